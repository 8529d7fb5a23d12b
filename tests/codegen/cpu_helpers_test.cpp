// The CPU kernels' helper headers (src/codegen/cpu/fj_math.h, fj_types.h,
// fj_philox.h), checked here twice:
//  - included into this test (default flags, no FMA): accuracy of every math
//    function in ulps against double precision, IEEE special values,
//    conversions bit for bit against ir/dtype, dropout bit for bit against
//    ir/philox;
//  - compiled with the host compiler exactly as the CPU backend compiles
//    generated kernels (-O3 -march=native, no -ffast-math): every loop over
//    them must be reported vectorised, and the compiled (vectorised, FMA)
//    code must pass the same accuracy checks. That test also prints
//    throughput (a report, not an assertion).
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <numbers>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codegen/cpu/fj_math.h"
#include "codegen/cpu/fj_philox.h"
#include "codegen/cpu/fj_types.h"
#include "cost/host_cpu.h"
#include "ir/dtype.h"
#include "ir/op_table.h"
#include "ir/philox.h"
#include "runtime/host_compiler.h"
#include "support/run_command.h"

namespace fusejit {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

std::string hex(float f) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a (%.9g)", static_cast<double>(f), static_cast<double>(f));
  return buf;
}

// Floats mapped to integers in order (-0 and +0 both to 0), so that the
// difference of two is their distance in ulps.
int64_t ordered(float f) {
  const uint32_t u = bits_of(f);
  return (u & 0x80000000u) ? -static_cast<int64_t>(u & 0x7fffffffu) : static_cast<int64_t>(u);
}
int64_t ulp_distance(float a, float b) {
  const int64_t d = ordered(a) - ordered(b);
  return d < 0 ? -d : d;
}

// ---------------------------------------------------------------------------
// Inputs: dense over [-20, 20], log-spaced magnitudes from the smallest
// subnormal to FLT_MAX (both signs), random bit patterns, and the values
// where the implementations switch pieces or clamp.
const std::vector<float>& sample_inputs() {
  static const std::vector<float> xs = [] {
    std::vector<float> v;
    const int dense = 2'000'000;
    for (int i = 0; i <= dense; ++i) v.push_back(static_cast<float>(-20.0 + 40.0 * i / dense));
    std::mt19937 rng(20240601);
    for (int e = -149; e <= 127; ++e) {
      for (int k = 0; k < 256; ++k) {
        const float m = 1.0f + static_cast<float>(k) / 256.0f + std::ldexp(static_cast<float>(rng() % 32768), -23);
        const float x = std::ldexp(m, e);
        if (std::isfinite(x)) {
          v.push_back(x);
          v.push_back(-x);
        }
      }
    }
    for (int i = 0; i < 1'000'000; ++i) v.push_back(float_of(rng()));
    const float edges[] = {0.0f,    -0.0f,   kInf,   -kInf,   kNaN,    -kNaN,   std::numeric_limits<float>::max(),
                           std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(), 88.72283f,
                           88.7228394f, -87.33655f, -103.972f, -103.97208f, -104.0f, 0.875f, 1.0f, 4.0f, 10.0f,
                           14.5f, 20.0f, 100.0f, 120.0f, 108.7f, 1.4142135f, 0.70710677f, 3.9195f, 9.0f};
    for (float e : edges) {
      for (float s : {1.0f, -1.0f}) {
        const float x = s * e;
        v.push_back(x);
        v.push_back(std::nextafter(x, kInf));
        v.push_back(std::nextafter(x, -kInf));
      }
    }
    return v;
  }();
  return xs;
}

struct UlpResult {
  int64_t worst = 0;
  float worst_x = 0, worst_got = 0, worst_want = 0;
  int64_t nan_mismatches = 0;
  std::string first_nan_mismatch;
};

// got[i] against want(xs[i]) in double, rounded to float. NaN must match NaN;
// otherwise the distance in ulps (infinity is one ulp beyond FLT_MAX).
UlpResult compare_ulps(const std::vector<float>& xs, const std::vector<float>& got,
                       const std::function<double(double)>& want) {
  UlpResult r;
  for (size_t i = 0; i < xs.size(); ++i) {
    const float w = static_cast<float>(want(static_cast<double>(xs[i])));
    const float g = got[i];
    if (std::isnan(w) || std::isnan(g)) {
      if (std::isnan(w) != std::isnan(g) && r.nan_mismatches++ == 0) {
        r.first_nan_mismatch = "x = " + hex(xs[i]) + ": got " + hex(g) + ", want " + hex(w);
      }
      continue;
    }
    const int64_t d = ulp_distance(g, w);
    if (d > r.worst) {
      r.worst = d;
      r.worst_x = xs[i];
      r.worst_got = g;
      r.worst_want = w;
    }
  }
  return r;
}

void expect_within(const char* name, const UlpResult& r, int64_t bound) {
  EXPECT_LE(r.worst, bound) << name << ": " << r.worst << " ulp at x = " << hex(r.worst_x) << ": got "
                            << hex(r.worst_got) << ", want " << hex(r.worst_want);
  EXPECT_EQ(r.nan_mismatches, 0) << name << ": NaN where the reference has none or vice versa, first at "
                                 << r.first_nan_mismatch;
}

// The double-precision references.
double gelu_exact(double x) { return 0.5 * x * std::erfc(-x / std::numbers::sqrt2); }
double gelu_tanh_z(double x) { return std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x); }
double gelu_tanh_as_sigmoid(double x) { return x / (1.0 + std::exp(-2.0 * gelu_tanh_z(x))); }

// Each unary function, its double reference and the bound its header comment
// states, in ulps.
struct UnaryCase {
  const char* name;
  float (*f)(float);
  std::function<double(double)> reference;
  int64_t bound;
};

std::vector<UnaryCase> unary_cases() {
  return {
      {"exp", fj_exp, [](double x) { return std::exp(x); }, 1},
      {"log", fj_log, [](double x) { return std::log(x); }, 1},
      {"tanh", fj_tanh, [](double x) { return std::tanh(x); }, 1},
      {"erf", fj_erf, [](double x) { return std::erf(x); }, 1},
      {"sigmoid", fj_sigmoid, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, 2},
      {"silu", fj_silu, [](double x) { return x / (1.0 + std::exp(-x)); }, 3},
      {"gelu_none", fj_gelu_none, gelu_exact, 6},
      {"gelu_tanh", fj_gelu_tanh, gelu_tanh_as_sigmoid, 1},
      {"sqrt", fj_sqrt, [](double x) { return std::sqrt(x); }, 0},
      {"rsqrt", fj_rsqrt, [](double x) { return 1.0 / std::sqrt(x); }, 1},
      {"reciprocal", fj_reciprocal, [](double x) { return 1.0 / x; }, 0},
      {"abs", fj_abs, [](double x) { return std::fabs(x); }, 0},
      {"relu", fj_relu, [](double x) { return reference::relu(x); }, 0},
  };
}

