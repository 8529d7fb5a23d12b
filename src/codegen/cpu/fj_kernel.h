// fusejit CPU helpers: moving spans of a tensor between its storage type and
// the f32 arrays kernels compute in, and reductions over such an array.
// Every loop here is a plain counted loop the compiler vectorizes.
#pragma once

#if defined(__AVX__)
// A vector of anything, for the streaming stores below: a whole 64-byte
// line with AVX-512, else 32 bytes. Compiler builtins rather than
// <immintrin.h>: with -march=native that header declares every intrinsic of
// every extension, and parsing it was ~80% of each kernel's compile time.
#if defined(__AVX512F__)
#define FJ_STREAM_BYTES 64
#else
#define FJ_STREAM_BYTES 32
#endif
typedef long long fj_stream_vec
    __attribute__((vector_size(FJ_STREAM_BYTES), aligned(FJ_STREAM_BYTES), may_alias));
// Streams one vector to p (aligned to FJ_STREAM_BYTES). The empty asm keeps
// the compiler from reordering these stores: write-combining buffers fill
// best with a line's stores in order and one line after the other, and
// GCC interleaved the stores of two lines (a copy so compiled measured
// 31 GB/s on an Intel Xeon where the same stores in order measured 38-39).
static inline void fj_stream_store(void* p, fj_stream_vec v) {
#if defined(__clang__)
  __builtin_nontemporal_store(v, static_cast<fj_stream_vec*>(p));
#elif FJ_STREAM_BYTES == 64
  __builtin_ia32_movntdq512(static_cast<fj_stream_vec*>(p), v);
#else
  __builtin_ia32_movntdq256(static_cast<fj_stream_vec*>(p), v);
#endif
  __asm__ volatile("" ::: "memory");
}
#endif

// Asks for the cache lines of a span, or of the span `ahead` bytes past it,
// before they are used: every 64-byte line from the one the first byte lies
// in. A row kernel requests the next row while it computes this one (the
// hardware prefetcher does not cross from one row's short stream to the
// next soon enough); a pointwise kernel requests each read a little ahead
// of its tile (kCpuPrefetchAheadBytes in cpu_emitter.h). The address is
// integer arithmetic because the lines ahead may lie past the end of the
// tensor: a prefetch of any address is harmless, a pointer past the end is not.
template <typename T>
static inline void fj_prefetch_span(const T* p, long long n, long long ahead = 0) {
  const unsigned long long first = reinterpret_cast<unsigned long long>(p) + static_cast<unsigned long long>(ahead);
  const unsigned long long end = first + static_cast<unsigned long long>(n) * sizeof(T);
  for (unsigned long long line = first & ~63ull; line < end; line += 64) {
    __builtin_prefetch(reinterpret_cast<const void*>(line), 0, 3);
  }
}

template <typename T>
static inline void fj_load_span(const T* __restrict p, float* __restrict v, long long n) {
  for (long long c = 0; c < n; ++c) v[c] = fj_to_float(p[c]);
}

template <typename T>
static inline void fj_store_span(T* __restrict p, const float* __restrict v, long long n) {
  for (long long c = 0; c < n; ++c) p[c] = fj_from_float<T>(v[c]);
}

// Stores v[0, n) into p kLanes elements at a time with `convert(in, out)`,
// one instruction per vector that returns false, writing nothing, for a
// vector that instruction would round otherwise than fj_from_float<T>;
// such a vector, and the tail, take fj_from_float<T>. The overloads of
// fj_store_span below give it their instruction, in inline assembly rather
// than intrinsics: <immintrin.h> costs most of a kernel's compile time
// (see fj_stream_store), and GCC and Clang name the builtins differently.
template <typename T, int kLanes, typename Convert>
static inline void fj_store_span_by_vectors(T* __restrict p, const float* __restrict v, long long n, Convert convert) {
  long long c = 0;
  for (; c + kLanes <= n; c += kLanes) {
    if (__builtin_expect(!convert(v + c, p + c), 0)) {
      for (int j = 0; j < kLanes; ++j) p[c + j] = fj_from_float<T>(v[c + j]);
    }
  }
  for (; c < n; ++c) p[c] = fj_from_float<T>(v[c]);
}

