// How many elements a GPU kernel's thread handles per 16-byte access. The
// CUDA generator vectorises with it, and the cost model charges dropout
// with it: a thread holding 8 consecutive elements draws one Philox block
// for all 8, one holding 4 draws a block for 4, and one holding a single
// element a block for it (ir/philox.h).
#pragma once

#include "fusion/plan.h"

namespace fusejit {

// Elements per 16-byte access of the narrowest tensor the kernel reads or
// writes: 8 for 16-bit data, 4 for f32; but 8 for f32 kernels with dropout
// whose innermost extent is a multiple of 8 (each f32 tensor then takes two
// adjacent 16-byte accesses per group, as in kernels mixing f32 and 16-bit
// data).
int gpu_vector_width(const Graph& graph, const Kernel& kernel);
// Whether the kernel has a vector variant: its innermost extent is a
// multiple of gpu_vector_width. Without one, every thread handles one
// element at a time (and dropout draws a whole Philox block per element).
bool gpu_has_vector_path(const Graph& graph, const Kernel& kernel);

}  // namespace fusejit
