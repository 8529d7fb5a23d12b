#include "fusion/kernel_bytes.h"

#include <algorithm>
#include <set>
#include <vector>

namespace fusejit {
namespace {

int64_t tensor_bytes(const Node& n) { return n.shape.numel() * dtype_size(n.dtype); }

}  // namespace

bool is_row_shaped(const Node& n, const Kernel& kernel) {
  return n.shape.last() == kernel.iteration.last() && n.shape.last() > 1 && n.shape.numel() > n.shape.last();
}

bool is_streamed_along_row(const Node& n, const Kernel& kernel) {
  const bool single_row = kernel.iteration.numel() == kernel.iteration.last();
  // Rows of one element: every tensor of the kernel's size is one element a
  // row, loaded or stored as it goes (is_row_shaped cannot tell it from a
  // per-row scalar, which here is the same thing).
  const bool rows_of_one = kernel.iteration.last() == 1 && n.shape.numel() == kernel.iteration.numel();
  return is_row_shaped(n, kernel) || rows_of_one ||
         (single_row && n.shape.last() == kernel.iteration.last() && n.shape.last() > 1);
}

KernelBytes kernel_bytes(const Graph& graph, const Kernel& kernel) {
  KernelBytes bytes;
  const bool reread = kernel.row_strategy == RowStrategy::kReread;
  // A re-reading kernel loads its row-shaped reads again in each pass that
  // needs them (row_pass_counts); a broadcast [N] vector is charged once, as
  // later rows find it in cache. A kernel of a single row shares nothing
  // between rows: its [1, N] reads and [N] vectors are that row, loaded in
  // each pass that needs them (a [1, 128256] log_softmax over a vocabulary
  // was charged one pass of its three, where [2, 128256] was charged all).
  const std::vector<int> passes = row_pass_counts(graph, kernel).reads;
  for (size_t r = 0; r < kernel.reads.size(); ++r) {
    const Node& n = graph.node(kernel.reads[r]);
    const bool each_pass = is_streamed_along_row(n, kernel);
    bytes.read += tensor_bytes(n) * (reread && each_pass ? std::max(1, passes[r]) : 1);
  }
  for (int32_t id : kernel.writes) bytes.written += tensor_bytes(graph.node(id));
  return bytes;
}

int64_t broadcast_reread_bytes(const Graph& graph, const Kernel& kernel, int64_t cache_bytes) {
  if (cache_bytes <= 0 || kernel.kind == KernelKind::kMatmul) return 0;
  const Shape& iteration = kernel.iteration;
  const int rank = iteration.rank();
  const double elements = static_cast<double>(iteration.numel());
  // The kernel's traffic per element of its iteration: what passes through
  // the cache between two uses of a broadcast element, per element apart.
  const double bytes_per_element = static_cast<double>(kernel_bytes(graph, kernel).total()) / elements;
  int64_t extra = 0;
  for (int32_t id : kernel.reads) {
    const Node& n = graph.node(id);
    if (n.shape.numel() >= iteration.numel() || n.shape.rank() > rank) continue;
    const int pad = rank - n.shape.rank();  // NumPy broadcasting aligns the last dimensions
    auto extent = [&](int d) { return d < pad ? int64_t{1} : n.shape[d - pad]; };
    int64_t reads = 1;
    for (int d = 0; d < rank; ++d) {
      if (extent(d) != 1 || iteration[d] == 1) continue;
      bool varies_inside = false;
      double apart = 1;  // iteration elements between two uses of one element along d
      for (int e = d + 1; e < rank; ++e) {
        varies_inside = varies_inside || extent(e) > 1;
        apart *= static_cast<double>(iteration[e]);
      }
      if (varies_inside && apart * bytes_per_element > static_cast<double>(cache_bytes)) reads *= iteration[d];
    }
    extra += (reads - 1) * n.shape.numel() * dtype_size(n.dtype);
  }
  return extra;
}

}  // namespace fusejit
