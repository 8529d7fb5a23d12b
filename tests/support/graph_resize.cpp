#include "support/graph_resize.h"

#include <set>
#include <stdexcept>

#include "ir/infer.h"

namespace fusejit::testing {

Graph resize_extents(const Graph& graph, const std::map<int64_t, int64_t>& resize) {
  Graph out;
  out.set_source_file(graph.source_file());
  for (const Node& n : graph.nodes()) {
    if (n.op == Op::kInput) {
      Node copy = n;
      for (int d = 0; d < copy.shape.rank(); ++d) {
        if (auto it = resize.find(copy.shape[d]); it != resize.end()) copy.shape[d] = it->second;
      }
      out.append(std::move(copy));
      continue;
    }
    NodeCheck check = make_node(out, n.info(), n.operands, n.attrs);
    if (!check.ok()) throw std::runtime_error("resize_extents: " + check.error);
    check.node.name = n.name;
    out.append(std::move(check.node));
  }
  for (int32_t o : graph.outputs()) out.add_output(o);
  return out;
}

Graph shrink(const Graph& graph, int64_t limit) {
  std::set<int64_t> extents;
  for (int32_t id : graph.inputs()) {
    for (int64_t e : graph.node(id).shape) {
      if (e > limit) extents.insert(e);
    }
  }
  static constexpr int64_t kSmall[] = {17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61};
  std::map<int64_t, int64_t> resize;
  size_t i = 0;
  for (int64_t e : extents) resize[e] = kSmall[i++ % std::size(kSmall)];
  return resize_extents(graph, resize);
}

}  // namespace fusejit::testing