#if defined(__AVX512F__) && (defined(__x86_64__) || defined(__i386__))
typedef float fj_v16sf __attribute__((vector_size(64)));
typedef short fj_v16hi __attribute__((vector_size(32)));
// The `convert` of fj_store_span_by_vectors for 16 floats to T by `insn`
// (AT&T syntax, completed with " x, r"), refusing a vector in which
// vfpclassps finds a value of the classes `classes` (AVX512-DQ).
#define FJ_AVX512_CONVERT16(T, classes, insn)                                                 \
  [](const float* in, T* out) {                                                               \
    fj_v16sf x;                                                                               \
    __builtin_memcpy(&x, in, sizeof x);                                                       \
    fj_v16hi r;                                                                               \
    unsigned found;                                                                           \
    __asm__("vfpclassps $" #classes ", %[x], %%k1\n\tkmovw %%k1, %[s]\n\t" insn " %[x], %[r]" \
            : [r] "=v"(r), [s] "=r"(found)                                                    \
            : [x] "v"(x)                                                                      \
            : "k1");                                                                          \
    if (found != 0) return false;                                                             \
    __builtin_memcpy(out, &r, sizeof r);                                                      \
    return true;                                                                              \
  }
#endif

#if defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__AVX512DQ__) && \
    (defined(__x86_64__) || defined(__i386__))
// Where the CPU has AVX512-BF16 (Intel Xeons from Cooper Lake on, AMD Zen 4
// and later; vfpclassps is AVX512-DQ, which they all have), vcvtneps2bf16
// rounds 16 floats as fj_from_float<fj_bf16> does (to nearest even; a NaN
// keeps its top bits and gets the quiet bit), except that it flushes
// subnormal inputs to zero: a vector holding one (vfpclassps, class 0x20)
// takes the portable conversion. Bit for bit fj_from_float<fj_bf16> for
// every float (all 2^32 were compared on an Intel Xeon); 0.057 ns per
// element on one Xeon thread against 0.146
// (bench/results/2026-12-02-cpu-bf16-narrowing.md).
#define FJ_NATIVE_BF16 1
static inline void fj_store_span(fj_bf16* __restrict p, const float* __restrict v, long long n) {
  fj_store_span_by_vectors<fj_bf16, 16>(p, v, n, FJ_AVX512_CONVERT16(fj_bf16, 0x20, "vcvtneps2bf16"));
}
#else
#define FJ_NATIVE_BF16 0
#endif

#if defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__AVX512BW__) && \
    (defined(__x86_64__) || defined(__i386__))
