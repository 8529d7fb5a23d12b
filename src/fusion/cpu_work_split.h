// How a CPU kernel's work is handed to threads: the work items and grain
// that the CPU generator gives each kernel (codegen/cpu), and the chunks
// the thread pool cuts them into (runtime/thread_pool.cpp). The cost model
// (cost/cost_model.cpp) charges a kernel that runs on fewer threads than
// the machine has for the threads it leaves idle: on 2 threads a softmax
// row of 4M f32 elements, which runs on one, took 2.05x as long as 64 rows
// of the same size (bench/results/2026-12-06-cpu-idle-threads.md).
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

// The CPU GEMM (codegen/cpu/matmul.cpp) works on blocks of up to this many
// rows of C, and packs all of B for each block of each thread's chunk.
inline constexpr int64_t kCpuMatmulRowBlock = 132;

// The elements of B that a matmul kernel packs on `threads` threads: K x N
// for each row block of each chunk (the zeros that fill a last panel
// narrower than the micro-kernel's are not counted: nothing is read for
// them). A GEMM of few rows per thread pays
// this over few rows: packing a 1024 x 1024 B costs as much as 12 rows of
// multiply-adds (bench/results/2026-12-06-cpu-matmul-packing.md).
int64_t cpu_matmul_packed_elements(const Graph& graph, const Kernel& kernel, int threads);

}  // namespace fusejit
