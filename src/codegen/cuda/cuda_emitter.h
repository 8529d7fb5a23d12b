// CUDA C++ for the kernels of a fusion plan. Matmul kernels are library
// calls and have no source.
#pragma once

#include <string_view>
#include <vector>

#include <absl/status/statusor.h>

#include "codegen/kernel_source.h"

namespace fusejit {

// The source of kernel `index` of `plan` (which must not be a matmul) for
// `access`; a kernel without a vector path is emitted with scalar accesses
// whatever is asked.
CudaKernelSource emit_cuda_kernel(const FusionPlan& plan, int index, CudaAccess access = CudaAccess::kVector);
// Sources of every generated kernel of the plan, in launch order.
std::vector<CudaKernelSource> emit_cuda(const FusionPlan& plan, CudaAccess access = CudaAccess::kVector);

// The device helpers every generated kernel starts with (src/codegen/cuda/*.cuh),
// between these two lines.
std::string_view cuda_helpers_source();
inline constexpr std::string_view kCudaHelpersBegin = "// ---- fusejit device helpers (src/codegen/cuda/*.cuh) ----";
inline constexpr std::string_view kCudaHelpersEnd = "// ---- end of fusejit device helpers ----";
// `source` without the helper block: the part a reviewer reads.
std::string without_helpers(const std::string& source);

// The kernels of a plan (emit_cuda) as one NVRTC program
// (codegen/translation_unit.h). NVRTC spends most of a small kernel's
// compile on the helpers and the fp16/bf16 headers, so checking that a whole
// plan compiles this way (`fusejit fuzz --cuda-compile`) costs about one
// kernel's compile instead of one per kernel.
std::string cuda_plan_program(const std::vector<CudaKernelSource>& kernels);

}  // namespace fusejit
