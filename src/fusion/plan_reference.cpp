#include "fusion/plan_reference.h"

#include <optional>

#include <fmt/format.h>

#include "fusion/plan_verify.h"
#include "ir/compare.h"

namespace fusejit {

InterpretOptions reference_options(const FusionPlan& plan) {
  InterpretOptions options;
  options.rounding = Rounding::kStoredNodes;
  for (const Kernel& k : plan.kernels) options.stored.insert(options.stored.end(), k.writes.begin(), k.writes.end());
  return options;
}

absl::StatusOr<TensorMap> interpret_plan(const FusionPlan& plan, const TensorMap& inputs,
                                         const ReferenceVariant& variant, OrderDependentElements* order_dependent) {
  if (absl::Status s = verify_plan(plan); !s.ok()) return s;
  InterpretOptions options = reference_options(plan);
  options.perturbation = variant.perturbation;
  options.perturbation_seed = variant.perturbation_seed;
  options.float32_intermediates = variant.float32_intermediates;
  options.order_dependent = order_dependent;
  return interpret(*plan.graph, inputs, options);
}

absl::StatusOr<std::string> first_wrong_output(const FusionPlan& plan, const TensorMap& inputs,
                                               const TensorMap& outputs, const TensorMap* float64_reference,
                                               int64_t* order_dependent_elements,
                                               OrderDependentElements* order_dependent_flags) {
  // The references, in the order they are consulted, each computed once, at
  // the first output that needs it.
  const ReferenceVariant variants[] = {
      {},
      {.perturbation = kRoundoffPerturbation, .perturbation_seed = 11},
      {.float32_intermediates = true},
      {.perturbation = kRoundoffPerturbation, .perturbation_seed = 11, .float32_intermediates = true},
  };
  std::optional<TensorMap> references[std::size(variants)];
  // Of the float32 reference (variants[2]): its elements that are one of
  // several right answers, which no reference can judge.
  OrderDependentElements order_dependent;
  auto reference = [&](size_t v) -> absl::StatusOr<const TensorMap*> {
    if (v == 0 && float64_reference != nullptr) return float64_reference;
    if (!references[v]) {
      absl::StatusOr<TensorMap> r = interpret_plan(plan, inputs, variants[v], v == 2 ? &order_dependent : nullptr);
      if (!r.ok()) return r.status();
      references[v] = *std::move(r);
    }
    return &*references[v];
  };

  if (order_dependent_elements != nullptr) *order_dependent_elements = 0;
  if (order_dependent_flags != nullptr) order_dependent_flags->clear();
  for (int32_t id : plan.graph->outputs()) {
    const Node& n = plan.graph->node(id);
    const auto out = outputs.find(n.name);
    if (out == outputs.end()) return fmt::format("output {} is missing", n.name);
    std::optional<Comparison> first;  // against the float64 reference: what a failure reports
    bool passed = false;
    for (size_t base : {0, 2}) {  // float64, then float32 intermediates
      absl::StatusOr<const TensorMap*> exact = reference(base);
      if (!exact.ok()) return exact.status();
      const auto flags = base == 2 ? order_dependent.find(n.name) : order_dependent.end();
      const std::vector<char>* skip = flags != order_dependent.end() ? &flags->second : nullptr;
      Comparison c = compare_tensors(out->second, (*exact)->at(n.name), skip);
      if (!first) first = c;
      if (!c.within(n.dtype)) {
        absl::StatusOr<const TensorMap*> perturbed = reference(base + 1);
        if (!perturbed.ok()) return perturbed.status();
        c = compare_tensors(out->second, (*exact)->at(n.name), (*perturbed)->at(n.name), skip);
      }
      if ((passed = c.within(n.dtype))) {
        if (order_dependent_elements != nullptr) *order_dependent_elements += c.skipped;
        if (order_dependent_flags != nullptr && c.skipped > 0) (*order_dependent_flags)[n.name] = *skip;
        break;
      }
    }
    if (!passed) {
      return fmt::format("output {} ({}{}) has relative error {:.3g} over the tolerance {:.1g}{}", n.name, n.dtype,
                         n.shape, first->relative_error, tolerance(n.dtype),
                         first->mismatch.empty() ? "" : "; " + first->mismatch);
    }
  }
  return std::string();
}

}  // namespace fusejit
