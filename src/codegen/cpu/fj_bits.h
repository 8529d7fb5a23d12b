// fusejit CPU helpers: float <-> bit pattern, for the other fj_*.h headers.
// memcpy is how C++17 spells a bit cast; compilers turn it into a register
// move (or nothing, inside a vectorized loop).
//
// Header-only; embedded as text, first, into JIT-compiled translation units.
#pragma once

#include <cstdint>
#include <cstring>

static inline uint32_t fj_float_as_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
static inline float fj_bits_as_float(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
