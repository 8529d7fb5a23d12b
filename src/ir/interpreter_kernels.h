// The loops of the reference interpreter, one per op kind. Each computes in
// float64 from the op table's reference functions and rounds its result to
// `round` when given. Results never depend on the thread count: every output
// element is computed by the same operations in the same order.
#pragma once

#include <cstdint>
#include <optional>

#include "ir/attrs.h"
#include "ir/dtype.h"
#include "ir/op_table.h"
#include "ir/shape.h"

namespace fusejit::detail {

// The dtype to round results to, or none.
using RoundTo = std::optional<DType>;

// An elementwise operand: a tensor's values, or a literal (rank-0 shape,
// pointing at the literal), read at the coordinates of a broadcast result.
struct ElementwiseOperand {
  const double* data = nullptr;
  Shape shape;
};

void eval_unary(UnaryReference fn, const Attrs& attrs, const double* x, int64_t n, double* out, RoundTo round,
                int threads);
void eval_binary(BinaryReference fn, const ElementwiseOperand& a, const ElementwiseOperand& b, const Shape& shape,
                 double* out, RoundTo round, int threads);
// Rounds to `dtype` always (cast is the user's explicit request to round).
void eval_cast(const double* x, int64_t n, DType dtype, double* out, int threads);
// Element i (the flat row-major index of the output) is x[i] * dropout_scale(p)
// when Philox keeps it and x[i] * 0 otherwise (so NaN and inf stay NaN, as in
// PyTorch, which multiplies by the mask).
void eval_dropout(const double* x, int64_t n, double p, uint64_t seed, double* out, RoundTo round, int threads);
// Reduces each of `rows` rows of length `len` to one value. With
// `float32_sum`, a sum is rounded to float32 before a mean divides it, as
// a kernel's float32 accumulator holds it: 4096 values of 1e35 add up to
// infinity there, not to 4.1e38 (InterpretOptions::float32_intermediates).
void eval_reduce(const OpInfo& info, const double* x, int64_t rows, int64_t len, double* out, RoundTo round,
                 int threads, bool float32_sum = false);
// out[M, N] = a[M, K] x b[K, N], each sum taken in order of increasing k.
void eval_matmul(const double* a, const double* b, int64_t m, int64_t k, int64_t n, double* out, RoundTo round,
                 int threads);
// Copies `n` values, rounding them when asked.
void copy_rounded(const double* x, int64_t n, double* out, RoundTo round, int threads);

}  // namespace fusejit::detail
