#include "ir/cpu_count.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace fusejit {
namespace {

std::optional<int> cpus_of_quota(long long quota, long long period) {
  if (quota <= 0 || period <= 0) return std::nullopt;  // -1: no limit (cgroup v1)
  // The kernel accepts quotas far above INT_MAX periods.
  return static_cast<int>(std::clamp<long long>((quota + period - 1) / period, 1, INT_MAX));
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

std::optional<int> tighter(std::optional<int> a, std::optional<int> b) {
  if (!a) return b;
  if (!b) return a;
  return std::min(*a, *b);
}

// `limit_of(dir)` for mount + path and each parent directory up to the
// mount, the tightest of them. Directories that do not exist are passed
// over: a container often sees the host's path for its cgroup, with its own
// cgroup mounted at the root.
template <typename LimitOf>
std::optional<int> walk_up(const std::string& mount, std::string path, const LimitOf& limit_of) {
  std::optional<int> limit;
  while (true) {
    limit = tighter(limit, limit_of(mount + path));
    if (path.empty() || path == "/") break;
    const size_t slash = path.find_last_of('/');
    path = slash == std::string::npos ? "" : path.substr(0, slash);
  }
  return limit;
}

std::optional<int> v2_limit(const std::string& dir) {
  const std::optional<std::string> max = read_first_line(dir + "/cpu.max");
  return max ? cpus_of_cpu_max(*max) : std::nullopt;
}

std::optional<int> v1_limit(const std::string& dir) {
  const std::optional<std::string> quota = read_first_line(dir + "/cpu.cfs_quota_us");
  const std::optional<std::string> period = read_first_line(dir + "/cpu.cfs_period_us");
  if (!quota || !period) return std::nullopt;
  const std::optional<long long> q = parse_integer(*quota), p = parse_integer(*period);
  return q && p ? cpus_of_quota(*q, *p) : std::nullopt;
}

// The affinity mask's CPU count, in a mask large enough for any machine
// (a fixed cpu_set_t holds 1024 CPUs, and the call fails beyond).
std::optional<int> affinity_cpu_count() {
  for (int cpus = 1024; cpus <= (1 << 20); cpus *= 2) {
    cpu_set_t* set = CPU_ALLOC(cpus);
    if (set == nullptr) return std::nullopt;
    const size_t size = CPU_ALLOC_SIZE(cpus);
    CPU_ZERO_S(size, set);
    const int rc = sched_getaffinity(0, size, set);
    const int error = errno;
    const int count = CPU_COUNT_S(size, set);
    CPU_FREE(set);
    if (rc == 0) return std::max(1, count);
    if (error != EINVAL) return std::nullopt;
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

std::optional<int> cgroup_cpu_limit(const std::string& root, std::string_view proc_self_cgroup) {
  std::optional<int> limit;
  std::istringstream lines{std::string(proc_self_cgroup)};
  std::string line;
  while (std::getline(lines, line)) {
    // "HIERARCHY:CONTROLLERS:PATH"; v2 is "0::PATH".
    const size_t first = line.find(':');
    const size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (line.compare(0, first, "0") == 0 && controllers.empty()) {
      limit = tighter(limit, walk_up(root, path, v2_limit));
      continue;
    }
    std::vector<std::string> names;
    std::istringstream list(controllers);
    for (std::string name; std::getline(list, name, ',');) names.push_back(name);
    if (std::find(names.begin(), names.end(), "cpu") == names.end()) continue;
    // Mounted under its controllers' names ("cpu,cpuacct"), as systemd and
    // Docker do, usually with a "cpu" link to it.
    limit = tighter(limit, walk_up(root + "/" + controllers, path, v1_limit));
    if (controllers != "cpu") limit = tighter(limit, walk_up(root + "/cpu", path, v1_limit));
  }
  return limit;
}

int count_usable_cpus() {
  int cpus = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  if (const std::optional<int> allowed = affinity_cpu_count()) cpus = *allowed;
  std::ifstream self("/proc/self/cgroup");
  std::stringstream text;
  text << self.rdbuf();
  if (const std::optional<int> limit = cgroup_cpu_limit("/sys/fs/cgroup", text.str())) {
    cpus = std::min(cpus, *limit);
  }
  return cpus;
}

int usable_cpu_count() {
  static const int cpus = count_usable_cpus();
  return cpus;
}

}  // namespace fusejit
