#include "ir/shape.h"

#include <fmt/ranges.h>

namespace fusejit {

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

bool Shape::numel_overflows() const {
  int64_t n = 1;
  for (int64_t d : dims_) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return true;
  }
  return false;
}

std::string Shape::to_string() const { return fmt::format("[{}]", fmt::join(dims_, ", ")); }

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  const int rank = std::max(a.rank(), b.rank());
  Shape out;
  for (int i = 0; i < rank; ++i) {
    const int ia = a.rank() - rank + i;
    const int ib = b.rank() - rank + i;
    const int64_t da = ia >= 0 ? a[ia] : 1;
    const int64_t db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out.push_back(da == 1 ? db : da);
  }
  return out;
}

absl::InlinedVector<int64_t, kMaxRank> broadcast_strides(const Shape& operand, const Shape& result) {
  absl::InlinedVector<int64_t, kMaxRank> strides(result.rank(), 0);
  int64_t stride = 1;
  for (int i = operand.rank() - 1; i >= 0; --i) {
    const int r = result.rank() - operand.rank() + i;
    strides[r] = operand[i] == 1 ? 0 : stride;
    stride *= operand[i];
  }
  return strides;
}

}  // namespace fusejit
