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
// with erfc(a / sqrt 2) = 2^(a P(a)), a = |x| <= 4 sqrt 2, P of degree 10
// (fit "gelu_cuda" in scripts/fit_cpu_math.py: 2^-24.6 absolute in the
// exponent; in a itself, so no rounded a / sqrt 2 feeds it), and 0 beyond,
// where |gelu| < 4.4e-8. Why not erff: libdevice's erff picks each of its
// coefficients from two sets with a select, so GeLU cost 27-29 instructions
// per element, about an H200's whole issue budget for a bf16 element (~28,
// bench/results/2026-11-30-sass-budget.md); this is one Horner chain and one
// ex2. And 1 + erff(y) cancels for x < 0, losing all relative accuracy below
// x = -4; erfc does not. Against the exact x Phi(x), with ex2.approx's 2 ulp:
// <= 48 ulp for x in [-4 sqrt 2, 0) (the exponent's rounding), <= 6.1 ulp
// for x >= 0 (44 and 2.3 with an exact exp2, as the host test checks).
// NaN -> NaN, +inf -> +inf, -inf -> NaN (the formula's -inf * 0), -0 -> -0,
// x < -4 sqrt 2 (about -5.657) -> -0.
__device__ __forceinline__ float fj_exp2_unscaled(float q) {  // q in [-26, 0] or -200: no subnormal results
#ifdef __CUDA_ARCH__
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(q));
  return r;
#else  // the CUDA emulator (tests/cuda_emulator/)
  return exp2f(q);
#endif
}
__device__ __forceinline__ float fj_gelu_none(float x) {
  const float a = fabsf(x);
  float p = 0x1.5f1c24p-29f;
  p = fmaf(p, a, -0x1.9756fap-24f);
  p = fmaf(p, a, 0x1.a43ef2p-20f);
  p = fmaf(p, a, -0x1.f77beep-17f);
  p = fmaf(p, a, 0x1.77d188p-14f);
  p = fmaf(p, a, -0x1.3e1f4ap-12f);
  p = fmaf(p, a, 0x1.47dc1p-16f);
  p = fmaf(p, a, 0x1.c75dc6p-8f);
  p = fmaf(p, a, -0x1.adb4e6p-5f);
  p = fmaf(p, a, -0x1.d63c24p-2f);
  p = fmaf(p, a, -0x1.26aed4p+0f);
  // 2^-200 flushes to 0: selecting the exponent rather than the result
  // keeps NVVM from branching around the polynomial per element.
  const float e = fj_exp2_unscaled(a > 0x1.6a09e6p+2f ? -200.0f : a * p);  // 4 sqrt 2
  return x * (x < 0.0f ? 0.5f * e : fmaf(-0.5f, e, 1.0f));
}
__device__ __forceinline__ float fj_gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}
// NaN if either operand is NaN (PyTorch's rule), else fmaxf / fminf. sm_80's
// max.NaN / min.NaN do exactly that in one instruction (the NaN is the
// canonical 0x7fffffff, FJ_NAN); spelled out, the check costs four.
__device__ __forceinline__ float fj_maximum(float a, float b) {
#ifdef __CUDA_ARCH__
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else  // the CUDA emulator (tests/cuda_emulator/)
  return (a != a || b != b) ? FJ_NAN : fmaxf(a, b);
#endif
}
__device__ __forceinline__ float fj_minimum(float a, float b) {
#ifdef __CUDA_ARCH__
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return (a != a || b != b) ? FJ_NAN : fminf(a, b);
#endif
}
__device__ __forceinline__ float fj_pow(float a, float b) { return powf(a, b); }
