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
__device__ __forceinline__ float fj_gelu_none(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
__device__ __forceinline__ float fj_gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float fj_maximum(float a, float b) { return (a != a || b != b) ? FJ_NAN : fmaxf(a, b); }
__device__ __forceinline__ float fj_minimum(float a, float b) { return (a != a || b != b) ? FJ_NAN : fminf(a, b); }
__device__ __forceinline__ float fj_pow(float a, float b) { return powf(a, b); }
