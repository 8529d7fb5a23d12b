// Rounding and conversion of the storage dtypes, checked against independent
// nearest-value searches, and the promotion table.
#include "ir/dtype.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace fusejit {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

float from_bits(uint32_t b) { return std::bit_cast<float>(b); }

// Every non-negative finite f16 value, ascending, decoded by the formula of
// IEEE 754 binary16 (not by half_bits_to_float).
const std::vector<double>& all_half_values() {
  static const std::vector<double> values = [] {
    std::vector<double> v;
    for (int e = 0; e < 31; ++e) {
      for (int m = 0; m < 1024; ++m) v.push_back(e == 0 ? m * 0x1p-24 : std::ldexp(1.0 + m / 1024.0, e - 15));
    }
    return v;
  }();
  return values;
}

// Nearest f16 value to finite x by search, ties to the even bit pattern; overflow
// past the midpoint of the largest finite value and 2^16 gives infinity.
double reference_half(double x) {
  const double a = std::fabs(x);
  const double max = 65504.0, overflow = 65520.0;  // 65520 = midpoint of 65504 and 2^16, ties go up (even)
  double r;
  if (a >= overflow) {
    r = kInf;
  } else if (a >= max) {
    r = max;
  } else {
    const auto& v = all_half_values();
    const auto hi = std::upper_bound(v.begin(), v.end(), a);  // first value > a
    const auto lo = hi - 1;
    const double dl = a - *lo, dh = *hi - a;
    const bool lo_even = ((lo - v.begin()) % 2) == 0;
    r = (dl < dh || (dl == dh && lo_even)) ? *lo : *hi;
  }
  return std::copysign(r, x);
}

// Nearest bf16 value to the float f: the two bf16 neighbours are the top 16
// bits truncated and that plus one; ties to the even pattern.
double reference_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint32_t down = bits & 0xffff0000u;
  const uint32_t up = down + 0x10000u;
  // Past the largest finite value the next "bf16 value" is 2^128, which rounds on to infinity.
  const bool up_overflows = (up & 0x7fffffffu) == 0x7f800000u;
  const double x = f, lo = from_bits(down), hi = up_overflows ? std::copysign(0x1p128, x) : from_bits(up);
  const double dl = std::fabs(x - lo), dh = std::fabs(hi - x);
  const double nearest = dl < dh ? lo : dh < dl ? hi : ((down >> 16) & 1u) == 0 ? lo : hi;
  return std::fabs(nearest) == 0x1p128 ? std::copysign(kInf, x) : nearest;
}

TEST(DTypeTest, NamesSizesAndParsing) {
  EXPECT_EQ(dtype_name(DType::kF32), "f32");
  EXPECT_EQ(dtype_name(DType::kF16), "f16");
  EXPECT_EQ(dtype_name(DType::kBF16), "bf16");
  for (DType t : kAllDTypes) EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  EXPECT_FALSE(parse_dtype("f64").has_value());
  EXPECT_FALSE(parse_dtype("BF16").has_value());
  EXPECT_EQ(dtype_size(DType::kF32), 4);
  EXPECT_EQ(dtype_size(DType::kF16), 2);
  EXPECT_EQ(dtype_size(DType::kBF16), 2);
}

TEST(DTypeTest, PromotionTableAsInPyTorch) {
  struct Row {
    DType a, b, result;
  };
  const Row table[] = {
      {DType::kF32, DType::kF32, DType::kF32},    {DType::kF16, DType::kF16, DType::kF16},
      {DType::kBF16, DType::kBF16, DType::kBF16}, {DType::kF32, DType::kF16, DType::kF32},
      {DType::kF32, DType::kBF16, DType::kF32},   {DType::kF16, DType::kBF16, DType::kF32},
  };
  for (const Row& r : table) {
    EXPECT_EQ(promote(r.a, r.b), r.result) << dtype_name(r.a) << " with " << dtype_name(r.b);
    EXPECT_EQ(promote(r.b, r.a), r.result) << dtype_name(r.b) << " with " << dtype_name(r.a);
  }
}

TEST(DTypeTest, HalfBitsRoundTripEveryPattern) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = half_bits_to_float(static_cast<uint16_t>(h));
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      ASSERT_TRUE(std::isnan(half_bits_to_float(float_to_half_bits(f))));
      continue;
    }
    ASSERT_EQ(float_to_half_bits(f), h) << std::hex << h;
    const double expected = (h & 0x7fffu) == 0x7c00u ? kInf : all_half_values()[h & 0x7fffu];
    ASSERT_EQ(std::fabs(static_cast<double>(f)), expected) << std::hex << h;
    ASSERT_EQ(std::signbit(f), (h & 0x8000u) != 0);
  }
}

