// Host memory for tensors and for the probes that measure the memory
// ceiling, backed by transparent huge pages where Linux offers them.
#pragma once

#include <cstddef>
#include <memory>

namespace fusejit {

// Returns a block to where allocate_host_memory took it from.
struct FreeHostMemory {
  size_t mapped_bytes = 0;  // 0: from the heap (std::free), else an mmap of this many bytes
  void operator()(void* p) const;
};
using HostMemory = std::unique_ptr<void, FreeHostMemory>;

// `bytes` of memory aligned to 64 bytes, or null when out of memory. Where
// huge pages are available (huge_pages_available()), a block of 2 MiB or
// more is its own 2 MiB-aligned mapping advised as huge-page memory
// (madvise MADV_HUGEPAGE; the kernel's transparent_hugepage setting is
// "madvise" on Debian 12, so without the advice every tensor sits in 4 KiB
// pages). A kernel streaming several arrays from memory then misses the TLB
// once per 2 MiB of each instead of once per 4 KiB, and in a virtual
// machine each of those misses walks two levels of page tables: on the
// development VM, a bf16 GeLU over 64 MiB ran 1.23x faster and the
// streaming copy of the ceiling 1.09-1.12x (bench/results/2026-12-01-cpu-intel.md).
// Its own mapping, not the heap's: glibc serves blocks up to 32 MiB from
// the heap once a large block has been freed, and advice given there would
// outlive the block and reach unrelated small allocations.
HostMemory allocate_host_memory(size_t bytes);

// Whether this process may get transparent huge pages: the system's
// setting is not "never" and the process has not turned them off (prctl).
bool huge_pages_available();

// Whether allocate_host_memory asks for huge pages for a block this size.
bool uses_huge_pages(size_t bytes);

}  // namespace fusejit
