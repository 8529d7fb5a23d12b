#include "cost/machine_load.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

namespace fusejit {

CpuTimeReading read_cpu_time() {
  CpuTimeReading r;
  timespec ts{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0) r.process_s = ts.tv_sec + ts.tv_nsec * 1e-9;
  // The first line sums every CPU: "cpu  user nice system idle iowait irq
  // softirq steal guest guest_nice", in ticks. Guest time is already in
  // user and nice.
  std::ifstream in("/proc/stat");
  std::string line;
  if (!std::getline(in, line) || line.rfind("cpu ", 0) != 0) return r;
  std::istringstream fields(line.substr(4));
  long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  fields >> user >> nice >> system >> idle >> iowait >> irq >> softirq;
  if (!fields) return r;
  fields >> steal;  // absent before Linux 2.6.11
  const double tick_s = 1.0 / static_cast<double>(std::max(1L, sysconf(_SC_CLK_TCK)));
  const long long busy = user + nice + system + irq + softirq + steal;
  r.machine_busy_s = static_cast<double>(busy) * tick_s;
  r.machine_total_s = static_cast<double>(busy + idle + iowait) * tick_s;
  r.known = true;
  return r;
}

void MachineLoadMeter::start() { started_ = read_cpu_time(); }

void MachineLoadMeter::stop() {
  const CpuTimeReading now = read_cpu_time();
  if (!started_.known || !now.known) return;
  const double total = now.machine_total_s - started_.machine_total_s;
  if (total <= 0) return;
  // This process's time is exact and the machine's counted in ticks: the
  // difference can dip below zero on an idle machine.
  const double others = (now.machine_busy_s - started_.machine_busy_s) - (now.process_s - started_.process_s);
  others_s_ += std::clamp(others, 0.0, total);
  total_s_ += total;
}

double MachineLoadMeter::others_share() const { return total_s_ > 0 ? others_s_ / total_s_ : 0; }

bool machine_idle_now() {
  static const bool idle = [] {
    MachineLoadMeter meter;
    meter.start();
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    meter.stop();
    return meter.others_share() <= kBusyShare;
  }();
  return idle;
}

std::string busy_measurement_warning(std::string_view what, double share) {
  return fmt::format(
      "fusejit: warning: other programs took {:.0f}% of this machine's CPU time while fusejit measured {}, so the "
      "figures may be low and predict kernels slower than they run; a later process that finds the machine idle "
      "measures them again (`fusejit devices --remeasure` does now)\n",
      100 * share, what);
}

}  // namespace fusejit
