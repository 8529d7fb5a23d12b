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
  // needs them (row_pass_needs); a broadcast [N] vector is charged once, as
  // later rows find it in cache. A kernel of a single row shares nothing
  // between rows: its [1, N] reads and [N] vectors are that row, loaded in
  // each pass that needs them (a [1, 128256] log_softmax over a vocabulary
  // was charged one pass of its three, where [2, 128256] was charged all).
  const std::vector<std::set<int32_t>> needs = row_pass_needs(graph, kernel);
  for (int32_t id : kernel.reads) {
    const Node& n = graph.node(id);
    const bool each_pass = is_streamed_along_row(n, kernel);
    bytes.read += tensor_bytes(n) * (reread && each_pass ? std::max(1, passes_needing(needs, id)) : 1);
  }
  for (int32_t id : kernel.writes) bytes.written += tensor_bytes(graph.node(id));
  return bytes;
}

}  // namespace fusejit
