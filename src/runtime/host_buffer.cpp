#include "runtime/host_buffer.h"

#include <fmt/format.h>

#include "ir/available_memory.h"
namespace fusejit {

absl::StatusOr<HostBuffer> HostBuffer::allocate(int64_t bytes, int misalign_bytes, const std::string& what) {
  if (bytes < 0 || misalign_bytes < 0 || misalign_bytes >= 64) {
    return absl::InvalidArgumentError(fmt::format("{}: bad size {} or misalignment {}", what, bytes, misalign_bytes));
  }
  const uint64_t total = (static_cast<uint64_t>(bytes) + 64 + 63) / 64 * 64;
  if (std::string refused = host_allocation_refusal(total, what); !refused.empty()) {
    return absl::ResourceExhaustedError(refused);
  }
  HostBuffer b;
  b.block_ = allocate_host_memory(total);
  if (!b.block_) {
    return absl::ResourceExhaustedError(
        fmt::format("out of host memory: cannot allocate {} bytes for {}", bytes, what));
  }
  b.offset_ = misalign_bytes;
  b.bytes_ = bytes;
  return b;
}

}  // namespace fusejit
