// Where a float32 sum's result depends on the order its terms are added in.
//
// A kernel sums a row in float32, in its own order (32 lanes and a tree on
// the CPU, a warp's shuffles on a GPU, cuBLAS's blocking for a matmul). In
// range, orders differ by rounding only, which the tolerance covers. Near
// float32's limit they can differ entirely: [3e38, 3e38, -3e38] is 3e38
// added left to right from the right, and infinity from the left, and with a
// -inf term one order gives -inf and another NaN. Neither is wrong, and the
// reference interpreter (which sums in float64) can give only one, so the
// elements where this happens are flagged and not compared
// (InterpretOptions::order_dependent, first_wrong_output). So are products
// past float32's range that a multiply-add can bring back.
#pragma once

#include <cstdint>

#include "ir/op_table.h"

namespace fusejit::detail {

// The terms of one sum, as far as overflow is concerned.
class SumOrderCheck {
 public:
  void add(double term);
  // For a matmul's products, known only by their sums: `terms` products
  // whose finite ones add up to `positive` and -`negative`, some of them
  // +-inf when `has_infinite` (signs unknown), NaN when `has_nan`. Their
  // largest magnitude is unknown, and each product may be rounded too.
  void add_products(double positive, double negative, int64_t terms, bool has_infinite, bool has_nan);
  // Whether some order of adding the terms in float32 overflows (to either
  // infinity) and another does not, or overflows to the other infinity.
  bool order_dependent() const;

 private:
  double positive_ = 0, negative_ = 0;  // sums of the finite terms' magnitudes, by sign
  double largest_ = 0;                  // the largest finite magnitude (add)
  int64_t terms_ = 0;
  bool products_ = false;  // add_products: largest_ unknown, products rounded
  bool plus_inf_ = false, minus_inf_ = false, nan_ = false;
  bool infinite_unknown_ = false;  // add_products: infinite terms of unknown sign
};

// 1.0 where the float32 product a * b (of float32 values) overflows, yet a
// multiply-add fma(a, b, c) with a float32 addend c can bring it back into
// range: kOverflow <= |a * b| < 2^129. Its consumers then have two right
// answers. Else 0.0.
double flag_rescuable_product(double a, double b);

// Flags (1.0, else 0.0) for each of `rows` results of reduction `info` over
// rows of `len` values `x`: set where the float32 result depends on the
// order of the terms, or where an element of the row is flagged in
// `x_flags` (nullptr: none). Returns whether any is set.
bool flag_order_dependent_reduce(const OpInfo& info, const double* x, const double* x_flags, int64_t rows, int64_t len,
                                 double* out_flags, int threads);

// The same for out[M, N] = a[M, K] x b[K, N]: each result's terms are the
// products a[i, k] * b[k, j]; flagged where their sum depends on the
// order, or where row i of a or column j of b holds a flagged element.
bool flag_order_dependent_matmul(const double* a, const double* a_flags, const double* b, const double* b_flags,
                                 int64_t m, int64_t k, int64_t n, double* out_flags, int threads);

}  // namespace fusejit::detail
