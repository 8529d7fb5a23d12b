// How many CPUs this process may run on: the threads worth starting.
//
// std::thread::hardware_concurrency() counts the machine's CPUs, not the
// ones the process is allowed: under `taskset`, a cgroup cpuset or a CPU
// quota (a container started with --cpus=2 on a 64-core host) it
// overcounts, and a pool of that many threads time-shares the few CPUs it
// has, every kernel slower for it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace fusejit {

// The CPUs the process may use, worked out once: the calling thread's CPU
// affinity mask, lowered to the cgroup's CPU quota rounded up; at least 1.
int usable_cpu_count();

// The same, worked out now (for tests; the affinity of the calling thread).
int count_usable_cpus();

// The tightest CPU quota on the process's cgroup and its ancestors, in
// CPUs rounded up; none when no level sets one. `root` is where the cgroup
// file systems are mounted ("/sys/fs/cgroup"), `proc_self_cgroup` the
// text of /proc/self/cgroup. cgroup v2 reads cpu.max in the "0::PATH"
// directory and each parent up to the root; v1 reads cpu.cfs_quota_us and
// cpu.cfs_period_us the same way under the cpu controller's mount.
std::optional<int> cgroup_cpu_limit(const std::string& root, std::string_view proc_self_cgroup);

// CPUs a cgroup v2 `cpu.max` line allows ("150000 100000" -> 2), none for
// "max ..." or a line that does not parse.
std::optional<int> cpus_of_cpu_max(std::string_view cpu_max);

}  // namespace fusejit
