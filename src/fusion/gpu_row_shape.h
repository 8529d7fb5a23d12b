// How a GPU row kernel lays a row over threads. The CUDA generator emits
// this shape and the cost model counts each thread's share of a row's
// reductions with it, so the two agree (but for FUSEJIT_ROW_BLOCK_THREADS,
// an experiment's override that only the generator reads).
#pragma once

#include <cstdint>
#include <vector>

#include "fusion/plan.h"

namespace fusejit {

// Rows up to this length get a warp each. DESIGN.md allows 1024, but a warp
// holding 1024 elements keeps 32 per lane in each live array and needs well
// over 128 registers for a residual + LayerNorm; a block of 64 threads does
// the same row with 16 per thread.
inline constexpr int64_t kGpuWarpRowLimit = 512;

// Threads in a block of a warp-per-row kernel (several rows to a block)
// and of a pointwise kernel, as the CUDA generator emits them.
inline constexpr int kGpuWarpRowBlockThreads = 128;
inline constexpr int kGpuPointwiseBlockThreads = 256;

struct GpuRowShape {
  // A warp, or a part of one, per row: `threads` lanes share a row and a
  // warp holds 32 / threads rows, several warps to a block.
  bool warp_per_row = false;
  int threads = 32;  // threads that share one row (a power of two)
};

// The shape of a row kernel with rows of `row_length` elements, of which a
// thread loads `chunk` consecutive ones at a time (fusion/gpu_vector_width.h:
// the vector width, or 1 without a vector path):
//   re-reading rows (RowStrategy::kReread): a block of 1024 threads per row;
//   rows up to kGpuWarpRowLimit: a warp per row, but rows shorter than 32
//   chunks get only as many lanes as they have chunks (a power of two), so
//   that a softmax over 8 experts does not leave 31 of 32 lanes idle; each
//   lane holds what it would hold with a whole warp;
//   longer rows: a block per row with about 8 elements (one 16-byte chunk of
//   bf16) per thread, 64 to 1024 threads. Each element of the row is
//   unrolled code, so fewer per thread means fewer registers and a faster
//   NVRTC compile; 1024 threads hold 16 each at the persistent limit.
GpuRowShape gpu_row_shape(int64_t row_length, RowStrategy strategy, int chunk);
// The same for a kernel of a plan, with its own chunk.
GpuRowShape gpu_row_shape(const Graph& graph, const Kernel& kernel);

// The thread blocks a generated GPU kernel's work makes (before the launch
// caps the grid at one wave of resident blocks, which never lowers it
// below the SM count): a pointwise kernel's vector steps over 256-thread
// blocks (it assumes the vector path); a row per block, or as many rows as
// a block of warp-per-row holds. 0 for a matmul (cuBLAS chooses).
int64_t gpu_kernel_blocks(const Graph& graph, const Kernel& kernel);

// How many [N] vectors (gamma, beta, a bias: the same columns in every row)
// a persistent row kernel loads once per thread and keeps in registers for
// all its rows. Each takes a thread's share of the row in registers (8 to 16
// floats); 50 fused LayerNorm layers kept 150 of them, which took 255
// registers and spilled 1.9 KB per thread (rows of 1024). The rest are read
// again in every row, just before their first use, from L1 or L2
// (bench/results/2026-12-05-row-kernel-kept-vectors.md).
inline constexpr int kGpuRowKeptVectors = 4;

// The [N] vectors a persistent row kernel reads, in kernel.reads order: the
// first kGpuRowKeptVectors kept, the others reloaded in every row. Both
// empty for other kernels (a re-reading kernel loads every read per pass).
// The CUDA generator emits these loads and the instruction model counts them.
struct GpuRowVectors {
  std::vector<int32_t> kept;
  std::vector<int32_t> reloaded;
};
GpuRowVectors gpu_row_vectors(const Graph& graph, const Kernel& kernel);

}  // namespace fusejit
