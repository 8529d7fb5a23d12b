// The share of the machine other programs take while fusejit measures the
// CPU: what marks a cached calibration as possibly low
// (cost/machine_load.h). Other tests may run beside these (ctest -j), so
// each asserts only what more load cannot undo.
#include "cost/machine_load.h"

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
  double ours_s = 0, total_s = 0;
  // Two spans, summed, this thread spinning in both.
  for (int span = 0; span < 2; ++span) {
    meter.start();
    const CpuTimeReading from = read_cpu_time();
    spin_for(std::chrono::milliseconds(300));
    const CpuTimeReading to = read_cpu_time();
    meter.stop();
    ours_s += to.process_s - from.process_s;
    total_s += to.machine_total_s - from.machine_total_s;
  }
  ASSERT_GT(total_s, 0);
  // Whatever else runs, the CPU time this thread got is not theirs (less
  // a fifth for the kernel's ticks).
  EXPECT_LE(meter.others_share(), 1.0 - 0.8 * ours_s / total_s) << ours_s << " s of " << total_s << " s";
  EXPECT_GE(meter.others_share(), 0.0);
}

TEST(MachineLoad, AMeterWithoutSpansReportsNoLoad) {
  MachineLoadMeter meter;
  EXPECT_EQ(meter.others_share(), 0.0);
  meter.start();  // started, never stopped: no span
  EXPECT_EQ(meter.others_share(), 0.0);
}

TEST(MachineLoad, TheWarningSaysHowBusyAndWhatHappensNext) {
  const std::string text = busy_measurement_warning("this CPU's op throughput", 0.62);
  EXPECT_NE(text.find("other programs took 62% of this machine's CPU time while fusejit measured this CPU's op "
                      "throughput"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("fusejit devices --remeasure"), std::string::npos) << text;
  EXPECT_EQ(text.back(), '\n');
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
  EXPECT_EQ(d.description, "the new one");
}

}  // namespace
}  // namespace fusejit