TEST(DTypeTest, HalfRoundsToNearestEvenIncludingTies) {
  // Normal range: 1 + 2^-11 is the midpoint of 1 and 1 + 2^-10.
  EXPECT_EQ(round_to_dtype(1.0 + 0x1p-11, DType::kF16), 1.0);
  EXPECT_EQ(round_to_dtype(1.0 + 3 * 0x1p-11, DType::kF16), 1.0 + 0x1p-9);
  EXPECT_EQ(round_to_dtype(1.0 + 0x1p-11 + 0x1p-20, DType::kF16), 1.0 + 0x1p-10);
  EXPECT_EQ(round_to_dtype(-(1.0 + 0x1p-11), DType::kF16), -1.0);
  EXPECT_EQ(round_to_dtype(2049.0, DType::kF16), 2048.0);  // ulp 2 above 2048: tie to even
  EXPECT_EQ(round_to_dtype(2051.0, DType::kF16), 2052.0);
  // Subnormals: spacing 2^-24.
  EXPECT_EQ(round_to_dtype(0x1p-24, DType::kF16), 0x1p-24);
  EXPECT_EQ(round_to_dtype(0x1p-25, DType::kF16), 0.0);  // tie: 0 is even
  EXPECT_EQ(round_to_dtype(0x1p-25 + 0x1p-35, DType::kF16), 0x1p-24);
  EXPECT_EQ(round_to_dtype(3 * 0x1p-25, DType::kF16), 0x1p-23);  // tie between 1 and 2 units: 2
  EXPECT_EQ(round_to_dtype(1023 * 0x1p-24, DType::kF16), 1023 * 0x1p-24);
  EXPECT_EQ(round_to_dtype(0x1p-14 - 0x1p-25, DType::kF16), 0x1p-14);  // largest subnormal + half: to 2^-14
  EXPECT_TRUE(std::signbit(round_to_dtype(-0x1p-26, DType::kF16)));    // underflow keeps the sign
  // Overflow.
  EXPECT_EQ(round_to_dtype(65504.0, DType::kF16), 65504.0);
  EXPECT_EQ(round_to_dtype(65519.0, DType::kF16), 65504.0);
  EXPECT_EQ(round_to_dtype(65520.0, DType::kF16), kInf);  // tie between 65504 (odd) and 2^16
  EXPECT_EQ(round_to_dtype(1e6, DType::kF16), kInf);
  EXPECT_EQ(round_to_dtype(-1e6, DType::kF16), -kInf);
  EXPECT_EQ(round_to_dtype(kInf, DType::kF16), kInf);
  EXPECT_EQ(round_to_dtype(-kInf, DType::kF16), -kInf);
  EXPECT_TRUE(std::isnan(round_to_dtype(std::nan(""), DType::kF16)));
}

TEST(DTypeTest, HalfMatchesNearestSearchAtEveryMidpoint) {
  // Every midpoint between neighbouring f16 values, and one float ulp either side of it.
  const auto& v = all_half_values();
  for (size_t i = 0; i + 1 < v.size(); ++i) {
    const float mid = static_cast<float>((v[i] + v[i + 1]) / 2);  // exact in float
    for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      ASSERT_EQ(half_bits_to_float(float_to_half_bits(f)), reference_half(f)) << f;
      ASSERT_EQ(half_bits_to_float(float_to_half_bits(-f)), reference_half(-f)) << -f;
    }
  }
}

TEST(DTypeTest, HalfMatchesNearestSearchOnRandomFloats) {
  std::mt19937 gen(1);  // the sequence of mt19937 is fixed by the standard
  for (int i = 0; i < 200000; ++i) {
    // Random bit patterns with exponents around the f16 range (2^-30 .. 2^17).
    const uint32_t exponent = 97 + gen() % 48;
    const uint32_t bits = (gen() & 0x80000000u) | (exponent << 23) | (gen() & 0x7fffffu);
    const float f = from_bits(bits);
    ASSERT_EQ(half_bits_to_float(float_to_half_bits(f)), reference_half(f)) << std::hex << bits;
  }
}

