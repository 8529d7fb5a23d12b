// Generated kernel source and what a runtime needs to launch it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fusion/plan.h"

namespace fusejit {

// One pointer parameter of a generated kernel, in parameter order: the
// kernel's reads first, then its writes.
struct KernelParam {
  int32_t node = -1;  // id in the plan's graph
  std::string name;   // the tensor's name
  DType dtype = DType::kF32;
  bool written = false;
};

// How a generated CUDA kernel walks its iteration space.
enum class CudaVariant : uint8_t {
  kPointwise,    // grid-stride loop over elements (vector groups when aligned)
  kWarpPerRow,   // rows up to 1024 elements: one warp per row, kept in registers
  kBlockPerRow,  // longer rows up to the persistent limit: one block per row, in registers
  kReread,       // rows beyond the limit: one block per row, re-read once per reduction stage
};
std::string_view cuda_variant_name(CudaVariant v);

struct CudaKernelSource {
  std::string name;    // the extern "C" entry point
  std::string source;  // a complete translation unit (helpers embedded)
  CudaVariant variant = CudaVariant::kPointwise;
  std::vector<KernelParam> params;
  // After the pointers the kernel takes: the element count (pointwise) or
  // the row count (row kernels) as a 64-bit integer, then `int aligned`:
  // 1 when every pointer is 16-byte aligned, which enables 16-byte accesses.
  int64_t count = 0;
  int vector_width = 1;         // elements per 16-byte access of the narrowest tensor
  bool has_vector_path = false; // false: `aligned` is ignored (extent not a multiple of vector_width)
  int block_threads = 256;      // blockDim.x
  int rows_per_block = 1;       // blockDim.y (warp per row)
  bool index_64bit = false;     // element indices need 64 bits (2^31 elements or more)
};

}  // namespace fusejit
