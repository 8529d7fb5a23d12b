// fusejit CPU helpers: Philox4x32-10 and dropout, bit for bit the mapping of
// src/ir/philox.h (and of codegen/cuda/fj_philox.cuh):
//   key = seed (lo, hi); counter = (index / 8 lo, index / 8 hi, 0, 0);
//   bits = 16-bit number index % 8 of philox(counter, key), little-endian
//          (the low half of word 0 first);
//   keep iff bits >= threshold (= ceil(p * 2^16));
//   result x * (keep ? scale : 0)  (a dropped NaN or infinity gives NaN).
//
// Written for auto-vectorisation: the 32 x 32 -> 64-bit multiplies go through
// uint64_t (vpmuludq), the ten rounds are spelled out (no inner loop to
// unroll first), and the keep test is a select. A loop over groups of eight
// elements (fj_dropout8, or fj_dropout_span on a tile) then vectorises over
// groups (with AVX2, fj_dropout_span uses explicit vector code instead,
// fj_dropout_block32, and with AVX-512 fj_dropout_block64, twice as fast
// again on a CPU with full-width 512-bit units); fj_dropout on a single
// element draws the whole group and picks its number, for code that handles
// one element at a time.
//
// Header-only and self-contained: embedded as text into JIT-compiled
// translation units.
#pragma once

#include <cstdint>
#include <cstring>

// One Philox round: (c0, c1, c2, c3) <- (hi(M1 c2) ^ c1 ^ k0, lo(M1 c2),
// hi(M0 c0) ^ c3 ^ k1, lo(M0 c0)).
static inline void fj_philox_round(uint32_t& c0, uint32_t& c1, uint32_t& c2, uint32_t& c3, uint32_t k0, uint32_t k1) {
  const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
  const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
  const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
  const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
  c1 = static_cast<uint32_t>(p1);
  c3 = static_cast<uint32_t>(p0);
  c0 = n0;
  c2 = n2;
}

// The ten rounds, the key bumped by the Weyl constants before rounds 2..10
// (as in Random123), spelled out (no inner loop to unroll first); State is
// a word (uint32_t) or a vector of them (fj_u64x4).
template <typename State, void (*Round)(State&, State&, State&, State&, uint32_t, uint32_t)>
static inline void fj_philox_rounds(State& c0, State& c1, State& c2, State& c3, uint32_t k0, uint32_t k1) {
  const uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  Round(c0, c1, c2, c3, k0, k1);
  Round(c0, c1, c2, c3, k0 + 1u * kW0, k1 + 1u * kW1);
  Round(c0, c1, c2, c3, k0 + 2u * kW0, k1 + 2u * kW1);
  Round(c0, c1, c2, c3, k0 + 3u * kW0, k1 + 3u * kW1);
  Round(c0, c1, c2, c3, k0 + 4u * kW0, k1 + 4u * kW1);
  Round(c0, c1, c2, c3, k0 + 5u * kW0, k1 + 5u * kW1);
  Round(c0, c1, c2, c3, k0 + 6u * kW0, k1 + 6u * kW1);
  Round(c0, c1, c2, c3, k0 + 7u * kW0, k1 + 7u * kW1);
  Round(c0, c1, c2, c3, k0 + 8u * kW0, k1 + 8u * kW1);
  Round(c0, c1, c2, c3, k0 + 9u * kW0, k1 + 9u * kW1);
}

// Philox4x32-10 of the counter (c0, c1, c2, c3) under key (k0, k1).
static inline void fj_philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1,
                                    uint32_t& w0, uint32_t& w1, uint32_t& w2, uint32_t& w3) {
  fj_philox_rounds<uint32_t, fj_philox_round>(c0, c1, c2, c3, k0, k1);
  w0 = c0;
  w1 = c1;
  w2 = c2;
  w3 = c3;
}

// The dropout counter of group (hi, lo): (lo, hi, 0, 0). The zeros fold into
// the first round.
static inline void fj_philox(uint32_t lo, uint32_t hi, uint32_t k0, uint32_t k1, uint32_t& w0, uint32_t& w1,
                             uint32_t& w2, uint32_t& w3) {
  fj_philox4x32_10(lo, hi, 0u, 0u, k0, k1, w0, w1, w2, w3);
}

