// Turning a grouping of nodes into a FusionPlan: what each kernel reads and
// writes, its name, its user ops and, for row kernels, how it holds the row.
// Shared by the unfused and the fused planner so both count the same way.
#pragma once

#include <memory>
#include <vector>

#include <absl/functional/function_ref.h>

#include "fusion/plan.h"

namespace fusejit {

struct KernelGroup {
  KernelKind kind = KernelKind::kPointwise;
  Shape iteration;
  std::vector<int32_t> nodes;  // topological order
};

// `groups` must be in a valid launch order. `origin[id]` names the user node
// that node `id` implements (identity for the unfused plan); `user_graph` is
// the graph the user wrote, whose op names label the kernels.
FusionPlan build_plan(std::string label, std::shared_ptr<const Graph> graph, const Graph& user_graph,
                      const std::vector<int32_t>& origin, std::vector<KernelGroup> groups,
                      const FusionOptions& options);

// How a kernel of `group` holds its rows: kNone unless it is a row kernel;
// kReread where its rows are longer than options.persistent_row_limit.
RowStrategy row_strategy_of(const KernelGroup& group, const FusionOptions& options);

// One kernel of build_plan: `group` as kernel number `index` (which names
// it), reading what its nodes use from outside it (`in_group` says which
// nodes are its own) and writing the nodes `needed_outside` says leave it
// (a graph output, or a value another kernel reads). The fusion pass weighs
// kernels it might make this way, without building a whole plan for each.
Kernel build_kernel(const Graph& graph, const Graph& user_graph, const std::vector<int32_t>& origin,
                    const KernelGroup& group, int index, absl::FunctionRef<bool(int32_t)> in_group,
                    absl::FunctionRef<bool(int32_t)> needed_outside, const FusionOptions& options);

// The unfused plan's kernel for user node `user` (matmul, row kernel over
// its operand for reductions and composites, else pointwise), with no
// nodes yet.
KernelGroup user_op_group(const Graph& user_graph, const Node& user);

// Throws Error when `graph` does not verify (the verifier's diagnostics: a
// graph built with Graph::append, or one without outputs) or an option is
// out of range, so that neither planner works on a graph it cannot plan.
void require_plannable(const Graph& graph, const FusionOptions& options);

}  // namespace fusejit
