// cuBLAS, loaded with dlopen the first time a plan with a matmul is loaded on
// the GPU: fusejit links and starts without it, and only a plan that needs
// it fails, with the libraries it tried. Internal to src/runtime/; the CUDA
// backend (cuda_backend_matmul.cpp) is its one user.
//
// The few entry points and enum values used are declared here, not taken
// from cublas_v2.h, so that no toolkit header is needed to build or use
// fusejit; where the toolkit is present, cublas_library.cpp checks every
// declaration against cublas_v2.h at compile time.
#pragma once

#include <cstdint>
#include <string>

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include "ir/dtype.h"
#include "runtime/cuda_driver.h"

// cuBLAS's own handle type (cublas_api.h names it the same way).
struct cublasContext;

namespace fusejit::cublas {

using Handle = cublasContext*;

// cudaDataType values (library_types.h) of the element types fusejit stores.
enum class DataType : int {
  kF32 = 0,    // CUDA_R_32F
  kF16 = 2,    // CUDA_R_16F
  kBF16 = 14,  // CUDA_R_16BF
};
DataType data_type(DType dtype);

// OK when cuBLAS loaded; otherwise NotFound naming every library tried.
absl::Status library_status();
// The file cuBLAS was loaded from ("" when it did not load).
std::string library_path();
// {13, 0, 2} from cublasGetProperty; an error when cuBLAS did not load.
absl::StatusOr<std::string> library_version();

// A cuBLAS handle in the context current on the calling thread.
absl::StatusOr<Handle> create_handle();
absl::Status destroy_handle(Handle handle);

// A row-major product C[m, n] = A[m, k] · B[k, n] as the column-major call
// cuBLAS makes: row-major C is column-major Cᵀ = Bᵀ·Aᵀ, and a row-major
// matrix read column-major is its transpose, so cuBLAS computes an n × m
// result from B (as its first operand, leading dimension n) and A (second,
// leading dimension k), neither transposed.
struct ColumnMajorGemm {
  int m = 0;  // rows of the column-major result (= n)
  int n = 0;  // its columns (= m)
  int k = 0;
  int lda = 0;  // of the first operand, B
  int ldb = 0;  // of the second operand, A
  int ldc = 0;
};
// InvalidArgument when an extent does not fit cublasGemmEx's 32-bit int.
absl::StatusOr<ColumnMajorGemm> row_major_gemm(int64_t m, int64_t n, int64_t k);

// C = A · B (row-major, A and B of `type`, C of `c_type`: `type`, or f32
// to keep the product unrounded) with f32 accumulation (CUBLAS_COMPUTE_32F,
// CUBLAS_GEMM_DEFAULT) on the default stream. Asynchronous like a kernel
// launch. Errors name cuBLAS's status and `what`.
absl::Status gemm_row_major(Handle handle, DataType type, DataType c_type, int64_t m, int64_t n, int64_t k,
                            cuda::DevicePtr a, cuda::DevicePtr b, cuda::DevicePtr c, std::string_view what);

}  // namespace fusejit::cublas
