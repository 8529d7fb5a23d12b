#include "fusion/plan_reference.h"

namespace fusejit {

InterpretOptions reference_options(const FusionPlan& plan) {
  InterpretOptions options;
  options.rounding = Rounding::kStoredNodes;
  for (const Kernel& k : plan.kernels) options.stored.insert(options.stored.end(), k.writes.begin(), k.writes.end());
  return options;
}

absl::StatusOr<TensorMap> interpret_plan(const FusionPlan& plan, const TensorMap& inputs) {
  return interpret(*plan.graph, inputs, reference_options(plan));
}

}  // namespace fusejit
