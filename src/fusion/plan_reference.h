// The reference result of a plan: the reference interpreter rounding to
// their dtype exactly the values the plan's kernels store (and nothing kept
// in registers), so that a backend running the plan in f32 is compared with
// what that plan should compute, not with another plan's rounding.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "fusion/plan.h"
#include "ir/interpreter.h"

namespace fusejit {

InterpretOptions reference_options(const FusionPlan& plan);

// Variants of the reference run (InterpretOptions has the details).
struct ReferenceVariant {
  double perturbation = 0;  // 0: the exact reference
  uint64_t perturbation_seed = 0;
  bool float32_intermediates = false;
};

// Per output, one flag per element: those whose float32 value depends on
// summation order, where more than one answer is right.
using OrderDependentElements = std::map<std::string, std::vector<char>>;

// With float32_intermediates, `order_dependent` (when not null) receives
// the outputs' elements whose float32 value depends on summation order
// (InterpretOptions::order_dependent).
absl::StatusOr<TensorMap> interpret_plan(const FusionPlan& plan, const TensorMap& inputs,
                                         const ReferenceVariant& variant = {},
                                         OrderDependentElements* order_dependent = nullptr);

// Judges `outputs`, a backend's results of `plan` on `inputs`. An output
// passes when it is within its dtype's tolerance (compare.h) of
//   1. the float64 reference, or
//   2. the same, allowing for the rounding noise of an ill-conditioned
//      result (the reference rerun with perturbed intermediates), or
//   3. the reference computed with float32 intermediates (strictly, or
//      allowing for noise as in 2): where float32 overflows inside a kernel
//      (LayerNorm of values near 1e20 squares them to infinity), float32
//      arithmetic gives another answer than float64, and a kernel computing
//      in float32 is held to that answer, everywhere else in the tensor too.
//      Where float32 gives several answers (a sum whose partial sums
//      overflow in some orders only, and what is computed from it), any is
//      right: those elements are left out of this comparison, counted in
//      `*order_dependent_elements` and flagged in `*order_dependent_flags`
//      (for the outputs that passed with some left out) when not null.
// The later references are computed only when an output fails the earlier
// ones. Returns "" when every output passes, else a description of the
// first that does not (name, dtype, shape, error, first disagreement).
// A caller that already holds reference 1 (interpret_plan(plan, inputs))
// passes it as `float64_reference` so that it is not computed again.
absl::StatusOr<std::string> first_wrong_output(const FusionPlan& plan, const TensorMap& inputs,
                                               const TensorMap& outputs, const TensorMap* float64_reference = nullptr,
                                               int64_t* order_dependent_elements = nullptr,
                                               OrderDependentElements* order_dependent_flags = nullptr);

}  // namespace fusejit
