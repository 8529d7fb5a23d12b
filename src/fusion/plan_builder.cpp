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

namespace {

// What each pass of a re-reading kernel needs: calls on_need(pass, l) once
// for each node and read it needs, by local index (node i is i, read r is
// nodes + r). Flat arrays and a pass stamp rather than maps and sets, so
// that weighing the candidate cuts of a long kernel stays cheap.
template <typename OnNeed>
void walk_row_passes(const Graph& graph, const Kernel& kernel, OnNeed on_need) {
  const size_t num_nodes = kernel.nodes.size();
  const size_t size = num_nodes + kernel.reads.size();
  absl::flat_hash_map<int32_t, int> local;
  local.reserve(size);
  for (size_t i = 0; i < num_nodes; ++i) local[kernel.nodes[i]] = static_cast<int>(i);
  for (size_t r = 0; r < kernel.reads.size(); ++r) local[kernel.reads[r]] = static_cast<int>(num_nodes + r);
  const std::vector<int> levels = reduction_levels(graph, kernel);
  const int passes = std::max(1, kernel.row_passes);
  const int64_t n = kernel.iteration.last();
  // Per node: whether it is elementwise over the row (what a pass computes
  // element by element; the kernel's other nodes are reductions, whose
  // results are per-row values from their pass on, or per-row values
  // computed once per row), and its operands' local indices. A read is
  // loaded in a pass that needs it when it varies along the row.
  std::vector<char> of_the_row(size, 0);
  std::vector<std::vector<int>> operands(num_nodes);
  std::vector<std::vector<int>> reduced_in(static_cast<size_t>(passes));  // pass -> operands it reduces
  for (size_t i = 0; i < num_nodes; ++i) {
    const Node& node = graph.node(kernel.nodes[i]);
    const bool reduce = node.info().kind == OpKind::kReduce;
    of_the_row[i] = node.shape == kernel.iteration && !reduce;
    for (const Operand& o : node.operands) {
      if (!o.is_literal()) operands[i].push_back(local.at(o.node));
    }
    if (reduce && levels[i] < passes) reduced_in[static_cast<size_t>(levels[i])].push_back(operands[i][0]);
  }
  for (size_t r = 0; r < kernel.reads.size(); ++r) {
    of_the_row[num_nodes + r] = graph.node(kernel.reads[r]).shape.last() == n;
  }
  std::vector<int> needed_in(size, -1);  // the last pass that needed it
  std::vector<int> pending;
  for (int pass = 0; pass < passes; ++pass) {
    pending = reduced_in[static_cast<size_t>(pass)];
    if (pass == passes - 1) {
      for (int32_t id : kernel.writes) {
        if (const int l = local.at(id); of_the_row[static_cast<size_t>(l)]) pending.push_back(l);
      }
    }
    while (!pending.empty()) {
      const auto l = static_cast<size_t>(pending.back());
      pending.pop_back();
      if (needed_in[l] == pass || !of_the_row[l]) continue;
      needed_in[l] = pass;
      on_need(pass, l);
      if (l < num_nodes) pending.insert(pending.end(), operands[l].begin(), operands[l].end());
    }
  }
}

}  // namespace

std::vector<std::set<int32_t>> row_pass_needs(const Graph& graph, const Kernel& kernel) {
  if (kernel.row_strategy != RowStrategy::kReread) return {};
  std::vector<std::set<int32_t>> needs(static_cast<size_t>(std::max(1, kernel.row_passes)));
  const size_t num_nodes = kernel.nodes.size();
  walk_row_passes(graph, kernel, [&](int pass, size_t l) {
    needs[static_cast<size_t>(pass)].insert(l < num_nodes ? kernel.nodes[l] : kernel.reads[l - num_nodes]);
  });
  return needs;
}

RowPassCounts row_pass_counts(const Graph& graph, const Kernel& kernel) {
  if (kernel.row_strategy != RowStrategy::kReread) return {};
  std::vector<int> counts(kernel.nodes.size() + kernel.reads.size(), 0);
  walk_row_passes(graph, kernel, [&](int, size_t l) { ++counts[l]; });
  const auto split = counts.begin() + static_cast<std::ptrdiff_t>(kernel.nodes.size());
  return {std::vector<int>(counts.begin(), split), std::vector<int>(split, counts.end())};
}

std::vector<int> compute_counts(const Graph& graph, const Kernel& kernel) {
  if (kernel.row_strategy != RowStrategy::kReread) return std::vector<int>(kernel.nodes.size(), 1);
  std::vector<int> counts = row_pass_counts(graph, kernel).nodes;
  for (int& c : counts) c = std::max(1, c);
  return counts;
}

RowStrategy row_strategy_of(const KernelGroup& group, const FusionOptions& options) {
  if (group.kind != KernelKind::kRow) return RowStrategy::kNone;
  return group.iteration.last() > options.persistent_row_limit ? RowStrategy::kReread : RowStrategy::kPersistent;
}

Kernel build_kernel(const Graph& graph, const Graph& user_graph, const std::vector<int32_t>& origin,
                    const KernelGroup& group, int index, absl::FunctionRef<bool(int32_t)> in_group,
                    absl::FunctionRef<bool(int32_t)> needed_outside, const FusionOptions& options) {
  Kernel kernel;
  kernel.kind = group.kind;
  kernel.iteration = group.iteration;
  kernel.nodes = group.nodes;
  absl::flat_hash_set<int32_t> read_set;
  int32_t last_origin = -1;
  bool writes_rows = false;
  for (int32_t id : group.nodes) {
    for (const Operand& o : graph.node(id).operands) {
      if (o.is_literal() || in_group(o.node)) continue;
      if (read_set.insert(o.node).second) kernel.reads.push_back(o.node);
    }
    if (origin[id] != last_origin) {
      kernel.user_ops.emplace_back(user_graph.node(origin[id]).info().name);
      last_origin = origin[id];
    }
    if (needed_outside(id)) {
      kernel.writes.push_back(id);
      writes_rows = writes_rows || graph.node(id).shape == kernel.iteration;
    }
  }
  kernel.name = kernel_name(index, kernel.user_ops);
  if (kernel.kind == KernelKind::kRow) {
    const std::vector<int> levels = reduction_levels(graph, kernel);
    for (size_t i = 0; i < kernel.nodes.size(); ++i) {
      if (graph.node(kernel.nodes[i]).info().kind == OpKind::kReduce) {
        kernel.reduction_stages = std::max(kernel.reduction_stages, levels[i] + 1);
      }
    }
    kernel.row_strategy = row_strategy_of(group, options);
    if (kernel.row_strategy == RowStrategy::kReread) {
      kernel.row_passes = std::max(1, kernel.reduction_stages + (writes_rows ? 1 : 0));
    }
  }
  return kernel;
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
  // A value leaves its kernel when the user asked for it or another kernel reads it.
  std::vector<bool> needed_outside(graph->num_nodes(), false);
  for (int32_t o : graph->outputs()) needed_outside[o] = true;
  for (size_t k = 0; k < groups.size(); ++k) {
    for (int32_t id : groups[k].nodes) {
      for (const Operand& o : graph->node(id).operands) {
        if (!o.is_literal() && kernel_of[o.node] != static_cast<int>(k)) needed_outside[o.node] = true;
      }
    }
  }
  for (size_t k = 0; k < groups.size(); ++k) {
    plan.kernels.push_back(build_kernel(
        *graph, user_graph, origin, groups[k], static_cast<int>(k),
        [&](int32_t id) { return kernel_of[id] == static_cast<int>(k); },
        [&](int32_t id) { return static_cast<bool>(needed_outside[id]); }, options));
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
