#include "fusion/plan_builder.h"

#include <algorithm>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <fmt/ranges.h>

#include "ir/composites.h"
#include "ir/counted.h"
#include "ir/error.h"
#include "ir/verifier.h"

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

bool kernel_space_hosts(KernelKind kind, const Shape& iteration, const Graph& graph, const Node& n) {
  if (kind == KernelKind::kMatmul) return false;
  const bool is_reduce = n.info().kind == OpKind::kReduce;
  const Shape& space = is_reduce ? graph.node(n.operands[0].node).shape : n.shape;
  if (kind == KernelKind::kPointwise) return space == iteration;
  return space == iteration || (!is_reduce && space == per_row(iteration));
}

namespace {

std::string kernel_name(int index, const std::vector<std::string>& user_ops) {
  constexpr size_t kMaxOpsInName = 4;
  std::vector<std::string> shown(user_ops.begin(), user_ops.begin() + std::min(user_ops.size(), kMaxOpsInName));
  std::string name = fmt::format("k{}_{}", index, fmt::join(shown, "_"));
  if (user_ops.size() > kMaxOpsInName) name += fmt::format("_and_{}_more", user_ops.size() - kMaxOpsInName);
  return name;
}

}  // namespace

bool rounds_in_kernel(const Graph& graph, const Kernel& kernel, int32_t id) {
  const Node& n = graph.node(id);
  if (n.dtype == DType::kF32) return false;
  if (std::find(kernel.writes.begin(), kernel.writes.end(), id) == kernel.writes.end()) return false;
  for (int32_t user : kernel.nodes) {
    for (const Operand& o : graph.node(user).operands) {
      if (!o.is_literal() && o.node == id) return true;
    }
  }
  return false;
}

std::vector<int> reduction_levels(const Graph& graph, const Kernel& kernel) {
  absl::flat_hash_map<int32_t, int> available;  // node -> level from which its value exists
  std::vector<int> levels;
  for (int32_t id : kernel.nodes) {
    const Node& n = graph.node(id);
    int l = 0;
    for (const Operand& o : n.operands) {
      if (auto it = available.find(o.node); !o.is_literal() && it != available.end()) l = std::max(l, it->second);
    }
    levels.push_back(l);
    available[id] = l + (n.info().kind == OpKind::kReduce ? 1 : 0);
  }
  return levels;
}

std::vector<std::set<int32_t>> row_pass_needs(const Graph& graph, const Kernel& kernel) {
  if (kernel.row_strategy != RowStrategy::kReread) return {};
  const std::vector<int> levels = reduction_levels(graph, kernel);
  absl::flat_hash_map<int32_t, int> level_of;
  for (size_t i = 0; i < kernel.nodes.size(); ++i) level_of[kernel.nodes[i]] = levels[i];
  auto is_reduce = [&](int32_t id) { return graph.node(id).info().kind == OpKind::kReduce; };
  // Elementwise over the row: what a pass computes element by element.
  // Other nodes of the kernel are reductions, whose results are per-row
  // values from their pass on, or per-row values computed once per row.
  auto of_the_row = [&](int32_t id) { return graph.node(id).shape == kernel.iteration && !is_reduce(id); };
  const int64_t n = kernel.iteration.last();
  std::vector<std::set<int32_t>> needs(static_cast<size_t>(std::max(1, kernel.row_passes)));
  for (int pass = 0; pass < static_cast<int>(needs.size()); ++pass) {
    std::set<int32_t>& need = needs[static_cast<size_t>(pass)];
    std::vector<int32_t> pending;
    for (int32_t id : kernel.nodes) {
      if (is_reduce(id) && level_of[id] == pass) pending.push_back(graph.node(id).operands[0].node);
    }
    if (pass == static_cast<int>(needs.size()) - 1) {
      for (int32_t id : kernel.writes) {
        if (of_the_row(id)) pending.push_back(id);
      }
    }
    while (!pending.empty()) {
      const int32_t id = pending.back();
      pending.pop_back();
      if (need.contains(id)) continue;
      if (!level_of.contains(id)) {  // a read: loaded in the pass when it varies along the row
        if (graph.node(id).shape.last() == n) need.insert(id);
        continue;
      }
      if (!of_the_row(id)) continue;
      need.insert(id);
      for (const Operand& o : graph.node(id).operands) {
        if (!o.is_literal()) pending.push_back(o.node);
      }
    }
  }
  return needs;
}

int passes_needing(const std::vector<std::set<int32_t>>& needs, int32_t id) {
  int count = 0;
  for (const std::set<int32_t>& need : needs) count += need.contains(id) ? 1 : 0;
  return count;
}

