// How much of the CPUs fusejit runs on other programs take while it
// measures them. The CPU's figures are measured once and cached
// (cost/cpu_probe.cpp, runtime/cpu_calibration.cpp), and a neighbour only
// ever slows a probe down: a calibration taken while a test suite ran on
// the 2-core development VM priced exp 2.2x, Philox 2.5x and the GEMM 1.9x
// below an idle one, and every softmax was then predicted 1.5x slower
// than it ran, until the figures were measured again
// (bench/results/2026-12-06-busy-calibration.md). So each measurement
// records how busy the CPUs were, and a busy one is measured again by a
// later process that finds them idle, up to kMaxBusyRemeasures times.
//
// What it cannot see: a CPU quota (a cgroup's cpu.max) that throttles this
// process, and, in a virtual machine whose kernel does not account steal
// time, the host's other guests.
#pragma once

#include <atomic>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace fusejit {

// The CPU time of the CPUs this process may run on (its affinity mask,
// from /proc/stat's per-CPU lines) and this process's, read at one moment,
// in seconds.
struct CpuTimeReading {
  // user, nice, system, irq, softirq and steal (in a virtual machine, time
  // the host gave this machine's CPUs to others).
  double machine_busy_s = 0;
  double machine_total_s = 0;  // busy plus idle and iowait
  double process_s = 0;        // this process's threads, user and system
  bool known = false;          // /proc/stat could be read
};
CpuTimeReading read_cpu_time();

// What others_share() returns where /proc/stat cannot be read: not a share.
inline constexpr double kUnknownShare = -1;

// Sums the CPU time other programs (this process's children included) took
// over one or more spans: start() and stop() around each.
class MachineLoadMeter {
 public:
  void start();
  void stop();
  // Their share (0 to 1) of those CPUs' time in the spans; kUnknownShare
  // where /proc/stat could not be read. The kernel counts in ticks (10 ms
  // per CPU), so it means something over a tenth of a second or more.
  double others_share() const;

 private:
  CpuTimeReading started_;
  double others_s_ = 0, total_s_ = 0;
  bool known_ = false;
};

// Above this share figures measured may be low (others took a tenth).
inline constexpr double kBusyShare = 0.1;
// At or below this share the CPUs count as idle for measuring again: below
// kBusyShare, so that a machine at the edge does not measure on and on.
inline constexpr double kIdleShare = 0.05;
// How many times busy figures are measured again by later processes
// before they are kept, marked, for good (`devices --remeasure` still
// measures them): a machine that is idle for a quarter of a second but
// busy again within the seconds a measurement takes would otherwise have
// every process measure.
inline constexpr int kMaxBusyRemeasures = 2;

// Whether other programs take at most kIdleShare of this process's CPUs
// now, sampled over a quarter of a second, once per process (later calls
// return the first answer). True where that cannot be read.
bool machine_idle_now();

// "57.9%": a share as the messages print it.
std::string busy_share_text(double share);

// Whether cached figures measured while others took `share` of the CPUs,
// and measured again `remeasures` times already for that, are to be
// measured again now: above kBusyShare, fewer than kMaxBusyRemeasures
// times, and the CPUs idle now (machine_idle_now). `measured_here` is the
// caller's flag for its cache file, set when it says yes: a process
// measures a file again at most once.
bool measure_busy_figures_again(double share, int remeasures, std::atomic<bool>& measured_here);

// What the "measuring ..." line says of such figures.
std::string busy_figures_reason(double share);

// The share and the re-measure count as a cache file keeps them:
// "others_busy_share" (null where unknown) and "busy_remeasures".
void write_busy_fields(nlohmann::json& j, double share, int remeasures);
// Reads them back; throws nlohmann::json::exception where the share is
// absent (a file from before it was kept: measured again).
void read_busy_fields(const nlohmann::json& j, double& share, int& remeasures);

// The warning printed after fusejit measured `what` ("this CPU's memory
// bandwidth") while other programs took `share` of its CPUs: that the
// figures may be low, and when they are measured again.
std::string busy_measurement_warning(std::string_view what, double share);

}  // namespace fusejit
