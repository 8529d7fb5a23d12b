#include "codegen/shared_code.h"

#include <absl/container/flat_hash_map.h>

#include "fusion/kernel_plan.h"

namespace fusejit {

std::vector<KernelGroup> group_same_code(const FusionPlan& plan, const std::vector<int>& kernels,
                                         const KernelSourceFn& source) {
  // The neutral kernel's name is the same placeholder for every kernel
  // here, so that only what the code does tells the sources apart.
  constexpr const char* kPlaceholder = "fj_neutral";
  std::vector<KernelGroup> groups;
  absl::flat_hash_map<std::string, size_t> group_of;  // neutral source -> index in groups
  for (int k : kernels) {
    const FusionPlan neutral = neutral_kernel_plan(plan, k, kPlaceholder);
    auto [it, inserted] = group_of.try_emplace(source(neutral, 0, k), groups.size());
    if (inserted) groups.emplace_back();
    groups[it->second].members.push_back(k);
  }
  for (KernelGroup& group : groups) {
    if (group.members.size() < 2) continue;
    const int first = group.members.front();
    group.neutral = std::make_shared<const FusionPlan>(
        neutral_kernel_plan(plan, first, plan.kernels[static_cast<size_t>(first)].name));
  }
  return groups;
}

}  // namespace fusejit
