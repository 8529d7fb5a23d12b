// Composite ops through the interpreter against their textbook definitions,
// and expand_composites() against the composites themselves.
#include "ir/composites.h"

#include <cmath>
#include <functional>
#include <numbers>
#include <optional>
#include <random>

#include <gtest/gtest.h>

#include "fusejit.h"
#include "ir/interpreter.h"
#include "ir/philox.h"

namespace fusejit {
namespace {

HostTensor random_tensor(DType dtype, const Shape& shape, uint64_t seed, double offset = 0) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal(offset, 1.5);  // values only; exactness comes from rounding below
  HostTensor t{dtype, shape, {}};
  for (int64_t i = 0; i < shape.numel(); ++i) t.values.push_back(round_to_dtype(normal(gen), dtype));
  return t;
}

TensorMap run(const Graph& g, const TensorMap& inputs, Rounding rounding = Rounding::kNone) {
  absl::StatusOr<TensorMap> out = interpret(g, inputs, {rounding});
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : TensorMap{};
}

// Values of these ops are O(1): compare to 1e-12 relative, with unit scale near 0.
void expect_close(const HostTensor& got, const std::vector<double>& want) {
  ASSERT_EQ(got.values.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got.values[i], want[i], 1e-12 * std::max(1.0, std::fabs(want[i]))) << "element " << i;
  }
}

// Applies `row_fn` to each row (the last dimension) of `x`.
std::vector<double> by_rows(const HostTensor& x,
                            const std::function<std::vector<double>(std::vector<double>)>& row_fn) {
  const int64_t len = x.shape.last();
  std::vector<double> out;
  for (int64_t start = 0; start < x.numel(); start += len) {
    const std::vector<double> row(x.values.begin() + start, x.values.begin() + start + len);
    for (double v : row_fn(row)) out.push_back(v);
  }
  return out;
}

// Textbook definitions, written directly.
std::vector<double> textbook_layer_norm(const std::vector<double>& x, const double* gamma, const double* beta,
                                        double eps) {
  const double n = static_cast<double>(x.size());
  double mean = 0;
  for (double v : x) mean += v / n;
  double variance = 0;
  for (double v : x) variance += (v - mean) * (v - mean) / n;
  std::vector<double> y;
  for (size_t i = 0; i < x.size(); ++i) {
    y.push_back((x[i] - mean) / std::sqrt(variance + eps) * (gamma ? gamma[i] : 1.0) + (beta ? beta[i] : 0.0));
  }
  return y;
}

std::vector<double> textbook_rms_norm(const std::vector<double>& x, const double* gamma, double eps) {
  double mean_square = 0;
  for (double v : x) mean_square += v * v / static_cast<double>(x.size());
  std::vector<double> y;
  for (size_t i = 0; i < x.size(); ++i) y.push_back(x[i] / std::sqrt(mean_square + eps) * (gamma ? gamma[i] : 1.0));
  return y;
}

std::vector<double> textbook_softmax(const std::vector<double>& x) {
  double total = 0;
  for (double v : x) total += std::exp(v);
  std::vector<double> y;
  for (double v : x) y.push_back(std::exp(v) / total);
  return y;
}

std::vector<double> textbook_log_softmax(const std::vector<double>& x) {
  double total = 0;
  for (double v : x) total += std::exp(v);
  std::vector<double> y;
  for (double v : x) y.push_back(v - std::log(total));
  return y;
}

// eps as the graph holds it: a literal, whose value is its float32 one.
double f32(double v) { return static_cast<float>(v); }

// Row lengths 1, 3 and 1000, and enough rows that the interpreter's row blocks have a tail.
const Shape kShapes[] = {{4, 1}, {2, 3, 3}, {67, 1000}, {5}};

