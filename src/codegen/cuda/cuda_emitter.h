// CUDA C++ for the kernels of a fusion plan. Matmul kernels are library
// calls and have no source.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <absl/status/statusor.h>

#include "codegen/kernel_source.h"

namespace fusejit {

// The source of kernel `index` of `plan` (which must not be a matmul) for
// `access`; a kernel without a vector path is emitted with scalar accesses
// whatever is asked. `shape` applies to row kernels: its block_threads to
// block-per-row ones, its prefetch_rows to persistent ones (16-byte variant); a
// pointwise kernel ignores it. cuda_row_shape_candidates lists the shapes
// worth timing. Both throw fusejit::Error for an index out of range or a
// kernel naming nodes the plan's graph lacks; emit_cuda_kernel for a matmul.
CudaKernelSource emit_cuda_kernel(const FusionPlan& plan, int index, CudaAccess access = CudaAccess::kVector,
                                  const CudaRowShape& shape = {});

// The count a generated kernel takes as its last argument: its elements
// (pointwise) or rows (row kernels). Not part of the source: kernels of
// different sizes share one compiled source (codegen/shared_code.h), and
// each is launched with its own count.
int64_t cuda_launch_count(const Kernel& kernel);

// The epilogue of matmul kernel `index` (fusion/matmul_epilogue.h) as a
// pointwise kernel of its own, named "<kernel>_epilogue": what a GPU runs
// after cuBLAS where cuBLASLt cannot run the epilogue. It reads the product
// in f32 (cuBLAS writes it so: rounding it to its dtype first would round
// twice, which the reference and cuBLASLt do not, and an f16 product could
// overflow before the bias brings it back), computes the epilogue in f32,
// and rounds once as it stores. Throws fusejit::Error for a kernel without
// an epilogue.
struct CudaMatmulEpilogue {
  CudaKernelSource source;
  // For each tensor parameter of the source, in order, the node of `plan`'s
  // graph it stands for: the matmul (its f32 product), the bias, the
  // kernel's output.
  std::vector<int32_t> tensors;
};
CudaMatmulEpilogue emit_cuda_matmul_epilogue(const FusionPlan& plan, int index,
                                             CudaAccess access = CudaAccess::kVector);

// The launch shapes worth timing for kernel `index` compiled for `access`:
// the default first, then half and twice its threads per row (16 elements
// per thread at most, 64 to 1024 threads, none without an access of the
// row) and, for the 16-byte variant, the default with the next row
// prefetched, with the next two where a thread's share is 8 elements or
// fewer, and
// the halved shape with the next row prefetched. Empty (nothing to choose) for
// kernels other than block-per-row ones, and when FUSEJIT_ROW_BLOCK_THREADS
// or FUSEJIT_ROW_PREFETCH=1 or 2 forces a shape.
std::vector<CudaRowShape> cuda_row_shape_candidates(const FusionPlan& plan, int index, CudaAccess access);
// "256 threads per row, next row prefetched" ("next 2 rows"): a source's launch shape in words.
std::string cuda_launch_shape(const CudaKernelSource& kernel);
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
