#include "fusion/plan_builder.h"

#include <algorithm>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <fmt/ranges.h>

#include "ir/builder.h"
#include "ir/composites.h"

namespace fusejit {

std::string_view kernel_kind_name(KernelKind kind) {
  switch (kind) {
    case KernelKind::kPointwise: return "pointwise";
    case KernelKind::kRow: return "row";
    case KernelKind::kMatmul: return "matmul";
  }
  return "?";
}

std::string_view row_strategy_name(RowStrategy s) {
  switch (s) {
    case RowStrategy::kNone: return "-";
    case RowStrategy::kPersistent: return "persistent";
    case RowStrategy::kReread: return "reread";
  }
  return "?";
}

namespace {

// Stages of one composite node, from its expansion on placeholder inputs.
int composite_stages(const Graph& graph, const Node& node) {
  Graph scratch;
  std::vector<Value> args;
  for (const Operand& o : node.operands) {
    const Node& operand = graph.node(o.node);
    args.push_back(scratch.input(operand.name, operand.dtype, operand.shape));
  }
  node.info().expand(args, node.attrs);
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < scratch.num_nodes(); ++id) ids.push_back(id);
  return reduction_stages(scratch, ids);
}

std::string kernel_name(int index, const std::vector<std::string>& user_ops) {
  constexpr size_t kMaxOpsInName = 4;
  std::vector<std::string> shown(user_ops.begin(), user_ops.begin() + std::min(user_ops.size(), kMaxOpsInName));
  std::string name = fmt::format("k{}_{}", index, fmt::join(shown, "_"));
  if (user_ops.size() > kMaxOpsInName) name += fmt::format("_and_{}_more", user_ops.size() - kMaxOpsInName);
  return name;
}

}  // namespace

int reduction_stages(const Graph& graph, const std::vector<int32_t>& nodes) {
  absl::flat_hash_map<int32_t, int> level;  // reductions on the longest path up to and including a node
  int stages = 0;
  for (int32_t id : nodes) {
    const Node& n = graph.node(id);
    int l = 0;
    for (const Operand& o : n.operands) {
      if (auto it = level.find(o.node); !o.is_literal() && it != level.end()) l = std::max(l, it->second);
    }
    if (n.info().kind == OpKind::kReduce) l += 1;
    if (n.info().kind == OpKind::kComposite) l += composite_stages(graph, n);
    level[id] = l;
    stages = std::max(stages, l);
  }
  return stages;
}

FusionPlan build_plan(std::string label, std::shared_ptr<const Graph> graph, const Graph& user_graph,
                      const std::vector<int32_t>& origin, std::vector<KernelGroup> groups,
                      const FusionOptions& options) {
  FusionPlan plan;
  plan.label = std::move(label);
  plan.graph = graph;
  std::vector<int> kernel_of(graph->num_nodes(), -1);
  for (size_t k = 0; k < groups.size(); ++k) {
    for (int32_t id : groups[k].nodes) kernel_of[id] = static_cast<int>(k);
  }
  for (size_t k = 0; k < groups.size(); ++k) {
    KernelGroup& group = groups[k];
    Kernel kernel;
    kernel.kind = group.kind;
    kernel.iteration = group.iteration;
    kernel.nodes = group.nodes;
    absl::flat_hash_set<int32_t> read_set;
    int32_t last_origin = -1;
    for (int32_t id : group.nodes) {
      for (const Operand& o : graph->node(id).operands) {
        if (o.is_literal() || kernel_of[o.node] == static_cast<int>(k)) continue;
        if (read_set.insert(o.node).second) kernel.reads.push_back(o.node);
      }
      if (origin[id] != last_origin) {
        kernel.user_ops.emplace_back(user_graph.node(origin[id]).info().name);
        last_origin = origin[id];
      }
    }
    kernel.name = kernel_name(static_cast<int>(k), kernel.user_ops);
    if (kernel.kind == KernelKind::kRow) {
      kernel.reduction_stages = reduction_stages(*graph, kernel.nodes);
      kernel.row_strategy = kernel.iteration.last() > options.persistent_row_limit ? RowStrategy::kReread
                                                                                    : RowStrategy::kPersistent;
    }
    plan.kernels.push_back(std::move(kernel));
  }
  // A value leaves its kernel when the user asked for it or another kernel reads it.
  std::vector<bool> needed_outside(graph->num_nodes(), false);
  for (int32_t o : graph->outputs()) needed_outside[o] = true;
  for (const Kernel& kernel : plan.kernels) {
    for (int32_t r : kernel.reads) needed_outside[r] = true;
  }
  for (Kernel& kernel : plan.kernels) {
    for (int32_t id : kernel.nodes) {
      if (needed_outside[id]) kernel.writes.push_back(id);
    }
  }
  return plan;
}

FusionPlan make_unfused_plan(const Graph& graph, const FusionOptions& options) {
  auto shared = std::make_shared<const Graph>(graph);
  std::vector<KernelGroup> groups;
  std::vector<int32_t> origin(graph.num_nodes());
  for (int32_t id = 0; id < graph.num_nodes(); ++id) {
    origin[id] = id;
    const Node& n = graph.node(id);
    switch (n.info().kind) {
      case OpKind::kInput: continue;
      case OpKind::kMatmul: groups.push_back({KernelKind::kMatmul, n.shape, {id}}); break;
      case OpKind::kReduce:
      case OpKind::kComposite:
        groups.push_back({KernelKind::kRow, graph.node(n.operands[0].node).shape, {id}});
        break;
      default: groups.push_back({KernelKind::kPointwise, n.shape, {id}}); break;
    }
  }
  return build_plan("unfused", shared, graph, origin, std::move(groups), options);
}

std::string describe(const FusionPlan& plan) {
  const Graph& g = *plan.graph;
  auto names = [&](const std::vector<int32_t>& ids) {
    std::vector<std::string> out;
    for (int32_t id : ids) out.push_back(g.node(id).name);
    return fmt::format("{}", fmt::join(out, ", "));
  };
  std::string text = fmt::format("{} plan: {} kernel{}\n", plan.label, plan.kernels.size(),
                                 plan.kernels.size() == 1 ? "" : "s");
  for (const Kernel& k : plan.kernels) {
    text += fmt::format("  {} [{} over {}", k.name, kernel_kind_name(k.kind), k.iteration);
    if (k.kind == KernelKind::kRow) {
      text += fmt::format(", {} row, {} reduction stage{}", row_strategy_name(k.row_strategy), k.reduction_stages,
                          k.reduction_stages == 1 ? "" : "s");
    }
    text += fmt::format("]\n    ops:    {}\n    reads:  {}\n    writes: {}\n", fmt::join(k.user_ops, ", "),
                        names(k.reads), names(k.writes));
  }
  return text;
}

}  // namespace fusejit
