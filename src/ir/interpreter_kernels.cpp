#include "ir/interpreter_kernels.h"

#include <algorithm>
#include <array>

#include "ir/interpreter_parallel.h"
#include "ir/philox.h"

namespace fusejit::detail {
namespace {

// Enough elements per thread that starting a thread is worth it.
constexpr int64_t kMinChunk = 1 << 15;

// Rounding sits in every inner loop; a predictable branch costs less than a
// second pass over memory.
struct Rounder {
  explicit Rounder(RoundTo round) : on(round.has_value()), dtype(round.value_or(DType::kF32)) {}
  double operator()(double v) const { return on ? round_to_dtype(v, dtype) : v; }
  bool on;
  DType dtype;
};

}  // namespace

void eval_unary(UnaryReference fn, const Attrs& attrs, const double* x, int64_t n, double* out, RoundTo round,
                int threads) {
  const Rounder r(round);
  parallel_for(n, kMinChunk, threads, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = r(fn(x[i], attrs));
  });
}

void eval_binary(BinaryReference fn, const ElementwiseOperand& a, const ElementwiseOperand& b, const Shape& shape,
                 double* out, RoundTo round, int threads) {
  const Rounder r(round);
  const int rank = shape.rank();
  const auto sa = broadcast_strides(a.shape, shape);
  const auto sb = broadcast_strides(b.shape, shape);
  const int64_t last = shape.last();
  parallel_for(shape.numel(), kMinChunk, threads, [&](int64_t begin, int64_t end) {
    // Walk [begin, end) in runs along the last dimension; only the run start
    // needs the full coordinate arithmetic.
    std::array<int64_t, kMaxRank> coord{};
    int64_t rest = begin;
    for (int d = rank - 1; d >= 0; --d) {
      coord[d] = rest % shape[d];
      rest /= shape[d];
    }
    for (int64_t flat = begin; flat < end;) {
      int64_t offset_a = 0, offset_b = 0;
      for (int d = 0; d < rank; ++d) {
        offset_a += coord[d] * sa[d];
        offset_b += coord[d] * sb[d];
      }
      const int64_t run = std::min(last - coord[rank - 1], end - flat);
      const double* pa = a.data + offset_a;
      const double* pb = b.data + offset_b;
      const int64_t step_a = sa[rank - 1], step_b = sb[rank - 1];
      double* o = out + flat;
      for (int64_t j = 0; j < run; ++j) o[j] = r(fn(pa[j * step_a], pb[j * step_b]));
      flat += run;
      coord[rank - 1] += run;
      for (int d = rank - 1; d > 0 && coord[d] == shape[d]; --d) {
        coord[d] = 0;
        ++coord[d - 1];
      }
    }
  });
}

void eval_cast(const double* x, int64_t n, DType dtype, double* out, int threads) {
  copy_rounded(x, n, out, dtype, threads);
}

void eval_dropout(const double* x, int64_t n, double p, uint64_t seed, double* out, RoundTo round, int threads) {
  const Rounder r(round);
  const PhiloxKey key = dropout_key(seed);
  const uint32_t threshold = dropout_threshold(p);
  const double scale = dropout_scale(p);
  const int64_t groups = (n + kDropoutGroup - 1) / kDropoutGroup;
  // One Philox call serves the eight elements of a counter, 16 bits each
  // (ir/philox.h).
  parallel_for(groups, kMinChunk / kDropoutGroup, threads, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      const PhiloxCounter words = philox4x32_10(dropout_counter(kDropoutGroup * static_cast<uint64_t>(g)), key);
      for (int lane = 0; lane < kDropoutGroup; ++lane) {
        const int64_t i = kDropoutGroup * g + lane;
        if (i >= n) break;
        out[i] = r(x[i] * (dropout_number(words, static_cast<uint64_t>(lane)) >= threshold ? scale : 0.0));
      }
    }
  });
}

void eval_reduce(const OpInfo& info, const double* x, int64_t rows, int64_t len, double* out, RoundTo round,
                 int threads, bool float32_sum) {
  const Rounder r(round);
  const Rounder accumulator(float32_sum ? RoundTo(DType::kF32) : std::nullopt);
  parallel_for(rows, std::max<int64_t>(1, kMinChunk / len), threads, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const double* v = x + row * len;
      double acc = info.reduce_identity;
      for (int64_t j = 0; j < len; ++j) acc = info.reduce_combine(acc, v[j]);
      if (info.reduce_divides_by_count) acc = accumulator(acc) / static_cast<double>(len);
      out[row] = r(acc);
    }
  });
}

void eval_matmul(const double* a, const double* b, int64_t m, int64_t k, int64_t n, double* out, RoundTo round,
                 int threads) {
  // Tiled i-k-j loops: a tile of b (kTileK x kTileN doubles, 512 KiB) stays in
  // cache while a block of rows uses it; the innermost loop runs over
  // contiguous memory. Tiles over k run in increasing order, so each sum is
  // taken in the order k = 0, 1, ..., K-1 whatever the tiling or threads.
  constexpr int64_t kTileM = 32, kTileK = 128, kTileN = 512;
  const Rounder r(round);
  std::fill(out, out + m * n, 0.0);
  const int64_t flops_per_row = std::max<int64_t>(1, k * n);
  parallel_for(m, std::max<int64_t>(1, (int64_t{1} << 22) / flops_per_row), threads, [&](int64_t begin, int64_t end) {
    for (int64_t i0 = begin; i0 < end; i0 += kTileM) {
      const int64_t i1 = std::min(end, i0 + kTileM);
      for (int64_t k0 = 0; k0 < k; k0 += kTileK) {
        const int64_t k1 = std::min(k, k0 + kTileK);
        for (int64_t j0 = 0; j0 < n; j0 += kTileN) {
          const int64_t width = std::min(n, j0 + kTileN) - j0;
          for (int64_t i = i0; i < i1; ++i) {
            double* c = out + i * n + j0;
            for (int64_t kk = k0; kk < k1; ++kk) {
              const double aik = a[i * k + kk];
              const double* bk = b + kk * n + j0;
              for (int64_t j = 0; j < width; ++j) c[j] += aik * bk[j];
            }
          }
        }
      }
      if (r.on) {
        for (int64_t idx = i0 * n; idx < i1 * n; ++idx) out[idx] = r(out[idx]);
      }
    }
  });
}

void copy_rounded(const double* x, int64_t n, double* out, RoundTo round, int threads) {
  const Rounder r(round);
  parallel_for(n, kMinChunk, threads, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = r(x[i]);
  });
}

}  // namespace fusejit::detail
