// Kernels of one plan that are the same code.
//
// A model built by repeating a layer has kernels that differ only in the
// names of their tensors and in their dropout seeds (which generated code
// takes as arguments): 200 layers make 200 copies of each of a few kernels.
// Compiling each copy costs a host-compiler or NVRTC run per kernel (tens
// to hundreds of milliseconds); compiling each distinct kernel once makes a
// model's cold start independent of its depth, and lets the kernel cache
// serve other graphs with the same layer.
//
// Two kernels are the same code when the neutral plans of both
// (fusion/kernel_plan.h) generate the same source: the test is the
// generated text itself, so nothing a code generator looks at can be missed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fusion/plan.h"

namespace fusejit {

struct CodeGroup {
  std::vector<int> members;  // indices into the plan's kernels, in plan order
  // A group of one compiles its kernel from the plan itself (the code keeps
  // the user's tensor names); a larger group compiles kernel 0 of this
  // neutral plan, named by shared_kernel_name(). Its parameters correspond
  // one for one to every member's own (emit::kernel_params), so each member
  // launches it with its own tensors and seeds.
  std::shared_ptr<const FusionPlan> neutral;

  // The plan and kernel index to generate the group's code from.
  const FusionPlan& code_plan(const FusionPlan& plan) const { return neutral ? *neutral : plan; }
  int code_index() const { return neutral ? 0 : members.front(); }
};

// The name of the code a group shares: the first member's ops and a hash of
// the code ("add_dropout_layer_norm_1f0c..."), the same in every plan and
// graph that has this kernel, so that the kernel cache serves them all.
std::string shared_kernel_name(const Kernel& first, uint64_t code_hash);

// The code a backend would generate for kernel `index` of `plan`; `member`
// is the kernel of the original plan it stands for (for choices that depend
// on the kernel's buffers, such as the CUDA access variant).
using KernelSourceFn = std::function<std::string(const FusionPlan& plan, int index, int member)>;

// Groups `kernels` (indices into plan.kernels) by the code `source` generates
// for their neutral plans, in order of each group's first member. Kernels
// with the same code but different buffer-dependent choices are in
// different groups, because `source` sees `member`.
std::vector<CodeGroup> group_same_code(const FusionPlan& plan, const std::vector<int>& kernels,
                                       const KernelSourceFn& source);

}  // namespace fusejit
