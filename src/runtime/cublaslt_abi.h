// The part of cuBLASLt's ABI that fusejit calls (cublaslt_library.h),
// declared here instead of taken from cublasLt.h, as cublas_abi.h does for
// cuBLAS; cublaslt_library.cpp checks it against the header where the
// toolkit is present. The CUDA emulator (tests/cuda_emulator/) defines
// these functions from the same list.
//
// Internal to src/runtime/.
#pragma once

#include <cstddef>
#include <cstdint>

// cuBLASLt's own handle type (cublasLt.h names it the same way).
struct cublasLtContext;

namespace fusejit::cublaslt::lt_abi {

using Status = int;  // cublasStatus_t
using Handle = cublasLtContext*;
// cublasLtMatmulDesc_t, cublasLtMatrixLayout_t, cublasLtMatmulPreference_t:
// pointers to opaque structs, each passed as the pointer it is.
using Descriptor = void*;

// cublasLtMatmulAlgo_t and cublasLtMatmulHeuristicResult_t, field for field.
struct Algo {
  uint64_t data[8];
};
struct HeuristicResult {
  Algo algo;
  size_t workspace_size;
  Status state;
  float waves_count;
  int reserved[4];
};

inline constexpr Status kSuccess = 0;            // CUBLAS_STATUS_SUCCESS
inline constexpr Status kNotSupported = 15;      // CUBLAS_STATUS_NOT_SUPPORTED
inline constexpr int kComputeF32 = 68;           // CUBLAS_COMPUTE_32F
inline constexpr int kScaleF32 = 0;              // CUDA_R_32F: alpha and beta of a 32F compute
inline constexpr int kDescEpilogue = 7;          // CUBLASLT_MATMUL_DESC_EPILOGUE (uint32_t)
inline constexpr int kDescBiasPointer = 8;       // CUBLASLT_MATMUL_DESC_BIAS_POINTER (const void*)
inline constexpr int kPrefMaxWorkspace = 1;      // CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES (uint64_t)
inline constexpr int kPrefAlignmentA = 5;        // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES (uint32_t)
inline constexpr int kPrefAlignmentB = 6;        // ... _B_BYTES
inline constexpr int kPrefAlignmentC = 7;        // ... _C_BYTES
inline constexpr int kPrefAlignmentD = 8;        // ... _D_BYTES
inline constexpr uint32_t kEpilogueDefault = 1;  // CUBLASLT_EPILOGUE_DEFAULT
inline constexpr uint32_t kEpilogueRelu = 2;     // CUBLASLT_EPILOGUE_RELU
inline constexpr uint32_t kEpilogueBias = 4;     // CUBLASLT_EPILOGUE_BIAS (| RELU, | GELU: the _BIAS forms)
inline constexpr uint32_t kEpilogueGelu = 32;    // CUBLASLT_EPILOGUE_GELU (the tanh form)

// X(member, symbol, return type, parameters).
#define FUSEJIT_CUBLASLT_FUNCTIONS(X)                                                                         \
  X(create, cublasLtCreate, Status, (Handle * handle))                                                        \
  X(destroy, cublasLtDestroy, Status, (Handle handle))                                                        \
  X(desc_create, cublasLtMatmulDescCreate, Status, (Descriptor * desc, int compute_type, int scale_type))     \
  X(desc_destroy, cublasLtMatmulDescDestroy, Status, (Descriptor desc))                                       \
  X(desc_set, cublasLtMatmulDescSetAttribute, Status,                                                         \
    (Descriptor desc, int attribute, const void* value, size_t size))                                         \
  X(layout_create, cublasLtMatrixLayoutCreate, Status,                                                        \
    (Descriptor * layout, int type, uint64_t rows, uint64_t cols, int64_t ld))                                \
  X(layout_destroy, cublasLtMatrixLayoutDestroy, Status, (Descriptor layout))                                 \
  X(pref_create, cublasLtMatmulPreferenceCreate, Status, (Descriptor * pref))                                 \
  X(pref_destroy, cublasLtMatmulPreferenceDestroy, Status, (Descriptor pref))                                 \
  X(pref_set, cublasLtMatmulPreferenceSetAttribute, Status,                                                   \
    (Descriptor pref, int attribute, const void* value, size_t size))                                         \
  X(heuristic, cublasLtMatmulAlgoGetHeuristic, Status,                                                        \
    (Handle handle, Descriptor op, Descriptor a, Descriptor b, Descriptor c, Descriptor d, Descriptor pref,   \
     int requested, HeuristicResult* results, int* returned))                                                 \
  X(matmul, cublasLtMatmul, Status,                                                                           \
    (Handle handle, Descriptor op, const void* alpha, const void* a, Descriptor a_layout, const void* b,      \
     Descriptor b_layout, const void* beta, const void* c, Descriptor c_layout, void* d, Descriptor d_layout, \
     const Algo* algo, void* workspace, size_t workspace_size, void* stream))                                 \
  X(get_status_name, cublasLtGetStatusName, const char*, (Status status))                                     \
  X(get_status_string, cublasLtGetStatusString, const char*, (Status status))

}  // namespace fusejit::cublaslt::lt_abi
