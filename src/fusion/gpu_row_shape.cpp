#include "fusion/gpu_row_shape.h"

#include <algorithm>

namespace fusejit {
namespace {

int64_t next_pow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

}  // namespace

GpuRowShape gpu_row_shape(int64_t row_length, RowStrategy strategy) {
  if (strategy == RowStrategy::kReread) return {.warp_per_row = false, .threads = 1024};
  if (row_length <= kGpuWarpRowLimit) return {.warp_per_row = true, .threads = 32};
  return {.warp_per_row = false,
          .threads = static_cast<int>(std::clamp<int64_t>(next_pow2((row_length + 7) / 8), 64, 1024))};
}

}  // namespace fusejit