// x * (keep ? scale : 0) for one element's 16-bit number. The multiplier is
// selected by integer masks rather than ?: (see fj_detail_select in
// fj_math.h: a float ?: whose result feeds arithmetic can keep a loop from
// vectorising).
static inline float fj_dropout_apply(float x, uint32_t bits, uint32_t threshold, float scale) {
  const uint32_t keep = 0u - static_cast<uint32_t>(bits >= threshold);
  uint32_t scale_bits;
  std::memcpy(&scale_bits, &scale, sizeof scale_bits);
  const uint32_t m_bits = scale_bits & keep;  // scale or +0.0f
  float m;
  std::memcpy(&m, &m_bits, sizeof m);
  return x * m;
}

// Elements 2j and 2j + 1 of a group: the low and the high half of word j.
static inline void fj_dropout_pair(const float* x, float* y, uint32_t word, uint32_t threshold, float scale) {
  const float x0 = x[0], x1 = x[1];  // loads first: y may be x
  y[0] = fj_dropout_apply(x0, word & 0xffffu, threshold, scale);
  y[1] = fj_dropout_apply(x1, word >> 16, threshold, scale);
}

// Dropout of element `index`: one Philox call for its group of eight, then
// its 16-bit number (index % 8).
static inline float fj_dropout(float x, unsigned long long index, uint32_t threshold, float scale, uint32_t k0,
                               uint32_t k1) {
  const unsigned long long group = index >> 3;
  uint32_t w0, w1, w2, w3;
  fj_philox(static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32), k0, k1, w0, w1, w2, w3);
  const uint32_t pair = static_cast<uint32_t>((index >> 1) & 3u);
  const uint32_t word = pair == 0 ? w0 : (pair == 1 ? w1 : (pair == 2 ? w2 : w3));  // integer selects vectorise
  return fj_dropout_apply(x, (index & 1u) ? word >> 16 : word & 0xffffu, threshold, scale);
}

// Dropout of 8 consecutive elements starting at `index` (a multiple of 8):
// they share one Philox call, whose eight 16-bit numbers decide them in order.
static inline void fj_dropout8(const float* x, float* y, unsigned long long index, uint32_t threshold, float scale,
                               uint32_t k0, uint32_t k1) {
  const unsigned long long group = index >> 3;
  uint32_t w0, w1, w2, w3;
  fj_philox(static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32), k0, k1, w0, w1, w2, w3);
  fj_dropout_pair(x + 0, y + 0, w0, threshold, scale);
  fj_dropout_pair(x + 2, y + 2, w1, threshold, scale);
  fj_dropout_pair(x + 4, y + 4, w2, threshold, scale);
  fj_dropout_pair(x + 6, y + 6, w3, threshold, scale);
}

// With AVX2, four groups at a time in explicit vector code: the
// auto-vectoriser keeps each 32 x 32 -> 64-bit product's halves in 32-bit
// lanes and pays three shuffles per multiply to split and merge them, which
// made dropout (with the earlier mask of 32 bits per element) cost 2.9 ns
// per element per thread on a Zen 3; this took 1.1. Each group's Philox
// state sits in a 64-bit lane, whose low half is the 32-bit word:
// vpmuludq reads only the low halves, so the high halves
// may hold anything, and a product's two halves need one shift to use. GCC
// (12 on) and Clang vector extensions, and the vpmuludq builtin both
// provide, rather than <immintrin.h>, whose parsing would cost more than the
// kernel's compile. The results are the scalar code's, bit for bit.
#if defined(__AVX2__) && (defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12))
#define FJ_PHILOX_AVX2 1

// One round on vectors of groups (the 256- and 512-bit blocks below): Mul
// gives each lane's low half times m as a full 64-bit product.
template <typename U64V, U64V (*Mul)(U64V, uint32_t)>
static inline void fj_philox_round_vec(U64V& c0, U64V& c1, U64V& c2, U64V& c3, uint32_t k0, uint32_t k1) {
  const U64V p0 = Mul(c0, 0xD2511F53u);
  const U64V p1 = Mul(c2, 0xCD9E8D57u);
  const U64V n0 = (p1 >> 32) ^ c1 ^ static_cast<unsigned long long>(k0);
  const U64V n2 = (p0 >> 32) ^ c3 ^ static_cast<unsigned long long>(k1);
  c1 = p1;
  c3 = p0;
  c0 = n0;
  c2 = n2;
}

