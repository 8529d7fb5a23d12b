// The roofline chart's gnuplot script: its solid roof is the compute rate
// the cost model uses for the kernels it plots.
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
  r.fused.kernels.push_back(k);
  return r;
}

TEST(RooflinePlot, AGpuRoofIsItsFp32InstructionRate) {
  // H200: 67 TFLOP/s FP32 counts an FMA twice; op-table FLOPs retire at 33.5 T/s.
  const std::string script = roofline_gnuplot_script(result_on(gpu_device("h200")), "/tmp/r.svg");
  EXPECT_NE(script.find("33500 GFLOP/s FP32 instruction rate"), std::string::npos) << script;
  EXPECT_NE(script.find("roof(x) = x * 4000 < 33500 ? x * 4000 : 33500"), std::string::npos) << script;
}

TEST(RooflinePlot, ACpuRoofIsItsFmaPeak) {
  DeviceSpec cpu;
  cpu.name = "cpu";
  cpu.measured = true;
  cpu.bandwidth_gbps = 50;
  cpu.peak_f32_tflops = 0.2;
  cpu.class_tflops.fill(0.1);
  const std::string script = roofline_gnuplot_script(result_on(cpu), "/tmp/r.svg");
  EXPECT_NE(script.find("200 GFLOP/s FP32 peak"), std::string::npos) << script;
}

}  // namespace
}  // namespace fusejit