TEST(DTypeTest, Bf16RoundsToNearestEvenIncludingTies) {
  EXPECT_EQ(round_to_dtype(1.0 + 0x1p-8, DType::kBF16), 1.0);  // tie: 1 is even
  EXPECT_EQ(round_to_dtype(1.0 + 3 * 0x1p-8, DType::kBF16), 1.0 + 0x1p-6);
  EXPECT_EQ(round_to_dtype(1.0 + 0x1p-8 + 0x1p-20, DType::kBF16), 1.0 + 0x1p-7);
  EXPECT_EQ(round_to_dtype(257.0, DType::kBF16), 256.0);
  EXPECT_EQ(round_to_dtype(259.0, DType::kBF16), 260.0);
  // Subnormals (bf16 shares float's exponent range).
  const float sub = from_bits(0x00010000u);
  EXPECT_EQ(round_to_dtype(sub, DType::kBF16), static_cast<double>(sub));
  EXPECT_EQ(round_to_dtype(from_bits(0x00008000u), DType::kBF16), 0.0);  // tie to even (0)
  EXPECT_EQ(round_to_dtype(from_bits(0x00018000u), DType::kBF16), static_cast<double>(from_bits(0x00020000u)));
  // Overflow: the largest bf16 is 0x7f7f; the midpoint to 0x7f80 (inf) rounds to even, which is inf.
  const double max_bf16 = from_bits(0x7f7f0000u);
  EXPECT_EQ(round_to_dtype(max_bf16, DType::kBF16), max_bf16);
  EXPECT_EQ(round_to_dtype(from_bits(0x7f7f7fffu), DType::kBF16), max_bf16);
  EXPECT_EQ(round_to_dtype(from_bits(0x7f7f8000u), DType::kBF16), kInf);
  EXPECT_EQ(round_to_dtype(std::numeric_limits<float>::max(), DType::kBF16), kInf);
  EXPECT_EQ(round_to_dtype(-1e39, DType::kBF16), -kInf);
  // NaN stays NaN, also when only low mantissa bits are set (truncation would give inf).
  EXPECT_TRUE(std::isnan(round_to_dtype(std::nan(""), DType::kBF16)));
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(from_bits(0x7f800001u)))));
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(from_bits(0xff800001u)))));
  EXPECT_TRUE(std::signbit(round_to_dtype(-0.0, DType::kBF16)));
}

TEST(DTypeTest, Bf16MatchesNearestSearch) {
  std::mt19937 gen(2);
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = gen();
    if ((bits & 0x7f800000u) == 0x7f800000u) continue;      // inf and NaN are tested above
    if (i % 4 == 0) bits = (bits & 0xffff0000u) | 0x8000u;  // a tie
    const float f = from_bits(bits);
    const double expected = reference_bf16(f);
    const double got = bf16_bits_to_float(float_to_bf16_bits(f));
    ASSERT_EQ(got, expected) << std::hex << bits;
    ASSERT_EQ(round_to_dtype(f, DType::kBF16), expected) << std::hex << bits;
  }
  for (uint32_t b = 0; b < 0x10000; ++b) {
    if ((b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0) continue;  // NaN
    ASSERT_EQ(float_to_bf16_bits(bf16_bits_to_float(static_cast<uint16_t>(b))), b) << std::hex << b;
  }
}

TEST(DTypeTest, F32RoundsDoubleToNearest) {
  EXPECT_EQ(round_to_dtype(0.1, DType::kF32), static_cast<double>(0.1f));
  EXPECT_EQ(round_to_dtype(1.0 + 0x1p-24, DType::kF32), 1.0);  // tie: even
  EXPECT_EQ(round_to_dtype(1.0 + 3 * 0x1p-24, DType::kF32), 1.0 + 0x1p-22);
  EXPECT_EQ(round_to_dtype(1e39, DType::kF32), kInf);
  EXPECT_EQ(round_to_dtype(1e-50, DType::kF32), 0.0);
  EXPECT_EQ(round_to_dtype(0x1p-149, DType::kF32), 0x1p-149);  // smallest subnormal
  EXPECT_TRUE(std::isnan(round_to_dtype(std::nan(""), DType::kF32)));
}

TEST(DTypeTest, SixteenBitRoundingGoesThroughFloatAsDevicesDo) {
  // round_to_dtype rounds double -> f32 -> f16, as a device storing its f32
  // result does. A double just above an f16 tie first becomes the tie in f32.
  const double v = 1.0 + 0x1p-11 + 0x1p-40;
  EXPECT_EQ(static_cast<double>(static_cast<float>(v)), 1.0 + 0x1p-11);
  EXPECT_EQ(round_to_dtype(v, DType::kF16), 1.0);
  EXPECT_EQ(reference_half(v), 1.0 + 0x1p-10);  // a direct rounding would go up
}

TEST(DTypeTest, RoundingIsIdempotent) {
  std::mt19937_64 gen(3);
  for (int i = 0; i < 10000; ++i) {
    const double v = std::ldexp(static_cast<double>(gen() >> 11) * 0x1p-53 - 0.5, static_cast<int>(gen() % 60) - 30);
    for (DType t : kAllDTypes) {
      const double r = round_to_dtype(v, t);
      ASSERT_EQ(round_to_dtype(r, t), r);
    }
  }
}

}  // namespace
}  // namespace fusejit
