#include "cost/host_memory.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace fusejit {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The kB of AnonHugePages in /proc/self/smaps for the mapping holding p.
int64_t huge_kb_backing(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto address = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  std::string line;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2 && line.find(':') > line.find(' ')) {
      inside = address >= begin && address < end;
    } else if (inside && line.rfind("AnonHugePages:", 0) == 0) {
      return std::atoll(line.c_str() + std::strlen("AnonHugePages:"));
    }
  }
  return -1;
}

TEST(HostMemory, SmallBlocksAreLineAlignedAndLargeOnesHugePageAligned) {
  EXPECT_FALSE(uses_huge_pages(4096));
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{100}, size_t{64 << 10}}) {
    HostMemory m = allocate_host_memory(bytes);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(m.get()) % 64, 0u) << bytes;
    std::memset(m.get(), 1, bytes);
  }
  const size_t bytes = (size_t{5} << 20) + 3;
  HostMemory m = allocate_host_memory(bytes);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(uses_huge_pages(bytes), huge_pages_available());
  if (uses_huge_pages(bytes)) EXPECT_EQ(reinterpret_cast<uintptr_t>(m.get()) % (size_t{2} << 20), 0u);
  std::memset(m.get(), 1, bytes);  // every byte asked for is usable
  EXPECT_EQ(allocate_host_memory(SIZE_MAX - 5), nullptr);  // too large: null, not a wrapped-around size
}

// Where this process may have transparent huge pages, a large block touched
// once is backed by them: what keeps a streaming kernel from missing the
// TLB every 4 KiB.
TEST(HostMemory, LargeBlocksGetHugePagesWhereTheSystemOffersThem) {
  if (!huge_pages_available()) GTEST_SKIP() << "transparent huge pages are off for this process or system";
  const std::string defrag = read_file("/sys/kernel/mm/transparent_hugepage/defrag");
  if (defrag.find("[never]") != std::string::npos) {
    GTEST_SKIP() << "huge pages are never assembled at fault time here (defrag: " << defrag << ")";
  }
  const size_t bytes = size_t{64} << 20;
  ASSERT_TRUE(uses_huge_pages(bytes));
  HostMemory m = allocate_host_memory(bytes);
  ASSERT_NE(m, nullptr);
  std::memset(m.get(), 1, bytes);
  const int64_t huge_kb = huge_kb_backing(m.get());
  if (huge_kb < 0) GTEST_SKIP() << "/proc/self/smaps does not describe the block";
  EXPECT_GT(huge_kb, 0) << "no huge pages behind a 64 MiB block";
}

}  // namespace
}  // namespace fusejit
