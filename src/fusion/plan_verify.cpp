#include "fusion/plan_verify.h"

#include <vector>

#include <fmt/format.h>

#include "ir/counted.h"
#include "ir/error.h"

namespace fusejit {

namespace {

std::string plan_label(const FusionPlan& plan) {
  return plan.label.empty() ? "the plan" : fmt::format("the {} plan", plan.label);
}

absl::Status check_has_graph(const FusionPlan& plan) {
  if (plan.graph != nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(fmt::format(
      "{} has no graph (a default-constructed FusionPlan?); make one with make_fused_plan or make_unfused_plan",
      plan_label(plan)));
}

absl::Status check_node_ids(const FusionPlan& plan, const Kernel& k) {
  const Graph& graph = *plan.graph;
  for (const std::vector<int32_t>* ids : {&k.nodes, &k.reads, &k.writes}) {
    for (int32_t id : *ids) {
      if (id < 0 || id >= graph.num_nodes()) {
        return absl::InvalidArgumentError(fmt::format(
            "{}: kernel {} names node {}, which its graph of {} nodes lacks (was the plan made for another graph?)",
            plan_label(plan), k.name, id, graph.num_nodes()));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status verify_kernel_of(const FusionPlan& plan, const Kernel& kernel) {
  if (absl::Status s = check_has_graph(plan); !s.ok()) return s;
  return check_node_ids(plan, kernel);
}

const Kernel& checked_kernel(const FusionPlan& plan, int index, std::string_view caller) {
  if (index < 0 || index >= static_cast<int>(plan.kernels.size())) {
    throw Error(fmt::format("{}: kernel index {} is out of range; {} has {}", caller, index, plan_label(plan),
                            counted(std::ssize(plan.kernels), "kernel")));
  }
  const Kernel& kernel = plan.kernels[static_cast<size_t>(index)];
  if (absl::Status s = verify_kernel_of(plan, kernel); !s.ok()) {
    throw Error(fmt::format("{}: {}", caller, status_text(s)));
  }
  return kernel;
}

absl::Status verify_plan(const FusionPlan& plan) {
  if (absl::Status s = check_has_graph(plan); !s.ok()) return s;
  const Graph& graph = *plan.graph;
  std::vector<bool> written(static_cast<size_t>(graph.num_nodes()), false);
  for (const Kernel& k : plan.kernels) {
    if (absl::Status s = check_node_ids(plan, k); !s.ok()) return s;
    for (int32_t id : k.writes) written[static_cast<size_t>(id)] = true;
  }
  for (int32_t id : graph.outputs()) {
    if (id < 0 || id >= graph.num_nodes()) continue;  // the verifier's to report
    if (!written[static_cast<size_t>(id)]) {
      return absl::InvalidArgumentError(
          fmt::format("{}: no kernel writes the graph's output {}; running it would return what was never computed",
                      plan_label(plan), graph.node(id).name));
    }
  }
  return absl::OkStatus();
}

}  // namespace fusejit
