#include "ir/summation_order.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ir/interpreter_kernels.h"
#include "ir/interpreter_parallel.h"

namespace fusejit::detail {
namespace {

// The smallest magnitude float32 rounds to infinity: halfway between
// FLT_MAX and 2^128 (ties go to 2^128, whose mantissa is even).
constexpr double kOverflow = 0x1p128 - 0x1p103;
// A float32 partial sum of n terms is off from the exact one by up to about
// n * 2^-24 of the terms' magnitudes; 2^-10 covers rows of 16384 terms at
// that worst case (and far longer ones as rounding errors really add up).
// Within the margin either outcome is possible, so both count.
constexpr double kMargin = 0x1p-10;
constexpr double kMayOverflow = kOverflow * (1 - kMargin);
constexpr double kMayStayFinite = kOverflow * (1 + kMargin);

// Enough work per thread that starting one is worth it.
constexpr int64_t kMinChunk = 1 << 15;

}  // namespace

void SumOrderCheck::add(double term) {
  if (std::isnan(term)) {
    nan_ = true;
  } else if (std::isinf(term)) {
    (term > 0 ? plus_inf_ : minus_inf_) = true;
  } else if (term > 0) {
    positive_ += term;
  } else {
    negative_ -= term;
  }
}

void SumOrderCheck::add_parts(double positive, double negative, bool has_nonfinite) {
  positive_ += positive;
  negative_ += negative;
  nonfinite_unknown_ = nonfinite_unknown_ || has_nonfinite;
}

bool SumOrderCheck::order_dependent() const {
  if (nan_ || (plus_inf_ && minus_inf_)) return false;  // NaN in every order
  // One infinity: that infinity in every order, unless the terms of the
  // other sign can reach the other one first (then NaN).
  if (plus_inf_) return negative_ >= kMayOverflow;
  if (minus_inf_) return positive_ >= kMayOverflow;
  const double larger = std::max(positive_, negative_), smaller = std::min(positive_, negative_);
  // Non-finite terms whose sign is unknown: the finite ones decide nothing
  // unless they can overflow, and then anything is possible.
  if (nonfinite_unknown_) return larger >= kMayOverflow;
  if (larger < kMayOverflow) return false;  // no order overflows
  // Adding all the terms of the larger sign first overflows. Another order
  // stays finite when the total is in range; when both signs' sums overflow
  // by themselves, one order reaches +inf and another -inf (then NaN).
  return std::fabs(positive_ - negative_) <= kMayStayFinite || smaller >= kMayOverflow;
}

bool flag_order_dependent_reduce(const OpInfo& info, const double* x, const double* x_flags, int64_t rows, int64_t len,
                                 double* out_flags, int threads) {
  std::vector<char> any(static_cast<size_t>(rows), 0);
  parallel_for(rows, std::max<int64_t>(1, kMinChunk / std::max<int64_t>(len, 1)), threads,
               [&](int64_t begin, int64_t end) {
                 for (int64_t row = begin; row < end; ++row) {
                   const double* v = x + row * len;
                   bool flagged = false;
                   if (x_flags != nullptr) {
                     const double* f = x_flags + row * len;
                     flagged = std::any_of(f, f + len, [](double flag) { return flag != 0; });
                   }
                   if (!flagged && info.reduce_rounds) {
                     SumOrderCheck sum;
                     for (int64_t j = 0; j < len; ++j) sum.add(v[j]);
                     flagged = sum.order_dependent();
                   }
                   out_flags[row] = flagged ? 1.0 : 0.0;
                   any[static_cast<size_t>(row)] = flagged;
                 }
               });
  return std::find(any.begin(), any.end(), 1) != any.end();
}

bool flag_order_dependent_matmul(const double* a, const double* a_flags, const double* b, const double* b_flags,
                                 int64_t m, int64_t k, int64_t n, double* out_flags, int threads) {
  // The sums of the positive and of the negative products, over the finite
  // operands, as matmuls of the operands' signed parts: a+ b+ + a- b- and
  // a+ b- + a- b+ (each part a magnitude, 0 where the value has the other
  // sign or is not finite).
  auto part = [](const double* x, int64_t count, bool positive) {
    std::vector<double> p(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      const double v = x[i];
      p[i] = !std::isfinite(v) ? 0 : positive ? std::max(v, 0.0) : std::max(-v, 0.0);
    }
    return p;
  };
  const std::vector<double> a_plus = part(a, m * k, true), a_minus = part(a, m * k, false);
  const std::vector<double> b_plus = part(b, k * n, true), b_minus = part(b, k * n, false);
  std::vector<double> positive(static_cast<size_t>(m * n)), negative(positive.size()), term(positive.size());
  eval_matmul(a_plus.data(), b_plus.data(), m, k, n, positive.data(), std::nullopt, threads);
  eval_matmul(a_minus.data(), b_minus.data(), m, k, n, term.data(), std::nullopt, threads);
  for (size_t i = 0; i < term.size(); ++i) positive[i] += term[i];
  eval_matmul(a_plus.data(), b_minus.data(), m, k, n, negative.data(), std::nullopt, threads);
  eval_matmul(a_minus.data(), b_plus.data(), m, k, n, term.data(), std::nullopt, threads);
  for (size_t i = 0; i < term.size(); ++i) negative[i] += term[i];

  // Per row of a and column of b: a non-finite value (its products' signs
  // are left unknown), a flagged one.
  std::vector<char> row_nonfinite(static_cast<size_t>(m), 0), row_flagged(row_nonfinite);
  std::vector<char> col_nonfinite(static_cast<size_t>(n), 0), col_flagged(col_nonfinite);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t kk = 0; kk < k; ++kk) {
      row_nonfinite[i] |= !std::isfinite(a[i * k + kk]);
      row_flagged[i] |= a_flags != nullptr && a_flags[i * k + kk] != 0;
    }
  }
  for (int64_t kk = 0; kk < k; ++kk) {
    for (int64_t j = 0; j < n; ++j) {
      col_nonfinite[j] |= !std::isfinite(b[kk * n + j]);
      col_flagged[j] |= b_flags != nullptr && b_flags[kk * n + j] != 0;
    }
  }
  bool any = false;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      SumOrderCheck sum;
      sum.add_parts(positive[i * n + j], negative[i * n + j], row_nonfinite[i] || col_nonfinite[j]);
      const bool flagged = row_flagged[i] || col_flagged[j] || sum.order_dependent();
      out_flags[i * n + j] = flagged ? 1.0 : 0.0;
      any = any || flagged;
    }
  }
  return any;
}

}  // namespace fusejit::detail