TEST(CompositeTest, LayerNormWithAndWithoutParameters) {
  for (const Shape& shape : kShapes) {
    const int64_t len = shape.last();
    const HostTensor x = random_tensor(DType::kF32, shape, 1, 0.5);
    const HostTensor gamma = random_tensor(DType::kF32, {len}, 2), beta = random_tensor(DType::kF32, {len}, 3);
    for (int params = 0; params <= 2; ++params) {
      for (std::optional<double> eps : {std::optional<double>(), std::optional<double>(1e-3)}) {
        SCOPED_TRACE(shape.to_string() + " params=" + std::to_string(params) +
                     " eps=" + std::to_string(eps.value_or(1e-5)));
        Graph g;
        auto vx = g.input("x", DType::kF32, shape);
        auto vg = g.input("gamma", DType::kF32, {len});
        auto vb = g.input("beta", DType::kF32, {len});
        Value y = params == 0   ? layer_norm(vx, std::nullopt, std::nullopt, eps)
                  : params == 1 ? layer_norm(vx, vg, std::nullopt, eps)
                                : layer_norm(vx, vg, vb, eps);
        g.output("y", y);
        const TensorMap inputs{{"x", x}, {"gamma", gamma}, {"beta", beta}};  // every input, used or not
        const std::vector<double> want = by_rows(x, [&](const std::vector<double>& row) {
          return textbook_layer_norm(row, params >= 1 ? gamma.values.data() : nullptr,
                                     params >= 2 ? beta.values.data() : nullptr, f32(eps.value_or(1e-5)));
        });
        expect_close(run(g, inputs).at("y"), want);
      }
    }
  }
}

TEST(CompositeTest, RmsNorm) {
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(shape.to_string());
    const int64_t len = shape.last();
    const HostTensor x = random_tensor(DType::kF32, shape, 4), gamma = random_tensor(DType::kF32, {len}, 5);
    Graph g;
    auto vx = g.input("x", DType::kF32, shape);
    auto vg = g.input("gamma", DType::kF32, {len});
    g.output("plain", rms_norm(vx));
    g.output("scaled", rms_norm(vx, vg, 1e-2));
    const TensorMap out = run(g, {{"x", x}, {"gamma", gamma}});
    expect_close(out.at("plain"),
                 by_rows(x, [](const std::vector<double>& r) { return textbook_rms_norm(r, nullptr, f32(1e-6)); }));
    expect_close(out.at("scaled"), by_rows(x, [&](const std::vector<double>& r) {
                   return textbook_rms_norm(r, gamma.values.data(), f32(1e-2));
                 }));
  }
}

TEST(CompositeTest, SoftmaxAndLogSoftmax) {
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(shape.to_string());
    const HostTensor x = random_tensor(DType::kF32, shape, 6, 3.0);
    Graph g;
    auto vx = g.input("x", DType::kF32, shape);
    g.output("s", softmax(vx));
    g.output("ls", log_softmax(vx));
    const TensorMap out = run(g, {{"x", x}});
    expect_close(out.at("s"), by_rows(x, textbook_softmax));
    expect_close(out.at("ls"), by_rows(x, textbook_log_softmax));
  }
}

TEST(CompositeTest, SoftmaxIsStableForLargeInputs) {
  // The expansion subtracts the row max, so exp never overflows.
  Graph g;
  auto x = g.input("x", DType::kF32, {1, 3});
  g.output("s", softmax(x));
  const HostTensor y = run(g, {{"x", HostTensor{DType::kF32, {1, 3}, {1000, 1000, 999}}}}).at("s");
  const double e = std::exp(-1.0);
  expect_close(y, {1 / (2 + e), 1 / (2 + e), e / (2 + e)});
}

TEST(CompositeTest, RoundedOnceAsOneUserOp) {
  // In every-op mode a composite is one user op: its float64 result is rounded once.
  const Shape shape{37, 100};
  const HostTensor x = random_tensor(DType::kBF16, shape, 7), gamma = random_tensor(DType::kF32, {100}, 8);
  Graph g;
  auto vx = g.input("x", DType::kBF16, shape);
  auto vg = g.input("gamma", DType::kF32, {100});
  g.output("ln", layer_norm(vx));
  g.output("ln_promoted", layer_norm(vx, vg));  // bf16 with f32 gamma gives f32
  const TensorMap inputs{{"x", x}, {"gamma", gamma}};
  const TensorMap every = run(g, inputs, Rounding::kEveryOp);
  const TensorMap exact = run(g, inputs, Rounding::kNone);
  EXPECT_EQ(every.at("ln").dtype, DType::kBF16);
  EXPECT_EQ(every.at("ln_promoted").dtype, DType::kF32);
  for (int64_t i = 0; i < shape.numel(); ++i) {
    ASSERT_EQ(every.at("ln").values[i], round_to_dtype(exact.at("ln").values[i], DType::kBF16));
    ASSERT_EQ(every.at("ln_promoted").values[i], round_to_dtype(exact.at("ln_promoted").values[i], DType::kF32));
  }
}

