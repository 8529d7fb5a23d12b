#include "fusion/reread_split.h"

#include <cmath>
#include <limits>

#include <absl/container/flat_hash_map.h>

#include "fusion/kernel_bytes.h"

namespace fusejit {
namespace {

// The user ops of `group`, in order, each with the kernel the unfused plan
// gives it. A user op's nodes are consecutive in the expanded graph (a
// composite expands in place); the fusion pass's node limit may have cut
// one, whose part here is an op of its own.
std::vector<KernelGroup> ops_of(const KernelGroup& group, const ExpandedGraph& expanded) {
  std::vector<KernelGroup> ops;
  int32_t last_origin = -1;
  for (int32_t id : group.nodes) {
    const int32_t user = expanded.origin[id];
    if (ops.empty() || user != last_origin) {
      ops.push_back(user_op_group(*expanded.user_graph, expanded.user_graph->node(user)));
      last_origin = user;
    }
    ops.back().nodes.push_back(id);
  }
  return ops;
}

bool within_limits(const Graph& graph, const Kernel& k, const FusionOptions& options) {
  int64_t dropouts = 0;
  for (int32_t id : k.nodes) dropouts += graph.node(id).op == Op::kDropout ? 1 : 0;
  const int64_t tensors = static_cast<int64_t>(k.reads.size() + k.writes.size()) + kDropoutKeySlots * dropouts;
  return tensors <= options.max_kernel_tensors && std::ssize(k.nodes) <= options.max_kernel_nodes;
}

}  // namespace

std::vector<KernelGroup> split_rereading_group(const KernelGroup& group, const ExpandedGraph& expanded,
                                               const std::vector<std::vector<int32_t>>& users,
                                               const std::vector<bool>& is_output, const FusionOptions& options) {
  const std::vector<KernelGroup> ops = ops_of(group, expanded);
  const int n = static_cast<int>(ops.size());
  if (n < 2) return {group};  // one op: nothing to leave out
  const Graph& graph = *expanded.graph;
  absl::flat_hash_map<int32_t, int> op_at;  // node -> index of its op in `ops`
  for (int i = 0; i < n; ++i) {
    for (int32_t id : ops[static_cast<size_t>(i)].nodes) op_at[id] = i;
  }
  const FusionPlan weighing{"fused", expanded.graph, {}};
  auto weight = [&](const Kernel& k) {
    return options.kernel_weight ? options.kernel_weight(weighing, k)
                                 : static_cast<double>(kernel_bytes(graph, k).total());
  };

  // best[j]: the least weight of ops [0, j) cut into runs; from[j]: where
  // the last of those runs starts; run_of[j]: that run as a group.
  constexpr double kNone = std::numeric_limits<double>::infinity();
  std::vector<double> best(static_cast<size_t>(n) + 1, kNone);
  std::vector<int> from(static_cast<size_t>(n) + 1, -1);
  std::vector<KernelGroup> run_of(static_cast<size_t>(n) + 1);
  best[0] = 0;
  for (int i = 0; i < n; ++i) {
    const Shape& first_space = ops[static_cast<size_t>(i)].iteration;
    std::vector<int32_t> nodes;  // of ops [i, j)
    bool reduces = false;
    // Every node so far elementwise over first_space: ops of one shape,
    // or the tail of a composite the node limit cut (the normalizing
    // multiply of a layer_norm, say), which needs no row kernel.
    bool elementwise = true;
    for (int j = i + 1; j <= n; ++j) {
      const KernelGroup& op = ops[static_cast<size_t>(j - 1)];
      for (int32_t id : op.nodes) {
        nodes.push_back(id);
        const Node& node = graph.node(id);
        const bool reduce = node.info().kind == OpKind::kReduce;
        reduces = reduces || reduce;
        elementwise = elementwise && !reduce && node.shape == first_space;
      }
      const bool weighed =
          j - i <= kRereadSplitShortRun || (i <= kRereadSplitShortRun && n - j <= kRereadSplitShortRun);
      if (!weighed) continue;
      KernelGroup kernel_group{KernelKind::kPointwise, first_space, {}};
      if (elementwise) {
        // a pointwise kernel over the run's shape
      } else if (j == i + 1) {
        kernel_group.kind = op.kind;  // one op, as the unfused plan runs it
        kernel_group.iteration = op.iteration;
      } else if (reduces) {
        kernel_group.kind = group.kind;  // a row kernel still, over the whole kernel's rows
        kernel_group.iteration = group.iteration;
      } else {
        continue;  // ops of different spaces, and no reduction to host them
      }
      kernel_group.nodes = nodes;
      const auto inside = [&](int32_t id) {
        const auto it = op_at.find(id);
        return it != op_at.end() && it->second >= i && it->second < j;
      };
      const Kernel kernel = build_kernel(
          graph, *expanded.user_graph, expanded.origin, kernel_group, 0, inside,
          [&](int32_t id) {
            if (is_output[id]) return true;
            for (int32_t user : users[id]) {
              if (!inside(user)) return true;
            }
            return false;
          },
          options);
      // One op is always possible: the unfused plan runs it so.
      if (j > i + 1 && !within_limits(graph, kernel, options)) continue;
      if (const double w = best[static_cast<size_t>(i)] + weight(kernel); w < best[static_cast<size_t>(j)]) {
        best[static_cast<size_t>(j)] = w;
        from[static_cast<size_t>(j)] = i;
        run_of[static_cast<size_t>(j)] = std::move(kernel_group);
      }
    }
  }
  // The whole kernel is the run [0, n); it stays whole unless a cut weighs
  // strictly less (ties keep the longer run, since runs from a smaller i
  // were weighed first), and when no cut weighs a finite amount.
  if (from[static_cast<size_t>(n)] <= 0 || !std::isfinite(best[static_cast<size_t>(n)])) return {group};
  std::vector<KernelGroup> out;
  for (int j = n; j > 0; j = from[static_cast<size_t>(j)]) out.push_back(std::move(run_of[static_cast<size_t>(j)]));
  return {out.rbegin(), out.rend()};
}

}  // namespace fusejit
