// The HBM byte counters (runtime/dram_counters.h) where they cannot be read:
// every failure is an error that says which part is missing, never a crash.
// Reading real counters needs a GPU: GpuBackend.MeasuredBytesMatchAStreamingKernel.
#include <cstdio>

#include <gtest/gtest.h>

#include "fusejit.h"
#include "runtime/cuda_driver.h"
#include "runtime/dram_counters.h"

namespace fusejit {
namespace {

TEST(DramCounters, CuptiLoadsOrSaysWhyNot) {
  const absl::Status s = cupti_status();
  if (s.ok()) return;  // libcupti with the range profiler is there
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(status_text(s).find("CUPTI"), std::string::npos) << s;
}

TEST(DramCounters, WithoutADriverNoCounterIsCreated) {
  if (cuda_driver_status().ok()) GTEST_SKIP() << "this machine has a CUDA driver and a GPU";
  absl::StatusOr<std::unique_ptr<DramByteCounter>> counter = DramByteCounter::create(nullptr, 0);
  ASSERT_FALSE(counter.ok());
  std::printf("[ cupti    ] %s\n", std::string(status_text(counter.status())).c_str());
  if (cupti_status().ok()) {
    // CUPTI loaded, and its first call that needs a GPU is the one named.
    EXPECT_NE(status_text(counter.status()).find("failed: "), std::string::npos) << counter.status();
  } else {
    EXPECT_EQ(counter.status(), cupti_status());
  }
}

// `fusejit bench` on the CPU says why there are no measured bytes, in the
// JSON and per kernel (BenchCli tests), and the backend says so too.
TEST(DramCounters, CpuPlansReadNoCounters) {
  absl::StatusOr<std::unique_ptr<Backend>> cpu = make_backend("cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  absl::StatusOr<Graph> g = parse_graph("input x: f32[4, 8]\ny = neg(x)\noutput y\n");
  ASSERT_TRUE(g.ok());
  absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = (*cpu)->load(make_fused_plan(*g));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE((*loaded)->set_inputs(random_inputs(*g, 1)).ok());
  absl::StatusOr<double> bytes = (*loaded)->measure_kernel_bytes(0);
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(status_text(bytes.status()).find("not read on the CPU"), std::string::npos) << bytes.status();
}

}  // namespace
}  // namespace fusejit
