// Host memory for tensors and for the probes that measure the memory
// ceiling, backed by transparent huge pages where Linux offers them.
#pragma once

#include <cstddef>

namespace fusejit {

// `bytes` of memory aligned to 64 bytes, or nullptr when out of memory; free
// it with std::free. A block of 2 MiB or more is aligned to 2 MiB and
// advised as huge-page memory (madvise MADV_HUGEPAGE; the kernel's
// transparent_hugepage setting is "madvise" on Debian 12, so without the
// advice every tensor sits in 4 KiB pages). A kernel streaming several
// arrays from memory then misses the TLB once per 2 MiB of each instead of
// once per 4 KiB, and in a virtual machine each of those misses walks two
// levels of page tables: on the development VM, a bf16 GeLU over 64 MiB
// ran 1.23x faster and the streaming copy of the ceiling 1.16x
// (bench/results/2026-12-01-cpu-intel.md). The advice is only advice: where
// the system refuses it, the memory works as before.
void* allocate_host_memory(size_t bytes);

// Whether allocate_host_memory asks for huge pages for a block this size.
bool uses_huge_pages(size_t bytes);

}  // namespace fusejit