// The GEMM's step for two bf16 operands (codegen/cpu/matmul.cpp): each f32
// lane of c adds the products of a pair of bf16 values, the pair at `pair`
// (broadcast to every lane) times the lane's pair in b, with one vdpbf16ps:
// 32 multiply-adds where vfmadd231ps does 16, and about twice the rate on
// an AMD EPYC with AVX512-BF16 (bench/results/2026-12-07-cpu-bf16-gemm.md).
// A bf16 product is exact in f32; the instruction adds the high halves'
// product first, then the low halves', each addition rounded to nearest
// even, but it reads subnormal inputs (and a subnormal c) as zero and
// flushes subnormal results to zero; the GEMM keeps every value it gives
// the instruction far enough from the subnormals that neither can happen
// (codegen/cpu/matmul.cpp, write_bf16_pair_blocks).
#define FJ_BF16_DOT 1
static inline void fj_dot_bf16_pairs(fj_vec& c, const unsigned* pair, fj_vec b) {
  __asm__("vdpbf16ps %[a]%{1to16%}, %[b], %[c]" : [c] "+v"(c) : [a] "m"(*pair), [b] "v"(b));
}
// What the GEMM's packing notes of each bf16 value (`bits`), branch-free so
// that its loops stay vectorized: whether it is tiny (nonzero, of biased
// exponent below `low`: subnormal, for any low of 1 or more), whether it
// is an infinity, and its biased exponent if it is nonzero, else 255.
static inline unsigned fj_bf16_tiny(unsigned bits, unsigned low) {
  return (bits & 0x7fffu) != 0 && ((bits >> 7) & 0xffu) < low;
}
static inline unsigned fj_bf16_infinite(unsigned bits) { return (bits & 0x7fffu) == 0x7f80u; }
static inline unsigned fj_bf16_exponent_of_nonzero(unsigned bits) {
  return (bits & 0x7fffu) != 0 ? (bits >> 7) & 0xffu : 255u;
}
// Bit b set where p[b] is tiny (fj_bf16_tiny), for the 32 values at p: with
// AVX512BW (which every CPU with AVX512-BF16 has, and compilers enable with
// it), two compares of one vector and a vpmovw2m, where testing them one by one (or four at a time) made
// the search for the GeLU tail's few tiny values in each row a third of
// mlp_block's second GEMM. A magnitude's exponent is below `low` exactly
// where the magnitude is below low << 7 (the mantissa takes 7 bits).
static inline unsigned fj_bf16_tiny_mask32(const fj_bf16* p, unsigned low) {
  typedef unsigned short fj_u16x32 __attribute__((vector_size(64)));
  fj_u16x32 v;
  __builtin_memcpy(&v, p, sizeof v);
  const fj_u16x32 magnitude = v & static_cast<unsigned short>(0x7fff);
  const auto tiny = (magnitude != 0) & (magnitude < static_cast<unsigned short>(low << 7));
  unsigned mask;
  __asm__("vpmovw2m %[t], %%k1\n\tkmovd %%k1, %[m]" : [m] "=r"(mask) : [t] "v"(tiny) : "k1");
  return mask;
}
#else
#define FJ_BF16_DOT 0
#endif

// f16 likewise with vcvtps2ph (rounding immediate 0: to nearest even),
// which is IEEE for every float but NaN: it keeps a NaN's payload, where
// fj_from_float<fj_f16> gives the canonical sign | 0x7e00, so a vector
// holding a NaN takes the portable conversion. AVX-512 converts 16 at a
// time (vfpclassps, class 0x81: quiet or signalling NaN); AVX with F16C,
// which nearly every x86-64 CPU has, 8 (vcmpunordps, vmovmskps). Bit for
// bit fj_from_float<fj_f16> for all 2^32 floats (AVX-512, on an Intel
// Xeon); 0.039 ns per element on one Xeon thread against 0.35
// (bench/results/2026-12-02-cpu-bf16-narrowing.md).
// FJ_NATIVE_F16: the lanes of the native path, 0 without one.
#if defined(__AVX512F__) && defined(__AVX512DQ__) && (defined(__x86_64__) || defined(__i386__))
#define FJ_NATIVE_F16 16
static inline void fj_store_span(fj_f16* __restrict p, const float* __restrict v, long long n) {
  fj_store_span_by_vectors<fj_f16, 16>(p, v, n, FJ_AVX512_CONVERT16(fj_f16, 0x81, "vcvtps2ph $0x0,"));
}
#elif defined(__F16C__) && defined(__AVX__) && (defined(__x86_64__) || defined(__i386__))
#define FJ_NATIVE_F16 8
static inline void fj_store_span(fj_f16* __restrict p, const float* __restrict v, long long n) {
  typedef float fj_v8sf __attribute__((vector_size(32)));
  typedef short fj_v8hi __attribute__((vector_size(16)));
  fj_store_span_by_vectors<fj_f16, 8>(p, v, n, [](const float* in, fj_f16* out) {
    fj_v8sf x;
    __builtin_memcpy(&x, in, sizeof x);
    fj_v8sf unordered;
    fj_v8hi r;
    unsigned nan;
    __asm__(
        "vcmpunordps %[x], %[x], %[t]\n\t"
        "vmovmskps %[t], %[s]\n\t"
        "vcvtps2ph $0x0, %[x], %[r]"
        : [r] "=x"(r), [s] "=r"(nan), [t] "=&x"(unordered)
        : [x] "x"(x));
    if (nan != 0) return false;
    __builtin_memcpy(out, &r, sizeof r);
    return true;
  });
}
#else
#define FJ_NATIVE_F16 0
#endif