// y = x * (keep ? scale : 0) for two vectors of words in the elements'
// order (group after group, w0..w3 in each, as 64-bit pairs): each word's
// low half decides an element and its high half the next, so the words read
// as 16-bit numbers (U16V, half a word vector each) are the elements'
// numbers in order. Each half is widened to 32-bit lanes (vpmovzxwd) and
// decides F32V floats: elements y[0, 4 * lanes).
template <typename U16V, typename I32V, typename F32V, typename U64V>
static inline void fj_dropout_apply_vec(const U64V (&words)[2], const float* x, float* y, uint32_t threshold,
                                        float scale) {
  constexpr int kLanes = static_cast<int>(sizeof(F32V) / sizeof(float));
  static_assert(2 * sizeof(U16V) == sizeof(U64V) && sizeof(I32V) == sizeof(F32V), "vector sizes");
  const F32V scale_v = F32V{} + scale;
  const I32V scale_bits = reinterpret_cast<I32V>(scale_v);
  for (int part = 0; part < 4; ++part) {
    U16V half;
    std::memcpy(&half, reinterpret_cast<const char*>(&words[part / 2]) + (part % 2) * sizeof(U16V), sizeof half);
    // Numbers below 2^16 and a threshold up to 2^16 compare the same signed
    // (vpcmpgtd; AVX2 has no unsigned compare).
    const I32V numbers = __builtin_convertvector(half, I32V);
    const I32V keep = numbers >= static_cast<int>(threshold);  // all ones where kept
    const I32V m_bits = scale_bits & keep;                     // scale or +0.0f
    F32V xv;
    std::memcpy(&xv, x + kLanes * part, sizeof xv);
    const F32V out = xv * reinterpret_cast<F32V>(m_bits);
    std::memcpy(y + kLanes * part, &out, sizeof out);
  }
}
typedef unsigned long long fj_u64x4 __attribute__((vector_size(32)));
typedef unsigned short fj_u16x8 __attribute__((vector_size(16)));
typedef int fj_i32x8 __attribute__((vector_size(32)));
typedef float fj_f32x8 __attribute__((vector_size(32)));

// The products of each lane's low half with m: four full 64-bit products.
static inline fj_u64x4 fj_detail_mul32x4(fj_u64x4 a, uint32_t m) {
  const int mi = static_cast<int>(m);
  const fj_i32x8 mv = {mi, 0, mi, 0, mi, 0, mi, 0};
  return reinterpret_cast<fj_u64x4>(__builtin_ia32_pmuludq256(reinterpret_cast<fj_i32x8>(a), mv));
}

// Elements y[0, 32) of the groups with counters (lo + j, hi), j < 4; lo + 3
// may wrap (the caller discards those groups). y may equal x.
static inline void fj_dropout_block32(const float* x, float* y, uint32_t lo, uint32_t hi, uint32_t threshold,
                                      float scale, uint32_t k0, uint32_t k1) {
  const unsigned long long l = lo, h = hi;
  fj_u64x4 c0 = {l, l + 1, l + 2, l + 3}, c1 = {h, h, h, h}, c2 = {0, 0, 0, 0}, c3 = {0, 0, 0, 0};
  fj_philox_rounds<fj_u64x4, fj_philox_round_vec<fj_u64x4, fj_detail_mul32x4>>(c0, c1, c2, c3, k0, k1);
  // Words (w0 w1) and (w2 w3) of each group as 32-bit pairs, then in the
  // elements' order: groups 0 and 1, groups 2 and 3.
  const fj_u64x4 w01 = (c0 & 0xffffffffull) | (c1 << 32);
  const fj_u64x4 w23 = (c2 & 0xffffffffull) | (c3 << 32);
  const fj_u64x4 words[2] = {__builtin_shufflevector(w01, w23, 0, 4, 1, 5), __builtin_shufflevector(w01, w23, 2, 6, 3, 7)};
  fj_dropout_apply_vec<fj_u16x8, fj_i32x8, fj_f32x8>(words, x, y, threshold, scale);
}
#else
#define FJ_PHILOX_AVX2 0
#endif

// With AVX-512, eight groups at a time the same way, in 512-bit vectors:
// half the instructions per element of fj_dropout_block32. On a CPU with
// full-width 512-bit units (AMD Zen 5) dropout ran 2.1x as fast as with
// 256-bit vectors (bench/results/2026-12-01-cpu-avx512-philox.md, with the
// earlier 24-bit mask); where 512-bit operations are split in two (Zen 4)
// it costs the same. GCC and Clang name the 512-bit vpmuludq builtin
// differently.
#if FJ_PHILOX_AVX2 && defined(__AVX512F__)
#define FJ_PHILOX_AVX512 1
typedef unsigned long long fj_u64x8 __attribute__((vector_size(64)));
typedef long long fj_i64x8 __attribute__((vector_size(64)));
typedef unsigned short fj_u16x16 __attribute__((vector_size(32)));
typedef int fj_i32x16 __attribute__((vector_size(64)));
typedef float fj_f32x16 __attribute__((vector_size(64)));