// The GeLU from which only 16-bit values are computed (fj_gelu_none_16bit):
// within 110 ulp of the exact function from x = -4 sqrt 2 up (it states 128
// and reaches 105); below, a negative number of at most 4.4e-8 in magnitude
// (never a growing x * 2^q) that stays within 1% of x Phi(x) down to x = -8;
// and the f32 helper's special values.
void expect_16bit_gelu_accurate(const std::vector<float>& xs, const std::vector<float>& got) {
  const float fit_end = -0x1.6a09e6p+2f;  // -4 sqrt 2
  std::vector<float> in_range, in_range_got;
  int64_t tail = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (xs[i] >= fit_end || std::isnan(xs[i])) {
      in_range.push_back(xs[i]);
      in_range_got.push_back(got[i]);
    } else if (xs[i] != -kInf) {
      ++tail;
      ASSERT_TRUE(got[i] <= 0.0f && got[i] >= -4.4e-8f) << "gelu_none_16bit(" << hex(xs[i]) << ") = " << hex(got[i]);
      if (xs[i] >= -8.0f) {
        const double want = gelu_exact(xs[i]);
        ASSERT_NEAR(got[i] / want, 1.0, 0.01) << "gelu_none_16bit(" << hex(xs[i]) << ") = " << hex(got[i]);
      }
    } else {
      EXPECT_TRUE(std::isnan(got[i])) << "gelu_none_16bit(-inf), the formula's -inf * 0";
    }
  }
  EXPECT_GT(tail, 100) << "the samples reach past -4 sqrt 2";
  const UlpResult r = compare_ulps(in_range, in_range_got, gelu_exact);
  expect_within("gelu_none_16bit", r, 110);
  EXPECT_GT(r.worst, 16) << "the sweep reached the negative tail";
}

TEST(CpuMath, SixteenBitGeluIsWithinItsBound) {
  const std::vector<float>& xs = sample_inputs();
  std::vector<float> got(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) got[i] = fj_gelu_none_16bit(xs[i]);
  expect_16bit_gelu_accurate(xs, got);
  EXPECT_TRUE(std::signbit(fj_gelu_none_16bit(-0.0f)));
  EXPECT_EQ(fj_gelu_none_16bit(kInf), kInf);
}

TEST(CpuMath, UlpErrorOverSampledRange) {
  const std::vector<float>& xs = sample_inputs();
  std::vector<float> got(xs.size());
  for (const UnaryCase& c : unary_cases()) {
    for (size_t i = 0; i < xs.size(); ++i) got[i] = c.f(xs[i]);
    expect_within(c.name, compare_ulps(xs, got, c.reference), c.bound);
  }
}

// gelu against the op table's own reference expressions, in ulps all the
// way down the negative tail: the reference is written without the
// cancellation of 1 + erf and 1 + tanh (ir/op_table.cpp), which once made
// it -0 where the function is about -1e-16.
TEST(CpuMath, GeluMatchesTheOpTableFormulas) {
  const std::vector<float>& xs = sample_inputs();
  for (const char* approximate : {"none", "tanh"}) {
    float (*f)(float) = std::string(approximate) == "none" ? fj_gelu_none : fj_gelu_tanh;
    int64_t failures = 0;
    std::string first;
    for (float x : xs) {
      const double want = reference::gelu(x, approximate);
      const float got = f(x);
      if (std::isnan(want) || std::isnan(got)) {
        if (std::isnan(want) != std::isnan(got) && failures++ == 0) first = hex(x);
        continue;
      }
      const float wf = static_cast<float>(want);
      const double ulp = std::isinf(wf) ? 0.0 : std::nextafter(std::fabs(wf), kInf) - std::fabs(wf);
      // One ulp beyond each function's bound in unary_cases(): want is not rounded.
      const double ulps = std::string(approximate) == "none" ? 7.0 : 2.0;
      const double tolerance = ulps * ulp;
      if (!(std::fabs(got - want) <= tolerance) && !(got == wf) && failures++ == 0) {
        first = hex(x) + ": got " + hex(got) + ", want " + std::to_string(want);
      }
    }
    EXPECT_EQ(failures, 0) << "gelu " << approximate << ", first at x = " << first;
  }
}

