#include "fusion/gpu_row_shape.h"

#include <algorithm>

#include "fusion/gpu_vector_width.h"

namespace fusejit {
namespace {

int64_t next_pow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

}  // namespace

GpuRowShape gpu_row_shape(int64_t row_length, RowStrategy strategy, int chunk) {
  if (strategy == RowStrategy::kReread) return {.warp_per_row = false, .threads = 1024};
  if (row_length <= kGpuWarpRowLimit) {
    const int64_t per_chunk = std::max(chunk, 1);
    const int64_t chunks = (row_length + per_chunk - 1) / per_chunk;
    return {.warp_per_row = true, .threads = static_cast<int>(std::min<int64_t>(next_pow2(chunks), 32))};
  }
  return {.warp_per_row = false,
          .threads = static_cast<int>(std::clamp<int64_t>(next_pow2((row_length + 7) / 8), 64, 1024))};
}

GpuRowShape gpu_row_shape(const Graph& graph, const Kernel& kernel) {
  const int chunk = gpu_has_vector_path(graph, kernel) ? gpu_vector_width(graph, kernel) : 1;
  return gpu_row_shape(kernel.iteration.last(), kernel.row_strategy, chunk);
}

int64_t gpu_kernel_blocks(const Graph& graph, const Kernel& kernel) {
  const int64_t count = kernel.iteration.numel();
  switch (kernel.kind) {
    case KernelKind::kMatmul: return 0;
    case KernelKind::kPointwise: {
      const int64_t width = gpu_has_vector_path(graph, kernel) ? gpu_vector_width(graph, kernel) : 1;
      const int64_t steps = (count + width - 1) / width;
      return (steps + kGpuPointwiseBlockThreads - 1) / kGpuPointwiseBlockThreads;
    }
    case KernelKind::kRow: {
      const int64_t rows = kernel.iteration.last() > 0 ? count / kernel.iteration.last() : 0;
      const GpuRowShape shape = gpu_row_shape(graph, kernel);
      if (!shape.warp_per_row) return rows;
      const int64_t rows_per_block = kGpuWarpRowBlockThreads / shape.threads;
      return (rows + rows_per_block - 1) / rows_per_block;
    }
  }
  return 0;
}

GpuRowVectors gpu_row_vectors(const Graph& graph, const Kernel& kernel) {
  GpuRowVectors vectors;
  if (kernel.kind != KernelKind::kRow || kernel.row_strategy == RowStrategy::kReread) return vectors;
  for (int32_t id : kernel.reads) {
    // Varies along the row (a nonzero last stride), the same in every row
    // (zero strides elsewhere): codegen/tensor_access.h's terms.
    const auto strides = broadcast_strides(graph.node(id).shape, kernel.iteration);
    if (strides.empty() || strides.back() == 0) continue;
    if (!std::all_of(strides.begin(), strides.end() - 1, [](int64_t s) { return s == 0; })) continue;
    (static_cast<int>(vectors.kept.size()) < kGpuRowKeptVectors ? vectors.kept : vectors.reloaded).push_back(id);
  }
  return vectors;
}

}  // namespace fusejit
