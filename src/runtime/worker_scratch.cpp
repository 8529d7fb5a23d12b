#include "runtime/worker_scratch.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <memory>

namespace fusejit {
namespace {

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};

struct Scratch {
  std::unique_ptr<float, FreeDeleter> data;
  int64_t bytes = 0;
};

thread_local Scratch scratch;

}  // namespace

float* worker_scratch(int64_t floats) {
  if (floats < 0 || floats > (std::numeric_limits<int64_t>::max() - 63) / static_cast<int64_t>(sizeof(float))) {
    return nullptr;
  }
  const int64_t bytes = std::max<int64_t>(64, (floats * static_cast<int64_t>(sizeof(float)) + 63) / 64 * 64);
  if (bytes > scratch.bytes) {
    // The old buffer goes first: its contents are not kept, and the two
    // together would raise the peak.
    scratch.data.reset();
    scratch.bytes = 0;
    float* p = static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(bytes)));
    if (p == nullptr) return nullptr;
    scratch.data.reset(p);
    scratch.bytes = bytes;
  }
  return scratch.data.get();
}

int64_t worker_scratch_bytes() { return scratch.bytes; }

}  // namespace fusejit
