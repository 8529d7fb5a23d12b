// fusejit CUDA helpers: the f32 functions the op table's code expressions
// name (src/ir/ops.def). NaN propagates as in PyTorch: maximum, minimum and
// relu of NaN are NaN.
#define FJ_INFINITY __int_as_float(0x7f800000)
#define FJ_NAN __int_as_float(0x7fffffff)

__device__ __forceinline__ float fj_abs(float x) { return fabsf(x); }
__device__ __forceinline__ float fj_exp(float x) { return expf(x); }
__device__ __forceinline__ float fj_log(float x) { return logf(x); }
__device__ __forceinline__ float fj_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ float fj_rsqrt(float x) { return rsqrtf(x); }
__device__ __forceinline__ float fj_reciprocal(float x) { return 1.0f / x; }
__device__ __forceinline__ float fj_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ float fj_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float fj_relu(float x) { return x != x ? x : fmaxf(x, 0.0f); }
__device__ __forceinline__ float fj_silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float fj_erf(float x) { return erff(x); }
// gelu, approximate = "none": 0.5 x (1 + erf(x / sqrt 2)) = x Phi(x), as
//   x < 0:  x * 0.5 e,   x >= 0:  x * (1 - 0.5 e),   e = erfc(|x| / sqrt 2),
// with erfc(t) = 2^(t P(t)) for t <= 4, P of degree 10 (fit "gelu_cuda" in
// scripts/fit_cpu_math.py: 2^-24.5 absolute in the exponent), and 0 beyond,
// where |gelu| < 4.4e-8. Why not erff: libdevice's erff picks each of its
// coefficients from two sets with a select, so GeLU cost ~23 instructions per
// element, which alone nearly fills an H200's issue budget for a bf16
// element (bench/results/2026-11-30-sass-budget.md); this is one Horner chain
// and one ex2. And 1 + erff(y) cancels for x < 0, losing all relative
// accuracy below x = -4; erfc does not. Against the exact x Phi(x): <= 46 ulp
// for x in [-5.6, 0) (the exponent's rounding), <= 4 ulp for x >= 0 with
// ex2.approx's error; NaN -> NaN, +inf -> +inf, -inf -> NaN (the formula's
// -inf * 0), -0 -> -0, x < -5.66 -> -0.
__device__ __forceinline__ float fj_exp2_unscaled(float q) {  // q in [-25, 0] or -200: no subnormal results
#ifdef __CUDA_ARCH__
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(q));
  return r;
#else  // the CUDA emulator (tests/cuda_emulator/)
  return exp2f(q);
#endif
}
__device__ __forceinline__ float fj_gelu_none(float x) {
  const float t = fabsf(x) * 0.70710678118654752f;
  float p = 0x1.ef88aep-24f;
  p = fmaf(p, t, -0x1.969fecp-19f);
  p = fmaf(p, t, 0x1.28b846p-15f);
  p = fmaf(p, t, -0x1.f6df4p-13f);
  p = fmaf(p, t, 0x1.097a2ap-10f);
  p = fmaf(p, t, -0x1.3dd254p-9f);
  p = fmaf(p, t, 0x1.c1995ep-14f);
  p = fmaf(p, t, 0x1.c76abep-6f);
  p = fmaf(p, t, -0x1.2fda18p-3f);
  p = fmaf(p, t, -0x1.d63c14p-1f);
  p = fmaf(p, t, -0x1.a0be9ep+0f);
  // 2^-200 flushes to 0: selecting the exponent rather than the result
  // keeps NVVM from branching around the polynomial per element.
  const float e = fj_exp2_unscaled(t > 4.0f ? -200.0f : t * p);
  return x * (x < 0.0f ? 0.5f * e : fmaf(-0.5f, e, 1.0f));
}
__device__ __forceinline__ float fj_gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float fj_maximum(float a, float b) { return (a != a || b != b) ? FJ_NAN : fmaxf(a, b); }
__device__ __forceinline__ float fj_minimum(float a, float b) { return (a != a || b != b) ? FJ_NAN : fminf(a, b); }
__device__ __forceinline__ float fj_pow(float a, float b) { return powf(a, b); }
