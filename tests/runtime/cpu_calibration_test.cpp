// The calibrated `cpu` device is cached, and the cache is used only for the
// kernels it measured: after a change to the CPU math or the kernel
// templates (another digest in the key) the throughputs are measured again,
// kept beside the figures of the other key.
#include "runtime/cpu_calibration.h"

#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cost/machine_load.h"
#include "cost/report.h"
#include "fusejit.h"
#include "runtime/runtime_test_util.h"

namespace fusejit {
namespace {

constexpr double kSentinelTflops = 12345.0;  // no CPU class reaches this

void write_calibration(const std::string& dir, const std::string& key, double tflops = kSentinelTflops,
                       double launch_us = 7.0, double others_busy_share = 0.01, double pack_gelems = 20.0) {
  nlohmann::json classes;
  for (int c = 0; c < kNumCostClasses; ++c) {
    classes[std::string(cost_class_name(static_cast<CostClass>(c)))] = tflops;
  }
  nlohmann::json entries;
  entries[key] = {{"class_tflops", classes},
                  {"matmul_pack_gelems", pack_gelems},
                  {"launch_overhead_us", launch_us},
                  {"others_busy_share", others_busy_share}};
  std::ofstream(dir + "/cpu-device-jit.json") << nlohmann::json{{"entries", entries}}.dump();
}

// Each test caches in a folder of its own, with the CPU backend to calibrate.
class CpuCalibration : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(backend.ok()) << backend.status(); }

  testing::TempDir dir{"fusejit-calibration"};
  testing::ScopedEnv cache_dir{"FUSEJIT_CACHE_DIR", dir.path()};
  absl::StatusOr<std::unique_ptr<Backend>> backend = make_cpu_backend();
};

TEST_F(CpuCalibration, KeyNamesTheProbeKernelsDigest) {
  const std::string key = cpu_calibration_key();
  const size_t at = key.find("kernels sha256 ");
  ASSERT_NE(at, std::string::npos) << key;
  EXPECT_EQ(key.size() - at, std::string("kernels sha256 ").size() + 64) << key;
  EXPECT_NE(key.find(" | probes v"), std::string::npos) << "the probes' method: " << key;
  EXPECT_EQ(key, cpu_calibration_key()) << "the key is deterministic";
}

TEST_F(CpuCalibration, CacheIsUsedOnlyForTheSameKernels) {
  const std::string key = cpu_calibration_key();

  write_calibration(dir.path(), key);
  absl::StatusOr<DeviceSpec> cached = calibrated_cpu_device(**backend);
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(cached->class_tflops[static_cast<int>(CostClass::kErf)], kSentinelTflops) << "same key: read back";
  EXPECT_EQ(cached->launch_overhead_us, 7.0);
  EXPECT_EQ(cached->matmul_pack_gelems, 20.0);
  EXPECT_EQ(cached->overlap, 0.0) << "a CPU's memory and compute times add";
  // The GEMM measured faster than the FMA probe raises the peak to its rate.
  EXPECT_EQ(cached->peak_f32_tflops, kSentinelTflops);
  EXPECT_EQ(cached->peak_tensor_tflops, kSentinelTflops);

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
  EXPECT_EQ(measured->overlap, 0.0);
  EXPECT_GE(measured->peak_f32_tflops, measured->class_tflops[static_cast<int>(CostClass::kMatmul)]);
  // Both settings' figures are kept: switching back measures nothing.
  std::ifstream in(dir.path() + "/cpu-device-jit.json");
  const nlohmann::json entries = nlohmann::json::parse(in).at("entries");
  EXPECT_TRUE(entries.contains(key));
  EXPECT_TRUE(entries.contains(stale));
  EXPECT_EQ(entries.at(stale).at("launch_overhead_us"), 7.0);
  // The GEMM's packing rate is measured and kept (0 where the two GEMM
  // probes could not set it apart: gemm_figures).
  EXPECT_GE(entries.at(key).at("matmul_pack_gelems").get<double>(), 0.0);
  EXPECT_EQ(entries.at(key).at("matmul_pack_gelems").get<double>(), measured->matmul_pack_gelems);

  // An entry without a packing rate (written before it was measured) is
  // measured again.
  nlohmann::json old = entries;
  old[key].erase("matmul_pack_gelems");
  std::ofstream(dir.path() + "/cpu-device-jit.json") << nlohmann::json{{"entries", old}}.dump();
  ASSERT_TRUE(calibrated_cpu_device(**backend).ok());
  std::ifstream again(dir.path() + "/cpu-device-jit.json");
  EXPECT_TRUE(nlohmann::json::parse(again).at("entries").at(key).contains("matmul_pack_gelems"));
}

// Backends calibrating at once in one process take turns: the later one
// reads what the first cached instead of timing probes beside it (which
// gave figures 2x apart, each counting the other as load).
TEST_F(CpuCalibration, BackendsCalibratingTogetherTakeTurns) {
  absl::StatusOr<std::unique_ptr<Backend>> other = make_cpu_backend();
  ASSERT_TRUE(other.ok()) << other.status();
  absl::StatusOr<DeviceSpec> first, second;
  std::thread a([&] { first = calibrated_cpu_device(**backend); });
  std::thread b([&] { second = calibrated_cpu_device(**other); });
  a.join();
  b.join();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->class_tflops, second->class_tflops);
  EXPECT_EQ(first->launch_overhead_us, second->launch_overhead_us);
}

