// Why two kernels of a fused plan are apart: for each pair where one
// kernel reads a tensor the other wrote, the rule of the fusion pass
// (fuse.cpp) that kept them apart, judged after the fact from the plan.
// `fusejit plan` prints them under the fused plan and in `--json`.
#pragma once

#include <string>
#include <vector>

#include "fusion/plan.h"

namespace fusejit {

struct FusionBoundary {
  int producer = 0;                  // index into plan.kernels
  int consumer = 0;                  // a later kernel that reads what `producer` wrote
  std::vector<std::string> tensors;  // what crosses, by name
  std::string reason;
};

// In kernel order, then by consumer. `options` must be those the plan was
// made with (its limits are part of the reasons).
std::vector<FusionBoundary> fusion_boundaries(const FusionPlan& plan, const FusionOptions& options);

}  // namespace fusejit
