// Whether cuBLASLt's activation epilogues compute what fusejit's ops do.
//
// cuBLASLt documents its RELU epilogue as "x := max(x, 0)" and its GELU as
// the tanh form, but not what they give for NaN or infinities: a GPU's
// max.f32 returns the number where one operand is NaN, so max(NaN, 0) may
// well be 0, where fusejit's relu (and PyTorch's) keeps the NaN. A matmul
// whose epilogue cuBLASLt runs differently would give a wrong answer only
// where such values occur, and silently. So before the CUDA backend hands
// an activation to cuBLASLt, it runs that epilogue once on known values and
// compares with the reference interpreter's; where they differ, cuBLAS and
// a generated epilogue kernel run the matmul instead, and the kernel's
// library_call says why.
#pragma once

#include <string>

#include <absl/status/statusor.h>

#include "ir/dtype.h"
#include "runtime/cublaslt_library.h"

namespace fusejit::cuda_backend {

class CudaGpu;

// "" where cuBLASLt's `activation` epilogue in `dtype`, with a bias or
// without, gives fusejit's results on every probe value (NaN, +-inf, finite
// values from -5 to 5 and some whose cube overflows float32: NaN where
// fusejit gives NaN, equal infinities, finite values within the dtype's
// tolerance); otherwise the first difference, as "cuBLASLt's relu epilogue
// with a bias gives 0 for NaN in bf16, fusejit's relu NaN". Probed with a
// 64 x 64 x 64 product once per CudaGpu (each backend made opens one) and
// dtype, activation and bias, then remembered, errors too, except out of
// memory. It runs the algorithm cuBLASLt's heuristic picks for that shape
// only: another algorithm, for another shape, could differ, which the GPU
// tests' own matmuls (NaN and infinities included) would show.
absl::StatusOr<std::string> lt_activation_difference(CudaGpu& gpu, DType dtype, cublaslt::Activation activation,
                                                     bool bias);

}  // namespace fusejit::cuda_backend
