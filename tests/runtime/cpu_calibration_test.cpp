// The calibrated `cpu` device is cached, and the cache is used only for the
// kernels it measured: after a change to the CPU math or the kernel
// templates (another digest in the key) the throughputs are measured again.
#include "runtime/cpu_calibration.h"

#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fusejit.h"
#include "runtime/runtime_test_util.h"

namespace fusejit {
namespace {

constexpr double kSentinelTflops = 12345.0;  // no CPU class reaches this

void write_calibration(const std::string& dir, const std::string& key) {
  nlohmann::json classes;
  for (int c = 0; c < kNumCostClasses; ++c) {
    classes[std::string(cost_class_name(static_cast<CostClass>(c)))] = kSentinelTflops;
  }
  std::ofstream(dir + "/cpu-device-jit.json")
      << nlohmann::json{{"key", key}, {"class_tflops", classes}, {"launch_overhead_us", 7.0}}.dump();
}

TEST(CpuCalibration, KeyNamesTheProbeKernelsDigest) {
  const std::string key = cpu_calibration_key();
  const size_t at = key.find("kernels sha256 ");
  ASSERT_NE(at, std::string::npos) << key;
  EXPECT_EQ(key.size() - at, std::string("kernels sha256 ").size() + 64) << key;
  EXPECT_EQ(key, cpu_calibration_key()) << "the key is deterministic";
}

TEST(CpuCalibration, CacheIsUsedOnlyForTheSameKernels) {
  absl::StatusOr<std::unique_ptr<Backend>> backend = make_cpu_backend();
  ASSERT_TRUE(backend.ok()) << backend.status();
  testing::TempDir dir("fusejit-calibration");
  testing::ScopedEnv cache_dir("FUSEJIT_CACHE_DIR", dir.path());
  const std::string key = cpu_calibration_key();

  write_calibration(dir.path(), key);
  absl::StatusOr<DeviceSpec> cached = calibrated_cpu_device(**backend);
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(cached->class_tflops[static_cast<int>(CostClass::kErf)], kSentinelTflops) << "same key: read back";
  EXPECT_EQ(cached->launch_overhead_us, 7.0);

  // The figures of other kernels (another digest of the probes' source).
  std::string stale = key;
  stale[stale.size() - 1] = stale.back() == '0' ? '1' : '0';
  write_calibration(dir.path(), stale);
  absl::StatusOr<DeviceSpec> measured = calibrated_cpu_device(**backend);
  ASSERT_TRUE(measured.ok()) << measured.status();
  for (int c = 0; c < kNumCostClasses; ++c) {
    EXPECT_GT(measured->class_tflops[c], 0) << cost_class_name(static_cast<CostClass>(c));
    EXPECT_LT(measured->class_tflops[c], kSentinelTflops) << cost_class_name(static_cast<CostClass>(c));
  }
  std::ifstream in(dir.path() + "/cpu-device-jit.json");
  EXPECT_EQ(nlohmann::json::parse(in).value("key", ""), key) << "the new figures replace the stale ones";
}

}  // namespace
}  // namespace fusejit
