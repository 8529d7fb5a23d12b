// fusejit CPU helpers: the f32 functions the op table's code expressions name
// (src/ir/ops.def), the CPU counterpart of codegen/cuda/fj_math.cuh (same
// names, same semantics). NaN propagates as in PyTorch: maximum, minimum and
// relu of NaN are NaN.
//
// Generated CPU kernels call these inside plain loops over float arrays,
// compiled with -O3 -march=native -fno-math-errno (no -ffast-math), and GCC
// or Clang must auto-vectorise those loops. So every function here is inline,
// branch-free (both sides of a choice are computed and fj_detail_select picks
// one) and calls no libm function except sqrt and fabs, which vectorise. The
// transcendental functions are our own: range reduction plus polynomials
// fitted by scripts/fit_cpu_math.py (near-minimax relative error by Lawson's
// algorithm in 50-digit arithmetic; float coefficients rounded one at a time
// with refits) or, in double, Taylor series. Accuracy, measured by
// tests/codegen/cpu_helpers_test.cpp as the distance in ulps from the double
// precision result rounded to float, is given on each function.
//
// Where the target has an FMA instruction, polynomials and reductions use it
// explicitly (__builtin_fma, inlined under -fno-math-errno), so results do not
// depend on -ffp-contract and the backend's -ffp-contract=off costs no speed;
// without one they use a * b + c. Every step that needs an exact product is
// exact either way, and the accuracy bounds below hold for both.
//
// gelu_tanh and pow compute in double internally: that is what makes them
// accurate to an ulp (see there), and double arithmetic vectorises too, at
// half the lanes.
//
// Header-only: embedded as text into JIT-compiled translation units
// (after fj_bits.h; the embedding drops the #include of it).
#pragma once

#include "fj_bits.h"

#include <cstdint>
#include <cstring>

// Compiler builtins rather than <cmath> and <limits>: they are the same
// operations (inlined under -fno-math-errno), and parsing <cmath> was over
// half of each kernel's compile time.
#define FJ_INFINITY (__builtin_inff())
#define FJ_NAN (__builtin_nanf(""))
static inline float fj_detail_fabs(float x) { return __builtin_fabsf(x); }
static inline double fj_detail_fabs(double x) { return __builtin_fabs(x); }


