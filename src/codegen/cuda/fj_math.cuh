// fusejit CUDA helpers: the f32 functions the op table's code expressions
// name (src/ir/ops.def). NaN propagates as in PyTorch: maximum, minimum and
// relu of NaN are NaN.
#define FJ_INFINITY __int_as_float(0x7f800000)
#define FJ_NAN __int_as_float(0x7fffffff)

// NAME(x): one PTX instruction on a GPU (an approximation on the special-
// function unit), HOST (an expression of x) in the CUDA emulator
// (tests/cuda_emulator/) and the host tests, which compile these helpers
// for the CPU.
#ifdef __CUDA_ARCH__
#define FJ_PTX_UNARY(NAME, INSTRUCTION, HOST)       \
  __device__ __forceinline__ float NAME(float x) {  \
    float r;                                        \
    asm(INSTRUCTION " %0, %1;" : "=f"(r) : "f"(x)); \
    return r;                                       \
  }
#else
#define FJ_PTX_UNARY(NAME, INSTRUCTION, HOST) \
  __device__ __forceinline__ float NAME(float x) { return HOST; }
#endif

__device__ __forceinline__ float fj_abs(float x) { return fabsf(x); }
__device__ __forceinline__ float fj_exp(float x) { return expf(x); }
__device__ __forceinline__ float fj_log(float x) { return logf(x); }
__device__ __forceinline__ float fj_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ float fj_rsqrt(float x) { return rsqrtf(x); }
// rsqrt of an x the code generator knows to be at least FLT_MIN (a
// variance plus epsilon, ir/value_bounds.h): rsqrt.approx.ftz, as accurate
// as rsqrtf for normal x and one instruction where rsqrtf takes four (it
// scales a subnormal x by 2^24 first). The emulator uses rsqrtf.
FJ_PTX_UNARY(fj_rsqrt_normal, "rsqrt.approx.ftz.f32", rsqrtf(x))
__device__ __forceinline__ float fj_reciprocal(float x) { return 1.0f / x; }
__device__ __forceinline__ float fj_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ float fj_relu(float x) { return x != x ? x : fmaxf(x, 0.0f); }
__device__ __forceinline__ float fj_erf(float x) { return erff(x); }
// gelu, approximate = "none": 0.5 x (1 + erf(x / sqrt 2)) = x Phi(x), as
//   x < 0:  x h,   x >= 0:  x (1 - h),   h = 0.5 erfc(|x| / sqrt 2),
// with 0.5 erfc(a / sqrt 2) = 2^(a P(a) - 1), a = |x| <= 4 sqrt 2, and 0
// beyond, where |gelu| < 4.4e-8. P is fitted in a itself, so no rounded
// a / sqrt 2 feeds it (scripts/fit_cpu_math.py): "gelu_cuda", degree 10,
// 2^-24.6 absolute in the exponent, and "gelu_16bit", degree 6, 2^-17.5,
// 4 instructions fewer per element. The code generator takes the second
// for a GeLU from which only f16 and bf16 values are computed
// (Graph::is_16bit_gelu): within 128 ulp of f32 (2^-16 relative), it is
// 16 times below the half ulp of f16 (at least 2^-12 relative), and every
// output it reaches is judged at a 16-bit tolerance (4e-3 for f16).
// Why not erff: libdevice's erff picks each of its coefficients from two
// sets with a select, so GeLU cost 27-29 instructions per element, about an
// H200's whole issue budget for a bf16 element (~28,
// bench/results/2026-11-30-sass-budget.md); this is one Horner chain and one
// ex2. And 1 + erff(y) cancels for x < 0, losing all relative accuracy below
// x = -4; erfc does not. Against the exact x Phi(x), with an exact exp2,
// the f32 helper is within 40.2 ulp for x in [-4 sqrt 2, 0) (the exponent's
// rounding) and 2.44 ulp for x >= 0, the 16-bit one within 92.9 and 54.9
// (the host test holds them to 40.5 and 2.5, 96 and 60); ex2.approx's 2
// ulp add about 4 on a GPU.
// NaN -> NaN, +inf -> +inf, -inf -> NaN (the formula's -inf * 0), -0 -> -0;
// x < -4 sqrt 2 (about -5.657) -> -0 in the f32 helper, and in the 16-bit
// one a negative number of magnitude at most 4.4e-8 (see there).
// 2^q on the special-function unit (ex2.approx.ftz: 2 ulp, and results
// below 2^-126 flush to +0, which the emulator's exp2f does as well).
FJ_PTX_UNARY(fj_exp2_ftz, "ex2.approx.ftz.f32", exp2f(x) < 0x1p-126f ? 0.0f : exp2f(x))
// a > limit ? above : otherwise, as a select in the PTX. Written as C in
// fj_gelu_none, GeLU's clamp became a branch around the polynomial (NVVM's
// choice, 38 more loop instructions per 8 elements in the demo's fused
// kernel); in PTX it stays a select whatever shape the code around it takes.
__device__ __forceinline__ float fj_select_above(float a, float limit, float above, float otherwise) {
#ifdef __CUDA_ARCH__
  float r;
  asm("{ .reg .pred p; setp.gt.f32 p, %1, %2; selp.f32 %0, %3, %4, p; }"
      : "=f"(r)
      : "f"(a), "f"(limit), "f"(above), "f"(otherwise));
  return r;
#else
  return a > limit ? above : otherwise;
#endif
}
// x h or x (1 - h), as above.
__device__ __forceinline__ float fj_gelu_from_h(float x, float h) { return x * (x < 0.0f ? h : 1.0f - h); }
// The same from a and a P(a), with h = 0 past the fit: 2^-200 flushes to 0.
// Selecting the exponent rather than the result keeps the polynomial
// unconditional.
__device__ __forceinline__ float fj_gelu_from_exponent(float x, float a, float p) {
  return fj_gelu_from_h(x, fj_exp2_ftz(fj_select_above(a, 0x1.6a09e6p+2f, -200.0f, fmaf(a, p, -1.0f))));  // 4 sqrt 2
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
  return fj_gelu_from_exponent(x, a, p);
}
// P(a) of the 16-bit GeLU below: h = 2^(a P(a) - 1) = 0.5 erfc(a / sqrt 2).
__device__ __forceinline__ float fj_gelu_16bit_poly(float a) {
  float p = -0x1.da3b1p-20f;
  p = fmaf(p, a, 0x1.f9936ap-15f);
  p = fmaf(p, a, -0x1.e277e2p-11f);
  p = fmaf(p, a, 0x1.15781ap-7f);
  p = fmaf(p, a, -0x1.b95c2cp-5f);
  p = fmaf(p, a, -0x1.d58e68p-2f);
  return fmaf(p, a, -0x1.26b5dap+0f);
}
__device__ __forceinline__ float fj_gelu_none_16bit(float x) {
  const float a = fabsf(x);
  // No clamp: past 4 sqrt 2 this polynomial (its a^6 coefficient is
  // negative) keeps a P(a) - 1 at or below its value there, -26.95, down to
  // -inf at a = inf (checked for every float above 4 sqrt 2 in f32
  // arithmetic; CudaGelu samples it). So h <= 2^-26.9: x >= 0 gives x
  // exactly, and x < 0 a value of at most 4.4e-8 in magnitude that goes on
  // approximating x Phi(x), where the clamp gave -0. Leaving out the compare
  // and select saves 2 of the fused demo kernel's 41 instructions per
  // element (bench/results/2026-12-02-gpu-reductions-and-gelu.md).
  return fj_gelu_from_h(x, fj_exp2_ftz(fmaf(a, fj_gelu_16bit_poly(a), -1.0f)));
}
// dropout(gelu(x)) for a 16-bit GeLU whose value only the dropout uses
// (fusion/gelu_dropout.h): x (x < 0 ? h s : s - h s), with the scale s in
// the exponent (`offset` = log2 s - 1, so h s = 2^(a P(a) + offset)), or
// x * 0 where the element is dropped, as dropout's x * (keep ? s : 0) gives
// (NaN for a dropped infinity). One multiply fewer than computing GeLU and
// then scaling it. h s / s = h, so the tail argument above holds as it is.
__device__ __forceinline__ float fj_gelu_none_16bit_dropout(float x, bool keep, float scale, float offset) {
  const float a = fabsf(x);
  const float hs = fj_exp2_ftz(fmaf(a, fj_gelu_16bit_poly(a), offset));
  return x * (keep ? (x < 0.0f ? hs : scale - hs) : 0.0f);
}
// 1/x on the special-function unit (rcp.approx.ftz: 1 ulp) for x of
// ordinary size; the emulator divides.
FJ_PTX_UNARY(fj_rcp_ftz, "rcp.approx.ftz.f32", 1.0f / x)
// sigmoid and silu as x sigmoid(x), with e = 2^(-|x| log2 e) in (0, 1]:
// sigmoid = 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0, so nothing
// overflows; one ex2 and one rcp, about 8 instructions where expf and an
// IEEE division took 18.5. The exponent's rounding grows with |x|: against
// the exact functions, with exact exp2 and division, <= 2.5 ulp for x >= 0,
// <= 10 for x in [-10, 0) and <= 65 by x = -87, where the results are below
// 1e-36 (the host test checks these); ex2.approx and rcp.approx add about
// 3 more on a GPU. Below x = -87.3, where e flushes to 0: sigmoid 0, silu
// -0 (the exact silu is below 1e-36 there). sigmoid(NaN) = silu(NaN) =
// NaN, silu(+inf) = +inf, silu(-inf) = NaN (the formula's -inf / inf).
__device__ __forceinline__ float fj_sigmoid_parts(float x, float* r) {
  const float e = fj_exp2_ftz(-1.44269504f * fabsf(x));
  *r = fj_rcp_ftz(1.0f + e);  // 1 + e in [1, 2]
  return x >= 0.0f ? 1.0f : e;
}
__device__ __forceinline__ float fj_sigmoid(float x) {  // NaN: ex2 and rcp of NaN are NaN
  float r;
  const float n = fj_sigmoid_parts(x, &r);
  return n * r;
}
__device__ __forceinline__ float fj_silu(float x) {
  float r;
  const float n = fj_sigmoid_parts(x, &r);
  return (x * n) * r;
}
// GeLU, approximate = "tanh": 0.5 x (1 + tanh z), z = sqrt(2/pi) (x +
// 0.044715 x^3), computed as the same function x sigmoid(2z), as the CPU
// helper does: with e = 2^(-|2z| log2 e) in (0, 1], x / (1 + e) for z >= 0
// and x e / (1 + e) for z < 0. That is one ex2 and one rcp, about 10
// instructions where tanhf made it 23.5 (bench/results/2026-12-01-gpu-
// instructions.md), and it does not cancel for x < 0 as 1 + tanh z does
// (8,185 ulp in [-4, -2), no correct bits below x = -4). The exponent's
// rounding grows with |z|: against the exact function, with exact exp2 and
// division, <= 2.5 ulp for x >= 0, <= 14 for x in [-4, 0) and <= 150 by
// x = -10, where the result is -1.6e-37 (the host test checks these);
// ex2.approx and rcp.approx add about 3 more on a GPU.
// gelu_tanh(+inf) = +inf, gelu_tanh(-inf) = NaN (the formula's -inf * 0),
// -0 -> -0; below about x = -10, where e flushes to 0, -0.
__device__ __forceinline__ float fj_gelu_tanh(float x) {
  // -|2z| log2(e) = -|x (c1 + c3 x^2)|, c1 = sqrt(8/pi) log2(e), c3 = 0.044715 c1.
  const float q = -fabsf(x * fmaf(0x1.a5a7d0p-4f, x * x, 0x1.26aec2p+1f));
  const float e = fj_exp2_ftz(q);
  const float r = fj_rcp_ftz(1.0f + e);  // 1 + e in [1, 2]
  return (x * (x >= 0.0f ? 1.0f : e)) * r;
}
// NaN if either operand is NaN (PyTorch's rule), else fmaxf / fminf. sm_80's
// max.NaN / min.NaN do exactly that in one instruction (the NaN is the
// canonical 0x7fffffff, FJ_NAN); spelled out, as older GPUs (a T4, sm_75)
// and the CUDA emulator (tests/cuda_emulator/) need it, the check costs four.
__device__ __forceinline__ float fj_maximum(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return (a != a || b != b) ? FJ_NAN : fmaxf(a, b);
#endif
}
__device__ __forceinline__ float fj_minimum(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return (a != a || b != b) ? FJ_NAN : fminf(a, b);
#endif
}
__device__ __forceinline__ float fj_pow(float a, float b) { return powf(a, b); }
