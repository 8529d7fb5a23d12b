#include "ir/value_bounds.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace fusejit {
namespace {

// Each f32 rounding moves a positive value down by at most 2^-24 of it
// (f16 by 2^-11, bf16 by 2^-8, from their dtype's rounding below); this
// much slack per op covers an op's own rounding.
constexpr double kRoundingSlack = 1 - 0x1p-20;

// The bound after rounding a value >= b to `dtype` (nearest even):
// relative for normal results, an absolute step for f16's subnormals. No
// claim for a negative bound (it would have to allow for overflow to -inf),
// and 0 for one below f32's normal range, where the kernels flush or round
// by absolute steps.
std::optional<double> rounded(double b, DType dtype) {
  if (b < 0) return std::nullopt;
  if (b < 0x1p-126) return 0.0;
  switch (dtype) {
    case DType::kF32: return b * kRoundingSlack;
    case DType::kBF16: return b * (1 - 0x1p-8);
    case DType::kF16: return b >= 0x1p-14 ? b * (1 - 0x1p-10) : std::max(0.0, b - 0x1p-24);
  }
  return std::nullopt;
}

// `bounds` holds those of the nodes before n.
std::optional<double> bound_of_node(const Node& n, const std::vector<std::optional<double>>& bounds) {
  auto of = [&](size_t i) -> std::optional<double> {
    const Operand& o = n.operands[i];
    if (o.is_literal()) return o.literal_value();
    if (static_cast<size_t>(o.node) >= bounds.size()) return std::nullopt;  // not a topological order: no claim
    return bounds[static_cast<size_t>(o.node)];
  };
  switch (n.op) {
    case Op::kSquare:
    case Op::kAbs:
    case Op::kExp:
    case Op::kSqrt:  // sqrt(-0) is -0, which equals 0 (not rsqrt: rsqrt(-0) is -inf)
    case Op::kRelu:
    case Op::kSigmoid: return 0.0;
    case Op::kAdd: {
      const std::optional<double> a = of(0), b = of(1);
      if (!a || !b) return std::nullopt;
      return *a + *b;
    }
    case Op::kMul: {
      const std::optional<double> a = of(0), b = of(1);
      if (!a || !b || *a < 0 || *b < 0) return std::nullopt;
      return *a * *b;
    }
    case Op::kMaximum: {
      const std::optional<double> a = of(0), b = of(1);
      if (a && b) return std::max(*a, *b);
      return a ? a : b;  // max(x, y) >= x whatever y is
    }
    case Op::kMax:  // a row's largest element: at least any element's bound
    case Op::kSum:  // a sum of values >= b >= 0 is at least one of them
    case Op::kMean: {
      const std::optional<double> a = of(0);
      if (!a || (n.op != Op::kMax && *a < 0)) return std::nullopt;
      // A mean of values >= b is >= b exactly; its f32 sum and division
      // round, by far less than half.
      return n.op == Op::kMean ? *a * 0.5 : *a;
    }
    case Op::kCast: return of(0);  // rounded to the cast's dtype below
    default: return std::nullopt;
  }
}

}  // namespace

std::optional<double> lower_bound(const Graph& graph, const Operand& operand) {
  if (operand.is_literal()) return operand.literal_value();
  // Operands come before their users (node ids are a topological order).
  std::vector<std::optional<double>> bounds;
  for (int32_t id = 0; id <= operand.node; ++id) {
    const Node& n = graph.node(id);
    const std::optional<double> b = bound_of_node(n, bounds);
    bounds.push_back(b ? rounded(*b, n.dtype) : std::nullopt);
  }
  return bounds.back();
}

bool is_at_least_min_normal(const Graph& graph, const Operand& operand) {
  const std::optional<double> b = lower_bound(graph, operand);
  return b && *b >= 0x1p-126;
}

}  // namespace fusejit