// Two timings of one GEMM that differ in rows per thread, each thread
// packing B once in both, give the multiply-adds' rate and the packing
// rate; where they cannot tell the packing apart, the longer GEMM's rate.
TEST(GemmFigures, TwoRowCountsSetThePackingApartFromTheMultiplyAdds) {
  // Made up: 1e6 elements packed at 5e9/s (200 us) and 0.25 TFLOP/s.
  const double packed = 1e6, pack_s = 200e-6, rate = 0.25e12;
  const double flops = 2.0 * 264 * 1024 * 1024, fewer = 2.0 * 72 * 1024 * 1024;
  GemmFigures g = gemm_figures(pack_s + flops / rate, flops, pack_s + fewer / rate, fewer, packed);
  EXPECT_NEAR(g.tflops, 0.25, 1e-9);
  EXPECT_NEAR(g.pack_gelems, 5.0, 1e-9);

  // Noise that leaves no packing time, or makes the shorter GEMM no faster:
  // the longer GEMM's rate with its packing in it, and no packing rate.
  for (double fewer_s : {fewer / rate, 2 * (flops / rate), flops / rate + pack_s}) {
    g = gemm_figures(pack_s + flops / rate, flops, fewer_s, fewer, packed);
    EXPECT_NEAR(g.tflops, flops / (pack_s + flops / rate) / 1e12, 1e-12) << fewer_s;
    EXPECT_EQ(g.pack_gelems, 0) << fewer_s;
  }
  // Packing under 2% of the longer GEMM's time is noise.
  const double little = 0.01 * (flops / rate);
  g = gemm_figures(little + flops / rate, flops, little + fewer / rate, fewer, packed);
  EXPECT_EQ(g.pack_gelems, 0);
  // Nothing packed (no GEMM): nothing to set apart.
  EXPECT_EQ(gemm_figures(pack_s + flops / rate, flops, pack_s + fewer / rate, fewer, 0).pack_gelems, 0);
}

// A calibration taken while other programs kept the machine busy is marked
// so: a process that finds the machine idle measures it again, keeping the
// better of each figure; one that finds it busy uses it, marked.
TEST_F(CpuCalibration, ABusyCalibrationIsMarkedAndMeasuredAgainWhenIdle) {
  const std::string key = cpu_calibration_key();
  write_calibration(dir.path(), key, kSentinelTflops, 7.0, /*others_busy_share=*/0.75);
  absl::StatusOr<DeviceSpec> d = calibrated_cpu_device(**backend);
  ASSERT_TRUE(d.ok()) << d.status();
  // Read back, or measured again and merged: no probe beats the sentinel.
  EXPECT_EQ(d->class_tflops[static_cast<int>(CostClass::kErf)], kSentinelTflops);
  std::ifstream in(dir.path() + "/cpu-device-jit.json");
  const double kept = nlohmann::json::parse(in).at("entries").at(key).at("others_busy_share").get<double>();
  if (machine_idle_now()) {
    EXPECT_LT(kept, 0.75) << "measured again (the lower share kept)";
    EXPECT_LE(d->launch_overhead_us, 7.0) << "the lower launch overhead kept";
  } else {
    EXPECT_EQ(kept, 0.75) << "used as it was";
    EXPECT_GE(d->others_busy_share, 0.75) << "and marked";
    EXPECT_NE(format_device(*d).find("measured while other programs took 75% of the time of the CPUs fusejit runs on"),
              std::string::npos)
        << format_device(*d);
  }
  // Measured again twice for that already: used as it is, marked.
  nlohmann::json twice = nlohmann::json::parse(std::ifstream(dir.path() + "/cpu-device-jit.json"));
  twice["entries"][key]["others_busy_share"] = 0.75;
  twice["entries"][key]["busy_remeasures"] = kMaxBusyRemeasures;
  std::ofstream(dir.path() + "/cpu-device-jit.json") << twice.dump();
  absl::StatusOr<DeviceSpec> marked = calibrated_cpu_device(**backend);
  ASSERT_TRUE(marked.ok()) << marked.status();
  EXPECT_EQ(marked->others_busy_share, 0.75);
  EXPECT_EQ(marked->busy_remeasures, kMaxBusyRemeasures);
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(dir.path() + "/cpu-device-jit.json"))["entries"][key],
            twice["entries"][key])
      << "not measured again";
  // An entry without the share (written before it was kept) is measured again.
  nlohmann::json old = nlohmann::json::parse(std::ifstream(dir.path() + "/cpu-device-jit.json"));
  old["entries"][key].erase("others_busy_share");
  std::ofstream(dir.path() + "/cpu-device-jit.json") << old.dump();
  absl::StatusOr<DeviceSpec> remeasured = calibrated_cpu_device(**backend);
  ASSERT_TRUE(remeasured.ok()) << remeasured.status();
  EXPECT_LT(remeasured->class_tflops[static_cast<int>(CostClass::kErf)], kSentinelTflops);
}

// Figures no machine has (a file edited by hand, or damaged) would predict
// "inf us" or a negative launch: they are measured again.
TEST_F(CpuCalibration, ImplausibleFiguresAreMeasuredAgain) {
  const std::string key = cpu_calibration_key();
  for (const auto& [tflops, launch] : {std::pair{0.0, 7.0}, {-3.0, 7.0}, {1.0, -1.0}, {1.0, 1e308}}) {
    write_calibration(dir.path(), key, tflops, launch);
    absl::StatusOr<DeviceSpec> d = calibrated_cpu_device(**backend);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_TRUE(plausible_measured_figures(*d)) << tflops << " " << launch;
    EXPECT_GE(d->launch_overhead_us, 0) << tflops << " " << launch;
    EXPECT_LT(d->launch_overhead_us, 1e6) << tflops << " " << launch;
    EXPECT_EQ(d->description.find("JIT kernels; op throughput"), std::string::npos) << d->description;
  }
}

}  // namespace
}  // namespace fusejit
