#include "fusion/plan_verify.h"

#include <vector>

#include <fmt/format.h>

namespace fusejit {

absl::Status verify_plan(const FusionPlan& plan) {
  const std::string label = plan.label.empty() ? "the plan" : fmt::format("the {} plan", plan.label);
  if (plan.graph == nullptr) {
    return absl::InvalidArgumentError(
        fmt::format("{} has no graph (a default-constructed FusionPlan?); make one with make_fused_plan or "
                    "make_unfused_plan",
                    label));
  }
  const Graph& graph = *plan.graph;
  std::vector<bool> written(static_cast<size_t>(graph.num_nodes()), false);
  for (const Kernel& k : plan.kernels) {
    for (const std::vector<int32_t>* ids : {&k.nodes, &k.reads, &k.writes}) {
      for (int32_t id : *ids) {
        if (id < 0 || id >= graph.num_nodes()) {
          return absl::InvalidArgumentError(fmt::format("{}: kernel {} names node {}, which its graph of {} nodes "
                                                        "lacks (was the plan made for another graph?)",
                                                        label, k.name, id, graph.num_nodes()));
        }
      }
    }
    for (int32_t id : k.writes) written[static_cast<size_t>(id)] = true;
  }
  for (int32_t id : graph.outputs()) {
    if (id < 0 || id >= graph.num_nodes()) continue;  // the verifier's to report
    if (!written[static_cast<size_t>(id)]) {
      return absl::InvalidArgumentError(
          fmt::format("{}: no kernel writes the graph's output {}; running it would return what was never computed",
                      label, graph.node(id).name));
    }
  }
  return absl::OkStatus();
}

}  // namespace fusejit
