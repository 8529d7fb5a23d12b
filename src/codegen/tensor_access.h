// How a kernel addresses a global tensor inside its iteration space: the
// tensor's strides along the iteration dimensions (0 where it broadcasts),
// and the source text of its offsets.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace fusejit {

struct TensorAccess {
  std::vector<int64_t> strides;  // one per iteration dimension
  bool varies_along_row() const { return !strides.empty() && strides.back() != 0; }
  // Whether every dimension but the last has stride 0 (a [N] vector).
  bool same_for_every_row() const;
  bool is_dense(const Shape& iteration) const;  // the tensor has the iteration shape itself
};

TensorAccess tensor_access(const Shape& tensor, const Shape& iteration);

// Source text of the offset of element `flat` (a flat index into the
// iteration space), e.g. "((i / 4096) * 1 + (i % 4096))"; "0" when the
// tensor is one element.
std::string element_offset(const TensorAccess& access, const Shape& iteration, const std::string& flat);
// Source text of the offset of the start of row `row` (iteration shape
// without its last dimension).
std::string row_offset(const TensorAccess& access, const Shape& iteration, const std::string& row);

}  // namespace fusejit
