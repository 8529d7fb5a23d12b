// The reference result of a plan: the reference interpreter rounding to
// their dtype exactly the values the plan's kernels store (and nothing kept
// in registers), so that a backend running the plan in f32 is compared with
// what that plan should compute, not with another plan's rounding.
#pragma once

#include <absl/status/statusor.h>

#include "fusion/plan.h"
#include "ir/interpreter.h"

namespace fusejit {

InterpretOptions reference_options(const FusionPlan& plan);
// `perturbation` and `seed` as in InterpretOptions (0: the exact reference).
absl::StatusOr<TensorMap> interpret_plan(const FusionPlan& plan, const TensorMap& inputs, double perturbation = 0,
                                         uint64_t seed = 0);

}  // namespace fusejit
