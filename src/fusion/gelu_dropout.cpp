#include "fusion/gelu_dropout.h"

#include <algorithm>

namespace fusejit {

int32_t gelu_folded_into_dropout(const Graph& graph, const Kernel& kernel, int32_t dropout) {
  const Node& d = graph.node(dropout);
  if (d.op != Op::kDropout || d.operands.empty() || d.operands[0].is_literal()) return -1;
  if (!(d.attrs.get_float("p") < 1)) return -1;  // p = 1 drops everything: no finite scale to fold
  const int32_t gelu = d.operands[0].node;
  if (!graph.is_16bit_gelu(gelu) || graph.node(gelu).operands[0].is_literal()) return -1;
  // Elementwise over the kernel's space, not a per-row value of a row
  // kernel ([M, 1]), which is computed on its own.
  if (graph.node(gelu).shape != kernel.iteration) return -1;
  const auto& nodes = kernel.nodes;
  if (std::find(nodes.begin(), nodes.end(), gelu) == nodes.end()) return -1;
  if (std::find(kernel.writes.begin(), kernel.writes.end(), gelu) != kernel.writes.end()) return -1;
  for (int32_t user : nodes) {
    if (user == dropout) continue;
    for (const Operand& o : graph.node(user).operands) {
      if (!o.is_literal() && o.node == gelu) return -1;
    }
  }
  return gelu;
}

absl::flat_hash_set<int32_t> gelus_folded_into_dropouts(const Graph& graph, const Kernel& kernel) {
  absl::flat_hash_set<int32_t> folded;
  for (int32_t id : kernel.nodes) {
    if (const int32_t gelu = gelu_folded_into_dropout(graph, kernel, id); gelu >= 0) folded.insert(gelu);
  }
  return folded;
}

}  // namespace fusejit
