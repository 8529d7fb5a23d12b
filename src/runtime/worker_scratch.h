// Working memory of a loaded CPU plan's kernels (row kernels' arrays,
// matmul's blocks): one buffer per thread of the pool, kept from call to
// call and freed with the plan.
//
// A kernel used to allocate its arrays on every call and free them after:
// for rows of a million floats that is 20 MB a call, which the allocator
// hands back to the system and the next call faults in again, page by page
// (on the development VM the faults cost 50 ms per call against a 1 ms
// kernel). A slot only grows, to the most any kernel of the plan asked for
// on that thread; each thread allocates (and first touches) its own.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

namespace fusejit {

class WorkerScratch {
 public:
  // One slot per thread of a pool of `threads` (ThreadPool::size()).
  explicit WorkerScratch(int threads);

  // At least `floats` floats, 64-byte aligned, for the calling thread alone
  // (its slot: ThreadPool::thread_index()); the same memory on the next
  // call unless more is asked for (contents are not kept when it grows).
  // nullptr when the memory cannot be had. Threads only touch their own
  // slot, so calls from the pool's threads at once are safe.
  float* get(int64_t floats);
  // Bytes held by all the slots.
  int64_t total_bytes() const;

 private:
  struct FreeDeleter {
    void operator()(float* p) const { std::free(p); }
  };
  struct Slot {
    std::unique_ptr<float, FreeDeleter> data;
    int64_t bytes = 0;
  };
  std::vector<Slot> slots_;
};

}  // namespace fusejit
