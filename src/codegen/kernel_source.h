// Generated kernel source and what a runtime needs to launch it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fusion/plan.h"

namespace fusejit {

// What a parameter of a generated kernel is.
enum class ParamKind : uint8_t {
  kTensor,  // a pointer to a tensor the kernel reads or writes
  // The seeds of the kernel's dropout ops, in node order
  // (emit::dropout_seeds gives the values): a CPU kernel takes a pointer to
  // them (unsigned long long), a CUDA kernel each seed's Philox round keys
  // by value (fj_dropout_keys<N>, philox_round_keys). Seeds are arguments
  // rather than constants in the code, so that kernels that differ only in
  // their seeds (a model's layers, a new seed per training step) share one
  // compiled program.
  kDropoutSeeds,
};

// One parameter of a generated kernel, in parameter order: the kernel's
// reads first, then its writes, then its dropout seeds if it has dropout
// ops.
struct KernelParam {
  int32_t node = -1;  // id in the plan's graph; -1 for kDropoutSeeds
  std::string name;   // the tensor's name
  DType dtype = DType::kF32;
  bool written = false;
  ParamKind kind = ParamKind::kTensor;
  int dropouts = 0;  // kDropoutSeeds: the kernel's dropout ops, whose seeds it takes
};

// How a generated CUDA kernel walks its iteration space.
enum class CudaVariant : uint8_t {
  kPointwise,    // grid-stride loop over elements (vector groups when aligned)
  kWarpPerRow,   // rows up to 512 elements: a warp (a part of one for short rows) per row, in registers
  kBlockPerRow,  // longer rows up to the persistent limit: one block per row, in registers
  kReread,       // rows beyond the limit: one block per row, re-read once per reduction stage
};
std::string_view cuda_variant_name(CudaVariant v);

// The global memory accesses a generated CUDA kernel is compiled for. A
// kernel exists in two variants when its innermost extent is a multiple of
// the vector width: 16-byte accesses, launched when every pointer is 16-byte
// aligned, and element-wise accesses, compiled only when a plan's buffers
// are not. One variant per NVRTC program keeps the other's code out of the
// compile (about a fifth of the fused demo kernel's cold compile time).
enum class CudaAccess : uint8_t {
  kVector,  // 16-byte accesses; falls back to kScalar where there is no vector path
  kScalar,  // one element per access, any alignment
};
std::string_view cuda_access_name(CudaAccess a);

// A launch shape for a block-per-row kernel other than the default one
// (fusion/gpu_row_shape.h): the CUDA runtime compiles a few and keeps the
// one that runs fastest on its GPU (runtime/cuda_row_tuning.h). The shape is
// part of the generated source, so cached kernels never mix.
inline constexpr int kMaxPrefetchRows = 2;
struct CudaRowShape {
  int block_threads = 0;  // threads per row; 0 for the default (or FUSEJIT_ROW_BLOCK_THREADS)
  // Rows loaded ahead of the one being computed, 0 to kMaxPrefetchRows
  // (or FUSEJIT_ROW_PREFETCH=N): their loads are in flight while a block
  // reduces and computes this row.
  int prefetch_rows = 0;
  bool operator==(const CudaRowShape&) const = default;
};

struct CudaKernelSource {
  // The extern "C" entry point: the plan kernel's name, with "_scalar" for
  // the element-wise variant of a kernel that also has a vector one.
  std::string name;
  std::string source;  // a complete translation unit (helpers embedded)
  CudaVariant variant = CudaVariant::kPointwise;
  std::vector<KernelParam> params;
  CudaAccess access = CudaAccess::kScalar;  // what this source was emitted for
  // After the pointers the kernel takes one more argument: the element count
  // (pointwise) or the row count (row kernels) as a 64-bit integer.
  int64_t count = 0;
  int vector_width = 1;         // elements per 16-byte access of the narrowest tensor
  bool has_vector_path = false; // a kVector variant exists (innermost extent a multiple of vector_width)
  int block_threads = 256;      // blockDim.x
  int rows_per_block = 1;       // blockDim.y (warp per row)
  int prefetch_rows = 0;        // a persistent row kernel's rows loaded ahead (CudaRowShape::prefetch_rows)
  // Element indices are 64-bit: a pointwise kernel's from 2^31 - 2^26
  // elements (its 32-bit loop is faster below), a row kernel's always (its
  // row index is a long long, which costs nothing per element).
  bool index_64bit = false;
};

}  // namespace fusejit
