#include "runtime/worker_scratch.h"

#include <algorithm>
#include <limits>

#include "runtime/thread_pool.h"

namespace fusejit {

WorkerScratch::WorkerScratch(int threads) : slots_(static_cast<size_t>(std::max(threads, 1))) {}

float* WorkerScratch::get(int64_t floats) {
  const size_t index = static_cast<size_t>(ThreadPool::thread_index());
  if (index >= slots_.size())
    return nullptr;  // a pool larger than the plan was loaded for: cannot happen (a forked child's has the inherited
                     // size)
  if (floats < 0 || floats > (std::numeric_limits<int64_t>::max() - 63) / static_cast<int64_t>(sizeof(float))) {
    return nullptr;
  }
  Slot& slot = slots_[index];
  const int64_t bytes = std::max<int64_t>(64, (floats * static_cast<int64_t>(sizeof(float)) + 63) / 64 * 64);
  if (bytes > slot.bytes) {
    // The old buffer goes first: its contents are not kept, and the two
    // together would raise the peak.
    slot.data.reset();
    slot.bytes = 0;
    float* p = static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(bytes)));
    if (p == nullptr) return nullptr;
    slot.data.reset(p);
    slot.bytes = bytes;
  }
  return slot.data.get();
}

int64_t WorkerScratch::total_bytes() const {
  int64_t total = 0;
  for (const Slot& slot : slots_) total += slot.bytes;
  return total;
}

}  // namespace fusejit
