// The CPU count that sizes fusejit's thread pools follows the process's CPU
// affinity and cgroup quota, not the machine's CPU count.
#include <sched.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <fstream>
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
  EXPECT_EQ(cpus_of_cpu_max("17592186044415 1000"), INT_MAX) << "a quota beyond int CPUs";
}

// A cgroup tree in a temporary directory, laid out as /sys/fs/cgroup.
class CgroupTree : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("fusejit-cgroup-test-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void write(const std::string& relative, const std::string& text) {
    const std::filesystem::path file = root_ / relative;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << text << "\n";
  }
  std::string root() const { return root_.string(); }
  std::filesystem::path root_;
};

// cgroup v2: the tightest quota of the process's cgroup and its parents;
// a "max" below a limited parent does not lift the parent's limit.
TEST_F(CgroupTree, Version2TakesTheTightestLevel) {
  write("kubepods/pod1/cpu.max", "250000 100000");
  write("kubepods/pod1/app/cpu.max", "max 100000");
  EXPECT_EQ(cgroup_cpu_limit(root(), "0::/kubepods/pod1/app\n"), 3);
  write("kubepods/cpu.max", "100000 100000");
  EXPECT_EQ(cgroup_cpu_limit(root(), "0::/kubepods/pod1/app\n"), 1);
  EXPECT_EQ(cgroup_cpu_limit(root(), "0::/elsewhere\n"), std::nullopt) << "no level sets a quota";
}

// cgroup v1: the cpu controller's mount, at the process's path and above;
// a path the container cannot see falls back to the mount's own files.
TEST_F(CgroupTree, Version1ReadsTheCpuControllersQuota) {
  write("cpu,cpuacct/system.slice/job.service/cpu.cfs_quota_us", "150000");
  write("cpu,cpuacct/system.slice/job.service/cpu.cfs_period_us", "100000");
  write("cpu,cpuacct/cpu.cfs_quota_us", "-1");
  write("cpu,cpuacct/cpu.cfs_period_us", "100000");
  const std::string cgroup = "12:memory:/system.slice/job.service\n4:cpu,cpuacct:/system.slice/job.service\n";
  EXPECT_EQ(cgroup_cpu_limit(root(), cgroup), 2);
  EXPECT_EQ(cgroup_cpu_limit(root(), "4:cpu,cpuacct:/docker/0123abcd\n"), std::nullopt) << "the root: no quota";
  write("cpu,cpuacct/cpu.cfs_quota_us", "400000");
  EXPECT_EQ(cgroup_cpu_limit(root(), "4:cpu,cpuacct:/docker/0123abcd\n"), 4);
  EXPECT_EQ(cgroup_cpu_limit(root(), "4:memory:/x\ngarbage\n"), std::nullopt) << "no cpu controller";
}

}  // namespace
}  // namespace fusejit