std::vector<int> compute_counts(const Graph& graph, const Kernel& kernel) {
  if (kernel.row_strategy != RowStrategy::kReread) return std::vector<int>(kernel.nodes.size(), 1);
  const std::vector<std::set<int32_t>> needs = row_pass_needs(graph, kernel);
  std::vector<int> counts;
  for (int32_t id : kernel.nodes) counts.push_back(std::max(1, passes_needing(needs, id)));
  return counts;
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
      const std::vector<int> levels = reduction_levels(*graph, kernel);
      for (size_t i = 0; i < kernel.nodes.size(); ++i) {
        if (graph->node(kernel.nodes[i]).info().kind == OpKind::kReduce) {
          kernel.reduction_stages = std::max(kernel.reduction_stages, levels[i] + 1);
        }
      }
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
    bool writes_rows = false;
    for (int32_t id : kernel.nodes) {
      if (!needed_outside[id]) continue;
      kernel.writes.push_back(id);
      writes_rows = writes_rows || graph->node(id).shape == kernel.iteration;
    }
    if (kernel.row_strategy == RowStrategy::kReread) {
      kernel.row_passes = std::max(1, kernel.reduction_stages + (writes_rows ? 1 : 0));
    }
  }
  return plan;
}

namespace {

// The op with the most operands: the unfused plan's kernel for it takes
// them all and its result, and no plan splits that kernel further.
const OpInfo& widest_op() {
  const OpInfo* widest = &callable_ops().front();
  for (const OpInfo& info : callable_ops()) {
    if (info.max_operands > widest->max_operands) widest = &info;
  }
  return *widest;
}

}  // namespace

void require_plannable(const Graph& graph, const FusionOptions& options) {
  if (const OpInfo& widest = widest_op(); options.max_kernel_tensors < widest.max_operands + 1) {
    throw Error(fmt::format("FusionOptions::max_kernel_tensors must be at least {} ({}'s {} operands and its result, "
                            "one kernel in the unfused plan), got {}",
                            widest.max_operands + 1, widest.name, widest.max_operands, options.max_kernel_tensors));
  }
  if (options.max_kernel_nodes < 1) {
    throw Error(fmt::format("FusionOptions::max_kernel_nodes must be at least 1, got {}", options.max_kernel_nodes));
  }
  if (options.persistent_row_limit < 1) {
    throw Error(fmt::format("FusionOptions::persistent_row_limit must be at least 1 element, got {}",
                            options.persistent_row_limit));
  }
  if (absl::Status s = verify(graph); !s.ok()) {
    throw Error(fmt::format("cannot plan a graph that does not verify:\n{}", status_text(s)));
  }
}

KernelGroup user_op_group(const Graph& user_graph, const Node& user) {
  const OpKind kind = user.info().kind;
  if (kind == OpKind::kMatmul) return {KernelKind::kMatmul, user.shape, {}};
  if (kind == OpKind::kReduce || kind == OpKind::kComposite) {
    return {KernelKind::kRow, user_graph.node(user.operands[0].node).shape, {}};
  }
  return {KernelKind::kPointwise, user.shape, {}};
}

FusionPlan make_unfused_plan(const Graph& graph, const FusionOptions& options) {
  require_plannable(graph, options);
  // Like the fused plan, the unfused plan runs on the expanded graph, so that
  // every kernel is made of primitives; a composite's kernel holds its whole
  // expansion, and only user ops' results cross kernels.
  std::vector<int32_t> origin;
  auto expanded = std::make_shared<const Graph>(expand_composites(graph, &origin));
  std::vector<KernelGroup> groups;
  std::vector<int> group_of_user_node(graph.num_nodes(), -1);
  const std::vector<bool> live = expanded->reaches_outputs();
  for (int32_t id = 0; id < expanded->num_nodes(); ++id) {
    const Node& user = graph.node(origin[id]);
    const OpKind kind = user.info().kind;
    if (kind == OpKind::kInput || !live[id]) continue;  // nothing uses a dead value: not computed
    int& group = group_of_user_node[origin[id]];
    if (group < 0) {
      group = static_cast<int>(groups.size());
      groups.push_back(user_op_group(graph, user));
    }
    groups[group].nodes.push_back(id);
  }
  return build_plan("unfused", expanded, graph, origin, std::move(groups), options);
}

std::string describe(const FusionPlan& plan) {
  const Graph& g = *plan.graph;
  auto names = [&](const std::vector<int32_t>& ids) {
    std::vector<std::string> out;
    for (int32_t id : ids) out.push_back(g.node(id).name);
    return fmt::format("{}", fmt::join(out, ", "));
  };
  std::string text = fmt::format("{} plan: {}\n", plan.label, counted(std::ssize(plan.kernels), "kernel"));
  for (const Kernel& k : plan.kernels) {
    text += fmt::format("  {} [{} over {}", k.name, kernel_kind_name(k.kind), k.iteration);
    if (k.kind == KernelKind::kRow) {
      text += fmt::format(", {} row, {}", row_strategy_name(k.row_strategy),
                          counted(k.reduction_stages, "reduction stage"));
    }
    text += fmt::format("]\n    ops:    {}\n    reads:  {}\n    writes: {}\n", fmt::join(k.user_ops, ", "),
                        names(k.reads), names(k.writes));
  }
  return text;
}

}  // namespace fusejit
