#include "fusion/plan_reference.h"

namespace fusejit {

InterpretOptions reference_options(const FusionPlan& plan) {
  InterpretOptions options;
  options.rounding = Rounding::kStoredNodes;
  for (const Kernel& k : plan.kernels) options.stored.insert(options.stored.end(), k.writes.begin(), k.writes.end());
  return options;
}

absl::StatusOr<TensorMap> interpret_plan(const FusionPlan& plan, const TensorMap& inputs, double perturbation,
                                         uint64_t seed) {
  InterpretOptions options = reference_options(plan);
  options.perturbation = perturbation;
  options.perturbation_seed = seed;
  return interpret(*plan.graph, inputs, options);
}

}  // namespace fusejit
