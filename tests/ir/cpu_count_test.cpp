// The CPU count that sizes fusejit's thread pools follows the process's CPU
// affinity and cgroup quota, not the machine's CPU count.
#include <sched.h>

#include <thread>

#include <gtest/gtest.h>

#include "ir/cpu_count.h"

namespace fusejit {
namespace {

TEST(CpuCount, IsAtLeastOneAndAtMostTheMachines) {
  const int cpus = usable_cpu_count();
  EXPECT_GE(cpus, 1);
  EXPECT_LE(cpus, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

// A thread pinned to one CPU (what `taskset -c 0` does to a process) counts one.
TEST(CpuCount, FollowsTheAffinityMask) {
  int counted = 0;
  bool pinned = false;
  std::thread t([&] {
    cpu_set_t set;
    CPU_ZERO(&set);
    ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
    int first = 0;
    while (first < CPU_SETSIZE && !CPU_ISSET(first, &set)) ++first;
    ASSERT_LT(first, CPU_SETSIZE);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    pinned = sched_setaffinity(0, sizeof one, &one) == 0;
    counted = count_usable_cpus();
  });
  t.join();
  ASSERT_TRUE(pinned) << "could not pin a thread to one CPU";
  EXPECT_EQ(counted, 1);
}

TEST(CpuCount, ReadsACgroupQuota) {
  EXPECT_EQ(cpus_of_cpu_max("200000 100000"), 2);
  EXPECT_EQ(cpus_of_cpu_max("150000 100000"), 2) << "a part of a CPU counts as a CPU";
  EXPECT_EQ(cpus_of_cpu_max("50000 100000"), 1);
  EXPECT_EQ(cpus_of_cpu_max("max 100000"), std::nullopt) << "no limit";
  EXPECT_EQ(cpus_of_cpu_max("garbage"), std::nullopt);
  EXPECT_EQ(cpus_of_cpu_max("100000 0"), std::nullopt);
}

}  // namespace
}  // namespace fusejit
