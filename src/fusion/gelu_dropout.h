// dropout(gelu(x)) in one helper, where a CUDA kernel may compute it so.
//
// Dropout multiplies each kept element by its scale s = 1 / (1 - p). When
// the value it drops is a 16-bit erf GeLU (Graph::is_16bit_gelu) that
// nothing else uses, the kernel computes x (x < 0 ? h s : s - h s) with
// h s = 2^(a P(a) - 1 + log2 s), the scale folded into GeLU's exponent, and
// lets the drop choose that factor or 0: one multiply per element fewer
// (codegen/cuda/fj_philox.cuh, fj_gelu_dropout8). The GPU cost model counts
// the saving where the code generator takes it.
#pragma once

#include <cstdint>

#include <absl/container/flat_hash_set.h>

#include "fusion/plan.h"

namespace fusejit {

// The GeLU node whose value dropout node `dropout` of `kernel` takes and
// that the kernel may compute together with it, or -1: the GeLU is in the
// kernel, elementwise over its whole space, computes 16-bit values, is not
// written out and has no other user in the kernel, and p < 1.
int32_t gelu_folded_into_dropout(const Graph& graph, const Kernel& kernel, int32_t dropout);
// Every GeLU of `kernel` that folds into its dropout.
absl::flat_hash_set<int32_t> gelus_folded_into_dropouts(const Graph& graph, const Kernel& kernel);

}  // namespace fusejit
