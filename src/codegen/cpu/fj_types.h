// fusejit CPU helpers: storage types and their conversions to f32, the CPU
// counterpart of codegen/cuda/fj_types.cuh (same names, same semantics).
//
// Bit for bit the conversions of src/ir/dtype.cpp (round to nearest even,
// overflow to infinity, NaN stays NaN, NaN payloads as dtype.cpp treats them:
// kept on widening, 0x7e00 / quiet bit set on narrowing) for every input.
//
// Everything is branch-free bit manipulation (plus two exact float
// operations for f16 subnormals), so that loops over
// arrays of these types auto-vectorise (and loops that also do arithmetic
// around the conversions). Not _Float16 with F16C inside loops: GCC 12
// converts _Float16 one element at a time ("no vectype" for HFmode without
// AVX512-FP16), which would keep the whole kernel loop scalar. A 16-bit
// output stored from its array, away from the loop's arithmetic, takes one
// instruction per vector instead where the CPU has it (fj_store_span in
// fj_kernel.h): f16 F16C's vcvtps2ph, 0.039 ns per element against these
// helpers' 0.35 on an Intel Xeon, and bf16 AVX512-BF16's vcvtneps2bf16.
//
// Header-only: embedded as text into JIT-compiled translation units
// (after fj_bits.h; the embedding drops the #include of it).
#pragma once

#include "fj_bits.h"

#include <cstdint>
#include <cstring>


// c ? a : b on bit patterns, without a branch: a ?: here would be a branch
// in GCC's IR until late, and float arithmetic around it (the conversions'
// own, or the kernel's) can then be copied into its arms and keep the loop
// from vectorising (see fj_detail_select in fj_math.h).
static inline uint32_t fj_detail_select_bits(bool c, uint32_t a, uint32_t b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(c);
  return (a & mask) | (b & ~mask);
}

struct fj_f16 {
  uint16_t bits;
};
struct fj_bf16 {
  uint16_t bits;
};

// IEEE binary16 <-> float as bit patterns. Written as selects between values
// computed for every case, so the compiler emits blends.
static inline float fj_half_bits_to_float(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const int32_t em = static_cast<int32_t>(h & 0x7fffu);  // exponent and mantissa
  // Normal: move the 10 mantissa bits to the top of float's 23 and rebias the
  // exponent from 15 to 127 (add 112 << 23).
  uint32_t bits = (static_cast<uint32_t>(em) << 13) + 0x38000000u;
  // Infinity / NaN (exponent 31): exponent 255, payload kept, as dtype.cpp.
  bits = fj_detail_select_bits(em >= 0x7c00, bits + 0x38000000u, bits);
  // Zero / subnormal: mantissa * 2^-24, exact (an integer below 2^10).
  const float sub = static_cast<float>(em) * 0x1p-24f;
  bits = fj_detail_select_bits(em < 0x0400, fj_float_as_bits(sub), bits);
  return fj_bits_as_float(bits | sign);
}

static inline uint16_t fj_float_to_half_bits(float f) {
  const uint32_t x = fj_float_as_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs_bits = x & 0x7fffffffu;
  const int32_t a = static_cast<int32_t>(abs_bits);
  // Normal result: rebias the exponent (127 -> 15) and round the mantissa from
  // 23 to 10 bits to nearest even; a carry out of the mantissa correctly bumps
  // the exponent (up to infinity at the top).
  uint32_t m = abs_bits - 0x38000000u;
  m = (m + 0xfffu + ((m >> 13) & 1u)) >> 13;
  // Subnormal or zero result (|f| < 2^-14): |f| in units of 2^-24 rounded to
  // nearest even. Adding 0.5 does that rounding in hardware: 0.5 + |f| lies in
  // [0.5, 1) where a float's spacing is exactly 2^-24, so the low bits of the
  // sum are the rounded count (1024 when it rounds up to the smallest normal).
  const uint32_t sub = fj_float_as_bits(fj_bits_as_float(abs_bits) + 0.5f) - 0x3f000000u;
  uint32_t r = fj_detail_select_bits(a < 0x38800000, sub, m);
  r = fj_detail_select_bits(a >= 0x477ff000, 0x7c00u, r);  // rounds above 65504: infinity (infinity included)
  r = fj_detail_select_bits(a > 0x7f800000, 0x7e00u, r);   // NaN: the quiet NaN dtype.cpp makes
  return static_cast<uint16_t>(r | sign);
}

static inline float fj_to_float(float x) { return x; }

static inline float fj_bf16_bits_to_float(uint32_t b) { return fj_bits_as_float(b << 16); }
static inline float fj_to_float(fj_bf16 b) { return fj_bf16_bits_to_float(b.bits); }

static inline uint16_t fj_float_to_bf16_bits(float f) {
  const uint32_t x = fj_float_as_bits(f);
  // Round to nearest even on the 16 bits dropped; an overflow carries into
  // the exponent and gives infinity, as it should.
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  // NaN: keep sign and top payload, set the quiet bit (what dtype.cpp does).
  const uint32_t nan = (x >> 16) | 0x40u;
  return static_cast<uint16_t>(fj_detail_select_bits((x & 0x7fffffffu) > 0x7f800000u, nan, rounded));
}

static inline float fj_to_float(fj_f16 h) { return fj_half_bits_to_float(h.bits); }

// fj_from_float<T>(x): x rounded to T. In an unnamed namespace so that JIT'd
// shared objects export no symbols for it (the functions above are static).
namespace {
template <typename T>
inline T fj_from_float(float x);
template <>
inline float fj_from_float<float>(float x) {
  return x;
}
template <>
inline fj_f16 fj_from_float<fj_f16>(float x) {
  return fj_f16{fj_float_to_half_bits(x)};
}
template <>
inline fj_bf16 fj_from_float<fj_bf16>(float x) {
  return fj_bf16{fj_float_to_bf16_bits(x)};
}
}  // namespace

// Rounding an f32 value to a storage type and back: what `cast` means.
static inline float fj_round_f32(float x) { return x; }
static inline float fj_round_f16(float x) { return fj_to_float(fj_from_float<fj_f16>(x)); }
static inline float fj_round_bf16(float x) { return fj_to_float(fj_from_float<fj_bf16>(x)); }
