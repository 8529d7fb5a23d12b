// Whether a FusionPlan can be run: the checks a backend and the reference
// make before touching it. Plans from make_fused_plan / make_unfused_plan
// pass; a default-constructed or hand-edited one may not, and running it
// would dereference a null graph or return outputs no kernel wrote.
#pragma once

#include <string_view>

#include <absl/status/status.h>

#include "fusion/plan.h"

namespace fusejit {

// InvalidArgument naming the first problem: no graph; a kernel naming a node
// the graph lacks; a graph output that no kernel writes.
absl::Status verify_plan(const FusionPlan& plan);

// The part of verify_plan() that concerns one kernel, which need not be one
// of plan.kernels (a copy, or a kernel of another plan of the same graph):
// the plan has a graph, and every node the kernel names is in it.
absl::Status verify_kernel_of(const FusionPlan& plan, const Kernel& kernel);

// Kernel `index` of `plan` for `caller` (a function of the public API that
// takes a plan and an index): throws fusejit::Error naming the caller for an
// index out of range or a kernel verify_kernel_of() refuses, so that a
// mistake in the call is a message, not a crash.
const Kernel& checked_kernel(const FusionPlan& plan, int index, std::string_view caller);

}  // namespace fusejit
