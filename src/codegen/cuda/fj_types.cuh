// fusejit CUDA helpers: storage types and their conversions to f32.
// Self-contained (no cuda_fp16.h / cuda_bf16.h), so NVRTC needs no include
// path; the conversions are the PTX instructions those headers use
// (cvt.rn.* rounds to nearest even, as the reference interpreter does).
// Requires sm_80 or newer (cvt.rn.bf16.f32). The #else branches are the
// same conversions in C++, for the tests' CUDA emulator, which compiles
// generated kernels for the host.
typedef unsigned short fj_u16;
struct __align__(2) fj_f16 { fj_u16 bits; };
struct __align__(2) fj_bf16 { fj_u16 bits; };

__device__ __forceinline__ float fj_to_float(float x) { return x; }
__device__ __forceinline__ float fj_to_float(fj_f16 h) {
  float f;
#ifdef __CUDA_ARCH__
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
#else  // compiled for the host by the CUDA emulator (tests/cuda_emulator/)
  _Float16 half;
  __builtin_memcpy(&half, &h.bits, 2);
  f = half;
#endif
  return f;
}
__device__ __forceinline__ float fj_to_float(fj_bf16 b) { return __uint_as_float(((unsigned)b.bits) << 16); }

template <typename T>
__device__ __forceinline__ T fj_from_float(float x);
template <>
__device__ __forceinline__ float fj_from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ fj_f16 fj_from_float<fj_f16>(float x) {
  fj_f16 h;
#ifdef __CUDA_ARCH__
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(x));
#else
  const _Float16 half = static_cast<_Float16>(x);  // rounds to nearest even
  __builtin_memcpy(&h.bits, &half, 2);
#endif
  return h;
}
template <>
__device__ __forceinline__ fj_bf16 fj_from_float<fj_bf16>(float x) {
  fj_bf16 b;
#ifdef __CUDA_ARCH__
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b.bits) : "f"(x));
#else  // round to nearest even; NaN stays a (quiet) NaN
  const unsigned u = __float_as_uint(x);
  b.bits = (u & 0x7fffffffu) > 0x7f800000u ? (fj_u16)((u >> 16) | 0x40u) : (fj_u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
  return b;
}

// A value ptxas must keep rather than compute again inside a loop. ptxas
// recomputes cheap loop invariants (a thread's shared-memory slot, a bf16
// vector widened before the row loop) in every iteration when it thinks a
// register is worth more; each recomputation is issue slots in every row.
// An empty asm that "writes" the value hides where it came from.
__device__ __forceinline__ void fj_keep(int& v) {
#ifdef __CUDA_ARCH__
  asm volatile("" : "+r"(v));
#endif
}
__device__ __forceinline__ void fj_keep(float& v) {
#ifdef __CUDA_ARCH__
  asm volatile("" : "+f"(v));
#endif
}

// A pointer whose value the compiler cannot see, so that loads through it
// inside a loop stay there: an [N] vector a row kernel reads in every row
// rather than keeping (fusion/gpu_row_shape.h: gpu_row_vectors).
template <typename T>
__device__ __forceinline__ void fj_opaque(const T*& p) {
#ifdef __CUDA_ARCH__
  asm volatile("" : "+l"(p));
#endif
}

// Rounding an f32 value to a storage type and back: what `cast` means.
__device__ __forceinline__ float fj_round_f32(float x) { return x; }
__device__ __forceinline__ float fj_round_f16(float x) { return fj_to_float(fj_from_float<fj_f16>(x)); }
__device__ __forceinline__ float fj_round_bf16(float x) { return fj_to_float(fj_from_float<fj_bf16>(x)); }

// N consecutive elements from / to 16-byte aligned memory, as 16-byte
// accesses (ld.global.nc.v4 / st.global.v4). N * sizeof(T) is a multiple of 16.
// The same in two steps, so that loads can be issued long before their
// values are needed (a row kernel fetching its next row): fj_load_raw keeps
// the N * sizeof(T) / 16 chunks as loaded, fj_convert_raw widens them.
template <typename T, int N>
__device__ __forceinline__ void fj_load_raw(const T* __restrict__ p, uint4* raw) {
#pragma unroll
  for (int c = 0; c < N * (int)sizeof(T) / 16; ++c) raw[c] = __ldg(reinterpret_cast<const uint4*>(p) + c);
}

