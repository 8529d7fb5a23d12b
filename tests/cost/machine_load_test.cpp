// The share of the machine other programs take while fusejit measures the
// CPU: what marks a cached calibration as possibly low
// (cost/machine_load.h). Other tests may run beside these (ctest -j), so
// each asserts only what more load cannot undo.
#include "cost/machine_load.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "cost/device.h"

namespace fusejit {
namespace {

using Clock = std::chrono::steady_clock;

void spin_for(std::chrono::milliseconds span) {
  volatile double x = 1;
  for (const auto end = Clock::now() + span; Clock::now() < end;) x = x * 1.0000001 + 1e-9;
}

int online_cpus() { return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN))); }

TEST(MachineLoad, ABusyChildProcessIsCountedAsAnotherProgram) {
  if (!read_cpu_time().known) GTEST_SKIP() << "/proc/stat cannot be read here";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    spin_for(std::chrono::milliseconds(900));
    _exit(0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the child is running
  MachineLoadMeter meter;
  meter.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  meter.stop();
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  // One CPU of the machine's, at the least (more where other tests run).
  EXPECT_GE(meter.others_share(), 0.7 / online_cpus()) << online_cpus() << " CPUs";
  EXPECT_LE(meter.others_share(), 1.0);
}

TEST(MachineLoad, ThisProcesssOwnWorkIsNotAnotherPrograms) {
  if (!read_cpu_time().known) GTEST_SKIP() << "/proc/stat cannot be read here";
  MachineLoadMeter meter;
  double ours_s = 0, busy_s = 0, total_s = 0;
  // Two spans, summed, this thread spinning in both.
  for (int span = 0; span < 2; ++span) {
    meter.start();
    const CpuTimeReading from = read_cpu_time();
    spin_for(std::chrono::milliseconds(300));
    const CpuTimeReading to = read_cpu_time();
    meter.stop();
    ours_s += to.process_s - from.process_s;
    busy_s += to.machine_busy_s - from.machine_busy_s;
    total_s += to.machine_total_s - from.machine_total_s;
  }
  ASSERT_GT(total_s, 0);
  ASSERT_GT(ours_s, 0);
  // What the CPUs did less what this thread did, whatever else runs (with
  // a few ticks' slack): a meter that counted this process as another
  // program would be off by ours_s / total_s, a third or more.
  const double others = std::max(0.0, busy_s - ours_s) / total_s;
  EXPECT_NEAR(meter.others_share(), others, 0.1 + 0.25 * ours_s / total_s)
      << ours_s << " s of ours, " << busy_s << " s busy of " << total_s << " s";
  EXPECT_LE(meter.others_share(), 1.0 - 0.7 * ours_s / total_s);
}

TEST(MachineLoad, AMeterWithoutSpansDoesNotKnow) {
  MachineLoadMeter meter;
  EXPECT_EQ(meter.others_share(), kUnknownShare);
  meter.start();  // started, never stopped: no span
  EXPECT_EQ(meter.others_share(), kUnknownShare);
}

// Busy figures are measured again only while that can help: above the
// busy share, fewer than kMaxBusyRemeasures times, once per process per
// file, and only when the CPUs are idle now.
TEST(MachineLoad, BusyFiguresAreMeasuredAgainOnlyWhileThatCanHelp) {
  std::atomic<bool> here{false};
  EXPECT_FALSE(measure_busy_figures_again(kBusyShare, 0, here)) << "not busy";
  EXPECT_FALSE(measure_busy_figures_again(kUnknownShare, 0, here)) << "unknown is not busy";
  EXPECT_FALSE(measure_busy_figures_again(0.9, kMaxBusyRemeasures, here)) << "measured again enough";
  EXPECT_FALSE(here.load());
  const bool idle = machine_idle_now();
  EXPECT_EQ(measure_busy_figures_again(0.9, 0, here), idle);
  EXPECT_FALSE(measure_busy_figures_again(0.9, 0, here)) << "at most once per process";
  std::atomic<bool> done{true};
  EXPECT_FALSE(measure_busy_figures_again(0.9, 1, done));
  EXPECT_LT(kIdleShare, kBusyShare) << "idle is well below busy, so an edge case does not measure on and on";
}

TEST(MachineLoad, CacheFilesKeepTheShareAndTheCount) {
  nlohmann::json j;
  write_busy_fields(j, 0.25, 1);
  double share = 0;
  int count = 0;
  read_busy_fields(j, share, count);
  EXPECT_EQ(share, 0.25);
  EXPECT_EQ(count, 1);
  write_busy_fields(j, kUnknownShare, 0);
  EXPECT_TRUE(j["others_busy_share"].is_null());
  read_busy_fields(j, share, count);
  EXPECT_EQ(share, kUnknownShare);
  EXPECT_EQ(count, 0);
  nlohmann::json old = {{"bandwidth_gbps", 40}};  // a file from before the share was kept
  EXPECT_THROW(read_busy_fields(old, share, count), nlohmann::json::exception);
}

TEST(MachineLoad, TheWarningSaysHowBusyAndWhatHappensNext) {
  const std::string text = busy_measurement_warning("this CPU's op throughput", 0.6234);
  EXPECT_NE(text.find("other programs took 62.3% of the time of the CPUs fusejit runs on while it measured this "
                      "CPU's op throughput"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("fusejit devices --remeasure"), std::string::npos) << text;
  EXPECT_EQ(text.find('\n'), std::string::npos) << "one line, as warn() takes it";
  EXPECT_EQ(text.find("fusejit: "), std::string::npos) << "warn() adds the prefix";
}

// A measurement taken again keeps the better of each figure: a neighbour
// only slows a probe down.
TEST(MachineLoad, AMeasurementTakenAgainKeepsEachBetterFigure) {
  DeviceSpec busy, idle;
  busy.bandwidth_gbps = 30;
  idle.bandwidth_gbps = 40;
  busy.thread_bandwidth_gbps = 25;
  idle.thread_bandwidth_gbps = 20;
  busy.peak_f32_tflops = 0.2;
  idle.peak_f32_tflops = 0.3;
  busy.peak_tensor_tflops = 0.2;
  idle.peak_tensor_tflops = 0.3;
  busy.class_tflops.fill(0.05);
  idle.class_tflops.fill(0.04);
  idle.class_tflops[0] = 0.2;
  busy.launch_overhead_us = 5;
  idle.launch_overhead_us = 9;
  busy.others_busy_share = 0.6;
  idle.others_busy_share = 0.02;
  idle.description = "the new one";
  const DeviceSpec d = better_measured_figures(busy, idle);
  EXPECT_EQ(d.bandwidth_gbps, 40);
  EXPECT_EQ(d.thread_bandwidth_gbps, 25);
  EXPECT_EQ(d.peak_f32_tflops, 0.3);
  EXPECT_EQ(d.peak_tensor_tflops, 0.3);
  EXPECT_EQ(d.class_tflops[0], 0.2);
  EXPECT_EQ(d.class_tflops[1], 0.05);
  EXPECT_EQ(d.launch_overhead_us, 5);
  EXPECT_EQ(d.others_busy_share, 0.02);
  EXPECT_EQ(d.busy_remeasures, 0) << "idle now: the count starts again";
  EXPECT_EQ(d.description, "the new one");
  // Busy again: this measurement is counted.
  busy.busy_remeasures = 1;
  idle.others_busy_share = 0.4;
  EXPECT_EQ(better_measured_figures(busy, idle).busy_remeasures, 2);
  EXPECT_EQ(better_measured_figures(busy, idle).others_busy_share, 0.4);
}

}  // namespace
}  // namespace fusejit
