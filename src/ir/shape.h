// Tensor shapes: rank 1 to 4, 64-bit extents, row-major, NumPy broadcasting.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <string>

#include <absl/container/inlined_vector.h>

#include <fmt/format.h>

namespace fusejit {

inline constexpr int kMaxRank = 4;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  // Iterators only: Shape(2, 3) would otherwise take 2 and 3 as a range
  // (std::vector's count-and-value constructor) and build [3, 3].
  template <std::input_iterator It>
  Shape(It begin, It end) : dims_(begin, end) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t operator[](int i) const { return dims_[i]; }
  int64_t& operator[](int i) { return dims_[i]; }
  int64_t last() const { return dims_.back(); }
  const int64_t* begin() const { return dims_.data(); }
  const int64_t* end() const { return dims_.data() + dims_.size(); }
  void push_back(int64_t d) { dims_.push_back(d); }

  // Product of extents. Callers that build shapes from user input must check
  // numel_overflows() first; verified graphs never overflow.
  int64_t numel() const;
  bool numel_overflows() const;
  // Number of rows when the last dimension is the row (numel / last()).
  int64_t rows() const { return numel() / last(); }

  bool operator==(const Shape&) const = default;
  std::string to_string() const;  // "[8192, 4096]"

 private:
  absl::InlinedVector<int64_t, kMaxRank> dims_;
};

// NumPy broadcasting: align trailing dimensions; each pair must be equal or
// one of them 1. Returns nullopt when the shapes are incompatible.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);

// Row-major strides of `operand` when read at the coordinates of `result`
// (which it broadcasts to): broadcast dimensions get stride 0. The returned
// vector has result.rank() entries.
absl::InlinedVector<int64_t, kMaxRank> broadcast_strides(const Shape& operand, const Shape& result);

}  // namespace fusejit

template <>
struct fmt::formatter<fusejit::Shape> : fmt::formatter<std::string_view> {
  auto format(const fusejit::Shape& s, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(s.to_string(), ctx);
  }
};
