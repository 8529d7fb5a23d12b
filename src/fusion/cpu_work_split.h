// How a CPU kernel's work is handed to threads: the work items and grain
// that the CPU generator gives each kernel (codegen/cpu), and the chunks
// the thread pool cuts them into (runtime/thread_pool.cpp). The cost model
// (cost/cost_model.cpp) charges a kernel that runs on fewer threads than
// the machine has for the threads it leaves idle: one row of 16M elements
// runs on one thread, and measured 2.3x its prediction when the model
// assumed every thread took a share.
#pragma once

#include <cstdint>

#include "fusion/plan.h"

namespace fusejit {

struct CpuWorkSplit {
  int64_t count = 0;  // work items: elements (pointwise) or rows (row, matmul)
  int64_t grain = 1;  // fewest items worth handing to one thread (about 64 KiB of traffic)
};

CpuWorkSplit cpu_work_split(const Graph& graph, const Kernel& kernel);

// The pool's split of `count` items over `threads`: `chunks` consecutive
// ranges of `chunk` items (the last may be shorter), each of at least
// `grain` items, one per thread: a split into more chunks than threads
// would only add waiting, since every item costs about the same.
struct CpuChunks {
  int64_t chunk = 0;   // items in each chunk but the last
  int64_t chunks = 0;  // threads that get a chunk
};
CpuChunks cpu_chunks(int64_t count, int64_t grain, int threads);

// How much longer than an even split over `threads` the kernel takes: its
// longest chunk over count / threads (1 when every thread gets an equal
// share; `threads` when one thread does it all).
double cpu_split_slowdown(const CpuWorkSplit& split, int threads);

}  // namespace fusejit
