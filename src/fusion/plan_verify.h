// Whether a FusionPlan can be run: the checks a backend and the reference
// make before touching it. Plans from make_fused_plan / make_unfused_plan
// pass; a default-constructed or hand-edited one may not, and running it
// would dereference a null graph or return outputs no kernel wrote.
#pragma once

#include <absl/status/status.h>

#include "fusion/plan.h"

namespace fusejit {

// InvalidArgument naming the first problem: no graph; a kernel naming a node
// the graph lacks; a graph output that no kernel writes.
absl::Status verify_plan(const FusionPlan& plan);

}  // namespace fusejit
