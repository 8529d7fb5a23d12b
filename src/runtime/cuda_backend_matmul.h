// A matmul kernel of a plan on the GPU: one cublasGemmEx call, or, for a
// kernel with an epilogue (fusion/matmul_epilogue.h), one cublasLtMatmul
// that adds the bias and applies the activation before it stores.
//
// Where cuBLASLt cannot run the epilogue (the library did not load, it
// offers no algorithm or refuses a descriptor, or a tensor is not 16-byte
// aligned, which fusejit does not ask of cuBLASLt: the bias pointer has no
// alignment preference), the product goes to a buffer of its own through
// cublasGemmEx, in f32 as cuBLASLt keeps it, and a generated pointwise
// kernel applies the epilogue and rounds once (emit_cuda_matmul_epilogue):
// the same values, with one launch and the f32 product's write and read
// more.
//
// The graph types matmul as PyTorch does (ir/infer.cpp): the result has the
// promoted dtype of its operands, and the reference multiplies their values
// in float64. cuBLAS wants both operands in one type, so an operand whose
// dtype differs from the result's (bf16 · f32, or f16 · bf16 giving f32) is
// first widened to f32, exactly, by a small generated kernel into a scratch
// buffer made at load time; the product then runs in f32 with f32 results.
// Internal to src/runtime/.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include "fusion/plan.h"
#include "runtime/cuda_backend_resources.h"

namespace fusejit::cuda_backend {

// The CUDA source of the widening kernels (fj_widen_bf16, fj_widen_f16).
std::string_view widen_kernels_source();

class MatmulStep {
 public:
  // `buffer(node)` is the device address of a tensor of the plan's graph.
  static absl::StatusOr<MatmulStep> prepare(CudaGpu& gpu, const FusionPlan& plan, const Kernel& kernel,
                                            const std::function<cuda::DevicePtr(int32_t)>& buffer);

  // Enqueues the widening (if any) and the GEMM on the default stream.
  absl::Status launch(CudaGpu& gpu);

  // "bf16[256, 768] x bf16[768, 3072] -> bf16 (cublasGemmEx)"
  const std::string& summary() const { return summary_; }
  // What runs it: "cublas", "cublasLt", or "cublas+jit" (a generated epilogue).
  const std::string& executed_by() const { return executed_by_; }

 private:
  // A 16-bit operand widened to f32 before the GEMM.
  struct Widening {
    cuda::Function function = nullptr;
    cuda::DevicePtr source = 0;
    DeviceBuffer widened;
    long long count = 0;
  };
  absl::Status widen(CudaGpu& gpu, Widening& w);
  // The epilogue as a generated kernel after cublasGemmEx.
  struct EpilogueKernel {
    DeviceBuffer product;  // f32
    ModuleHandle module;
    cuda::Function function = nullptr;
    std::vector<cuda::DevicePtr> pointers;  // in the kernel's params order
    long long count = 0;
    cuda::Dim3 grid;
    cuda::Dim3 block;
  };
  absl::Status prepare_epilogue_kernel(CudaGpu& gpu, const FusionPlan& plan, const Kernel& kernel,
                                       const std::function<cuda::DevicePtr(int32_t)>& buffer);

  std::string name_;
  std::string summary_;
  std::string executed_by_ = "cublas";
  int64_t m_ = 0;
  int64_t n_ = 0;
  int64_t k_ = 0;
  cublas::DataType type_ = cublas::DataType::kF32;
  cublas::DataType c_type_ = cublas::DataType::kF32;  // type_, or f32 for a product a generated epilogue reads
  cuda::DevicePtr a_ = 0;
  cuda::DevicePtr b_ = 0;
  cuda::DevicePtr c_ = 0;
  ModuleHandle widen_module_;  // only when an operand is widened
  std::optional<Widening> widen_a_;
  std::optional<Widening> widen_b_;
  std::optional<cublaslt::EpilogueGemm> lt_;  // a matmul with an epilogue, run by cuBLASLt
  cuda::DevicePtr lt_workspace_ = 0;
  std::optional<EpilogueKernel> epilogue_;  // otherwise
};

}  // namespace fusejit::cuda_backend