TEST(CpuMath, PowAgainstStdPow) {
  std::vector<float> a, b;
  const float special[] = {0.0f, -0.0f, 1.0f,  -1.0f, kInf,  -kInf, kNaN, 0.5f,  -0.5f, 2.0f,  -2.0f,  3.0f,
                           -3.0f, 0.3f, -0.3f, 1e-45f, -1e-45f, 3e38f, -3e38f, 1.0000001f, 0.99999994f, 16777216.0f,
                           -16777216.0f, 16777215.0f, -16777215.0f, 2.5f, -2.5f, 1e10f, -1e10f, 127.0f, 128.0f,
                           -149.0f, -150.0f, 0.1f, 10.0f, -7.0f, 1e-3f, 1e3f};
  for (float x : special) {
    for (float y : special) {
      a.push_back(x);
      b.push_back(y);
    }
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> base(0.0f, 4.0f), exponent(-80.0f, 80.0f), any(-30.0f, 30.0f);
  for (int i = 0; i < 1'000'000; ++i) {
    switch (i % 4) {
      case 0: a.push_back(float_of(rng())); b.push_back(float_of(rng())); break;
      case 1: a.push_back(float_of(rng())); b.push_back(static_cast<float>(static_cast<int>(rng() % 201) - 100)); break;
      case 2: a.push_back(any(rng)); b.push_back(any(rng)); break;
      default: a.push_back(base(rng)); b.push_back(exponent(rng)); break;
    }
  }
  int64_t worst = 0, nan_mismatches = 0;
  std::string where;
  for (size_t i = 0; i < a.size(); ++i) {
    const float got = fj_pow(a[i], b[i]);
    const float want = static_cast<float>(std::pow(static_cast<double>(a[i]), static_cast<double>(b[i])));
    const std::string at = "pow(" + hex(a[i]) + ", " + hex(b[i]) + "): got " + hex(got) + ", want " + hex(want);
    if (std::isnan(got) || std::isnan(want)) {
      if (std::isnan(got) != std::isnan(want) && nan_mismatches++ == 0) ADD_FAILURE() << at;
      continue;
    }
    const int64_t d = ulp_distance(got, want);
    if (d > worst) {
      worst = d;
      where = at;
    }
    // The special cases must be exact, signed zeros and infinities included.
    if (std::isinf(a[i]) || a[i] == 0.0f || std::isinf(b[i]) || b[i] == 0.0f || a[i] == 1.0f || b[i] == 1.0f) {
      EXPECT_EQ(bits_of(got), bits_of(want)) << at;
    }
  }
  EXPECT_LE(worst, 1) << where;
  EXPECT_EQ(nan_mismatches, 0);
}

TEST(CpuMath, SpecialValues) {
  auto same = [](float got, float want) {
    return std::isnan(want) ? std::isnan(got) : bits_of(got) == bits_of(want);
  };
  struct Case {
    const char* what;
    float got, want;
  };
  const float fmax = std::numeric_limits<float>::max();
  const Case cases[] = {
      {"exp(+inf)", fj_exp(kInf), kInf},
      {"exp(-inf)", fj_exp(-kInf), 0.0f},
      {"exp(NaN)", fj_exp(kNaN), kNaN},
      {"exp(89) overflows", fj_exp(89.0f), kInf},
      {"exp(fmax)", fj_exp(fmax), kInf},
      {"exp(-104) underflows", fj_exp(-104.0f), 0.0f},
      {"exp(-fmax)", fj_exp(-fmax), 0.0f},
      {"exp(-0)", fj_exp(-0.0f), 1.0f},
      {"log(+0)", fj_log(0.0f), -kInf},
      {"log(-0)", fj_log(-0.0f), -kInf},
      {"log(-1)", fj_log(-1.0f), kNaN},
      {"log(-inf)", fj_log(-kInf), kNaN},
      {"log(+inf)", fj_log(kInf), kInf},
      {"log(NaN)", fj_log(kNaN), kNaN},
      {"log(1)", fj_log(1.0f), 0.0f},
      {"tanh(+inf)", fj_tanh(kInf), 1.0f},
      {"tanh(-inf)", fj_tanh(-kInf), -1.0f},
      {"tanh(+0)", fj_tanh(0.0f), 0.0f},
      {"tanh(-0)", fj_tanh(-0.0f), -0.0f},
      {"tanh(NaN)", fj_tanh(kNaN), kNaN},
      {"erf(+inf)", fj_erf(kInf), 1.0f},
      {"erf(-inf)", fj_erf(-kInf), -1.0f},
      {"erf(+0)", fj_erf(0.0f), 0.0f},
      {"erf(-0)", fj_erf(-0.0f), -0.0f},
      {"erf(NaN)", fj_erf(kNaN), kNaN},
      {"sigmoid(-inf)", fj_sigmoid(-kInf), 0.0f},
      {"sigmoid(+inf)", fj_sigmoid(kInf), 1.0f},
      {"sigmoid(NaN)", fj_sigmoid(kNaN), kNaN},
      {"sigmoid(-0)", fj_sigmoid(-0.0f), 0.5f},
      // silu: what x / (1 + exp(-x)) gives in double.
      {"silu(-inf)", fj_silu(-kInf), static_cast<float>(-HUGE_VAL / (1.0 + std::exp(HUGE_VAL)))},
      {"silu(+inf)", fj_silu(kInf), kInf},
      {"silu(-0)", fj_silu(-0.0f), -0.0f},
      {"silu(-1000)", fj_silu(-1000.0f), -0.0f},
      {"silu(NaN)", fj_silu(kNaN), kNaN},
      {"gelu_none(-inf)", fj_gelu_none(-kInf), static_cast<float>(reference::gelu(-HUGE_VAL, "none"))},
      {"gelu_none(+inf)", fj_gelu_none(kInf), kInf},
      {"gelu_none(-0)", fj_gelu_none(-0.0f), -0.0f},
      {"gelu_none(-20)", fj_gelu_none(-20.0f), -0.0f},
      {"gelu_none(NaN)", fj_gelu_none(kNaN), kNaN},
      {"gelu_tanh(-inf)", fj_gelu_tanh(-kInf), static_cast<float>(reference::gelu(-HUGE_VAL, "tanh"))},
      {"gelu_tanh(+inf)", fj_gelu_tanh(kInf), kInf},
      {"gelu_tanh(fmax)", fj_gelu_tanh(fmax), fmax},
      {"gelu_tanh(-0)", fj_gelu_tanh(-0.0f), -0.0f},
      {"gelu_tanh(-20)", fj_gelu_tanh(-20.0f), -0.0f},
      {"gelu_tanh(NaN)", fj_gelu_tanh(kNaN), kNaN},
      {"relu(NaN)", fj_relu(kNaN), kNaN},
      {"relu(-0)", fj_relu(-0.0f), 0.0f},
      {"relu(-inf)", fj_relu(-kInf), 0.0f},
      {"maximum(NaN, 1)", fj_maximum(kNaN, 1.0f), kNaN},
      {"maximum(1, NaN)", fj_maximum(1.0f, kNaN), kNaN},
      {"minimum(NaN, 1)", fj_minimum(kNaN, 1.0f), kNaN},
      {"minimum(1, NaN)", fj_minimum(1.0f, kNaN), kNaN},
      {"maximum(-0, +0)", fj_maximum(-0.0f, 0.0f), static_cast<float>(reference::maximum(-0.0, 0.0))},
      {"maximum(+0, -0)", fj_maximum(0.0f, -0.0f), static_cast<float>(reference::maximum(0.0, -0.0))},
      {"minimum(-0, +0)", fj_minimum(-0.0f, 0.0f), static_cast<float>(reference::minimum(-0.0, 0.0))},
      {"maximum(-inf, 2)", fj_maximum(-kInf, 2.0f), 2.0f},
      {"minimum(-inf, 2)", fj_minimum(-kInf, 2.0f), -kInf},
      {"rsqrt(+0)", fj_rsqrt(0.0f), kInf},
      {"rsqrt(-0)", fj_rsqrt(-0.0f), -kInf},
      {"rsqrt(-1)", fj_rsqrt(-1.0f), kNaN},
      {"rsqrt(+inf)", fj_rsqrt(kInf), 0.0f},
      {"rsqrt(4)", fj_rsqrt(4.0f), 0.5f},
      {"reciprocal(-0)", fj_reciprocal(-0.0f), -kInf},
      {"abs(-0)", fj_abs(-0.0f), 0.0f},
      {"-FJ_INFINITY", (-FJ_INFINITY), -kInf},
      {"FJ_NAN", FJ_NAN, kNaN},
  };
  for (const Case& c : cases) EXPECT_TRUE(same(c.got, c.want)) << c.what << ": got " << hex(c.got) << ", want " << hex(c.want);
  // Subnormal results and arguments: within an ulp.
  EXPECT_LE(ulp_distance(fj_exp(-100.0f), static_cast<float>(std::exp(-100.0))), 1);
  EXPECT_LE(ulp_distance(fj_sigmoid(-100.0f), static_cast<float>(1.0 / (1.0 + std::exp(100.0)))), 2);
  EXPECT_GT(fj_exp(-100.0f), 0.0f);
  const float tiny = std::numeric_limits<float>::denorm_min();
  EXPECT_LE(ulp_distance(fj_log(tiny), static_cast<float>(std::log(static_cast<double>(tiny)))), 1);
  // The reference formula really is NaN at silu(-inf) and gelu(-inf).
  EXPECT_TRUE(std::isnan(fj_silu(-kInf)));
  EXPECT_TRUE(std::isnan(fj_gelu_none(-kInf)));
}

// ---------------------------------------------------------------------------
// Conversions.

TEST(CpuTypes, EverySixteenBitPatternWidensLikeDtype) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t b = static_cast<uint16_t>(h);
    ASSERT_EQ(bits_of(fj_to_float(fj_f16{b})), bits_of(half_bits_to_float(b))) << std::hex << "f16 0x" << h;
    ASSERT_EQ(bits_of(fj_to_float(fj_bf16{b})), bits_of(bf16_bits_to_float(b))) << std::hex << "bf16 0x" << h;
  }
}