TEST(CompositeTest, ExpansionVerifiesAndComputesTheSameValues) {
  const Shape shape{70, 600};
  Graph g;
  auto x = g.input("x", DType::kBF16, shape);
  auto w = g.input("w", DType::kBF16, {600});
  auto gamma = g.input("gamma", DType::kBF16, {600});
  auto beta = g.input("beta", DType::kBF16, {600});
  auto h = layer_norm(x + w, gamma, beta);
  g.output("h", h);
  g.output("r", rms_norm(silu(h), gamma));
  g.output("s", softmax(h * 0.5));
  g.output("ls", log_softmax(h));
  const Graph expanded = expand_composites(g);
  ASSERT_TRUE(verify(expanded).ok()) << verify(expanded);
  for (const Node& n : expanded.nodes()) EXPECT_NE(n.info().kind, OpKind::kComposite) << n.name;

  const TensorMap inputs = random_inputs(g, 3);
  for (Rounding mode : {Rounding::kNone, Rounding::kOutputsOnly}) {
    const TensorMap a = run(g, inputs, mode), b = run(expanded, inputs, mode);
    ASSERT_EQ(a.size(), 4u);
    for (const auto& [name, t] : a) {
      SCOPED_TRACE(name);
      ASSERT_TRUE(b.contains(name));
      EXPECT_EQ(b.at(name).dtype, t.dtype);
      EXPECT_EQ(b.at(name).shape, t.shape);
      expect_close(b.at(name), t.values);
    }
  }
}

TEST(CompositeTest, IssueChainMatchesAHandComputation) {
  // y = layer_norm(dropout(gelu(x + b), 0.1, 42), gamma, beta), fused semantics (outputs only).
  const int64_t rows = 48, cols = 256;
  Graph g;
  auto x = g.input("x", DType::kBF16, {rows, cols});
  auto b = g.input("b", DType::kBF16, {cols});
  auto gamma = g.input("gamma", DType::kBF16, {cols});
  auto beta = g.input("beta", DType::kBF16, {cols});
  g.output("y", layer_norm(dropout(gelu(x + b), 0.1, 42), gamma, beta));
  const TensorMap in = random_inputs(g, 11);
  const HostTensor y = run(g, in, Rounding::kOutputsOnly).at("y");
  const double scale = dropout_scale(0.1);
  std::vector<double> want;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> row;
    for (int64_t c = 0; c < cols; ++c) {
      const double h = in.at("x").values[r * cols + c] + in.at("b").values[c];
      const double gl = 0.5 * h * (1 + std::erf(h / std::numbers::sqrt2));
      row.push_back(dropout_keeps(42, r * cols + c, 0.1) ? gl * scale : 0.0);
    }
    for (double v : textbook_layer_norm(row, in.at("gamma").values.data(), in.at("beta").values.data(), 1e-5)) {
      want.push_back(round_to_dtype(v, DType::kBF16));
    }
  }
  // Rounding to bf16 once: the float64 paths may differ by ~1e-15, which can flip a
  // rounding only for values on a bf16 midpoint; allow one bf16 ulp there.
  int64_t off_by_one_ulp = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (y.values[i] == want[i]) continue;
    ++off_by_one_ulp;
    ASSERT_NEAR(y.values[i], want[i], std::fabs(want[i]) * 0x1p-7) << i;
  }
  EXPECT_LE(off_by_one_ulp, 2);
}

}  // namespace
}  // namespace fusejit
