#include "cost/machine_load.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

namespace fusejit {

CpuTimeReading read_cpu_time() {
  CpuTimeReading r;
  timespec ts{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0) r.process_s = ts.tv_sec + ts.tv_nsec * 1e-9;
  // The CPUs this process may run on: a neighbour on them is what slows a
  // probe down (under taskset, or in a container given a few of a host's
  // CPUs, load on the others says little, and a busy pair of 64 would be 3%).
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const bool have_mask = sched_getaffinity(0, sizeof allowed, &allowed) == 0;
  // Lines "cpuN user nice system idle iowait irq softirq steal guest
  // guest_nice", in ticks. Guest time is already in user and nice.
  std::ifstream in("/proc/stat");
  const double tick_s = 1.0 / static_cast<double>(std::max(1L, sysconf(_SC_CLK_TCK)));
  std::string line;
  long long busy = 0, total = 0;
  bool any = false;
  while (std::getline(in, line)) {
    if (line.rfind("cpu", 0) != 0) continue;
    if (line.size() < 4 || line[3] < '0' || line[3] > '9') continue;  // "cpu " sums every CPU
    std::istringstream fields(line.substr(3));
    int cpu = -1;
    long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    fields >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq;
    if (!fields || cpu < 0) continue;
    fields >> steal;  // absent before Linux 2.6.11
    if (have_mask && (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed))) continue;
    busy += user + nice + system + irq + softirq + steal;
    total += user + nice + system + irq + softirq + steal + idle + iowait;
    any = true;
  }
  if (!any) return r;
  r.machine_busy_s = static_cast<double>(busy) * tick_s;
  r.machine_total_s = static_cast<double>(total) * tick_s;
  r.known = true;
  return r;
}

void MachineLoadMeter::start() { started_ = read_cpu_time(); }

void MachineLoadMeter::stop() {
  const CpuTimeReading now = read_cpu_time();
  if (!started_.known || !now.known) return;
  // Summed as they are and clamped once (others_share): clamping each short
  // span of a few ticks would bias the sum upwards.
  others_s_ += (now.machine_busy_s - started_.machine_busy_s) - (now.process_s - started_.process_s);
  total_s_ += now.machine_total_s - started_.machine_total_s;
  known_ = true;
}

double MachineLoadMeter::others_share() const {
  if (!known_) return kUnknownShare;
  // This process's time is exact and the machine's counted in ticks: the
  // difference can dip below zero on an idle machine.
  return total_s_ > 0 ? std::clamp(others_s_ / total_s_, 0.0, 1.0) : 0.0;
}

bool machine_idle_now() {
  static const bool idle = [] {
    MachineLoadMeter meter;
    meter.start();
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    meter.stop();
    return meter.others_share() <= kIdleShare;
  }();
  return idle;
}

std::string busy_share_text(double share) { return fmt::format("{:.3g}%", 100 * share); }

bool measure_busy_figures_again(double share, int remeasures, std::atomic<bool>& measured_here) {
  if (share <= kBusyShare || remeasures >= kMaxBusyRemeasures || measured_here.load() || !machine_idle_now()) {
    return false;
  }
  return !measured_here.exchange(true);
}

std::string busy_figures_reason(double share) {
  return fmt::format(
      "the cached figures were measured while other programs took {} of the time of the CPUs fusejit runs on, "
      "and they are idle now",
      busy_share_text(share));
}

void write_busy_fields(nlohmann::json& j, double share, int remeasures) {
  j["others_busy_share"] = share < 0 ? nlohmann::json() : nlohmann::json(share);
  j["busy_remeasures"] = remeasures;
}

void read_busy_fields(const nlohmann::json& j, double& share, int& remeasures) {
  const nlohmann::json& s = j.at("others_busy_share");
  share = s.is_null() ? kUnknownShare : s.get<double>();
  remeasures = j.value("busy_remeasures", 0);
}

std::string busy_measurement_warning(std::string_view what, double share) {
  return fmt::format(
      "other programs took {} of the time of the CPUs fusejit runs on while it measured {}, so "
      "the figures may be low and predict kernels slower than they run; a later process that finds the machine "
      "idle measures them again, up to twice (or run `fusejit devices --remeasure` once the machine is idle)",
      busy_share_text(share), what);
}

}  // namespace fusejit