// Floats that exercise every rounding path: all 16-bit values and the ties
// and near-ties between neighbours, the overflow and subnormal boundaries,
// NaNs with every kind of payload, and a stride through all 2^32 patterns.
std::vector<float> conversion_inputs() {
  std::vector<uint32_t> u;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = half_bits_to_float(static_cast<uint16_t>(h));
    const float b = bf16_bits_to_float(static_cast<uint16_t>(h));
    for (float f : {a, b}) {
      const uint32_t x = bits_of(f);
      for (int d = -2; d <= 2; ++d) u.push_back(x + d);
    }
    // f16 midpoints between h and h + 1 (exact in float), and their neighbours.
    if ((h & 0x7c00u) != 0x7c00u && (h & 0x7fffu) != 0x7bffu) {
      const double mid = (static_cast<double>(half_bits_to_float(static_cast<uint16_t>(h))) +
                          static_cast<double>(half_bits_to_float(static_cast<uint16_t>(h + 1)))) / 2;
      const uint32_t m = bits_of(static_cast<float>(mid));
      for (int d = -1; d <= 1; ++d) u.push_back(m + d);
    }
    // bf16 ties: the dropped half is exactly 0x8000.
    u.push_back((h << 16) | 0x8000u);
    u.push_back((h << 16) | 0x7fffu);
    u.push_back((h << 16) | 0x8001u);
  }
  for (uint32_t x : {0x477fefffu, 0x477ff000u, 0x477ff001u, 0x477fe000u, 0x477fffffu, 0x7f7fffffu, 0x7f800000u,
                     0x7f800001u, 0x7fc00000u, 0x7fffffffu, 0x7fbfffffu, 0x38800000u, 0x387fffffu, 0x33000000u,
                     0x33000001u, 0x32ffffffu, 0x337fffffu, 0x7f7f8000u, 0x7f7f7fffu}) {
    u.push_back(x);
    u.push_back(x | 0x80000000u);
  }
  std::mt19937 rng(99);
  for (int i = 0; i < 100000; ++i) u.push_back((0x7f800001u + rng() % 0x7fffffu) | (rng() & 0x80000000u));  // NaNs
  for (uint64_t x = 0; x <= 0xffffffffull; x += 1009) u.push_back(static_cast<uint32_t>(x));
  std::vector<float> f(u.size());
  for (size_t i = 0; i < u.size(); ++i) f[i] = float_of(u[i]);
  return f;
}

TEST(CpuTypes, NarrowingMatchesDtypeBitForBit) {
  const std::vector<float> xs = conversion_inputs();
  ASSERT_GT(xs.size(), 4'000'000u);
  int64_t f16_bad = 0, bf16_bad = 0, round_bad = 0;
  for (float x : xs) {
    const uint16_t h = fj_from_float<fj_f16>(x).bits, want_h = float_to_half_bits(x);
    const uint16_t b = fj_from_float<fj_bf16>(x).bits, want_b = float_to_bf16_bits(x);
    if (h != want_h && f16_bad++ < 5) ADD_FAILURE() << "f16 of " << hex(x) << std::hex << ": 0x" << h << ", want 0x" << want_h;
    if (b != want_b && bf16_bad++ < 5) ADD_FAILURE() << "bf16 of " << hex(x) << std::hex << ": 0x" << b << ", want 0x" << want_b;
    // cast: round to the storage type and back, as the reference's round_to_dtype.
    const float r16 = static_cast<float>(round_to_dtype(x, DType::kF16));
    const float rb16 = static_cast<float>(round_to_dtype(x, DType::kBF16));
    if ((bits_of(fj_round_f16(x)) != bits_of(r16) || bits_of(fj_round_bf16(x)) != bits_of(rb16) ||
         bits_of(fj_round_f32(x)) != bits_of(x)) &&
        round_bad++ < 5) {
      ADD_FAILURE() << "fj_round_* of " << hex(x);
    }
    EXPECT_EQ(bits_of(fj_from_float<float>(x)), bits_of(x));
  }
  EXPECT_EQ(f16_bad, 0);
  EXPECT_EQ(bf16_bad, 0);
  EXPECT_EQ(round_bad, 0);
}

// ---------------------------------------------------------------------------
// Philox and dropout.

TEST(CpuPhilox, KnownAnswerVectors) {
  // Random123's philox4x32-10 vectors (DESIGN.md section 4).
  struct Kat {
    uint32_t c[4], k[2], out[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& t : kats) {
    uint32_t w[4];
    fj_philox4x32_10(t.c[0], t.c[1], t.c[2], t.c[3], t.k[0], t.k[1], w[0], w[1], w[2], w[3]);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(w[i], t.out[i]) << "word " << i;
  }
  for (uint64_t group : {0ull, 1ull, 12345ull, 0x1'0000'0003ull, 0xffff'ffff'ffffull}) {
    const PhiloxCounter want = philox4x32_10(dropout_counter(group * 8), dropout_key(0x1234'5678'9abcull));
    uint32_t w[4];
    fj_philox(static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32), 0x56789abcu, 0x1234u, w[0], w[1],
              w[2], w[3]);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(w[i], want[i]) << "group " << group << " word " << i;
  }
}

std::vector<float> dropout_inputs(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  for (size_t i = 3; i < n; i += 97) x[i] = (i % 3 == 0) ? kNaN : (i % 3 == 1 ? -kInf : -0.0f);  // x * 0 cases
  return x;
}

float reference_dropout(float x, uint64_t seed, uint64_t index, double p) {
  return dropout_keeps(seed, index, p) ? x * dropout_scale(p) : x * 0.0f;
}

TEST(CpuPhilox, DropoutEqualsTheReferenceBitForBit) {
  const std::vector<float> x = dropout_inputs(100000, 1);
  for (double p : {0.1, 0.5, 0.9}) {
    for (uint64_t seed : {1234567ull, 0xdead'beef'cafeull}) {
      const uint32_t k0 = dropout_key(seed)[0], k1 = dropout_key(seed)[1];
      const uint32_t threshold = dropout_threshold(p);
      const float scale = dropout_scale(p);
      int64_t bad = 0, kept = 0;
      for (uint64_t i = 0; i < x.size(); i += 8) {
        float y8[8];
        fj_dropout8(&x[i], y8, i, threshold, scale, k0, k1);
        for (uint64_t e = 0; e < 8; ++e) {
          const float want = reference_dropout(x[i + e], seed, i + e, p);
          const float one = fj_dropout(x[i + e], i + e, threshold, scale, k0, k1);
          bad += (bits_of(y8[e]) != bits_of(want)) + (bits_of(one) != bits_of(want));
          kept += dropout_keeps(seed, i + e, p);
        }
      }
      EXPECT_EQ(bad, 0) << "p = " << p << ", seed = " << seed;
      EXPECT_NEAR(static_cast<double>(kept) / x.size(), 1 - p, 0.01);
    }
  }
}