// A streamed block of 32 floats to a 16-bit type: one 64-byte line,
// converted in registers (two halves of 16 by `insn`, joined by
// vinserti64x4) and streamed from there, or false, having written nothing,
// where vfpclassps finds a value of `classes` in either half (as
// FJ_AVX512_CONVERT16). Through fj_store_span into a block instead, each
// line was two 32-byte stores read back by one 64-byte load, which the CPU
// cannot forward from the stores and waits for: LayerNorm's row kernel over
// [4096, 4096] took 0.39 ns per element on one thread in bf16 and 0.50 in
// f16 that way, 0.26 and 0.34 this way (AMD EPYC VM). fj_stream_span keeps
// its block: a pointwise bf16 add streamed line by line like this ran 15%
// faster in the cache but 10% slower from memory.
#if FJ_STREAM_BYTES == 64 && defined(__AVX512DQ__) && (defined(__x86_64__) || defined(__i386__))
#define FJ_AVX512_STREAM_LINE(T, classes, insn)                         \
  static inline bool fj_stream_line_natively(T* out, const float* in) { \
    fj_v16sf lo, hi;                                                    \
    __builtin_memcpy(&lo, in, sizeof lo);                               \
    __builtin_memcpy(&hi, in + 16, sizeof hi);                          \
    fj_stream_vec line;                                                 \
    fj_v16hi upper;                                                     \
    unsigned found;                                                     \
    __asm__("vfpclassps $" #classes                                     \
            ", %[lo], %%k1\n\t"                                         \
            "vfpclassps $" #classes                                     \
            ", %[hi], %%k2\n\t"                                         \
            "korw %%k2, %%k1, %%k1\n\t"                                 \
            "kmovw %%k1, %[s]\n\t" insn " %[lo], %t[line]\n\t" insn     \
            " %[hi], %[upper]\n\t"                                      \
            "vinserti64x4 $1, %[upper], %g[line], %g[line]"             \
            : [line] "=&v"(line), [upper] "=&v"(upper), [s] "=r"(found) \
            : [lo] "v"(lo), [hi] "v"(hi)                                \
            : "k1", "k2");                                              \
    if (found != 0) return false;                                       \
    fj_stream_store(out, line);                                         \
    return true;                                                        \
  }
#if FJ_NATIVE_BF16
FJ_AVX512_STREAM_LINE(fj_bf16, 0x20, "vcvtneps2bf16")
#endif
#if FJ_NATIVE_F16 == 16
FJ_AVX512_STREAM_LINE(fj_f16, 0x81, "vcvtps2ph $0x0,")
#endif
#endif
// Every other type and CPU: no instruction for it.
template <typename T>
static inline bool fj_stream_line_natively(T*, const float*) {
  return false;
}

static inline void fj_fill_span(float* __restrict v, float value, long long n) {
  for (long long c = 0; c < n; ++c) v[c] = value;
}

