#include "ir/dtype.h"

#include <bit>
#include <cmath>
#include <limits>

namespace fusejit {

bool is_valid_dtype(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view text) {
  for (DType t : kAllDTypes) {
    if (dtype_name(t) == text) return t;
  }
  return std::nullopt;
}

int64_t dtype_size(DType t) { return t == DType::kF32 ? 4 : 2; }

DType promote(DType a, DType b) {
  if (a == b) return a;
  return DType::kF32;  // f32 with anything, or f16 with bf16
}

uint16_t float_to_half_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow or inf
  if (abs < 0x38800000u) {
    // Result is subnormal or zero: scale into units of 2^-24 and round to even.
    const float mag = std::bit_cast<float>(abs);
    const float scaled = mag * 16777216.0f;  // 2^24, exact
    const float rounded = std::nearbyint(scaled);  // default mode: nearest even
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(rounded));
  }
  // Normal: rebias exponent, round mantissa from 23 to 10 bits (nearest even).
  uint32_t m = abs - 0x38000000u;  // exponent bias 127 -> 15
  const uint32_t lsb = (m >> 13) & 1u;
  m += 0xfffu + lsb;
  return static_cast<uint16_t>(sign | (m >> 13));
}

float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    const float mag = static_cast<float>(man) * 0x1p-24f;
    return std::bit_cast<float>(std::bit_cast<uint32_t>(mag) | sign);
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t float_to_bf16_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest even; overflow carries into inf
  return static_cast<uint16_t>(x >> 16);
}

float bf16_bits_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

double round_to_dtype(double v, DType t) {
  // double -> float is round-to-nearest-even in hardware; the 16-bit types
  // then round from float exactly as a device does after f32 arithmetic.
  const float f = static_cast<float>(v);
  switch (t) {
    case DType::kF32: return f;
    case DType::kF16: return half_bits_to_float(float_to_half_bits(f));
    case DType::kBF16: return bf16_bits_to_float(float_to_bf16_bits(f));
  }
  return f;
}

std::string float32_range_problem(double v, bool zero_allowed) {
  if (v == 0 || std::isnan(v)) return {};  // NaN is the caller's to reject: it is no range question
  const float largest = std::numeric_limits<float>::max(), smallest = std::numeric_limits<float>::min();
  // Past the largest finite float, but rounding down to it, is fine.
  if (std::isinf(static_cast<float>(v))) {
    return fmt::format("{} is past float32's largest finite value, {}; kernels compute in float32", v, largest);
  }
  if (std::fabs(static_cast<float>(v)) < smallest) {  // what rounds up to the smallest normal value is fine
    return fmt::format("{} is below float32's smallest normal value, {}, where it would lose its precision or "
                       "become 0; kernels compute in float32{}",
                       v, smallest, zero_allowed ? " (write 0 for zero)" : "");
  }
  return {};
}

}  // namespace fusejit
