// The roofline chart's gnuplot script: its solid roof is the device's FP32
// peak, and the fused kernel's own compute roof (its op mix on a CPU, its
// instruction issue on a GPU) is drawn dashed below it.
#include <gtest/gtest.h>

#include "cost/device.h"
#include "runtime/roofline_plot.h"

namespace fusejit {
namespace {

BenchResult result_on(const DeviceSpec& device) {
  BenchResult r;
  r.backend = "test";
  r.device = device;
  r.ceiling_gbps = 4000;
  KernelBench k;
  k.name = "k0_add";
  k.intensity = 0.25;
  k.achieved_gflops = 900;
  r.unfused.kernels.push_back(k);
  k.name = "k0_fused";
  k.intensity = 11.5;
  k.achieved_gflops = 20000;
  k.compute_roof_gflops = 29300;  // the cost model's FLOPs / issue-bound time
  r.fused.kernels.push_back(k);
  return r;
}

TEST(RooflinePlot, AGpuKernelsInstructionIssueIsDashedBelowTheFp32Peak) {
  // H200: 67 TFLOP/s FP32; the fused kernel's FLOPs reach 29.3 TFLOP/s at
  // most, issuing its instructions.
  const std::string script = roofline_gnuplot_script(result_on(gpu_device("h200")), "/tmp/r.svg");
  EXPECT_NE(script.find("67000 GFLOP/s FP32 peak"), std::string::npos) << script;
  EXPECT_NE(script.find("roof(x) = x * 4000 < 67000 ? x * 4000 : 67000"), std::string::npos) << script;
  EXPECT_NE(script.find("compute roof of the fused kernel''s instruction issue: 29300.0 GFLOP/s"), std::string::npos)
      << script;
}

// Names reach gnuplot as written: the file name single-quoted (a quote
// doubled), where it neither runs `commands` in backquotes nor expands
// backslashes; kernel names bare in the data, which gnuplot takes as they
// are (it would show single quotes there as part of the label), anything
// but an identifier's characters made '_'.
TEST(RooflinePlot, NamesAreQuotedSoGnuplotTakesThemLiterally) {
  BenchResult r = result_on(gpu_device("h100"));
  r.fused.kernels[0].name = "k0_`id`_it's";
  const std::string script = roofline_gnuplot_script(r, "/tmp/a`touch x`\\n'b.svg");
  EXPECT_NE(script.find("set output '/tmp/a`touch x`\\n''b.svg'"), std::string::npos) << script;
  EXPECT_NE(script.find(" k0__id__it_s\n"), std::string::npos) << script;
  EXPECT_NE(script.find(" k0_add\n"), std::string::npos) << script;
  EXPECT_EQ(script.find('"'), std::string::npos) << "no double-quoted string:\n" << script;
}

TEST(RooflinePlot, ACpuRoofIsItsFmaPeak) {
  DeviceSpec cpu;
  cpu.name = "cpu";
  cpu.measured = true;
  cpu.bandwidth_gbps = 50;
  cpu.peak_f32_tflops = 0.2;
  cpu.class_tflops.fill(0.1);
  BenchResult r = result_on(cpu);
  r.fused.kernels[0].compute_roof_gflops = 100;
  const std::string script = roofline_gnuplot_script(r, "/tmp/r.svg");
  EXPECT_NE(script.find("200 GFLOP/s FP32 peak"), std::string::npos) << script;
  EXPECT_NE(script.find("compute roof of the fused kernel''s op mix: 100.0 GFLOP/s"), std::string::npos) << script;
}

}  // namespace
}  // namespace fusejit
