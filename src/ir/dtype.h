// Element types. fusejit stores tensors as f32, f16 or bf16 and does all
// arithmetic in f32 on devices (float64 in the reference interpreter); the
// dtype therefore decides only storage size and where values are rounded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace fusejit {

enum class DType : uint8_t { kF32, kF16, kBF16 };

inline constexpr DType kAllDTypes[] = {DType::kF32, DType::kF16, DType::kBF16};

std::string_view dtype_name(DType t);          // "f32", "f16", "bf16" ("?" for a value outside the enum)
// Whether t is one of the enum's values (a cast from an integer may not be).
bool is_valid_dtype(DType t);
std::optional<DType> parse_dtype(std::string_view text);
int64_t dtype_size(DType t);                   // bytes per element

// Result type of a binary op on two tensors, as in PyTorch: equal types stay,
// f32 wins over the 16-bit types, and f16 with bf16 (neither holds the other)
// gives f32. Numeric literals never take part in promotion.
DType promote(DType a, DType b);

// Rounds a value to the nearest value representable in `t` (round to nearest
// even, overflow to infinity, NaN stays NaN) and returns it widened back to
// double. This is the single definition of "store in dtype" for the reference.
double round_to_dtype(double v, DType t);

// Kernels compute in f32, so a number written into a graph (a literal
// operand, a float attribute such as eps) must mean the same in f32 as in
// the float64 reference: "" when it does (0, or a finite value of f32's
// normal range, whatever its rounding), else why not ("1e+39 is past
// float32's largest finite value, 3.4028235e+38; kernels compute in
// float32"). Without this, 1e39 becomes infinity in a kernel and 1e-50 zero.
// `zero_allowed`: whether 0 is a value the caller accepts, and so worth
// suggesting for a number too small to keep.
std::string float32_range_problem(double v, bool zero_allowed = true);

// Bit-level conversions used by storage (npy files, device buffers).
uint16_t float_to_half_bits(float f);
float half_bits_to_float(uint16_t h);
uint16_t float_to_bf16_bits(float f);
float bf16_bits_to_float(uint16_t b);

}  // namespace fusejit

template <>
struct fmt::formatter<fusejit::DType> : fmt::formatter<std::string_view> {
  auto format(fusejit::DType t, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(fusejit::dtype_name(t), ctx);
  }
};
