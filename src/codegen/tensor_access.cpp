#include "codegen/tensor_access.h"

#include <fmt/format.h>

namespace fusejit {

bool TensorAccess::same_for_every_row() const {
  for (size_t d = 0; d + 1 < strides.size(); ++d) {
    if (strides[d] != 0) return false;
  }
  return true;
}

bool TensorAccess::is_dense(const Shape& iteration) const {
  int64_t expected = 1;
  for (int d = iteration.rank() - 1; d >= 0; --d) {
    if (iteration[d] != 1 && strides[d] != expected) return false;
    expected *= iteration[d];
  }
  return true;
}

TensorAccess tensor_access(const Shape& tensor, const Shape& iteration) {
  const auto strides = broadcast_strides(tensor, iteration);
  return {std::vector<int64_t>(strides.begin(), strides.end())};
}

namespace {

// Dimensions [0, dims) of `iteration` as fewer, equivalent ones: adjacent
// dimensions merge when the tensor is contiguous across them (the outer
// stride is the inner stride times the inner extent) or broadcasts along
// both; extents of 1 drop out. A dense [8, 16, 128, 128] tensor's rows are
// then one dimension of 16384 (offset row * 128), where three coordinates
// took a division, a modulo and a multiply each, in every row.
struct MergedDim {
  int64_t extent;
  int64_t stride;
};
std::vector<MergedDim> merge_dims(const std::vector<int64_t>& strides, const Shape& iteration, int dims) {
  std::vector<MergedDim> merged;  // innermost first
  for (int d = dims - 1; d >= 0; --d) {
    if (iteration[d] == 1) continue;
    const int64_t stride = strides[d];
    if (!merged.empty()) {
      MergedDim& inner = merged.back();
      const bool contiguous = inner.stride != 0 && stride == inner.stride * inner.extent;
      if (contiguous || (inner.stride == 0 && stride == 0)) {
        inner.extent *= iteration[d];
        continue;
      }
    }
    merged.push_back({iteration[d], stride});
  }
  return merged;
}

// Sum of coordinate * stride over dimensions [0, dims) of `iteration`, where
// the coordinates are those of the flat index `flat` over those dimensions.
// The outermost coordinate needs no modulo (the index is in range).
std::string offset_over(const std::vector<int64_t>& strides, const Shape& iteration, int dims,
                        const std::string& flat) {
  const std::vector<MergedDim> merged = merge_dims(strides, iteration, dims);
  std::vector<std::string> terms;
  int64_t inner = 1;  // product of extents inside dimension d
  for (size_t d = 0; d < merged.size(); ++d) {
    if (merged[d].stride != 0) {
      std::string coord = inner == 1 ? flat : fmt::format("({} / {})", flat, inner);
      if (d + 1 < merged.size()) coord = fmt::format("({} % {})", coord, merged[d].extent);
      terms.push_back(merged[d].stride == 1 ? coord : fmt::format("{} * {}", coord, merged[d].stride));
    }
    inner *= merged[d].extent;
  }
  if (terms.empty()) return "0";
  std::string out = terms.back();
  for (int i = static_cast<int>(terms.size()) - 2; i >= 0; --i) out += " + " + terms[i];
  return "(" + out + ")";
}

}  // namespace

std::string element_offset(const TensorAccess& access, const Shape& iteration, const std::string& flat) {
  if (access.is_dense(iteration)) return flat;
  return offset_over(access.strides, iteration, iteration.rank(), flat);
}

std::string row_offset(const TensorAccess& access, const Shape& iteration, const std::string& row) {
  return offset_over(access.strides, iteration, iteration.rank() - 1, row);
}

}  // namespace fusejit
