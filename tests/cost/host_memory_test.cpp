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
  for (size_t bytes : {size_t{1}, size_t{100}, size_t{64 << 10}}) {
    void* p = allocate_host_memory(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    std::memset(p, 1, bytes);
    std::free(p);
  }
  void* p = allocate_host_memory((size_t{5} << 20) + 3);
  ASSERT_NE(p, nullptr);
  if (uses_huge_pages(size_t{5} << 20)) EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (size_t{2} << 20), 0u);
  std::memset(p, 1, (size_t{5} << 20) + 3);  // every byte asked for is usable
  std::free(p);
}

// Where Linux offers transparent huge pages ("always" or "madvise"), a large
// block touched once is backed by them: what keeps a streaming kernel from
// missing the TLB every 4 KiB.
TEST(HostMemory, LargeBlocksGetHugePagesWhereTheSystemOffersThem) {
  const std::string setting = read_file("/sys/kernel/mm/transparent_hugepage/enabled");
  if (setting.empty() || setting.find("[never]") != std::string::npos) {
    GTEST_SKIP() << "transparent huge pages are off or absent here: '" << setting << "'";
  }
  const size_t bytes = size_t{64} << 20;
  ASSERT_TRUE(uses_huge_pages(bytes));
  char* p = static_cast<char*>(allocate_host_memory(bytes));
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, bytes);
  EXPECT_GT(huge_kb_backing(p), 0) << "no huge pages behind a 64 MiB block (setting: " << setting << ")";
  std::free(p);
}

}  // namespace
}  // namespace fusejit
