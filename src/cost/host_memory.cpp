#include "cost/host_memory.h"

#include <cstdlib>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace fusejit {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

size_t round_up(size_t bytes, size_t to) { return (bytes + to - 1) / to * to; }

}  // namespace

bool uses_huge_pages(size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  return bytes >= kHugePage;
#else
  return false;
#endif
}

void* allocate_host_memory(size_t bytes) {
  if (!uses_huge_pages(bytes)) return std::aligned_alloc(64, round_up(bytes == 0 ? 1 : bytes, 64));
  const size_t total = round_up(bytes, kHugePage);
  void* p = std::aligned_alloc(kHugePage, total);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Before the first touch, so that the pages are huge from the start.
  if (p != nullptr) madvise(p, total, MADV_HUGEPAGE);
#endif
  return p;
}

}  // namespace fusejit
