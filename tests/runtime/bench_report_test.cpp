// format_bench / bench_json on results built by hand: what the report says
// about the last-level cache when its size is known and when it is not.
#include <string>
#include <vector>

#include <absl/strings/str_split.h>
#include <gtest/gtest.h>

#include "runtime/bench_report.h"

namespace fusejit {
namespace {

BenchResult result_with_cache(int64_t cache_bytes) {
  BenchResult r;
  r.backend = "cpu";
  r.description = "a test CPU";
  r.device.name = "cpu";
  r.device.cache_bytes = cache_bytes;
  r.ceiling_gbps = 40;
  r.copy_bytes = int64_t{128} << 20;
  r.working_set_bytes = int64_t{256} << 20;
  r.reps = 3;
  r.unfused.label = "unfused";
  r.fused.label = "fused";
  return r;
}

TEST(BenchReport, WorkingSetIsComparedWithTheCacheWhenItsSizeIsKnown) {
  const BenchResult r = result_with_cache(int64_t{32} << 20);
  EXPECT_NE(format_bench(r).find("moves 256 MiB per run (8.0x the 32 MiB last-level cache)"), std::string::npos)
      << format_bench(r);
  EXPECT_EQ(bench_json(r)["last_level_cache_bytes"], int64_t{32} << 20);
}

// Sizes under a MiB (a small GPU's L2, a tiny graph) in KiB or bytes, not as
// "0 MiB" or "1 KiB"; between KiBs or MiBs with a decimal.
TEST(BenchReport, SizesUnderAMebibyteAreGivenInKibibytes) {
  BenchResult r = result_with_cache(int64_t{384} << 10);
  r.working_set_bytes = 525824;
  const std::string text = format_bench(r);
  EXPECT_NE(text.find("moves 513.5 KiB per run (1.3x the 384 KiB last-level cache)"), std::string::npos) << text;
  EXPECT_EQ(text.find("0 MiB"), std::string::npos) << text;
  r.working_set_bytes = 16;  // f32[1] -> exp -> sum: not "1 KiB"
  EXPECT_NE(format_bench(r).find("moves 16 bytes per run"), std::string::npos) << format_bench(r);
  r.working_set_bytes = 3 << 19;  // not "1 MiB"
  EXPECT_NE(format_bench(r).find("moves 1.5 MiB per run"), std::string::npos) << format_bench(r);
  r.working_set_bytes = 1184;  // not "2 KiB"
  EXPECT_NE(format_bench(r).find("moves 1.2 KiB per run"), std::string::npos) << format_bench(r);
}

TEST(BenchReport, AnUnknownCacheSizeIsSaidToBeUnknown) {
  const BenchResult r = result_with_cache(0);
  const std::string text = format_bench(r);
  EXPECT_NE(text.find("(the last-level cache's size is unknown"), std::string::npos) << text;
  EXPECT_EQ(text.find("0 MiB"), std::string::npos) << text;
  EXPECT_TRUE(bench_json(r)["last_level_cache_bytes"].is_null());
}

// A working set under the cache's size is not rounded up to it.
TEST(BenchReport, AWorkingSetJustUnderTheCacheIsNotRoundedToIt) {
  BenchResult r = result_with_cache(int64_t{32} << 20);
  r.working_set_bytes = 32086016;  // 30.6 MiB: 0.96x, not "1.0x"
  EXPECT_NE(format_bench(r).find("(0.96x the 32 MiB last-level cache)"), std::string::npos) << format_bench(r);
}

// The roof a kernel is measured against is the time the cost model gives
// it: on a device that adds memory and compute time (a CPU, overlap 0),
// 1 / (1 / compute roof + 1 / (ceiling x intensity)); on one that overlaps
// them (a GPU), the lower of the two. A kernel at that rate is at 100%.
TEST(BenchReport, TheRoofAddsMemoryAndComputeTimeWhereTheDeviceDoes) {
  BenchResult r = result_with_cache(int64_t{32} << 20);  // ceiling 40 GB/s
  KernelBench k;
  k.name = "k0_gelu";
  k.intensity = 2;             // memory roof 80 GFLOP/s
  k.compute_roof_gflops = 80;  // as high: each takes half the time on a CPU
  k.achieved_gflops = 40;
  r.fused.kernels = {k};
  r.device.overlap = 0;
  std::string text = format_roofline(r);
  EXPECT_NE(text.find("40.00        40.00   100.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("memory and compute times added"), std::string::npos) << text;
  r.device.overlap = 1;
  text = format_roofline(r);
  EXPECT_NE(text.find("40.00        80.00    50.0%"), std::string::npos) << text;
  EXPECT_EQ(text.find("times added"), std::string::npos) << text;
  // A kernel the model gives a quarter of the bandwidth (one thread of
  // four) has a quarter of the memory roof: 20 GFLOP/s, memory-bound.
  r.fused.kernels[0].bandwidth_share = 0.25;
  text = format_roofline(r);
  EXPECT_NE(text.find("40.00        20.00   200.0%  memory"), std::string::npos) << text;
}

// Repetitions of uneven length (a busy machine) are called out, plan by
// plan; even ones are not. The JSON names the graph and the inputs' seed.
TEST(BenchReport, UnevenRepetitionsAreCalledOut) {
  BenchResult r = result_with_cache(int64_t{32} << 20);
  r.unfused.measured_us_median = 300;
  r.unfused.measured_us_min = 100;
  r.fused.measured_us_median = 101;
  r.fused.measured_us_min = 100;
  const std::string text = format_bench(r);
  EXPECT_NE(text.find("note: repetitions took uneven times (median over min: unfused 3.00x)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("timing: 3 repetitions after a warm-up"), std::string::npos) << text;
  r.unfused.measured_us_median = 110;
  EXPECT_EQ(format_bench(r).find("uneven"), std::string::npos) << format_bench(r);
  r.reps = 1;
  EXPECT_NE(format_bench(r).find("timing: 1 repetition after"), std::string::npos) << format_bench(r);
  r.seed = 17;
  r.graph_source = "g.fj";
  EXPECT_EQ(bench_json(r)["seed"], 17);
  EXPECT_EQ(bench_json(r)["graph"], "g.fj");
}

// A kernel name longer than the kernel column widens it: in every row the
// column after the name (bytes in the plan tables, FLOP/byte in the
// roofline's) ends where its head does, as the columns are right-aligned.
TEST(BenchReport, ALongKernelNameWidensItsColumn) {
  BenchResult r = result_with_cache(int64_t{32} << 20);
  KernelBench short_kernel;
  short_kernel.name = "k1_add";
  short_kernel.bytes = 4096;
  KernelBench long_kernel = short_kernel;
  long_kernel.name = "k0_reciprocal_reciprocal_reciprocal_reciprocal_and_12_more";
  r.unfused.kernels = {short_kernel};
  r.fused.kernels = {long_kernel, short_kernel};
  const std::string text = format_bench(r) + format_roofline(r);
  const std::vector<std::string> lines = absl::StrSplit(text, '\n');
  size_t head_end = std::string::npos;  // of the current table's column
  std::string value;                    // what that column holds in each row
  int rows = 0;
  for (const std::string& line : lines) {
    if (const size_t at = line.find("bytes (pred.)"); at != std::string::npos) {
      head_end = at + std::string_view("bytes (pred.)").size();
      value = "4,096";
    } else if (const size_t at = line.find("FLOP/byte"); at != std::string::npos) {
      head_end = at + std::string_view("FLOP/byte").size();
      value = "0.00";
    } else if (head_end != std::string::npos) {
      for (const KernelBench* k : {&short_kernel, &long_kernel}) {
        const size_t name = line.find(" " + k->name + " ");
        if (name == std::string::npos) continue;
        EXPECT_EQ(line.find(value, name + k->name.size()) + value.size(), head_end) << line << "\n" << text;
        ++rows;
      }
    }
  }
  EXPECT_EQ(rows, 6) << "3 rows in the plan tables, 3 in the roofline's\n" << text;
}

// Kernels whose launch shapes were timed get a line each, saying what was
// kept; a kernel that runs another's code does not repeat it; without
// tuning there is no such section. The JSON has both fields, null where empty.
TEST(BenchReport, TunedLaunchShapesAreReported) {
  BenchResult r = result_with_cache(int64_t{32} << 20);
  KernelBench tuned;
  tuned.name = "k0_add_layer_norm";
  tuned.launch_shape = "256 threads per row";
  tuned.tuning = "fastest of 5 launch shapes timed on its first run (31.0 us, default 512 threads per row: 36.0 us)";
  KernelBench repeated = tuned;
  repeated.name = "k1_add_layer_norm";
  repeated.shares_code_with = "k0_add_layer_norm";
  KernelBench plain;
  plain.name = "k2_add";
  plain.launch_shape = "256 threads per block";
  r.fused.kernels = {tuned, repeated, plain};
  const std::string text = format_bench(r);
  EXPECT_NE(text.find("launch shapes (timed on each kernel's first run, FUSEJIT_AUTOTUNE=0 keeps the defaults):\n"
                      "  fused k0_add_layer_norm: 256 threads per row; fastest of 5 launch shapes timed on its first "
                      "run (31.0 us, default 512 threads per row: 36.0 us)\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("k1_add_layer_norm:"), std::string::npos) << text;
  EXPECT_EQ(text.find("k2_add:"), std::string::npos) << text;
  const nlohmann::json j = bench_json(r);
  EXPECT_EQ(j["fused"]["kernels"][0]["launch_shape"], "256 threads per row");
  EXPECT_EQ(j["fused"]["kernels"][0]["launch_tuning"], tuned.tuning);
  EXPECT_EQ(j["fused"]["kernels"][2]["launch_shape"], "256 threads per block");
  EXPECT_TRUE(j["fused"]["kernels"][2]["launch_tuning"].is_null());
  r.fused.kernels = {plain};
  EXPECT_EQ(format_bench(r).find("launch shapes"), std::string::npos) << format_bench(r);
}

}  // namespace
}  // namespace fusejit
