// Host memory a process can still take, checked before large allocations.
//
// Linux lets malloc and mmap promise more memory than there is; the pages
// are found only when first touched, and when they are not there the
// kernel's OOM killer ends the process (or another one) without a word. A
// `fusejit demo --rows 400000` on a 24 GiB machine passed every check on
// its inputs and was killed at 24.3 GB. So every large host allocation of a
// run (the reference interpreter's tensors, the backends' buffers, results
// read back) first asks whether it fits in what is available now, and
// refuses with an error naming the tensor when it does not.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace fusejit {

// Bytes available to this process now: /proc/meminfo's MemAvailable,
// lowered to what the memory limit of the process's cgroup (v2 memory.max,
// v1 memory.limit_in_bytes) and of each cgroup above it leaves: the limit
// less the usage, whose inactive file pages (reclaimable cache) count as
// free. None when nothing can be read.
std::optional<uint64_t> available_host_memory();

// One cgroup level's files as text ("" where absent): for tests.
struct CgroupMemoryFiles {
  std::string limit;  // memory.max ("max": none) or memory.limit_in_bytes
  std::string usage;  // memory.current or memory.usage_in_bytes
  std::string stat;   // memory.stat
};
std::optional<uint64_t> available_host_memory_from(std::string_view meminfo,
                                                   const std::vector<CgroupMemoryFiles>& levels);

// Whether `bytes` fit in available_host_memory() (or it is unknown, or
// bytes are under 64 MiB, too few to matter and too many allocations to
// read /proc for).
bool host_allocation_fits(uint64_t bytes);

// "" when `bytes` for `what` fit in available_host_memory() (or it is
// unknown, or bytes are under 64 MiB, too few to matter and too many
// allocations to read /proc for); else the error text: "out of host
// memory: WHAT needs N MiB, M MiB are available".
std::string host_allocation_refusal(uint64_t bytes, std::string_view what);

// Thrown where an allocation is refused deep inside a computation that
// reports errors as a Status at its top (the reference interpreter).
class OutOfHostMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace fusejit