static inline fj_u64x8 fj_detail_mul32x8(fj_u64x8 a, uint32_t m) {
  const int mi = static_cast<int>(m);
  const fj_i32x16 mv = {mi, 0, mi, 0, mi, 0, mi, 0, mi, 0, mi, 0, mi, 0, mi, 0};
#if defined(__clang__)
  return reinterpret_cast<fj_u64x8>(__builtin_ia32_pmuludq512(reinterpret_cast<fj_i32x16>(a), mv));
#else
  return reinterpret_cast<fj_u64x8>(__builtin_ia32_pmuludq512_mask(reinterpret_cast<fj_i32x16>(a), mv, fj_i64x8{},
                                                                    static_cast<unsigned char>(0xff)));
#endif
}

// Elements y[0, 64) of the groups with counters (lo + j, hi), j < 8, which
// must not wrap (the caller stays inside one run). y may equal x.
static inline void fj_dropout_block64(const float* x, float* y, uint32_t lo, uint32_t hi, uint32_t threshold,
                                      float scale, uint32_t k0, uint32_t k1) {
  const unsigned long long l = lo, h = hi;
  fj_u64x8 c0 = {l, l + 1, l + 2, l + 3, l + 4, l + 5, l + 6, l + 7}, c1 = {h, h, h, h, h, h, h, h}, c2 = {}, c3 = {};
  fj_philox_rounds<fj_u64x8, fj_philox_round_vec<fj_u64x8, fj_detail_mul32x8>>(c0, c1, c2, c3, k0, k1);
  // As in fj_dropout_block32: (w0 w1) and (w2 w3) pairs, then groups 0-3
  // and groups 4-7 in the elements' order.
  const fj_u64x8 w01 = (c0 & 0xffffffffull) | (c1 << 32);
  const fj_u64x8 w23 = (c2 & 0xffffffffull) | (c3 << 32);
  const fj_u64x8 words[2] = {__builtin_shufflevector(w01, w23, 0, 8, 1, 9, 2, 10, 3, 11),
                             __builtin_shufflevector(w01, w23, 4, 12, 5, 13, 6, 14, 7, 15)};
  fj_dropout_apply_vec<fj_u16x16, fj_i32x16, fj_f32x16>(words, x, y, threshold, scale);
}
#else
#define FJ_PHILOX_AVX512 0
#endif

// Groups of eight: y[8g + j] for g in [0, groups), the first group's counter
// being first_group. Within a run of groups whose counter's high word is
// constant (2^32 groups, i.e. 2^35 elements), the counter is a 32-bit
// induction variable, which keeps the vectorised loop in 32-bit lanes.
static inline void fj_dropout_groups(const float* x, float* y, int64_t groups, unsigned long long first_group,
                                     uint32_t threshold, float scale, uint32_t k0, uint32_t k1) {
  while (groups > 0) {
    const uint32_t lo0 = static_cast<uint32_t>(first_group);
    const uint32_t hi = static_cast<uint32_t>(first_group >> 32);
    const unsigned long long room = (1ull << 32) - lo0;  // groups before the high word changes
    const int64_t run = static_cast<unsigned long long>(groups) < room ? groups : static_cast<int64_t>(room);
#if FJ_PHILOX_AVX2
    int64_t g = 0;
#if FJ_PHILOX_AVX512
    for (; g + 8 <= run; g += 8) {
      fj_dropout_block64(x + 8 * g, y + 8 * g, lo0 + static_cast<uint32_t>(g), hi, threshold, scale, k0, k1);
    }
#endif
    for (; g + 4 <= run; g += 4) {
      fj_dropout_block32(x + 8 * g, y + 8 * g, lo0 + static_cast<uint32_t>(g), hi, threshold, scale, k0, k1);
    }
    if (g < run) {  // one to three groups: a block of four on copies, rather than a loop to vectorise and compile
      float xs[32] = {}, ys[32];
      std::memcpy(xs, x + 8 * g, static_cast<size_t>(run - g) * 8 * sizeof(float));
      fj_dropout_block32(xs, ys, lo0 + static_cast<uint32_t>(g), hi, threshold, scale, k0, k1);
      std::memcpy(y + 8 * g, ys, static_cast<size_t>(run - g) * 8 * sizeof(float));
    }
#else
    for (int64_t g = 0; g < run; ++g) {
      uint32_t w0, w1, w2, w3;
      fj_philox(lo0 + static_cast<uint32_t>(g), hi, k0, k1, w0, w1, w2, w3);
      fj_dropout_pair(x + 8 * g + 0, y + 8 * g + 0, w0, threshold, scale);
      fj_dropout_pair(x + 8 * g + 2, y + 8 * g + 2, w1, threshold, scale);
      fj_dropout_pair(x + 8 * g + 4, y + 8 * g + 4, w2, threshold, scale);
      fj_dropout_pair(x + 8 * g + 6, y + 8 * g + 6, w3, threshold, scale);
    }
#endif
    x += 8 * run;
    y += 8 * run;
    groups -= run;
    first_group += static_cast<unsigned long long>(run);
  }
}