TEST(CpuPhilox, DropoutSpanAnyStartAndLength) {
  const std::vector<float> x = dropout_inputs(100020, 2);
  const uint64_t seed = 42;
  const uint32_t k0 = dropout_key(seed)[0], k1 = dropout_key(seed)[1];
  std::vector<int64_t> lengths;
  for (int64_t n = 0; n <= 25; ++n) lengths.push_back(n);
  lengths.push_back(1000);
  lengths.push_back(100003);
  // Bases: the start, a run that crosses a change of the counter's high
  // word (group 2^32 - 2 onwards), and a large index.
  for (uint64_t base : {0ull, 8 * ((1ull << 32) - 2), (1ull << 40) + 8}) {
    for (double p : {0.1, 0.5, 0.9}) {
      const uint32_t threshold = dropout_threshold(p);
      const float scale = dropout_scale(p);
      for (uint64_t start : {0, 1, 2, 3, 5, 7, 9}) {
        for (int64_t n : lengths) {
          if (start + n > x.size()) continue;
          std::vector<float> y(n + 1, 7.0f);
          fj_dropout_span(x.data() + start, y.data(), n, base + start, threshold, scale, k0, k1);
          std::vector<float> in_place(x.begin() + start, x.begin() + start + n);
          fj_dropout_span(in_place.data(), in_place.data(), n, base + start, threshold, scale, k0, k1);
          int64_t bad = 0;
          for (int64_t i = 0; i < n; ++i) {
            const uint32_t want = bits_of(reference_dropout(x[start + i], seed, base + start + i, p));
            bad += (bits_of(y[i]) != want) + (bits_of(in_place[i]) != want);
          }
          EXPECT_EQ(bad, 0) << "base " << base << " start " << start << " n " << n << " p " << p;
          EXPECT_EQ(y[n], 7.0f) << "wrote past the end: base " << base << " start " << start << " n " << n;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// The headers compiled as the CPU backend compiles generated kernels.

// The CPU backend's flags (host_compile_flags()), -ffp-contract=off and -w
// aside (the instances below add the former).
std::string jit_flags() {
  std::vector<std::string> flags = host_compile_flags();
  std::erase_if(flags, [](const std::string& f) { return f == "-ffp-contract=off" || f == "-w"; });
  std::string joined;
  for (const std::string& f : flags) joined += (joined.empty() ? "" : " ") + f;
  return joined;
}

struct JitCompiler {
  std::string command;  // empty: none found
  bool clang = false;
};

// $CXX, else c++; GCC and Clang report vectorised loops differently.
JitCompiler host_compiler() {
  const char* cxx = std::getenv("CXX");
  for (std::string candidate : {std::string(cxx ? cxx : ""), std::string("c++")}) {
    if (candidate.empty() || testing::run_command("command -v " + candidate).exit_code != 0) continue;
    return {candidate, testing::run_command(candidate + " --version").out.find("clang") != std::string::npos};
  }
  return {};
}

// One loop per function, each on a line of its own, tagged, so that the
// compiler's -fopt-info-vec report can be matched to it.
struct JitLoop {
  std::string tag;   // exported function name: jit_<tag>
  std::string body;  // the loop, on one line
};

std::vector<JitLoop> jit_loops() {
  std::vector<JitLoop> loops;
  for (const char* f : {"exp", "log", "tanh", "erf", "sigmoid", "silu", "gelu_none", "gelu_none_16bit", "gelu_tanh",
                        "sqrt", "rsqrt", "reciprocal", "abs", "relu", "round_f16", "round_bf16"}) {
    loops.push_back({f, "void jit_" + std::string(f) + "(const float* x, float* y, int64_t n) { " +
                            "for (int64_t c = 0; c < n; ++c) y[c] = fj_" + f + "(x[c]); }"});
  }
  loops.push_back({"pow", "void jit_pow(const float* a, const float* b, float* y, int64_t n) { "
                          "for (int64_t c = 0; c < n; ++c) y[c] = fj_pow(a[c], b[c]); }"});
  loops.push_back({"maximum", "void jit_maximum(const float* a, const float* b, float* y, int64_t n) { "
                              "for (int64_t c = 0; c < n; ++c) y[c] = fj_maximum(a[c], b[c]); }"});
  loops.push_back({"minimum", "void jit_minimum(const float* a, const float* b, float* y, int64_t n) { "
                              "for (int64_t c = 0; c < n; ++c) y[c] = fj_minimum(a[c], b[c]); }"});
  loops.push_back({"f16_to_float", "void jit_f16_to_float(const fj_f16* x, float* y, int64_t n) { "
                                   "for (int64_t c = 0; c < n; ++c) y[c] = fj_to_float(x[c]); }"});
  loops.push_back({"float_to_f16", "void jit_float_to_f16(const float* x, fj_f16* y, int64_t n) { "
                                   "for (int64_t c = 0; c < n; ++c) y[c] = fj_from_float<fj_f16>(x[c]); }"});
  loops.push_back({"bf16_to_float", "void jit_bf16_to_float(const fj_bf16* x, float* y, int64_t n) { "
                                    "for (int64_t c = 0; c < n; ++c) y[c] = fj_to_float(x[c]); }"});
  loops.push_back({"float_to_bf16", "void jit_float_to_bf16(const float* x, fj_bf16* y, int64_t n) { "
                                    "for (int64_t c = 0; c < n; ++c) y[c] = fj_from_float<fj_bf16>(x[c]); }"});
  // What a fused kernel looks like: load bf16, compute, store bf16.
  loops.push_back({"bf16_gelu_bf16", "void jit_bf16_gelu_bf16(const fj_bf16* x, fj_bf16* y, int64_t n) { "
                                     "for (int64_t c = 0; c < n; ++c) y[c] = "
                                     "fj_from_float<fj_bf16>(fj_gelu_none_16bit(fj_to_float(x[c])) * 2.0f + 1.0f); }"});
  // The dropout group loop: one Philox call per 8 elements.
  loops.push_back({"dropout8", "void jit_dropout8(const float* x, float* y, int64_t groups, unsigned long long index, "
                               "uint32_t t, float s, uint32_t k0, uint32_t k1) { for (int64_t g = 0; g < groups; ++g) "
                               "fj_dropout8(x + 8 * g, y + 8 * g, index + 8 * g, t, s, k0, k1); }"});
  return loops;
}

// Scalar std:: versions and the span helper, for the throughput report and
// the dropout check (not themselves expected to vectorise).
const char* const kJitExtras = R"(
struct jit_max_combine {  // as row kernels emit their combiners: for a float and for lanes
  float operator()(float acc, float x) const { return fj_maximum(acc, x); }
  fj_vec operator()(fj_vec acc, fj_vec x) const { return fj_maximum(acc, x); }
};
float jit_reduce_max(const float* x, int64_t n) { return fj_reduce_span(x, n, -FJ_INFINITY, jit_max_combine()); }
void jit_store_span_bf16(const float* x, fj_bf16* y, int64_t n) { fj_store_span(y, x, n); }
void jit_stream_span_bf16(const float* x, fj_bf16* y, int64_t n) { fj_stream_span(y, x, n); fj_stream_fence(); }
void jit_store_span_f16(const float* x, fj_f16* y, int64_t n) { fj_store_span(y, x, n); }
void jit_stream_span_f16(const float* x, fj_f16* y, int64_t n) { fj_stream_span(y, x, n); fj_stream_fence(); }
// As a row kernel's loop streams its output: a block of 32 at a time.
extern "C++" template <typename T>
void jit_stream_blocks(const float* x, T* y, int64_t n) {
  int64_t c = 0;
  for (; c + kFjReduceLanes <= n; c += kFjReduceLanes) fj_stream_block(y + c, x + c);
  fj_store_span(y + c, x + c, n - c);
  fj_stream_fence();
}
void jit_stream_blocks_bf16(const float* x, fj_bf16* y, int64_t n) { jit_stream_blocks(x, y, n); }
void jit_stream_blocks_f16(const float* x, fj_f16* y, int64_t n) { jit_stream_blocks(x, y, n); }
int jit_native_bf16() { return FJ_NATIVE_BF16; }
int jit_native_f16() { return FJ_NATIVE_F16; }
int jit_philox_avx2() { return FJ_PHILOX_AVX2; }
int jit_philox_avx512() { return FJ_PHILOX_AVX512; }
void jit_dropout_span(const float* x, float* y, int64_t n, unsigned long long first, uint32_t t, float s,
                      uint32_t k0, uint32_t k1) { fj_dropout_span(x, y, n, first, t, s, k0, k1); }
void std_exp(const float* x, float* y, int64_t n) { for (int64_t c = 0; c < n; ++c) y[c] = std::exp(x[c]); }
void std_erf(const float* x, float* y, int64_t n) { for (int64_t c = 0; c < n; ++c) y[c] = std::erf(x[c]); }
void std_tanh(const float* x, float* y, int64_t n) { for (int64_t c = 0; c < n; ++c) y[c] = std::tanh(x[c]); }
void std_gelu_none(const float* x, float* y, int64_t n) {
  for (int64_t c = 0; c < n; ++c) y[c] = 0.5f * x[c] * (1.0f + std::erf(x[c] * 0.70710678118654752f));
}
)";

// The kernels compiled with one set of flags: the JIT flags as the CPU
// backend's design gives them, or those plus -ffp-contract=off (what
// runtime/host_compiler.cpp passes), so that the headers are checked with and
// without FMA contraction. Each is one test, compiled once.
class CpuHelpersJit : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    compiler_ = host_compiler();
    if (compiler_.command.empty()) GTEST_SKIP() << "no host C++ compiler ($CXX or c++) found";
    dir_ = testing::make_temp_dir("fusejit-cpu-helpers");
    std::ostringstream src;
    src << "#include \"codegen/cpu/fj_math.h\"\n#include \"codegen/cpu/fj_types.h\"\n"
           "#include \"codegen/cpu/fj_philox.h\"\n#include \"codegen/cpu/fj_kernel.h\"\n#include <cmath>\n"
           "#include <cstdint>\nextern \"C\" {\n";
    int line = 8;
    for (const JitLoop& loop : jit_loops()) {
      src << loop.body << "\n";
      loop_lines_[loop.tag] = line++;
    }
    src << kJitExtras << "}\n";
    const std::string cpp = dir_ + "/kernels.cpp";
    testing::write_file(cpp, src.str());
    // GCC: "kernels.cpp:12:36: optimized: loop vectorized using 32 byte vectors";
    // Clang: "kernels.cpp:12:36: remark: vectorized loop (vectorization width: 8, ...)".
    const char* report_flag = compiler_.clang ? "-Rpass=loop-vectorize" : "-fopt-info-vec-optimized";
    command_ = compiler_.command + " " + jit_flags() + " " + GetParam() + " " + report_flag + " -I" +
               FUSEJIT_SOURCE_DIR + "/src -o " + dir_ + "/kernels.so " + cpp;
    compile_ = testing::run_command(command_);
    ASSERT_EQ(compile_.exit_code, 0) << command_ << "\n" << compile_.err;
    handle_ = dlopen((dir_ + "/kernels.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
  }
  void TearDown() override {
    if (handle_ != nullptr) dlclose(handle_);
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  template <typename F>
  F sym(const std::string& name) const {
    void* p = dlsym(handle_, name.c_str());
    EXPECT_NE(p, nullptr) << name;
    return reinterpret_cast<F>(p);
  }

  void expect_every_loop_vectorised() const;
  void expect_accurate() const;
  void expect_conversions_match_dtype() const;
  void expect_dropout_matches_reference() const;
  void report_throughput() const;

  JitCompiler compiler_;
  std::string dir_, command_;
  testing::CommandResult compile_;
  std::map<std::string, int> loop_lines_;  // tag -> line in kernels.cpp
  void* handle_ = nullptr;
};

void CpuHelpersJit::expect_every_loop_vectorised() const {
  const std::regex report(compiler_.clang ? R"(kernels\.cpp:(\d+):\d+: remark: vectorized loop)"
                                          : R"(kernels\.cpp:(\d+):\d+: optimized: loop vectorized)");
  std::set<int> vectorised;
  std::istringstream err(compile_.err);
  for (std::string l; std::getline(err, l);) {
    std::smatch m;
    if (std::regex_search(l, m, report)) vectorised.insert(std::stoi(m[1]));
  }
  for (const auto& [tag, line] : loop_lines_) {
    EXPECT_TRUE(vectorised.count(line)) << "the loop over " << tag << " (kernels.cpp line " << line
                                        << ") was not vectorised:\n"
                                        << compile_.err;
  }
  // Loops inside the headers, reported at their line there.
  auto expect_header_loop_vectorised = [&](const std::string& header, const std::string& loop, const char* what) {
    const std::string text = testing::read_file(std::string(FUSEJIT_SOURCE_DIR) + "/src/codegen/cpu/" + header);
    const size_t at = text.find(loop);
    ASSERT_NE(at, std::string::npos) << loop;
    const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + at, '\n'));
    std::string escaped = header;
    escaped.insert(escaped.find('.'), "\\");
    const std::regex report(escaped + ":" + std::to_string(line) +
                            (compiler_.clang ? R"(:\d+: remark: vectorized loop)" : R"(:\d+: optimized: loop vectorized)"));
    EXPECT_TRUE(std::regex_search(compile_.err, report))
        << what << " (" << header << " line " << line << ") was not vectorised:\n"
        << compile_.err;
  };
  // With AVX2 the groups go through explicit vector code (fj_dropout_block32),
  // checked bit for bit by expect_dropout_matches_reference; without it,
  // through a loop the compiler must vectorise.
  const bool avx2_philox = sym<int (*)()>("jit_philox_avx2")() != 0;
  const bool avx512_philox = sym<int (*)()>("jit_philox_avx512")() != 0;
  const std::string flag = GetParam();
  if (flag == "-mno-avx2") EXPECT_FALSE(avx2_philox) << "-mno-avx2 must take the scalar loop";
  if (flag == "-mno-avx2" || flag == "-mno-avx512f") EXPECT_FALSE(avx512_philox) << flag << " must not take AVX-512";
#if defined(__x86_64__) || defined(__i386__)
  // -march=native on a CPU with AVX-512 must take fj_dropout_block64, or
  // the test of its bits below would pass without running it.
  if (flag.empty() && __builtin_cpu_supports("avx512f")) EXPECT_TRUE(avx512_philox) << "-march=native with AVX-512F";
#endif
  if (!avx2_philox) {
    expect_header_loop_vectorised("fj_philox.h", "for (int64_t g = 0; g < run; ++g)", "fj_dropout_span's group loop");
  }
  // fj_reduce_span is not among the loops: its lanes are fj_vec values
  // (vector types), vector code whatever the vectoriser decides, and its
  // NaN-propagating max is checked bit for bit below.
}

void CpuHelpersJit::expect_accurate() const {
  using Unary = void (*)(const float*, float*, int64_t);
  using Binary = void (*)(const float*, const float*, float*, int64_t);
  const std::vector<float>& xs = sample_inputs();
  const int64_t n = static_cast<int64_t>(xs.size());
  std::vector<float> got(xs.size());
  for (const UnaryCase& c : unary_cases()) {
    Unary f = sym<Unary>(std::string("jit_") + c.name);
    if (f == nullptr) continue;
    f(xs.data(), got.data(), n);
    expect_within(c.name, compare_ulps(xs, got, c.reference), c.bound);
  }
  Unary gelu_16bit = sym<Unary>("jit_gelu_none_16bit");
  ASSERT_TRUE(gelu_16bit);
  gelu_16bit(xs.data(), got.data(), n);
  expect_16bit_gelu_accurate(xs, got);
  // Binary functions on pairs of the samples (the second reversed).
  const std::vector<float> b(xs.rbegin(), xs.rend());
  Binary pow = sym<Binary>("jit_pow"), maximum = sym<Binary>("jit_maximum"), minimum = sym<Binary>("jit_minimum");
  ASSERT_TRUE(pow && maximum && minimum);
  pow(xs.data(), b.data(), got.data(), n);
  int64_t worst = 0, nan_mismatches = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float want = static_cast<float>(std::pow(static_cast<double>(xs[i]), static_cast<double>(b[i])));
    if (std::isnan(want) || std::isnan(got[i])) {
      if (std::isnan(want) != std::isnan(got[i]) && nan_mismatches++ == 0) {
        ADD_FAILURE() << "pow(" << hex(xs[i]) << ", " << hex(b[i]) << ") = " << hex(got[i]);
      }
      continue;
    }
    worst = std::max(worst, ulp_distance(got[i], want));
  }
  EXPECT_LE(worst, 1) << "pow";
  maximum(xs.data(), b.data(), got.data(), n);
  std::vector<float> got_min(xs.size());
  minimum(xs.data(), b.data(), got_min.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const float want_max = static_cast<float>(reference::maximum(xs[i], b[i]));
    const float want_min = static_cast<float>(reference::minimum(xs[i], b[i]));
    ASSERT_TRUE(std::isnan(want_max) ? std::isnan(got[i]) : bits_of(got[i]) == bits_of(want_max))
        << "maximum(" << hex(xs[i]) << ", " << hex(b[i]) << ")";
    ASSERT_TRUE(std::isnan(want_min) ? std::isnan(got_min[i]) : bits_of(got_min[i]) == bits_of(want_min))
        << "minimum(" << hex(xs[i]) << ", " << hex(b[i]) << ")";
  }
}

void CpuHelpersJit::expect_conversions_match_dtype() const {
  // fj_f16 / fj_bf16 are a uint16_t in a struct: same layout, same calling convention.
  using Widen16 = void (*)(const uint16_t*, float*, int64_t);
  using Narrow16 = void (*)(const float*, uint16_t*, int64_t);
  Widen16 f16_to_float = sym<Widen16>("jit_f16_to_float"), bf16_to_float = sym<Widen16>("jit_bf16_to_float");
  Narrow16 float_to_f16 = sym<Narrow16>("jit_float_to_f16"), float_to_bf16 = sym<Narrow16>("jit_float_to_bf16");
  ASSERT_TRUE(f16_to_float && bf16_to_float && float_to_f16 && float_to_bf16);
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  std::vector<float> wide(65536);
  f16_to_float(all.data(), wide.data(), 65536);
  for (uint32_t h = 0; h < 65536; ++h) ASSERT_EQ(bits_of(wide[h]), bits_of(half_bits_to_float(all[h]))) << h;
  bf16_to_float(all.data(), wide.data(), 65536);
  for (uint32_t h = 0; h < 65536; ++h) ASSERT_EQ(bits_of(wide[h]), bits_of(bf16_bits_to_float(all[h]))) << h;
  const std::vector<float> xs = conversion_inputs();
  std::vector<uint16_t> narrow(xs.size());
  float_to_f16(xs.data(), narrow.data(), static_cast<int64_t>(xs.size()));
  for (size_t i = 0; i < xs.size(); ++i) ASSERT_EQ(narrow[i], float_to_half_bits(xs[i])) << hex(xs[i]);
  float_to_bf16(xs.data(), narrow.data(), static_cast<int64_t>(xs.size()));
  for (size_t i = 0; i < xs.size(); ++i) ASSERT_EQ(narrow[i], float_to_bf16_bits(xs[i])) << hex(xs[i]);
  // The spans kernels store and stream their 16-bit outputs with: with
  // AVX512-BF16 (FJ_NATIVE_BF16) or F16C (FJ_NATIVE_F16) one instruction
  // per vector, and the portable conversion for a vector holding a value
  // the instruction treats otherwise (a bf16 subnormal, an f16 NaN). Each
  // span starts on a 64-byte boundary and one element past it: aligned,
  // a row kernel's blocks stream (with AVX-512 a line converted in
  // registers); one element off, the streamed span has a head before its
  // aligned vectors, the blocks are stored plainly, and the vectors fall
  // across the inputs differently.
  using Native = int (*)();
  Native native_bf16 = sym<Native>("jit_native_bf16"), native_f16 = sym<Native>("jit_native_f16");
  ASSERT_TRUE(native_bf16 && native_f16);
  std::printf("[ REPORT   ] bf16 spans narrowed with %s, f16 spans with %s\n",
              native_bf16() ? "vcvtneps2bf16 (AVX512-BF16)" : "the portable conversion",
              native_f16() == 16  ? "vcvtps2ph, 16 lanes"
              : native_f16() == 8 ? "vcvtps2ph, 8 lanes"
                                  : "the portable conversion");
  // The cost model prices native stores wherever the CPU has the
  // instructions: the kernels compiled as designed must then use them.
  if (std::string(GetParam()).find("-mno-") == std::string::npos) {
    EXPECT_EQ(native_bf16() != 0, host_cpu_has_avx512_bf16()) << "FJ_NATIVE_BF16 under " << command_;
    EXPECT_EQ(native_f16() != 0, host_cpu_has_f16c()) << "FJ_NATIVE_F16 under " << command_;
  }
  // Without AVX-512 the 8-lane path, so that an AVX-512 machine checks it too.
  if (std::string(GetParam()) == "-mno-avx512f" && host_cpu_has_f16c()) {
    EXPECT_EQ(native_f16(), 8) << "FJ_NATIVE_F16 under " << command_;
  }
  struct Span {
    const char* name;
    uint16_t (*reference)(float);
  };
  for (const Span& s :
       {Span{"jit_store_span_bf16", float_to_bf16_bits}, Span{"jit_stream_span_bf16", float_to_bf16_bits},
        Span{"jit_stream_blocks_bf16", float_to_bf16_bits}, Span{"jit_store_span_f16", float_to_half_bits},
        Span{"jit_stream_span_f16", float_to_half_bits}, Span{"jit_stream_blocks_f16", float_to_half_bits}}) {
    Narrow16 span = sym<Narrow16>(s.name);
    ASSERT_NE(span, nullptr);
    for (size_t misaligned : {0, 1}) {
      std::vector<uint16_t> spanned(xs.size() + 64, 0xdead);
      const size_t to_line = (64 - reinterpret_cast<uintptr_t>(spanned.data() + 1) % 64) % 64 / 2;
      const size_t first = 1 + to_line + misaligned;
      span(xs.data(), spanned.data() + first, static_cast<int64_t>(xs.size()));
      for (size_t i = 0; i < first; ++i) ASSERT_EQ(spanned[i], 0xdead) << s.name << " wrote before its span";
      for (size_t i = first + xs.size(); i < spanned.size(); ++i) {
        ASSERT_EQ(spanned[i], 0xdead) << s.name << " wrote past its span";
      }
      for (size_t i = 0; i < xs.size(); ++i) {
        ASSERT_EQ(spanned[first + i], s.reference(xs[i]))
            << s.name << " misaligned " << misaligned << " " << hex(xs[i]);
      }
    }
  }
}

void CpuHelpersJit::expect_dropout_matches_reference() const {
  using Dropout = void (*)(const float*, float*, int64_t, unsigned long long, uint32_t, float, uint32_t, uint32_t);
  Dropout dropout8 = sym<Dropout>("jit_dropout8"), span = sym<Dropout>("jit_dropout_span");
  ASSERT_TRUE(dropout8 && span);
  const std::vector<float> x = dropout_inputs(100003, 3);
  const uint64_t seed = 0x0123'4567'89ab'cdefull;
  const uint32_t k0 = dropout_key(seed)[0], k1 = dropout_key(seed)[1];
  for (double p : {0.1, 0.5, 0.9}) {
    const uint32_t threshold = dropout_threshold(p);
    const float scale = dropout_scale(p);
    for (uint64_t base : {0ull, 8 * ((1ull << 32) - 100)}) {
      std::vector<float> y(x.size());
      dropout8(x.data(), y.data(), static_cast<int64_t>(x.size() / 8), base, threshold, scale, k0, k1);
      int64_t bad = 0;
      for (size_t i = 0; i < x.size() / 8 * 8; ++i) {
        bad += bits_of(y[i]) != bits_of(reference_dropout(x[i], seed, base + i, p));
      }
      EXPECT_EQ(bad, 0) << "dropout8 loop, p " << p << " base " << base;
      for (uint64_t start : {0, 1, 2, 3, 5, 7, 9}) {
        const int64_t n = static_cast<int64_t>(x.size() - start);
        span(x.data() + start, y.data(), n, base + start, threshold, scale, k0, k1);
        bad = 0;
        for (int64_t i = 0; i < n; ++i) {
          bad += bits_of(y[i]) != bits_of(reference_dropout(x[start + i], seed, base + start + i, p));
        }
        EXPECT_EQ(bad, 0) << "fj_dropout_span, p " << p << " base " << base << " start " << start;
      }
    }
  }
}

// A report, not an assertion: single-thread ns per element over 1M floats,
// the helpers (vectorised) against scalar std:: functions compiled the same
// way, and dropout against the reference implementation (ir/philox.cpp).
void CpuHelpersJit::report_throughput() const {
  using Unary = void (*)(const float*, float*, int64_t);
  using Dropout = void (*)(const float*, float*, int64_t, unsigned long long, uint32_t, float, uint32_t, uint32_t);
  const int64_t n = 1 << 20;
  std::vector<float> x(n), y(n);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (float& v : x) v = normal(rng);
  auto best_ns = [&](const std::function<void()>& run) {
    double best = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      run();
      const auto t1 = std::chrono::steady_clock::now();
      best = std::min(best, std::chrono::duration<double, std::nano>(t1 - t0).count() / n);
    }
    return best;
  };
  std::printf("[ REPORT   ] ns/element, 1M floats, one thread, %s %s %s:\n", compiler_.command.c_str(), jit_flags().c_str(),
              GetParam());
  for (const char* f : {"exp", "erf", "tanh", "gelu_none"}) {
    Unary mine = sym<Unary>(std::string("jit_") + f), theirs = sym<Unary>(std::string("std_") + f);
    if (!mine || !theirs) continue;
    const double a = best_ns([&] { mine(x.data(), y.data(), n); });
    const double b = best_ns([&] { theirs(x.data(), y.data(), n); });
    std::printf("[ REPORT   ]   %-10s fj %6.3f   std:: %6.3f\n", f, a, b);
  }
  if (Dropout span = sym<Dropout>("jit_dropout_span")) {
    const double a = best_ns([&] { span(x.data(), y.data(), n, 1, dropout_threshold(0.1), dropout_scale(0.1), 1, 2); });
    const double b = best_ns([&] {
      for (int64_t i = 0; i < n; ++i) y[i] = reference_dropout(x[i], 1, static_cast<uint64_t>(i), 0.1);
    });
    std::printf("[ REPORT   ]   %-10s fj %6.3f   reference (ir/philox.cpp) %6.3f\n", "dropout", a, b);
  }
}

// The one test that compiles: every loop vectorised, and the compiled
// (vectorised, FMA) code as accurate and bit-exact as the checks above.
TEST_P(CpuHelpersJit, CompiledLikeKernelsVectorisedAndExact) {
  {
    SCOPED_TRACE("vectorisation");
    expect_every_loop_vectorised();
  }
  {
    SCOPED_TRACE("accuracy of the compiled functions");
    expect_accurate();
  }
  {
    SCOPED_TRACE("compiled conversions");
    expect_conversions_match_dtype();
  }
  {
    SCOPED_TRACE("compiled dropout");
    expect_dropout_matches_reference();
  }
  {
    SCOPED_TRACE("compiled max reduction");
    using Reduce = float (*)(const float*, int64_t);
    Reduce reduce_max = sym<Reduce>("jit_reduce_max");
    ASSERT_NE(reduce_max, nullptr);
    std::vector<float> xs = sample_inputs();
    xs.erase(std::remove_if(xs.begin(), xs.end(), [](float v) { return std::isnan(v); }), xs.end());
    for (int64_t n : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{1000}, static_cast<int64_t>(xs.size())}) {
      EXPECT_EQ(reduce_max(xs.data(), n), *std::max_element(xs.begin(), xs.begin() + n)) << "n " << n;
    }
    // A NaN in the first and in a later vector of lanes, in the last lane,
    // in a later step and in the tail.
    for (int64_t at : {int64_t{0}, int64_t{7}, int64_t{16}, int64_t{24}, int64_t{31}, int64_t{63}, int64_t{999}}) {
      std::vector<float> with_nan(xs.begin(), xs.begin() + 1000);
      with_nan[at] = std::numeric_limits<float>::quiet_NaN();
      EXPECT_TRUE(std::isnan(reduce_max(with_nan.data(), 1000))) << "NaN at " << at;
    }
  }
  report_throughput();
}

// On x86 also without AVX2, as a CPU without it compiles the kernels: the
// scalar Philox loop of fj_dropout_groups instead of fj_dropout_block32;
// and without AVX-512, so that a machine with it still checks
// fj_dropout_block32 (with -march=native it takes fj_dropout_block64).
#if defined(__x86_64__) || defined(__i386__)
INSTANTIATE_TEST_SUITE_P(Flags, CpuHelpersJit,
                         ::testing::Values("", "-ffp-contract=off", "-mno-avx2", "-mno-avx512f"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           const std::string flag = info.param;
                           if (flag.empty()) return "AsDesigned";
                           if (flag == "-mno-avx2") return "WithoutAvx2";
                           return flag == "-mno-avx512f" ? "WithoutAvx512" : "NoFpContract";
                         });
#else
INSTANTIATE_TEST_SUITE_P(Flags, CpuHelpersJit, ::testing::Values("", "-ffp-contract=off"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param).empty() ? "AsDesigned" : "NoFpContract";
                         });
#endif

}  // namespace
}  // namespace fusejit