// The 32 partial results of a reduction (kCpuReduceLanes in
// cpu_emitter.h), lane j accumulating elements j, j + 32, j + 64, ... and
// the lanes combined as a tree at the end (fj_lanes_total): the order fixes
// the bits, the same for any vector width. Held as fj_vec registers: a float[32]
// accumulator indexed in the vectorized loop was kept on the stack, every
// step a store and a reload on the chain of dependent additions (LayerNorm's
// row kernel spent about a third of its time there). So every combiner
// passed to fj_lanes_combine or fj_reduce_span needs an fj_vec overload
// that does lane by lane what its float one does.
constexpr int kFjReduceLanes = 32;
static_assert(kFjReduceLanes % kFjVecLanes == 0, "the lanes fill whole vectors");
struct fj_lanes {
  fj_vec v[kFjReduceLanes / kFjVecLanes];
};

static inline fj_lanes fj_lanes_fill(float x) {
  fj_lanes acc;
  for (int k = 0; k < kFjReduceLanes / kFjVecLanes; ++k) acc.v[k] = fj_vec_splat(x);
  return acc;
}

// Lane j of acc combined with values[j], for the 32 values of one step.
template <typename Combine>
static inline void fj_lanes_combine(fj_lanes& acc, const float* values, Combine combine) {
#pragma GCC unroll 8
  for (int k = 0; k < kFjReduceLanes / kFjVecLanes; ++k) {
    fj_vec x;
    __builtin_memcpy(&x, values + k * kFjVecLanes, sizeof x);
    acc.v[k] = combine(acc.v[k], x);
  }
}

// The lanes as 32 floats, for a tail of fewer than 32 elements and the
// final combination.
static inline void fj_lanes_store(const fj_lanes& acc, float* lanes) { __builtin_memcpy(lanes, acc.v, sizeof acc.v); }

// The 32 lanes of a reduction combined into one value, as a tree: lane j
// with lane j + 16, then j with j + 8, and so on. Each level's combinations
// are independent, so the five levels take about five combinations'
// latency; a running combination of lane after lane was a chain of 31,
// which for max (a compare, a NaN check and a select, about ten cycles
// deep) cost 300 cycles a row: on rows of 32 floats, a max reduction ran
// 9x slower than a sum (a new-user trial, 2026-12-04). The order is fixed
// by the lanes, not the vector width, so every width gives the same bits.
template <typename Combine>
static inline float fj_lanes_total(float* acc, Combine combine) {
  for (int width = kFjReduceLanes / 2; width >= 1; width /= 2) {
    for (int j = 0; j < width; ++j) acc[j] = combine(acc[j], acc[j + width]);
  }
  return acc[0];
}

// Reduces v[0, n) with Combine in the 32 lanes (so that the loop
// vectorizes whatever Combine is: the compiler may not reassociate float
// additions by itself), then combines the lanes (fj_lanes_total). 32 lanes are
// two AVX-512 vectors (four AVX2 ones): independent chains of additions
// hide an addition's latency, which one chain of 16 lanes waited on.
// The order differs from a sequential sum, like any parallel reduction; the
// partial sums also make the rounding error grow more slowly than one
// running sum does.
template <typename Combine>
static inline float fj_reduce_span(const float* __restrict v, long long n, float identity, Combine combine) {
  fj_lanes lanes = fj_lanes_fill(identity);
  long long c = 0;
  for (; c + kFjReduceLanes <= n; c += kFjReduceLanes) fj_lanes_combine(lanes, v + c, combine);
  float acc[kFjReduceLanes];
  fj_lanes_store(lanes, acc);
  for (int j = 0; c < n; ++c, ++j) acc[j] = combine(acc[j], v[c]);
  return fj_lanes_total(acc, combine);
}

