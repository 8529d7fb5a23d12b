#include "fusion/kernel_plan.h"

#include <memory>

#include <absl/container/flat_hash_map.h>
#include <fmt/format.h>

#include "ir/error.h"

namespace fusejit {

FusionPlan neutral_kernel_plan(const FusionPlan& plan, int index, std::string name) {
  const Graph& g = *plan.graph;
  const Kernel& kernel = plan.kernels.at(static_cast<size_t>(index));
  auto neutral = std::make_shared<Graph>();
  absl::flat_hash_map<int32_t, int32_t> renamed;  // plan's node id -> neutral graph's node id
  auto add = [&](int32_t id, Node node) { renamed.emplace(id, neutral->append(std::move(node))); };
  for (size_t i = 0; i < kernel.reads.size(); ++i) {
    const Node& n = g.node(kernel.reads[i]);
    Node in;
    in.op = Op::kInput;
    in.name = fmt::format("in{}", i);
    in.dtype = n.dtype;
    in.shape = n.shape;
    add(kernel.reads[i], std::move(in));
  }
  for (size_t i = 0; i < kernel.nodes.size(); ++i) {
    const int32_t id = kernel.nodes[i];
    Node n = g.node(id);
    n.name = fmt::format("t{}", i);
    n.loc = {};
    n.auto_named = false;
    for (Operand& o : n.operands) {
      if (o.is_literal()) continue;
      auto it = renamed.find(o.node);
      if (it == renamed.end()) {
        throw Error(fmt::format("kernel {}: node {} uses {}, which the kernel neither computes nor reads", kernel.name,
                                g.node(id).name, g.node(o.node).name));
      }
      o.node = it->second;
    }
    if (n.op == Op::kDropout) n.attrs.set("seed", int64_t{0});
    add(id, std::move(n));
  }
  Kernel k = kernel;
  k.name = std::move(name);
  auto remap = [&](std::vector<int32_t>& ids) {
    for (int32_t& id : ids) id = renamed.at(id);
  };
  remap(k.nodes);
  remap(k.reads);
  remap(k.writes);
  for (int32_t id : k.writes) neutral->add_output(id);
  return {.label = plan.label, .graph = std::move(neutral), .kernels = {std::move(k)}};
}

}  // namespace fusejit
