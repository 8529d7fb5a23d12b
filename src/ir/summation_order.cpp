#include "ir/summation_order.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "ir/interpreter_kernels.h"
#include "ir/interpreter_parallel.h"

namespace fusejit::detail {
namespace {

// The smallest magnitude float32 rounds to infinity: halfway between
// FLT_MAX and 2^128 (ties go to 2^128, whose mantissa is even). A sum
// overflows at the first addition whose exact result reaches it.
constexpr double kOverflow = 0x1p128 - 0x1p103;

// Enough work per thread that starting one is worth it.
constexpr int64_t kMinChunk = 1 << 15;

}  // namespace

void SumOrderCheck::add(double term) {
  ++terms_;
  if (std::isnan(term)) {
    nan_ = true;
  } else if (std::isinf(term)) {
    (term > 0 ? plus_inf_ : minus_inf_) = true;
  } else {
    (term > 0 ? positive_ : negative_) += std::fabs(term);
    largest_ = std::max(largest_, std::fabs(term));
  }
}

void SumOrderCheck::add_products(double positive, double negative, int64_t terms, bool has_infinite, bool has_nan) {
  positive_ += positive;
  negative_ += negative;
  terms_ += terms;
  products_ = true;
  infinite_unknown_ = infinite_unknown_ || has_infinite;
  nan_ = nan_ || has_nan;
}

// A float32 sum in any order is a tree of additions of partial sums, each
// rounded. Where no partial sum overflows, each rounding is off by at most
// half an ulp of a finite result (2^103 at the top of the range) and by at
// most its smaller operand, a partial sum without the largest term.
// Rounded partial sums therefore stay within drift(k) = k * per_add of the
// exact ones after k additions, and the first addition to overflow
// (exact result at least kOverflow) adds two partial sums of disjoint sets
// of terms, which together took at most n - 2 additions. So:
// - some order may overflow towards a sign only if the terms of that sign
//   reach kOverflow less the drift of n - 2 additions;
// - every order that has not overflowed before its last addition does then
//   if the exact total is at least kOverflow plus the drift of n - 1.
// Between the two, several answers are possible.
bool SumOrderCheck::order_dependent() const {
  if (nan_ || (plus_inf_ && minus_inf_)) return false;  // NaN in every order
  const double total = positive_ + negative_;
  const auto n = static_cast<double>(terms_);
  // The smaller operand of an addition holds at most the terms other than
  // the largest (their own rounding grows them by at most n ulps); for
  // products, whose largest is unknown, a rounding is at most an ulp of
  // the total, and each product may be rounded once more (no multiply-add).
  const double rounding = products_ ? 0x1p-24 * total : (total - largest_) * (1 + n * 0x1p-23);
  const double per_add = std::min(0x1p103, rounding);
  const double rounded_terms = products_ ? n : 0;
  const double before_last = (std::max(n - 2, 0.0) + rounded_terms) * per_add;
  const double all = (std::max(n - 1, 0.0) + rounded_terms) * per_add;
  auto may_overflow = [&](double one_sign) { return one_sign + before_last >= kOverflow; };
  // One infinity: that infinity in every order, unless the terms of the
  // other sign can reach the other one first (then NaN).
  if (plus_inf_) return may_overflow(negative_);
  if (minus_inf_) return may_overflow(positive_);
  const double larger = std::max(positive_, negative_), smaller = std::min(positive_, negative_);
  // Infinite products of unknown signs: the finite ones decide nothing
  // unless they can overflow, and then anything is possible.
  if (infinite_unknown_) return may_overflow(larger);
  if (!may_overflow(larger)) return false;  // no order overflows
  // Adding all the terms of the larger sign first may overflow. Another
  // order may stay finite, or overflow to the other sign (then NaN).
  return std::fabs(positive_ - negative_) - all < kOverflow || may_overflow(smaller);
}

double flag_rescuable_product(double a, double b) {
  const double p = std::fabs(a * b);  // exact: float32 values
  return p >= kOverflow && p < 0x1p129 ? 1.0 : 0.0;
}

bool flag_order_dependent_reduce(const OpInfo& info, const double* x, const double* x_flags, int64_t rows, int64_t len,
                                 double* out_flags, int threads) {
  std::atomic<bool> any{false};
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
                   if (flagged) any = true;
                 }
               });
  return any;
}

