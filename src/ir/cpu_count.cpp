#include "ir/cpu_count.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <string>
#include <thread>

namespace fusejit {
namespace {

std::optional<int> cpus_of_quota(long long quota, long long period) {
  if (quota <= 0 || period <= 0) return std::nullopt;  // -1: no limit (cgroup v1)
  return static_cast<int>(std::max<long long>(1, (quota + period - 1) / period));
}

std::optional<std::string> read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

std::optional<long long> parse_integer(std::string_view text) {
  long long v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// The quota of the cgroup this process is in, as the container sees it:
// cgroup v2 at the process's own path, then at the root of the hierarchy;
// else cgroup v1's cpu controller.
std::optional<int> cgroup_cpu_limit() {
  std::ifstream self("/proc/self/cgroup");
  std::string line;
  while (std::getline(self, line)) {
    if (line.rfind("0::", 0) != 0) continue;
    const std::string path = line.substr(3);
    for (const std::string& dir : {"/sys/fs/cgroup" + path, std::string("/sys/fs/cgroup")}) {
      if (std::optional<std::string> max = read_first_line(dir + "/cpu.max")) return cpus_of_cpu_max(*max);
    }
  }
  for (const char* dir : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
    const std::optional<std::string> quota = read_first_line(std::string(dir) + "/cpu.cfs_quota_us");
    const std::optional<std::string> period = read_first_line(std::string(dir) + "/cpu.cfs_period_us");
    if (!quota || !period) continue;
    const std::optional<long long> q = parse_integer(*quota), p = parse_integer(*period);
    if (q && p) return cpus_of_quota(*q, *p);
  }
  return std::nullopt;
}

}  // namespace

std::optional<int> cpus_of_cpu_max(std::string_view cpu_max) {
  const size_t space = cpu_max.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::optional<long long> quota = parse_integer(cpu_max.substr(0, space));  // "max": none
  const std::optional<long long> period = parse_integer(cpu_max.substr(space + 1));
  if (!quota || !period) return std::nullopt;
  return cpus_of_quota(*quota, *period);
}

int count_usable_cpus() {
  int cpus = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  cpu_set_t set;
  CPU_ZERO(&set);
  // Fails (and the count stays the hardware's) only beyond 1024 CPUs.
  if (sched_getaffinity(0, sizeof set, &set) == 0) cpus = std::max(1, CPU_COUNT(&set));
  if (const std::optional<int> limit = cgroup_cpu_limit()) cpus = std::min(cpus, *limit);
  return cpus;
}

int usable_cpu_count() {
  static const int cpus = count_usable_cpus();
  return cpus;
}

}  // namespace fusejit