static inline uint64_t fj_detail_double_as_bits(double x) {
  uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
static inline double fj_detail_bits_as_double(uint64_t u) {
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// c ? a : b, without a branch. A plain ?: on floats is a branch in GCC's IR
// until if-conversion, which happens late; before that, partial redundancy
// elimination copies the arithmetic that follows the join into both arms
// (folding it where an arm is a constant), and if-conversion then refuses the
// arms because, under the default -ftrapping-math, a floating-point operation
// may not be executed speculatively: the loop stays scalar ("control flow in
// loop"). Selecting bits with a mask has no branch to copy into, and becomes
// a compare plus a blend in vector code. For the same reason conditions are
// combined with & and |, never the short-circuiting && and ||.
static inline float fj_detail_select(bool c, float a, float b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(c);
  return fj_bits_as_float((fj_float_as_bits(a) & mask) | (fj_float_as_bits(b) & ~mask));
}
static inline double fj_detail_select_d(bool c, double a, double b) {
  const uint64_t mask = 0ull - static_cast<uint64_t>(c);
  return fj_detail_bits_as_double((fj_detail_double_as_bits(a) & mask) | (fj_detail_double_as_bits(b) & ~mask));
}

#if defined(__FMA__) || defined(__FP_FAST_FMAF) || defined(__ARM_FEATURE_FMA)
static inline float fj_detail_fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
static inline double fj_detail_fma(double a, double b, double c) { return __builtin_fma(a, b, c); }
// The rounding error of sq = x * x: x^2 = sq + the result, exactly.
static inline float fj_detail_square_error(float x, float sq) { return __builtin_fmaf(x, x, -sq); }
#else
static inline float fj_detail_fma(float a, float b, float c) { return a * b + c; }
static inline double fj_detail_fma(double a, double b, double c) { return a * b + c; }
// Dekker's product: x = hi + lo, each half of at most 12 significant bits,
// so every product below is exact, and so are the sums (barring underflow,
// for |x| < 2^-60, where the error is below any result it feeds).
static inline float fj_detail_square_error(float x, float sq) {
  const float hi = fj_bits_as_float(fj_float_as_bits(x) & 0xfffff000u);
  const float lo = x - hi;
  return ((hi * hi - sq) + 2.0f * hi * lo) + lo * lo;
}
#endif

// c0 + x (c1 + x (c2 + ...)): Horner's rule with fused multiply-adds.
template <typename T>
static inline T fj_detail_horner(T, T c0) {
  return c0;
}
template <typename T, typename... Rest>
static inline T fj_detail_horner(T x, T c0, Rest... rest) {
  return fj_detail_fma(fj_detail_horner(x, rest...), x, c0);
}

// ---------------------------------------------------------------------------
// Simple functions: correctly rounded (one IEEE operation each, or two for
// rsqrt).

static inline float fj_abs(float x) { return __builtin_fabsf(x); }
static inline float fj_sqrt(float x) { return __builtin_sqrtf(x); }
// 1 / sqrt(x) with two correctly rounded operations (<= 1 ulp), never the
// 12-bit rsqrtps estimate (the compiler may not use it without -ffast-math).
// rsqrt(+0) = +inf, rsqrt(-0) = -inf, as 1.0 / std::sqrt(x).
static inline float fj_rsqrt(float x) { return 1.0f / __builtin_sqrtf(x); }
// The same where x is known to be at least FLT_MIN (ir/value_bounds.h): the
// GPU takes a cheaper instruction there; a CPU has nothing cheaper to take.
static inline float fj_rsqrt_normal(float x) { return fj_rsqrt(x); }
static inline float fj_reciprocal(float x) { return 1.0f / x; }
// NaN -> NaN; -0 -> +0 (the reference's x > 0 ? x : 0).
static inline float fj_relu(float x) { return fj_detail_select(!(x <= 0.0f), x, 0.0f); }
// NaN if either operand is NaN (PyTorch), else the reference's a > b ? a : b
// (so maximum(-0, +0) = +0 and maximum(+0, -0) = -0, as in the reference).
static inline float fj_maximum(float a, float b) { return fj_detail_select((a > b) | (a != a), a, b); }
static inline float fj_minimum(float a, float b) { return fj_detail_select((a < b) | (a != a), a, b); }

// A vector of floats, the lanes of a reduction's accumulator (fj_lanes in
// fj_kernel.h). GCC's vector extension: the operators act lane by lane and
// the variable lives in a register, where a float array indexed inside a
// vectorized loop lived on the stack. As wide as the vectors the compiler
// vectorizes loops with: the lanes come from a block the vectorized loop
// just computed, and with equal widths the compiler passes them over in
// registers. With 32-byte lanes beside 64-byte loop vectors (tried on an
// AMD CPU) they went through the stack and the LayerNorm row kernel took
// 25 us instead of 21. fusejit compiles with -mprefer-vector-width=512
// wherever AVX-512F is on (host_compiler.cpp), so 64 bytes there; a
// kernel compiled by hand without that flag loses time, never bits.
#if defined(__AVX512F__)
typedef float fj_vec __attribute__((vector_size(64)));
#elif defined(__AVX__)
typedef float fj_vec __attribute__((vector_size(32)));
#else
typedef float fj_vec __attribute__((vector_size(16)));
#endif
constexpr int kFjVecLanes = static_cast<int>(sizeof(fj_vec) / sizeof(float));
// x in every lane. x - (+0) is x for every float (-0 and NaN included), and
// compilers make it one broadcast; a loop over the lanes became a masked
// broadcast per lane.
static inline fj_vec fj_vec_splat(float x) {
  const fj_vec zero = {};
  return x - zero;
}
// a * b + c rounded once where the CPU has FMA (the matmul's inner step),
// whatever -ffp-contract says: the compiler never fuses behind the
// program's back, the program asks here.
static inline fj_vec fj_vec_fma(fj_vec a, fj_vec b, fj_vec c) {
#if defined(__clang__) && defined(__FMA__)
#pragma clang fp contract(fast)
  return a * b + c;
#elif defined(__AVX512F__) && !defined(__clang__)
  return __builtin_ia32_vfmaddps512_mask(a, b, c, static_cast<unsigned short>(0xffff), 4);
#elif defined(__FMA__) && defined(__AVX__) && !defined(__clang__)
  return __builtin_ia32_vfmaddps256(a, b, c);
#elif defined(__FMA__) && !defined(__clang__)
  return __builtin_ia32_vfmaddps(a, b, c);
#else
  return a * b + c;
#endif
}
// The float overloads above, lane by lane: a comparison gives a lane mask
// of all-ones or zeros, and the bits are selected through it (`?:` on
// vectors needs clang 10 or later).
typedef int fj_vec_mask __attribute__((vector_size(sizeof(fj_vec))));
static inline fj_vec fj_vec_select(fj_vec_mask m, fj_vec a, fj_vec b) {
  return (fj_vec)(((fj_vec_mask)a & m) | ((fj_vec_mask)b & ~m));
}
static inline fj_vec fj_maximum(fj_vec a, fj_vec b) { return fj_vec_select((a > b) | (a != a), a, b); }
static inline fj_vec fj_minimum(fj_vec a, fj_vec b) { return fj_vec_select((a < b) | (a != a), a, b); }

// ---------------------------------------------------------------------------
// Building blocks in float.

// x_nonneg with the sign of s (s's sign bit ORed in).
static inline float fj_detail_with_sign_of(float x_nonneg, float s) {
  return fj_bits_as_float(fj_float_as_bits(x_nonneg) | (fj_float_as_bits(s) & 0x80000000u));
}

// 2^n for n in [-126, 127], from its bits.
static inline float fj_detail_pow2i(int32_t n) { return fj_bits_as_float(static_cast<uint32_t>(n + 127) << 23); }

// v * 2^n for n in [-252, 252] with a single rounding: two factors that are
// each a normal float. Wherever n is nonzero here, |v| is in [2^-7, 2^8] and
// n in [-174, 145], so the first product is a normal float, exact, and only
// the second can round (into the subnormal range, or to infinity).
static inline float fj_detail_scale2(float v, int32_t n) {
  const int32_t n1 = n / 2;
  return (v * fj_detail_pow2i(n1)) * fj_detail_pow2i(n - n1);
}

// exp(x) = (1 + s) * 2^n: returns s in about [-0.293, 0.415] and sets n.
// x is clamped to [-120, 100], beyond which exp over- or underflows for every
// caller; NaN passes through the clamps (they compare false) and gives NaN.
// Callers that multiply exp by something can fold 1 + s into that product
// and save a rounding.
static inline float fj_detail_exp_reduce(float x, int32_t& n) {
  x = fj_detail_select(x < -120.0f, -120.0f, x);
  x = fj_detail_select(x > 100.0f, 100.0f, x);
  // n = round(x / ln 2): adding 1.5 * 2^23 rounds to an integer (the float
  // spacing there is 1), read back from the low bits of t, so no
  // float-to-int conversion (undefined for NaN) is needed.
  const float kShifter = 0x1.8p23f;
  const float t = fj_detail_fma(x, 0x1.715476p+0f, kShifter);  // 1 / ln 2
  const float nf = t - kShifter;
  n = static_cast<int32_t>(fj_float_as_bits(t) - fj_float_as_bits(kShifter));
  // r = x - n ln 2 (Cody-Waite): ln2_hi has 16 significant bits, so
  // nf * ln2_hi is exact (|n| <= 174) and so is x - nf * ln2_hi (Sterbenz),
  // fused or not; ln2_lo = ln 2 - ln2_hi rounded to float.
  const float r = fj_detail_fma(-nf, 0x1.7f7d1cp-20f, fj_detail_fma(-nf, 0x1.62e4p-1f, x));
  // exp(r) - 1 = r + r^2 Q(r) on |r| <= 0.3467, Q of degree 4 (fit "exp":
  // relative error of exp 2^-28.3 with these float coefficients).
  const float q = fj_detail_horner(r, 0x1.fffffcp-2f, 0x1.555492p-3f, 0x1.5558b0p-5f, 0x1.12398ap-7f, 0x1.6a4d6cp-10f);
  return fj_detail_fma(r * r, q, r);
}

// erf(a) / a - 1 = P(a^2) for |a| < 1, degree 6 (fit "erf": relative error
// of erf 2^-29.4). Writing erf(a) = a + a P keeps the rounding of the
// constant term (2/sqrt(pi) - 1) small against the result.
static inline float fj_detail_erf_small_p(float y) {
  return fj_detail_horner(y, 0x1.06eba8p-3f, -0x1.81273ep-2f, 0x1.ce2ce6p-4f, -0x1.b7f71ap-6f, 0x1.53f226p-8f,
                          -0x1.a35186p-11f, 0x1.4772cp-14f);
}

// ---------------------------------------------------------------------------
// Building blocks in double (for gelu and pow).

// exp(x) in double, relative error below 2^-36 (plenty for a float result),
// for x clamped to [-708, 708] so that the result is a normal double.
// n = round(x / ln 2) as in the float version; r = x - n ln 2 with one double
// constant (its rounding costs < 2^-44 absolute for |n| <= 1022);
// exp(r) = Taylor series to r^9 (r^10/10! < 2^-37 for |r| <= 0.3466).
static inline double fj_detail_exp_d(double x) {
  x = fj_detail_select_d(x < -708.0, -708.0, x);
  x = fj_detail_select_d(x > 708.0, 708.0, x);
  const double kShifter = 0x1.8p52;
  const double t = fj_detail_fma(x, 0x1.71547652b82fep+0, kShifter);  // 1 / ln 2
  const double nf = t - kShifter;
  const uint64_t n = fj_detail_double_as_bits(t) - fj_detail_double_as_bits(kShifter);  // two's complement
  const double r = fj_detail_fma(-nf, 0x1.62e42fefa39efp-1, x);                       // ln 2
  const double p = fj_detail_horner(r, 1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040,
                                    1.0 / 40320, 1.0 / 362880);
  return p * fj_detail_bits_as_double((n + 1023) << 52);
}

// log(x) in double, relative error about 2^-44, for positive finite normal x.
// x = 2^e m with m in [sqrt(1/2), sqrt(2)) (adding 1 - sqrt(1/2) in bits
// carries into the exponent exactly when m's mantissa is >= sqrt(2)'s);
// log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716: the series
// 2s (1 + s^2/3 + ... + s^14/15) leaves s^16/17 < 2^-45.
static inline double fj_detail_log_d(double x) {
  const uint64_t kSqrtHalf = 0x3fe6a09e667f3bcdull;
  const uint64_t ix = fj_detail_double_as_bits(x) + (0x3ff0000000000000ull - kSqrtHalf);
  // The exponent from the high word, as int32, which converts to double
  // without AVX-512 (int64 -> double does not vectorise on AVX2).
  const int32_t e = static_cast<int32_t>(static_cast<uint32_t>(ix >> 32) >> 20) - 1023;
  const double m = fj_detail_bits_as_double((ix & 0x000fffffffffffffull) + kSqrtHalf);
  const double s = (m - 1.0) / (m + 1.0);
  const double z = s * s;
  const double series = fj_detail_horner(z, 1.0, 1.0 / 3, 1.0 / 5, 1.0 / 7, 1.0 / 9, 1.0 / 11, 1.0 / 13, 1.0 / 15);
  return fj_detail_fma(static_cast<double>(e), 0x1.62e42fefa39efp-1, 2.0 * s * series);
}

// ---------------------------------------------------------------------------
// Transcendental functions. "ulp" below: the largest distance, in units in
// the last place, from the double-precision result rounded to float, over all
// 2^32 floats (checked once with the JIT flags plus -ffp-contract=off, and
// over every 7th float without FMA; the test samples them).

// exp: <= 1 ulp. exp(+inf) = +inf, exp(-inf) = 0, overflow to +inf above
// 88.72, gradual underflow (subnormal results rounded once) below -87.34.
static inline float fj_exp(float x) {
  int32_t n;
  const float s = fj_detail_exp_reduce(x, n);
  return fj_detail_scale2(1.0f + s, n);
}

// log: <= 1 ulp. log(+-0) = -inf, log(x < 0) = NaN, log(+inf) = +inf,
// subnormal x handled.
static inline float fj_log(float x) {
  // Subnormal x: scale into the normal range first.
  const bool sub = x < 0x1p-126f;
  const float xs = fj_detail_select(sub, x * 0x1p23f, x);
  // x = 2^e m with m in [sqrt(1/2), sqrt(2)): adding (1.0f - sqrt(1/2)) in
  // bits carries into the exponent exactly when the mantissa is >= sqrt(2)'s.
  const uint32_t ix = fj_float_as_bits(xs) + (0x3f800000u - 0x3f3504f3u);
  const int32_t e = static_cast<int32_t>(ix >> 23) - 127 - (sub ? 23 : 0);
  const float m = fj_bits_as_float((ix & 0x007fffffu) + 0x3f3504f3u);
  const float f = m - 1.0f;  // exact (Sterbenz)
  // log(1 + f) = f + f^2 Q(f), f in [-0.293, 0.415), Q of degree 8 (fit "log":
  // relative error 2^-27.4).
  const float q = fj_detail_horner(f, -0x1p-1f, 0x1.555554p-2f, -0x1.000226p-2f, 0x1.99a01ep-3f, -0x1.54728cp-3f,
                                   0x1.22d8fap-3f, -0x1.0d81f6p-3f, 0x1.056018p-3f, -0x1.38cebep-4f);
  const float fe = static_cast<float>(e);
  // e ln 2 + log(1 + f), ln 2 split as in exp: fe * ln2_hi is exact.
  const float r = fj_detail_fma(fe, 0x1.62e4p-1f, f + fj_detail_fma(f * f, q, fe * 0x1.7f7d1cp-20f));
  // x <= 0 or NaN: -inf for +-0, NaN otherwise; +inf stays +inf.
  const float special = fj_detail_select(x == 0.0f, -FJ_INFINITY, FJ_NAN);
  return fj_detail_select(!(x > 0.0f), special, fj_detail_select(x == FJ_INFINITY, x, r));
}

// tanh: <= 1 ulp. tanh(+-inf) = +-1, tanh(+-0) = +-0 (computed on |x|, the
// sign put back last).
// |x| < 0.875: x + x^3 P(x^2), P of degree 6 (fit "tanh": 2^-30.3).
// Beyond: 1 - 2 / (exp(2|x|) + 1); tanh(0.875) > 0.7 keeps the errors of exp
// and of the division small in the result. |x| is clamped to 10, where tanh
// already rounds to 1.
static inline float fj_tanh(float x) {
  const float a = fj_detail_fabs(x);
  const float y = a * a;
  const float p = fj_detail_horner(y, -0x1.55555p-2f, 0x1.110fa8p-3f, -0x1.b9da52p-5f, 0x1.6376eep-6f, -0x1.11023p-7f,
                                   0x1.5b6d5ap-9f, -0x1.f9b7d6p-12f);
  const float small = fj_detail_fma(a, y * p, a);
  const float ac = fj_detail_select(a > 10.0f, 10.0f, a);
  int32_t n;
  const float s = fj_detail_exp_reduce(2.0f * ac, n);                                  // n in [1, 29] here
  const float big = 1.0f - 2.0f / fj_detail_fma(1.0f + s, fj_detail_pow2i(n), 1.0f);
  return fj_detail_with_sign_of(fj_detail_select(a < 0.875f, small, big), x);
}

// G(t) = erfcx(a) (a + 2), t = (a - 2) / (a + 2), a >= 0, so that
// erfc(a) = exp(-a^2) G(t) / (a + 2): degree 11 (fit "erfc": relative error
// 2^-25.8 over a in [0, 10.25]). Shared by erf and gelu.
static inline float fj_detail_erfcx_g(float t) {
  return fj_detail_horner(t, 0x1.058672p+0f, -0x1.5fd386p-1f, 0x1.1e2d88p-2f, -0x1.2a892ep-5f, -0x1.6012e6p-6f,
                          0x1.a8d52cp-8f, 0x1.868b08p-9f, -0x1.c8d32ap-11f, -0x1.bb8676p-12f, 0x1.371da2p-13f,
                          -0x1.c37ab4p-15f, -0x1.76509ap-14f);
}

// erf: <= 1 ulp. erf(+-inf) = +-1, erf(+-0) = +-0 (computed on |x|).
// |x| < 1: x + x P(x^2). Beyond: 1 - erfc(|x|) with
//   erfc(a) = exp(-a^2) G(t) / (a + 2),  t = (a - 2) / (a + 2)
// (fj_detail_erfcx_g). erfc's error (a few 2^-24 relative) is
// damped by erfc / erf < 0.19 here, which is also why a^2 need not be exact.
// |x| is clamped to 4, where erf already rounds to 1.
static inline float fj_erf(float x) {
  const float a = fj_detail_fabs(x);
  const float small = fj_detail_fma(a, fj_detail_erf_small_p(a * a), a);
  const float ac = fj_detail_select(a > 4.0f, 4.0f, a);
  const float inv = 1.0f / (ac + 2.0f);
  const float t = (ac - 2.0f) * inv;
  const float g = fj_detail_erfcx_g(t);
  int32_t n;
  const float s = fj_detail_exp_reduce(-(ac * ac), n);  // n in [-23, -1] here
  const float gi = g * inv;
  const float erfc = fj_detail_fma(gi, s, gi) * fj_detail_pow2i(n);
  return fj_detail_with_sign_of(fj_detail_select(a < 1.0f, small, 1.0f - erfc), x);
}

// sigmoid = 1 / (1 + exp(-x)): <= 2 ulp, subnormal results included.
// sigmoid(-inf) = 0, sigmoid(+inf) = 1. With e = exp(-|x|) in (0, 1] nothing
// overflows: x >= 0: 1 / (1 + e); x < 0: e / (1 + e).
static inline float fj_sigmoid(float x) {
  const float e = fj_exp(-fj_detail_fabs(x));
  return fj_detail_select(x >= 0.0f, 1.0f, e) / (1.0f + e);
}

// silu = x / (1 + exp(-x)) = x sigmoid(x): <= 3 ulp, subnormal results
// included (it underflows below x = -108.7). With e = exp(-|x|) = (1 + s) 2^n:
//   x >= 0: x / (1 + e);   x < 0: x e / (1 + e) = (x (1 + s) / (1 + e)) 2^n,
// scaling by 2^n last so that results near the subnormal range keep their
// precision. silu(+inf) = +inf; silu(-0) = -0; silu(x < -120) = x * 0, which
// is -0, and NaN for x = -inf: what the double formula gives (-inf / inf).
static inline float fj_silu(float x) {
  const bool neg = x < 0.0f;
  int32_t n;
  const float s = fj_detail_exp_reduce(-fj_detail_fabs(x), n);
  const float p = 1.0f + s;
  const float d = 1.0f + fj_detail_scale2(p, n);
  const float r = fj_detail_select(neg, fj_detail_scale2((x * p) / d, n), x / d);
  return fj_detail_select(x < -120.0f, x * 0.0f, r);
}

// gelu, approximate = "none": 0.5 x (1 + erf(x / sqrt 2)) = x Phi(x), in
// float (double arithmetic halves the vector lanes; this was the demo
// chain's costliest op at 3.1 ns per element, now 1.9), as
//   x < 0:   x * 0.5 erfc(a),                       a = |x| / sqrt 2
//   x >= 0:  x * (1 - 0.5 erfc(a)), or below a = 1 x * (0.5 + 0.5 erf(a))
// (erf's series: erfc's error is not damped by 1 - 0.5 erfc near 0.5), with
// erfc(a) = exp(-x^2 / 2) G(t) / (a + 2) as in fj_erf. x^2 is split into
// sq + sq_lo exactly, and exp(-x^2 / 2) = exp(-sq / 2) (1 - sq_lo / 2): an
// error of 2^-24 relative in x^2 would cost up to 44 ulp at x = -13. The
// power of two of exp is applied last so that results near the subnormal
// range keep their precision. <= 6 ulp against the exact 0.5 x erfc(-x /
// sqrt 2) everywhere, the negative tail included (the formula itself, in f32
// as the CUDA helper computes it, or even in double, loses everything there
// to the cancellation in 1 + erf). |x| is clamped to 16 for the arithmetic:
// beyond, the result is x (x > 0), or x * 0 (x < 0), which is -0, and NaN for
// x = -inf, as the formula's -inf * 0. gelu(+inf) = +inf; gelu(-0) = -0.
static inline float fj_gelu_none(float x) {
  const float xc = fj_detail_select(x < -16.0f, -16.0f, fj_detail_select(x > 16.0f, 16.0f, x));
  const float sq = xc * xc;
  const float sq_lo = fj_detail_square_error(xc, sq);  // x^2 = sq + sq_lo
  const float a = fj_detail_fabs(xc) * 0x1.6a09e6p-1f;  // 1 / sqrt 2
  const float inv = 1.0f / (a + 2.0f);
  const float t = (a - 2.0f) * inv;
  const float g = fj_detail_erfcx_g(t);
  int32_t n;
  const float s = fj_detail_exp_reduce(-0.5f * sq, n);  // n in [-173, 0] (clamped at -120)
  // 0.5 erfc(a) = c 2^n
  const float half_gi = 0.5f * (g * inv);
  const float c0 = fj_detail_fma(half_gi, s, half_gi);
  const float c = fj_detail_fma(c0, -0.5f * sq_lo, c0);
  const float neg = fj_detail_scale2(x * c, n);
  const float half_erf = 0.5f * fj_detail_fma(a, fj_detail_erf_small_p(a * a), a);
  const float pos = x * fj_detail_select(a < 1.0f, 0.5f + half_erf, 1.0f - fj_detail_scale2(c, n));
  return fj_detail_select(x < -16.0f, x * 0.0f, fj_detail_select(x < 0.0f, neg, pos));
}

// gelu, approximate = "none", where only f16 and bf16 values are computed
// from the result (the code generator picks it: Graph::is_16bit_gelu), in
// the CUDA helper's form: x h for x < 0 and x (1 - h) for x >= 0 with
// h = 0.5 erfc(|x| / sqrt 2) = 2^(a P(a) - 1), a = |x|. P is the CUDA
// helper's degree-6 fit over a <= 4 sqrt 2 ("gelu_16bit" in
// scripts/fit_cpu_math.py: 2^-17.5 in the exponent); 2^q is exp(q ln 2)
// through fj_detail_exp_reduce, with no division and no second polynomial:
// about half the f32 helper's time. Within 128 ulp of f32 for
// x >= -4 sqrt 2 (2^-16 relative; 105 at worst over the test's samples,
// which it is held to 110 of), 16 times below the half ulp of f16, and
// every output it reaches is judged at a 16-bit tolerance. Past the fit, as
// in the CUDA helper, the polynomial goes on: a P(a) - 1 stays at or below
// its value at 4 sqrt 2, -26.95, and falls to -inf (fj_math.cuh), so x >= 0
// gives x exactly and x < 0 a negative number of at most 4.4e-8 in
// magnitude, within 1% of x Phi(x) down to x = -8 (28% low at -10.7, 91% at
// -12.7: the polynomial was fitted only up to 4 sqrt 2), and -0 past
// x = -12.73 (a clamp to -0 from -4 sqrt 2 on cost 80 bf16 inputs in
// [-8.3, -5.7] all their digits). gelu(+inf) = +inf, gelu(-inf) = NaN (the
// formula's -inf * 0), -0 -> -0.
static inline float fj_gelu_none_16bit(float x) {
  const float a = fj_detail_fabs(x);
  const float p = fj_detail_horner(a, -0x1.26b5dap+0f, -0x1.d58e68p-2f, -0x1.b95c2cp-5f, 0x1.15781ap-7f,
                                   -0x1.e277e2p-11f, 0x1.f9936ap-15f, -0x1.da3b1p-20f);
  const float e = 0x1.62e430p-1f * fj_detail_fma(a, p, -1.0f);  // ln h (ln 2 times the exponent)
  int32_t n;
  const float s = fj_detail_exp_reduce(e, n);
  // Below e^-87 (about 2^-125.5; a > 12.73) h is 0, as a GPU's ex2.approx.ftz
  // makes it below 2^-126, and n, which may be below -126 there, is not used:
  // one select and one product, where scaling into the subnormal range in two
  // steps (fj_detail_scale2) made the demo's GeLU kernel 12% slower.
  const float h = fj_detail_select(e < -87.0f, 0.0f, (1.0f + s) * fj_detail_pow2i(n));
  return x * fj_detail_select(x < 0.0f, h, 1.0f - h);
}

// gelu, approximate = "tanh": 0.5 x (1 + tanh(z)), z = sqrt(2/pi) (x + 0.044715 x^3).
// Computed in double as x sigmoid(2z) (the same function, without the
// cancellation of 1 + tanh(z) for x < 0), with e = exp(-|2z|) in (0, 1]:
// 2z >= 0: x / (1 + e); 2z < 0: x e / (1 + e). z in double matters: the
// result's relative error is 2|z| times z's. <= 1 ulp against x sigmoid(2z)
// in double. gelu_tanh(+inf) = +inf; gelu_tanh(-inf) = NaN (the formula's
// -inf * 0); large negative x gives -0, as the formula.
static inline float fj_gelu_tanh(float x) {
  const double xd = x;
  const double s = 1.5957691216057308 * (xd + 0.044715 * (xd * xd * xd));  // 2 sqrt(2/pi) (x + 0.044715 x^3)
  const double e = fj_detail_exp_d(-fj_detail_fabs(s));
  const double r = xd * fj_detail_select_d(s >= 0.0, 1.0, e) / (1.0 + e);
  // Below -708 exp_d has clamped: the result underflows anyway (x * 0 is -0,
  // or NaN for x = -inf, as the formula).
  return static_cast<float>(fj_detail_select_d(s < -708.0, xd * 0.0, r));
}

// pow(a, b) with C's (and std::pow's) special cases, vectorisable:
// |a|^b = exp(b log|a|) in double (log_d to 2^-44, exp_d to 2^-36, so the
// float result is within 1 ulp: correctly rounded except within ~2^-12 ulp
// of a tie), then:
//   pow(a, +-0) = 1 and pow(1, b) = 1, even for NaN; pow(-1, +-inf) = 1;
//   otherwise NaN in gives NaN out;
//   a < 0 finite and b not an integer: NaN;
//   a with the sign bit set (-0 and -inf included) and b an odd integer:
//   the result is negative;
//   zeros, infinities and overflow fall out of log(0) = -inf, log(inf) = inf
//   and exp's clamps (double exp(+-708) is far outside float's range).
static inline float fj_pow(float a, float b) {
  const double ad = fj_detail_fabs(static_cast<double>(a));
  // log|a| for finite nonzero a (every float is a normal double); 0 and inf
  // (and NaN, handled below) by select. The log_d argument is kept valid.
  const bool normal = (ad > 0.0) & (ad < 0x1p200);
  const double l = fj_detail_log_d(fj_detail_select_d(normal, ad, 1.0));
  const double log_a = fj_detail_select_d(normal, l, fj_detail_select_d(ad == 0.0, -__builtin_inf(), __builtin_inf()));
  const double y = static_cast<double>(b) * log_a;
  // exp_d clamps to [-708, 708]; y = -inf, +inf saturate to 0 and inf after
  // rounding to float. (y is NaN for b = +-inf with |a| = 1, handled below.)
  const float mag = static_cast<float>(fj_detail_exp_d(y));
  // Is b an integer, and odd? Every |b| >= 2^24 is an even integer; below,
  // truncate (b clamped first so that the conversion is defined).
  const float ab = fj_detail_fabs(b);
  const bool big = ab >= 0x1p24f;  // also true for inf; false for NaN
  const int32_t k = static_cast<int32_t>(fj_detail_select(ab < 0x1p24f, ab, 0.0f));
  const bool small_integer = static_cast<float>(k) == ab;  // false when big (k = 0 then)
  const bool integer = big | small_integer;
  // a's sign bit where k is odd (k << 31 is the parity as a sign bit; an
  // integer mask rather than a bool, which GCC would narrow to one bit and
  // then fail to vectorise).
  const uint32_t sign = fj_float_as_bits(a) & (static_cast<uint32_t>(k) << 31);
  const float signed_mag = fj_detail_select(small_integer, fj_bits_as_float(fj_float_as_bits(mag) | sign), mag);
  float r = fj_detail_select((a < 0.0f) & (a > -FJ_INFINITY) & !integer, FJ_NAN, signed_mag);
  r = fj_detail_select((a != a) | (b != b), FJ_NAN, r);
  // pow(-1, +-inf) = 1; pow(1, anything) = 1; pow(anything, +-0) = 1.
  r = fj_detail_select((a == -1.0f) & (ab == FJ_INFINITY), 1.0f, r);
  return fj_detail_select((a == 1.0f) | (b == 0.0f), 1.0f, r);
}
