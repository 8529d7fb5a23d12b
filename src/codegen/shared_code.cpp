#include "codegen/shared_code.h"

#include <string_view>

#include <absl/container/flat_hash_map.h>
#include <fmt/format.h>

#include "fusion/kernel_plan.h"

namespace fusejit {
namespace {

// 64-bit FNV-1a: names shared code after what it is, not where it is.
uint64_t fnv1a64(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

std::string shared_kernel_name(const Kernel& first, uint64_t code_hash) {
  // "k12_add_dropout_layer_norm" -> "add_dropout_layer_norm_<hash>": the
  // index says where the kernel is in one plan, which the name of code
  // shared across layers (and, through the cache, across graphs) must not.
  const size_t underscore = first.name.find('_');
  const std::string ops = underscore == std::string::npos ? first.name : first.name.substr(underscore + 1);
  return fmt::format("{}_{:016x}", ops.empty() ? std::string("kernel") : ops, code_hash);
}

std::vector<CodeGroup> group_same_code(const FusionPlan& plan, const std::vector<int>& kernels,
                                       const KernelSourceFn& source) {
  // The neutral kernel's name is the same placeholder for every kernel
  // here, so that only what the code does tells the sources apart.
  constexpr const char* kPlaceholder = "fj_neutral";
  std::vector<CodeGroup> groups;
  absl::flat_hash_map<std::string, size_t> group_of;  // neutral source -> index in groups
  std::vector<uint64_t> hashes;  // of each group's neutral source
  for (int k : kernels) {
    const FusionPlan neutral = neutral_kernel_plan(plan, k, kPlaceholder);
    std::string text = source(neutral, 0, k);
    const uint64_t hash = fnv1a64(text);
    auto [it, inserted] = group_of.try_emplace(std::move(text), groups.size());
    if (inserted) {
      groups.emplace_back();
      hashes.push_back(hash);
    }
    groups[it->second].members.push_back(k);
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    CodeGroup& group = groups[g];
    if (group.members.size() < 2) continue;
    const int first = group.members.front();
    group.neutral = std::make_shared<const FusionPlan>(neutral_kernel_plan(
        plan, first, shared_kernel_name(plan.kernels[static_cast<size_t>(first)], hashes[g])));
  }
  return groups;
}

}  // namespace fusejit