// fj_load_raw as plain (coherent) loads, for a row kernel's rows ahead:
// ptxas moves read-only (nc) loads past the row's barriers, down to the end
// of its work, where little latency is left to hide; an ordinary load stays
// ahead of the first barrier. The inputs are not written while the kernel
// runs, so both read the same values. The asm is volatile so that NVVM,
// too, keeps it where it is written: a plain asm with no memory operand
// may be sunk to its first use, which is after those barriers (NVRTC 13.0
// keeps it ahead of the first bar.sync either way, as the PTX shows).
template <typename T, int N>
__device__ __forceinline__ void fj_load_raw_early(const T* __restrict__ p, uint4* raw) {
#pragma unroll
  for (int c = 0; c < N * (int)sizeof(T) / 16; ++c) {
#ifdef __CUDA_ARCH__
    const uint4* q = reinterpret_cast<const uint4*>(p) + c;
    asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(raw[c].x), "=r"(raw[c].y), "=r"(raw[c].z), "=r"(raw[c].w)
                 : "l"(q));
#else
    raw[c] = reinterpret_cast<const uint4*>(p)[c];
#endif
  }
}

// One 16-byte chunk of T widened to 16 / sizeof(T) floats.
template <typename T>
__device__ __forceinline__ void fj_widen_chunk(const uint4& raw, const T*, float* v) {
  const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int j = 0; j < 16 / (int)sizeof(T); ++j) v[j] = fj_to_float(e[j]);
}
// bf16 pairs from their 32-bit words: the low element is the word shifted
// up 16 bits, the high one the word with its low half cleared, one
// instruction each. Element by element, ptxas extracted the high half and
// shifted it back (PRMT + SHF): 4 more loop instructions per 8 elements in
// the fused demo kernel.
__device__ __forceinline__ void fj_widen_chunk(const uint4& raw, const fj_bf16*, float* v) {
  const unsigned w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    v[2 * k] = __uint_as_float(w[k] << 16);
    v[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
  }
}

template <typename T, int N>
__device__ __forceinline__ void fj_convert_raw(const uint4* raw, float* v) {
  constexpr int kPerChunk = 16 / sizeof(T);
#pragma unroll
  for (int c = 0; c < N / kPerChunk; ++c) fj_widen_chunk(raw[c], (const T*)nullptr, v + c * kPerChunk);
}

template <typename T, int N>
__device__ __forceinline__ void fj_load_vec(const T* __restrict__ p, float* v) {
  uint4 raw[(N * sizeof(T) + 15) / 16];  // at least one: the scalar variant instantiates this unused
  fj_load_raw<T, N>(p, raw);
  fj_convert_raw<T, N>(raw, v);
}

template <typename T, int N>
__device__ __forceinline__ void fj_store_vec(T* __restrict__ p, const float* v) {
  constexpr int kPerChunk = 16 / sizeof(T);
#pragma unroll
  for (int c = 0; c < N / kPerChunk; ++c) {
    uint4 raw;
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int j = 0; j < kPerChunk; ++j) e[j] = fj_from_float<T>(v[c * kPerChunk + j]);
    reinterpret_cast<uint4*>(p)[c] = raw;
  }
}

// The same accesses one element at a time, for pointers that are not
// 16-byte aligned.
template <typename T, int N>
__device__ __forceinline__ void fj_load_scalar(const T* __restrict__ p, float* v) {
#pragma unroll
  for (int j = 0; j < N; ++j) v[j] = fj_to_float(p[j]);
}

template <typename T, int N>
__device__ __forceinline__ void fj_store_scalar(T* __restrict__ p, const float* v) {
#pragma unroll
  for (int j = 0; j < N; ++j) p[j] = fj_from_float<T>(v[j]);
}

// A uniform branch on alignment, so that the arithmetic around the accesses
// is generated once rather than once per access width.
template <typename T, int N>
__device__ __forceinline__ void fj_load(const T* __restrict__ p, float* v, bool aligned) {
  if (aligned) {
    fj_load_vec<T, N>(p, v);
  } else {
    fj_load_scalar<T, N>(p, v);
  }
}

template <typename T, int N>
__device__ __forceinline__ void fj_store(T* __restrict__ p, const float* v, bool aligned) {
  if (aligned) {
    fj_store_vec<T, N>(p, v);
  } else {
    fj_store_scalar<T, N>(p, v);
  }
}
