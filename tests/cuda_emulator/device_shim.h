// What a generated CUDA kernel needs from CUDA, in host C++: the CUDA
// emulator includes this before each module's source and compiles the pair
// with the host compiler. Every CUDA thread of a block runs the kernel as a
// fiber; the emulator sets fj_emu_state before it resumes one, so the
// built-in variables read that thread's indices.
//
// Only what fusejit's kernels use is here; anything else fails to compile,
// which the emulator reports as a module load error with the compiler's
// message.
#pragma once

#include <math.h>
#include <stdint.h>

#include <cstring>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
// Blocks run one after another, so a function-local static is exactly one
// variable per block, seen by all of the block's threads. They share one
// section, which the emulator fills with 0xFF (NaN) before each block: on a
// GPU, shared memory starts with whatever was there, never zeros.
#define __shared__ static __attribute__((section("fj_emu_shared")))

#include "emu_state.h"

struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

// Set by the emulator (it finds the symbol with dlsym) before each fiber runs.
extern "C" FjEmuState fj_emu_state;
extern "C" FjEmuState fj_emu_state = {};

// The bounds of the __shared__ variables (both null if there are none): the
// linker defines __start_/__stop_ symbols for a section named like an identifier.
extern "C" char __start_fj_emu_shared[] __attribute__((weak));
extern "C" char __stop_fj_emu_shared[] __attribute__((weak));
extern "C" void fj_emu_shared_memory(char** begin, char** end) {
  *begin = __start_fj_emu_shared;
  *end = __stop_fj_emu_shared;
}

#define threadIdx (fj_emu_state.thread_idx)
#define blockIdx (fj_emu_state.block_idx)
#define blockDim (fj_emu_state.block_dim)
#define gridDim (fj_emu_state.grid_dim)

inline void __syncthreads() { fj_emu_state.syncthreads(); }

template <typename T>
T __shfl_xor_sync(unsigned /*mask: every lane takes part in fusejit's kernels*/, T value, int lane_mask) {
  static_assert(sizeof(T) == 4, "the emulator shuffles 32-bit values");
  unsigned bits;
  std::memcpy(&bits, &value, 4);
  bits = fj_emu_state.shfl_xor(bits, lane_mask);
  std::memcpy(&value, &bits, 4);
  return value;
}

template <typename T>
T __ldg(const T* p) {
  return *p;
}
template <typename T>
T __ldcg(const T* p) {
  return *p;
}

inline unsigned __umulhi(unsigned a, unsigned b) { return static_cast<unsigned>((uint64_t{a} * b) >> 32); }
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __int_as_float(int i) { return __uint_as_float(static_cast<unsigned>(i)); }
inline int __float_as_int(float f) { return static_cast<int>(__float_as_uint(f)); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

// extern "C" fj_emu_launch_NAME(void** args): calls kernel NAME with its
// arguments unpacked from cuLaunchKernel's array, whatever its parameters.
template <typename... Params, size_t... I>
void fj_emu_call(void (*kernel)(Params...), void** args, std::index_sequence<I...>) {
  kernel(*static_cast<std::remove_reference_t<Params>*>(args[I])...);
}
template <typename... Params>
void fj_emu_call(void (*kernel)(Params...), void** args) {
  fj_emu_call(kernel, args, std::index_sequence_for<Params...>{});
}
