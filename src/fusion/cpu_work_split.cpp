#include "fusion/cpu_work_split.h"

#include <algorithm>

namespace fusejit {

// Grains of about 64 KiB of traffic: fewer items would cost more to hand
// to a thread than to run.
CpuWorkSplit cpu_work_split(const Graph& graph, const Kernel& kernel) {
  CpuWorkSplit split;
  switch (kernel.kind) {
    case KernelKind::kPointwise:
      split.count = kernel.iteration.numel();
      split.grain = 16384;
      break;
    case KernelKind::kRow: {
      const int64_t n = kernel.iteration.rank() == 0 ? 1 : kernel.iteration.last();
      split.count = n == 0 ? 0 : kernel.iteration.numel() / n;
      split.grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1));
      break;
    }
    case KernelKind::kMatmul: {
      // Rows of C: rows of A, [M, K].
      const Shape& a = graph.node(graph.node(kernel.nodes.at(0)).operands.at(0).node).shape;
      const int64_t k = a.rank() == 0 ? 1 : a.last();
      split.count = k == 0 ? a.numel() : a.numel() / k;
      split.grain = 32;
      break;
    }
  }
  return split;
}

CpuChunks cpu_chunks(int64_t count, int64_t grain, int threads) {
  if (count <= 0) return {};
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks = std::max<int64_t>(1, count / grain);
  const int64_t wanted = std::min<int64_t>(std::max(threads, 1), max_chunks);
  CpuChunks c;
  c.chunk = (count + wanted - 1) / wanted;
  c.chunks = (count + c.chunk - 1) / c.chunk;
  return c;
}

int64_t cpu_matmul_packed_elements(const Graph& graph, const Kernel& kernel, int threads) {
  if (kernel.kind != KernelKind::kMatmul || kernel.writes.empty()) return 0;  // an unused matmul does nothing
  const Node& mm = graph.node(kernel.nodes.at(0));
  const int64_t b_elements = graph.node(mm.operands.at(1).node).shape.numel();  // B is [K, N]
  const CpuWorkSplit split = cpu_work_split(graph, kernel);
  const CpuChunks c = cpu_chunks(split.count, split.grain, threads);
  if (c.chunks == 0) return 0;
  auto blocks = [](int64_t rows) { return (rows + kCpuMatmulRowBlock - 1) / kCpuMatmulRowBlock; };
  const int64_t last = split.count - (c.chunks - 1) * c.chunk;
  return ((c.chunks - 1) * blocks(c.chunk) + blocks(last)) * b_elements;
}

}  // namespace fusejit