// Stores a span with non-temporal (streaming) stores where the CPU has
// AVX: they write whole cache lines to memory without first reading them
// (no read-for-ownership), which a normal store of a large output pays
// with one extra read of every byte. Only for outputs much larger than the
// cache, which nothing reads back soon; fj_stream_fence() must follow
// before another thread reads them.
template <typename T>
static inline void fj_stream_span(T* __restrict p, const float* __restrict v, long long n) {
#if defined(__AVX__)
  constexpr long long kPer = FJ_STREAM_BYTES / static_cast<long long>(sizeof(T));
  constexpr long long kBlock = 512;
  static_assert(kBlock % kPer == 0, "the block holds whole vectors");
  long long c = 0;
  for (; c < n && (reinterpret_cast<unsigned long long>(p + c) & (FJ_STREAM_BYTES - 1)) != 0; ++c) {
    p[c] = fj_from_float<T>(v[c]);
  }
  // Converted a block at a time into an aligned buffer by a loop that
  // vectorizes, then streamed out: loading each vector right after
  // writing it element by element would stall on store forwarding.
  alignas(FJ_STREAM_BYTES) T block[kBlock];
  while (c + kPer <= n) {
    const long long m = (n - c) / kPer * kPer < kBlock ? (n - c) / kPer * kPer : kBlock;
    fj_store_span(block, v + c, m);
    for (long long j = 0; j < m; j += kPer) {
      fj_stream_store(p + c + j, *reinterpret_cast<const fj_stream_vec*>(block + j));
    }
    c += m;
  }
  for (; c < n; ++c) p[c] = fj_from_float<T>(v[c]);
#else
  fj_store_span(p, v, n);
#endif
}

// An f32 span needs no conversion: streamed straight from the array, not
// through the block (one copy less of every element).
static inline void fj_stream_span(float* __restrict p, const float* __restrict v, long long n) {
#if defined(__AVX__)
  constexpr long long kPer = FJ_STREAM_BYTES / 4;
  long long c = 0;
  for (; c < n && (reinterpret_cast<unsigned long long>(p + c) & (FJ_STREAM_BYTES - 1)) != 0; ++c) p[c] = v[c];
  for (; c + kPer <= n; c += kPer) {
    fj_stream_vec bytes;
    __builtin_memcpy(&bytes, v + c, FJ_STREAM_BYTES);  // v may be aligned differently from p
    fj_stream_store(p + c, bytes);
  }
  for (; c < n; ++c) p[c] = v[c];
#else
  fj_store_span(p, v, n);
#endif
}

// Stores the kFjReduceLanes values of one block of a loop (v, in f32),
// streamed when p is aligned for it, else by plain stores. Generated
// loops stream their outputs a block at a time from inside the loop: the
// values go out while later blocks are computed, instead of through an
// array written and read back for a fj_stream_span after the loop (on the
// AMD EPYC VM, the f32 residual + LayerNorm row kernel took 16% less time
// per row in the cache, and ran 1.1x faster from memory).
template <typename T>
static inline void fj_stream_block(T* __restrict p, const float* __restrict v) {
  constexpr long long kBytes = kFjReduceLanes * static_cast<long long>(sizeof(T));
#if defined(__AVX__)
  static_assert(kBytes % FJ_STREAM_BYTES == 0, "a block is whole vectors");
  if ((reinterpret_cast<unsigned long long>(p) & (FJ_STREAM_BYTES - 1)) == 0) {
    if constexpr (sizeof(T) == 2 && kBytes == FJ_STREAM_BYTES) {
      if (fj_stream_line_natively(p, v)) return;
    }
    // f32 goes straight from v; a 16-bit type is converted first, by
    // fj_store_span's vector instructions.
    alignas(FJ_STREAM_BYTES) T block[sizeof(T) == 4 ? 1 : kFjReduceLanes];
    const void* bytes = v;
    if constexpr (sizeof(T) != 4) {
      fj_store_span(block, v, kFjReduceLanes);
      bytes = block;
    }
    for (long long at = 0; at < kBytes; at += FJ_STREAM_BYTES) {
      fj_stream_vec vec;
      __builtin_memcpy(&vec, static_cast<const char*>(bytes) + at, FJ_STREAM_BYTES);
      fj_stream_store(reinterpret_cast<char*>(p) + at, vec);
    }
    return;
  }
#endif
  fj_store_span(p, v, kFjReduceLanes);
}

static inline void fj_stream_fence() {
#if defined(__AVX__)
  __builtin_ia32_sfence();
#endif
}