bool flag_order_dependent_matmul(const double* a, const double* a_flags, const double* b, const double* b_flags,
                                 int64_t m, int64_t k, int64_t n, double* out_flags, int threads) {
  // Per row of a and column of b: its largest finite magnitude, and whether
  // it holds an infinity, a NaN, a flagged element.
  struct Line {
    double largest = 0;
    bool infinite = false, nan = false, flagged = false;
    void add(double v, const double* flag) {
      if (std::isnan(v)) {
        nan = true;
      } else if (std::isinf(v)) {
        infinite = true;
      } else {
        largest = std::max(largest, std::fabs(v));
      }
      flagged = flagged || (flag != nullptr && *flag != 0);
    }
  };
  std::vector<Line> rows(static_cast<size_t>(m)), cols(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t kk = 0; kk < k; ++kk) rows[i].add(a[i * k + kk], a_flags != nullptr ? &a_flags[i * k + kk] : nullptr);
  }
  for (int64_t kk = 0; kk < k; ++kk) {
    for (int64_t j = 0; j < n; ++j) cols[j].add(b[kk * n + j], b_flags != nullptr ? &b_flags[kk * n + j] : nullptr);
  }
  double largest_a = 0, largest_b = 0;
  for (const Line& r : rows) largest_a = std::max(largest_a, r.largest);
  for (const Line& c : cols) largest_b = std::max(largest_b, c.largest);
  // No sum of finite products comes near float32's limit, with room for
  // rounding: only flagged operands flag anything, and the four matmuls
  // below (and their memory) are not needed. This is every matmul of
  // ordinary data.
  const bool may_overflow = largest_a * largest_b * static_cast<double>(k) >= 0x1p124;

  // Otherwise the sums of the positive and of the negative products, over
  // the finite operands, as matmuls of the operands' signed parts: a+ b+ +
  // a- b- and a+ b- + a- b+ (each part a magnitude, 0 where the value has
  // the other sign or is not finite).
  std::vector<double> positive, negative;
  if (may_overflow) {
    auto part = [](const double* x, int64_t count, bool plus) {
      std::vector<double> p(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) {
        const double v = x[i];
        p[i] = !std::isfinite(v) ? 0 : plus ? std::max(v, 0.0) : std::max(-v, 0.0);
      }
      return p;
    };
    const std::vector<double> a_plus = part(a, m * k, true), a_minus = part(a, m * k, false);
    const std::vector<double> b_plus = part(b, k * n, true), b_minus = part(b, k * n, false);
    positive.resize(static_cast<size_t>(m * n));
    negative.resize(positive.size());
    std::vector<double> term(positive.size());
    eval_matmul(a_plus.data(), b_plus.data(), m, k, n, positive.data(), std::nullopt, threads);
    eval_matmul(a_minus.data(), b_minus.data(), m, k, n, term.data(), std::nullopt, threads);
    for (size_t i = 0; i < term.size(); ++i) positive[i] += term[i];
    eval_matmul(a_plus.data(), b_minus.data(), m, k, n, negative.data(), std::nullopt, threads);
    eval_matmul(a_minus.data(), b_plus.data(), m, k, n, term.data(), std::nullopt, threads);
    for (size_t i = 0; i < term.size(); ++i) negative[i] += term[i];
  }

  bool any = false;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      bool flagged = rows[i].flagged || cols[j].flagged;
      if (!flagged && may_overflow) {
        SumOrderCheck sum;
        // A NaN in row i or column j makes every product with it NaN (0 x
        // NaN included): NaN in every order.
        sum.add_products(positive[i * n + j], negative[i * n + j], k, rows[i].infinite || cols[j].infinite,
                         rows[i].nan || cols[j].nan);
        flagged = sum.order_dependent();
      }
      out_flags[i * n + j] = flagged ? 1.0 : 0.0;
      any = any || flagged;
    }
  }
  return any;
}

}  // namespace fusejit::detail
