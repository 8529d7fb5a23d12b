// How many elements a GPU kernel's thread handles per 16-byte access. The
// CUDA generator vectorises with it, and the cost model charges dropout
// with it: a thread holding 8 consecutive elements draws one Philox block
// for all 8, one holding 4 draws a block for 4 (ir/philox.h).
#pragma once

#include "fusion/plan.h"

namespace fusejit {

// Elements per 16-byte access of the narrowest tensor the kernel reads or
// writes: 8 for 16-bit data, 4 for f32.
int gpu_vector_width(const Graph& graph, const Kernel& kernel);

}  // namespace fusejit
