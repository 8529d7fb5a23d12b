// The two kernel templates (internal to the CUDA emitter).
#pragma once

#include "codegen/kernel_source.h"

namespace fusejit::cuda_emit {

CudaKernelSource emit_pointwise(const FusionPlan& plan, const Kernel& kernel, CudaAccess access);
CudaKernelSource emit_row(const FusionPlan& plan, const Kernel& kernel, CudaAccess access, const CudaRowShape& shape);
// cuda_row_shape_candidates (cuda_emitter.h) for a row kernel.
std::vector<CudaRowShape> row_shape_candidates(const FusionPlan& plan, const Kernel& kernel, CudaAccess access);

}  // namespace fusejit::cuda_emit
