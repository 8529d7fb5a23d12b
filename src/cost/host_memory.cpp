#include "cost/host_memory.h"

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#if defined(__linux__)
#include <sys/mman.h>
#include <sys/prctl.h>
#endif

namespace fusejit {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

// 0 where rounding up would wrap around.
size_t round_up(size_t bytes, size_t to) { return bytes > SIZE_MAX - to ? 0 : (bytes + to - 1) / to * to; }

}  // namespace

void FreeHostMemory::operator()(void* p) const {
#if defined(__linux__)
  if (mapped_bytes > 0) {
    munmap(p, mapped_bytes);
    return;
  }
#endif
  std::free(p);
}

bool huge_pages_available() {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  static const bool available = [] {
    std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string setting;
    if (!std::getline(in, setting) || setting.find("[never]") != std::string::npos) return false;
#if defined(PR_GET_THP_DISABLE)
    if (prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1) return false;
#endif
    return true;
  }();
  return available;
#else
  return false;
#endif
}

bool uses_huge_pages(size_t bytes) { return bytes >= kHugePage && huge_pages_available(); }

HostMemory allocate_host_memory(size_t bytes) {
  if (!uses_huge_pages(bytes)) {
    const size_t size = round_up(bytes == 0 ? 1 : bytes, 64);
    return HostMemory(size == 0 ? nullptr : std::aligned_alloc(64, size), FreeHostMemory{});
  }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  const size_t total = round_up(bytes, kHugePage);
  if (total == 0 || total > SIZE_MAX - kHugePage) return HostMemory(nullptr, FreeHostMemory{});
  // Map a huge page more than asked for and unmap the ends, so that the
  // block starts on a 2 MiB boundary.
  void* raw = mmap(nullptr, total + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return HostMemory(nullptr, FreeHostMemory{});
  const uintptr_t base = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = (base + kHugePage - 1) / kHugePage * kHugePage;
  if (start > base) munmap(raw, start - base);
  const uintptr_t end = base + total + kHugePage;
  if (end > start + total) munmap(reinterpret_cast<void*>(start + total), end - (start + total));
  // Before the first touch, so that the pages are huge from the start.
  madvise(reinterpret_cast<void*>(start), total, MADV_HUGEPAGE);
  return HostMemory(reinterpret_cast<void*>(start), FreeHostMemory{total});
#else
  return HostMemory(nullptr, FreeHostMemory{});
#endif
}

}  // namespace fusejit