// Dropout of the count (< 8) elements from global index first_index, which
// lie in one group of eight: one Philox call, and the elements spelled out.
// (A loop here was vectorised and unrolled like the main one, for at most a
// few elements, and tripled the kernel's compile time.) Element e reads
// x[e] before writing y[e], so y may equal x.
static inline void fj_dropout_partial(const float* x, float* y, int64_t count, unsigned long long first_index,
                                      uint32_t threshold, float scale, uint32_t k0, uint32_t k1) {
  if (count <= 0) return;
  const unsigned long long group = first_index >> 3;
  uint32_t w[4];
  fj_philox(static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32), k0, k1, w[0], w[1], w[2], w[3]);
  uint16_t numbers[8];
  std::memcpy(numbers, w, sizeof numbers);  // little-endian: number j is element j of the group
  const uint16_t* n = numbers + (first_index & 7u);  // lane + count <= 8
  y[0] = fj_dropout_apply(x[0], n[0], threshold, scale);
  if (count > 1) y[1] = fj_dropout_apply(x[1], n[1], threshold, scale);
  if (count > 2) y[2] = fj_dropout_apply(x[2], n[2], threshold, scale);
  if (count > 3) y[3] = fj_dropout_apply(x[3], n[3], threshold, scale);
  if (count > 4) y[4] = fj_dropout_apply(x[4], n[4], threshold, scale);
  if (count > 5) y[5] = fj_dropout_apply(x[5], n[5], threshold, scale);
  if (count > 6) y[6] = fj_dropout_apply(x[6], n[6], threshold, scale);
}

// Dropout of the n elements y[i] = dropout(x[i]) with global indices
// first_index + i, for any first_index: the elements up to the next multiple
// of 8, whole groups (vectorised), then the last few elements.
// y may equal x (in place); otherwise they must not overlap.
// Not inlined: it is called once per tile, and one copy per module instead of
// one per call site keeps a kernel with several dropouts quick to compile.
#if defined(__clang__)
__attribute__((noinline))
#else
__attribute__((noinline, noclone))
#endif
static inline void fj_dropout_span(const float* x, float* y, int64_t n, unsigned long long first_index,
                                   uint32_t threshold, float scale, uint32_t k0, uint32_t k1) {
  int64_t head = static_cast<int64_t>((8u - (first_index & 7u)) & 7u);
  head = head < n ? head : n;
  fj_dropout_partial(x, y, head, first_index, threshold, scale, k0, k1);
  const int64_t groups = (n - head) / 8;
  fj_dropout_groups(x + head, y + head, groups, (first_index + head) >> 3, threshold, scale, k0, k1);
  const int64_t done = head + 8 * groups;
  fj_dropout_partial(x + done, y + done, n - done, first_index + done, threshold, scale, k0, k1);
}

// What generated kernels call: the seed whole (a kernel's s_NAME local),
// split into Philox's key here (philox.h: key = (seed lo, seed hi)). CUDA
// kernels take round keys instead; the op table's code names one `{key}`.
static inline float fj_dropout(float x, unsigned long long index, uint32_t threshold, float scale,
                               unsigned long long seed) {
  return fj_dropout(x, index, threshold, scale, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}
static inline void fj_dropout_span(const float* x, float* y, int64_t n, unsigned long long first_index,
                                   uint32_t threshold, float scale, unsigned long long seed) {
  fj_dropout_span(x, y, n, first_index, threshold, scale, static_cast<uint32_t>(seed),
                  static_cast<uint32_t>(seed >> 32));
}
