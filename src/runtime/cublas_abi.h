// The part of cuBLAS's ABI that fusejit calls, declared here instead of
// taken from cublas_v2.h (see cublas_library.h); cublas_library.cpp checks
// it against the header where the toolkit is present. The CUDA emulator
// (tests/cuda_emulator/) defines these functions from the same list.
//
// Internal to src/runtime/.
#pragma once

#include "runtime/cublas_library.h"

namespace fusejit::cublas::cublas_abi {

using Status = int;                       // cublasStatus_t
inline constexpr Status kSuccess = 0;     // CUBLAS_STATUS_SUCCESS
inline constexpr int kOpN = 0;            // CUBLAS_OP_N
inline constexpr int kComputeF32 = 68;    // CUBLAS_COMPUTE_32F: f32 accumulation, no TF32
inline constexpr int kGemmDefault = -1;   // CUBLAS_GEMM_DEFAULT
inline constexpr int kPropertyMajor = 0;  // MAJOR_VERSION
inline constexpr int kPropertyMinor = 1;  // MINOR_VERSION
inline constexpr int kPropertyPatch = 2;  // PATCH_LEVEL

// X(member, symbol, return type, parameters). cublas_v2.h maps cublasCreate
// to cublasCreate_v2 and so on; these are the symbols it maps to.
#define FUSEJIT_CUBLAS_FUNCTIONS(X)                                                                                 \
  X(create, cublasCreate_v2, Status, (Handle * handle))                                                             \
  X(destroy, cublasDestroy_v2, Status, (Handle handle))                                                             \
  X(get_property, cublasGetProperty, Status, (int type, int* value))                                                \
  X(gemm_ex, cublasGemmEx, Status,                                                                                  \
    (Handle handle, int transa, int transb, int m, int n, int k, const void* alpha, const void* a, int a_type,      \
     int lda, const void* b, int b_type, int ldb, const void* beta, void* c, int c_type, int ldc, int compute_type, \
     int algo))

// Newer than the rest (cuBLAS 11.4); error messages use them when present.
#define FUSEJIT_CUBLAS_OPTIONAL_FUNCTIONS(X)                            \
  X(get_status_name, cublasGetStatusName, const char*, (Status status)) \
  X(get_status_string, cublasGetStatusString, const char*, (Status status))

}  // namespace fusejit::cublas::cublas_abi
