// The CUDA device helpers that are plain C++ (Philox, dropout, math) compiled
// for the host with small stand-ins for CUDA's built-ins, and checked against
// the reference: the GPU's dropout mask must equal the reference's bit for bit.
#include <math.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include <gtest/gtest.h>

#include "ir/philox.h"

namespace fusejit {
namespace cuda_on_host {

#define __device__
#define __forceinline__ inline
struct uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline unsigned __umulhi(unsigned a, unsigned b) { return static_cast<unsigned>((uint64_t{a} * b) >> 32); }
inline float __int_as_float(int bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
// expf, erff, fmaxf and the others come from <cmath> in the global namespace.
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }

#include "codegen/cuda/fj_math.cuh"
#include "codegen/cuda/fj_philox.cuh"

#undef __device__
#undef __forceinline__

}  // namespace cuda_on_host

namespace {

TEST(CudaHelpersOnHost, PhiloxMatchesTheReference) {
  for (uint64_t seed : {0ull, 42ull, 0xFFFFFFFFFFFFull}) {
    for (uint64_t group : {0ull, 1ull, 12345ull, 0x1'0000'0003ull}) {
      const PhiloxCounter expected = philox4x32_10(dropout_counter(group * 4), dropout_key(seed));
      const cuda_on_host::uint4 got = cuda_on_host::fj_philox(
          cuda_on_host::make_uint4(static_cast<unsigned>(group), static_cast<unsigned>(group >> 32), 0, 0),
          dropout_key(seed)[0], dropout_key(seed)[1]);
      EXPECT_EQ(got.x, expected[0]);
      EXPECT_EQ(got.y, expected[1]);
      EXPECT_EQ(got.z, expected[2]);
      EXPECT_EQ(got.w, expected[3]);
    }
  }
}

TEST(CudaHelpersOnHost, DropoutMaskEqualsTheReferenceBitForBit) {
  for (double p : {0.1, 0.5, 0.9}) {
    const uint64_t seed = 1234567;
    const unsigned k0 = dropout_key(seed)[0], k1 = dropout_key(seed)[1];
    int differences = 0;
    for (uint64_t i = 0; i < 100000; i += 4) {
      float x[4] = {1.5f, -2.0f, 3.25f, 0.5f}, y4[4];
      cuda_on_host::fj_dropout4(x, y4, i, dropout_threshold(p), dropout_scale(p), k0, k1);
      for (int e = 0; e < 4; ++e) {
        const float expected = dropout_keeps(seed, i + e, p) ? x[e] * dropout_scale(p) : x[e] * 0.0f;
        const float one = cuda_on_host::fj_dropout(x[e], i + e, dropout_threshold(p), dropout_scale(p), k0, k1);
        differences += (y4[e] != expected) + (one != expected);
      }
    }
    EXPECT_EQ(differences, 0) << "p = " << p;
  }
}

TEST(CudaHelpersOnHost, MathKeepsPyTorchNanRules) {
  const float nan = std::nanf("");
  EXPECT_TRUE(std::isnan(cuda_on_host::fj_maximum(nan, 1.0f)));
  EXPECT_TRUE(std::isnan(cuda_on_host::fj_minimum(1.0f, nan)));
  EXPECT_TRUE(std::isnan(cuda_on_host::fj_relu(nan)));
  EXPECT_EQ(cuda_on_host::fj_relu(-2.0f), 0.0f);
  EXPECT_NEAR(cuda_on_host::fj_gelu_none(1.0f), 0.8413447460685429, 1e-6);
  EXPECT_NEAR(cuda_on_host::fj_gelu_tanh(1.0f), 0.8411919906082768, 1e-6);
  EXPECT_TRUE(std::isnan(cuda_on_host::fj_dropout(nan, 0, dropout_threshold(0.999), 2.0f, 1, 2)));  // x * 0 is NaN
}

}  // namespace
}  // namespace fusejit
