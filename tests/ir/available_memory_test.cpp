// What a process may still allocate: MemAvailable, lowered by the memory
// limits of its cgroup and the cgroups above it.
#include "ir/available_memory.h"

#include <gtest/gtest.h>

#include "fusejit.h"

namespace fusejit {
namespace {

constexpr const char* kMeminfo =
    "MemTotal:       24684356 kB\n"
    "MemFree:        22281216 kB\n"
    "MemAvailable:   20000000 kB\n"
    "Buffers:          123456 kB\n";

TEST(AvailableMemory, MemAvailableWithoutACgroupLimit) {
  EXPECT_EQ(available_host_memory_from(kMeminfo, {}), uint64_t{20000000} * 1024);
  // v2 "max", and v1's "no limit" (a page short of 2^63), leave it as it is.
  EXPECT_EQ(available_host_memory_from(kMeminfo, {{"max\n", "5000\n", ""}}), uint64_t{20000000} * 1024);
  EXPECT_EQ(available_host_memory_from(kMeminfo, {{"9223372036854771712\n", "1217220608\n", ""}}),
            uint64_t{20000000} * 1024);
  EXPECT_EQ(available_host_memory_from("", {}), std::nullopt);
}

TEST(AvailableMemory, ACgroupLimitLessItsUsageWithReclaimableCacheFree) {
  const uint64_t gib = uint64_t{1} << 30;
  // v2: 4 GiB limit, 3 GiB used of which 1 GiB inactive file pages.
  const CgroupMemoryFiles v2{std::to_string(4 * gib) + "\n", std::to_string(3 * gib) + "\n",
                             "anon 100\nfile 200\ninactive_file " + std::to_string(gib) + "\nactive_file 5\n"};
  EXPECT_EQ(available_host_memory_from(kMeminfo, {v2}), 2 * gib);
  // v1 counts the hierarchy's cache as total_inactive_file (and its own as inactive_file).
  const CgroupMemoryFiles v1{std::to_string(4 * gib), std::to_string(3 * gib),
                             "inactive_file 7\ntotal_rss 1\ntotal_inactive_file " + std::to_string(gib / 2) + "\n"};
  EXPECT_EQ(available_host_memory_from(kMeminfo, {v1}), 4 * gib - (3 * gib - gib / 2));
  // The tightest level decides, and a level over its limit leaves nothing.
  const CgroupMemoryFiles parent{std::to_string(gib), std::to_string(gib / 4), ""};
  EXPECT_EQ(available_host_memory_from(kMeminfo, {v2, parent}), gib - gib / 4);
  const CgroupMemoryFiles full{std::to_string(gib), std::to_string(2 * gib), ""};
  EXPECT_EQ(available_host_memory_from(kMeminfo, {full}), 0u);
}

TEST(AvailableMemory, LargeAllocationsBeyondWhatIsAvailableAreRefused) {
  EXPECT_EQ(host_allocation_refusal(1 << 20, "a small buffer"), "") << "small blocks are not checked";
  const std::optional<uint64_t> available = available_host_memory();
  ASSERT_TRUE(available.has_value()) << "this machine has /proc/meminfo";
  EXPECT_GT(*available, 0u);
  const std::string refused = host_allocation_refusal(uint64_t{1} << 60, "tensor y");
  EXPECT_NE(refused.find("out of host memory: tensor y needs 1099511627776 MiB"), std::string::npos) << refused;
  EXPECT_NE(refused.find("MiB are available"), std::string::npos) << refused;
}

// The reference interpreter says which node it could not hold, as a
// Status, instead of asking for the memory and being killed.
TEST(AvailableMemory, TheInterpreterRefusesAValueBeyondWhatIsAvailable) {
  const std::optional<uint64_t> available = available_host_memory();
  ASSERT_TRUE(available.has_value());
  // An input of one element broadcast to twice the available memory in float64.
  const int64_t cols = 1 << 20;
  const int64_t rows = static_cast<int64_t>(*available / 8 / cols) * 2 + 1;
  Graph g;
  auto x = g.input("x", DType::kF32, {1, cols});
  auto b = g.input("b", DType::kF32, {rows, 1});
  g.output("y", add(x, b));
  TensorMap inputs;
  inputs["x"] = HostTensor::random_normal(DType::kF32, Shape{1, cols}, 1);
  inputs["b"] = HostTensor::random_normal(DType::kF32, Shape{rows, 1}, 2);
  absl::StatusOr<TensorMap> out = interpret(g, inputs);
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(out.status())) << out.status();
  EXPECT_NE(out.status().message().find("out of host memory"), std::string::npos) << out.status();
  EXPECT_NE(out.status().message().find("y"), std::string::npos) << out.status();
}

}  // namespace
}  // namespace fusejit
