// One kernel of a plan as a plan of its own, with neutral names.
//
// A model built by repeating a layer gives kernels that do the same work on
// different tensors: k2_add_gelu reads h0 and b1 and writes a0, k6_add_gelu
// reads h1 and b1 and writes a1. Generated code names its values after the
// graph's tensors, so the two sources differ although the machine code
// would not. The neutral plan renames what the code could depend on only
// through names (reads become inputs in0, in1, ...; the kernel's nodes t0,
// t1, ... in order) and zeroes dropout seeds (generated code takes them as
// arguments), so kernels that are the same code generate the same source,
// and a backend compiles it once (codegen/shared_code.h).
#pragma once

#include <string>

#include "fusion/plan.h"

namespace fusejit {

// Kernel `index` of `plan` as the only kernel of a new plan over a graph of
// its own: the kernel's reads are the graph's inputs (in read order), its
// nodes follow in order, its writes are the graph's outputs. The kernel
// keeps every other field (kind, iteration space, row strategy) and is named
// `name`; the plan keeps `plan`'s label. Parameters of the code generated
// from it (codegen/kernel_names.h: kernel_params) correspond one for one to
// those of the original kernel.
FusionPlan neutral_kernel_plan(const FusionPlan& plan, int index, std::string name);

}  // namespace fusejit
