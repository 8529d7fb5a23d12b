// format_bench / bench_json on results built by hand: what the report says
// about the last-level cache when its size is known and when it is not.
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

// Sizes under a MiB (a small GPU's L2, a tiny graph) in KiB, not as "0 MiB".
TEST(BenchReport, SizesUnderAMebibyteAreGivenInKibibytes) {
  BenchResult r = result_with_cache(int64_t{384} << 10);
  r.working_set_bytes = 525824;
  const std::string text = format_bench(r);
  EXPECT_NE(text.find("moves 514 KiB per run (1.3x the 384 KiB last-level cache)"), std::string::npos) << text;
  EXPECT_EQ(text.find("0 MiB"), std::string::npos) << text;
}

TEST(BenchReport, AnUnknownCacheSizeIsSaidToBeUnknown) {
  const BenchResult r = result_with_cache(0);
  const std::string text = format_bench(r);
  EXPECT_NE(text.find("(the last-level cache's size is unknown"), std::string::npos) << text;
  EXPECT_EQ(text.find("0 MiB"), std::string::npos) << text;
  EXPECT_TRUE(bench_json(r)["last_level_cache_bytes"].is_null());
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

}  // namespace
}  // namespace fusejit
