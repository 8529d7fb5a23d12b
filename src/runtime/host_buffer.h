// A 64-byte aligned block of host memory (in huge pages from 2 MiB up:
// cost/host_memory.h), optionally shifted by a few bytes so that tests can
// hand kernels pointers that are not 16-byte aligned.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>

#include <absl/status/statusor.h>

#include "cost/host_memory.h"

namespace fusejit {

class HostBuffer {
 public:
  // `what` names the buffer in the out-of-memory error.
  static absl::StatusOr<HostBuffer> allocate(int64_t bytes, int misalign_bytes, const std::string& what);

  void* data() const { return static_cast<char*>(block_.get()) + offset_; }
  int64_t bytes() const { return bytes_; }

 private:
  HostMemory block_;
  int offset_ = 0;
  int64_t bytes_ = 0;
};

}  // namespace fusejit
