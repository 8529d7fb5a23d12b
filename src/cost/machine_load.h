// How much of this machine's CPU time other programs take while fusejit
// measures the CPU. The CPU's figures are measured once and cached
// (cost/cpu_probe.cpp, runtime/cpu_calibration.cpp), and a neighbour only
// ever slows a probe down: a calibration taken while a test suite ran on
// the 2-core development VM priced exp 2.2x, Philox 2.5x and the GEMM 1.9x
// below an idle one, and every softmax was then predicted 1.5x slower
// than it ran, until the figures were measured again
// (bench/results/2026-12-06-busy-calibration.md). So each measurement
// records how busy the machine was, and a busy one is measured again by a
// later process that finds the machine idle.
#pragma once

#include <string>
#include <string_view>

namespace fusejit {

// The machine's CPU time (every CPU, from /proc/stat) and this process's,
// read at one moment, in seconds.
struct CpuTimeReading {
  // user, nice, system, irq, softirq and steal (in a virtual machine, time
  // the host gave this machine's CPUs to others).
  double machine_busy_s = 0;
  double machine_total_s = 0;  // busy plus idle and iowait
  double process_s = 0;        // this process's threads, user and system
  bool known = false;          // /proc/stat could be read
};
CpuTimeReading read_cpu_time();

// Sums the CPU time other programs (this process's children included) took
// over one or more spans: start() and stop() around each.
class MachineLoadMeter {
 public:
  void start();
  void stop();
  // Their share (0 to 1) of the machine's CPU time in the spans; 0 where
  // /proc/stat cannot be read. The kernel counts in ticks (10 ms per CPU),
  // so it means something over a tenth of a second or more.
  double others_share() const;

 private:
  CpuTimeReading started_;
  double others_s_ = 0, total_s_ = 0;
};

// Above this share (a tenth of the machine) figures measured may be low.
constexpr double kBusyShare = 0.1;

// Whether other programs take at most kBusyShare of the machine now,
// sampled over a quarter of a second, once per process (later calls return
// the first answer).
bool machine_idle_now();

// The warning printed after fusejit measured `what` ("this CPU's memory
// bandwidth") while other programs took `share` of the machine: that the
// figures may be low, and when they are measured again.
std::string busy_measurement_warning(std::string_view what, double share);

}  // namespace fusejit
