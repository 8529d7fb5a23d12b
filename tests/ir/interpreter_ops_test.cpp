// The reference interpreter, op by op, against float64 formulas written out
// here (never the op table's own reference functions); broadcasting,
// literals, type promotion, rounding modes, NaN/inf and input checking.
#include "ir/interpreter.h"

#include <cmath>
#include <functional>
#include <numbers>
#include <random>
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fusejit.h"
#include "ir/philox.h"

namespace fusejit {
namespace {

using ::testing::HasSubstr;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Random values with magnitude in [0.25, 2), of random sign unless `positive`, exact in `dtype`.
HostTensor nonzero(DType dtype, const Shape& shape, uint64_t seed, bool positive = false) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> magnitude(0.25, 2.0);
  HostTensor t{dtype, shape, {}};
  for (int64_t i = 0; i < shape.numel(); ++i) {
    const double v = magnitude(gen) * (positive || gen() % 2 == 0 ? 1.0 : -1.0);
    t.values.push_back(round_to_dtype(v, dtype));
  }
  return t;
}

TensorMap run(const Graph& g, const TensorMap& inputs, Rounding rounding = Rounding::kNone,
              std::vector<int32_t> stored = {}) {
  absl::StatusOr<TensorMap> out = interpret(g, inputs, {rounding, std::move(stored)});
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : TensorMap{};
}

// Equal within `rel` relative error; NaN matches NaN, infinities match exactly.
void expect_close(const HostTensor& got, const std::vector<double>& want, double rel = 1e-12) {
  ASSERT_EQ(got.values.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got.values[i])) << "element " << i << ": got " << got.values[i] << ", want NaN";
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(got.values[i], want[i]) << "element " << i;
    } else {
      EXPECT_NEAR(got.values[i], want[i], rel * std::fabs(want[i]) + 1e-300) << "element " << i;
    }
  }
}

std::vector<double> map(const HostTensor& x, const std::function<double(double)>& f) {
  std::vector<double> out;
  for (double v : x.values) out.push_back(f(v));
  return out;
}

double gelu_erf(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
double gelu_tanh(double x) {
  const double inner = std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(inner));
}

struct UnaryCase {
  std::string name;
  std::function<Value(Value)> build;
  std::function<double(double)> expected;
  bool positive = false;  // domain
};

std::vector<UnaryCase> unary_cases() {
  return {
      {"neg", [](Value x) { return neg(x); }, [](double x) { return 0.0 - x; }},
      {"abs", [](Value x) { return abs(x); }, [](double x) { return x < 0 ? -x : x; }},
      {"exp", [](Value x) { return exp(x); }, [](double x) { return std::pow(std::numbers::e, x); }},
      {"log", [](Value x) { return log(x); }, [](double x) { return std::log2(x) / std::log2(std::numbers::e); }, true},
      {"sqrt", [](Value x) { return sqrt(x); }, [](double x) { return std::pow(x, 0.5); }, true},
      {"rsqrt", [](Value x) { return rsqrt(x); }, [](double x) { return std::pow(x, -0.5); }, true},
      {"reciprocal", [](Value x) { return reciprocal(x); }, [](double x) { return std::pow(x, -1.0); }},
      {"square", [](Value x) { return square(x); }, [](double x) { return std::pow(x, 2.0); }},
      {"tanh", [](Value x) { return tanh(x); }, [](double x) { return (std::exp(2 * x) - 1) / (std::exp(2 * x) + 1); }},
      {"sigmoid", [](Value x) { return sigmoid(x); }, [](double x) { return std::exp(x) / (std::exp(x) + 1); }},
      {"relu", [](Value x) { return relu(x); }, [](double x) { return x > 0 ? x : 0.0; }},
      {"silu", [](Value x) { return silu(x); }, [](double x) { return x * std::exp(x) / (std::exp(x) + 1); }},
      {"erf", [](Value x) { return erf(x); }, [](double x) { return 1.0 - std::erfc(x); }},
      {"gelu", [](Value x) { return gelu(x); }, gelu_erf},
      {"gelu", [](Value x) { return gelu(x, "tanh"); }, gelu_tanh},
  };
}

struct BinaryCase {
  std::string name;
  std::function<Value(Value, Value)> build;
  std::function<double(double, double)> expected;
  bool positive = false;
};

std::vector<BinaryCase> binary_cases() {
  return {
      {"add", [](Value a, Value b) { return a + b; }, [](double a, double b) { return a + b; }},
      {"sub", [](Value a, Value b) { return a - b; }, [](double a, double b) { return a - b; }},
      {"mul", [](Value a, Value b) { return a * b; }, [](double a, double b) { return a * b; }},
      {"div", [](Value a, Value b) { return a / b; }, [](double a, double b) { return a * (1.0 / b); }},
      {"maximum", [](Value a, Value b) { return maximum(a, b); }, [](double a, double b) { return a < b ? b : a; }},
      {"minimum", [](Value a, Value b) { return minimum(a, b); }, [](double a, double b) { return b < a ? b : a; }},
      {"pow", [](Value a, Value b) { return pow(a, b); }, [](double a, double b) { return std::exp(b * std::log(a)); },
       true},
  };
}

const Shape kShape{64, 33};

TEST(InterpreterOpsTest, EveryUnaryOp) {
  for (const UnaryCase& c : unary_cases()) {
    SCOPED_TRACE(c.name);
    Graph g;
    auto x = g.input("x", DType::kF32, kShape);
    g.output("y", c.build(x));
    const HostTensor in = nonzero(DType::kF32, kShape, 1, c.positive);
    const HostTensor y = run(g, {{"x", in}}).at("y");
    EXPECT_EQ(y.dtype, DType::kF32);
    EXPECT_EQ(y.shape, kShape);
    expect_close(y, map(in, c.expected));
  }
}

TEST(InterpreterOpsTest, GeluFormsDiffer) {
  // The two forms agree to about 1e-3, so a swapped form would fail above.
  EXPECT_GT(std::fabs(gelu_erf(1.5) - gelu_tanh(1.5)), 1e-5);
}

TEST(InterpreterOpsTest, EveryBinaryOp) {
  for (const BinaryCase& c : binary_cases()) {
    SCOPED_TRACE(c.name);
    Graph g;
    auto a = g.input("a", DType::kF32, kShape);
    auto b = g.input("b", DType::kF32, kShape);
    g.output("y", c.build(a, b));
    const HostTensor ta = nonzero(DType::kF32, kShape, 2, c.positive);
    const HostTensor tb = nonzero(DType::kF32, kShape, 3);
    const HostTensor y = run(g, {{"a", ta}, {"b", tb}}).at("y");
    std::vector<double> want;
    for (int64_t i = 0; i < kShape.numel(); ++i) want.push_back(c.expected(ta.values[i], tb.values[i]));
    expect_close(y, want);
  }
}

TEST(InterpreterOpsTest, Reductions) {
  const Shape shape{5, 3, 37};
  const HostTensor in = nonzero(DType::kF32, shape, 4);
  struct Case {
    std::string name;
    std::function<Value(Value)> build;
  };
  const Case cases[] = {{"sum", [](Value x) { return sum(x); }},
                        {"mean", [](Value x) { return mean(x); }},
                        {"max", [](Value x) { return max(x); }}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Graph g;
    auto x = g.input("x", DType::kF32, shape);
    g.output("y", c.build(x));
    const HostTensor y = run(g, {{"x", in}}).at("y");
    EXPECT_EQ(y.shape, (Shape{5, 3, 1}));
    std::vector<double> want;
    for (int64_t row = 0; row < 15; ++row) {
      double total = 0, largest = -kInf;
      for (int64_t j = 0; j < 37; ++j) {
        total += in.values[row * 37 + j];
        largest = std::max(largest, in.values[row * 37 + j]);
      }
      want.push_back(c.name == "sum" ? total : c.name == "mean" ? total / 37 : largest);
    }
    expect_close(y, want);
  }
}

TEST(InterpreterOpsTest, CastAlwaysRounds) {
  const HostTensor in = nonzero(DType::kF32, kShape, 5);
  for (DType to : kAllDTypes) {
    for (Rounding mode : {Rounding::kNone, Rounding::kOutputsOnly, Rounding::kEveryOp}) {
      Graph g;
      auto x = g.input("x", DType::kF32, kShape);
      g.output("y", cast(x, to) * 1.0);  // the cast is not an output, and still rounds
      const HostTensor y = run(g, {{"x", in}}, mode).at("y");
      EXPECT_EQ(y.dtype, to);
      for (int64_t i = 0; i < in.numel(); ++i) ASSERT_EQ(y.values[i], round_to_dtype(in.values[i], to)) << i;
    }
  }
}

TEST(InterpreterOpsTest, Dropout) {
  Graph g;
  auto x = g.input("x", DType::kF32, kShape);
  g.output("y", dropout(x, 0.25, 7));
  const HostTensor in = nonzero(DType::kF32, kShape, 6);
  const HostTensor y = run(g, {{"x", in}}).at("y");
  const double scale = 1.0 / 0.75;  // 4/3 rounded to float below
  for (int64_t i = 0; i < in.numel(); ++i) {
    const double u = dropout_uniform(7, i);
    ASSERT_EQ(y.values[i], u >= 0.25 ? in.values[i] * static_cast<float>(scale) : 0.0) << i;
  }
}

std::vector<double> reference_matmul(const HostTensor& a, const HostTensor& b) {
  const int64_t k = b.shape[0], n = b.shape[1], m = a.numel() / k;
  std::vector<double> out(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t kk = 0; kk < k; ++kk) acc += a.values[i * k + kk] * b.values[kk * n + j];
      out[i * n + j] = acc;
    }
  }
  return out;
}

TEST(InterpreterOpsTest, Matmul) {
  // Small, batched, and big enough to cross the interpreter's tiles in k and n.
  const std::pair<Shape, Shape> shapes[] = {
      {{3, 4}, {4, 5}}, {{2, 3, 5, 7}, {7, 4}}, {{70, 300}, {300, 130}}, {{40, 20}, {20, 600}}, {{1, 1}, {1, 1}}};
  for (const auto& [sa, sb] : shapes) {
    SCOPED_TRACE(sa.to_string() + " x " + sb.to_string());
    Graph g;
    auto a = g.input("a", DType::kF32, sa);
    auto b = g.input("b", DType::kF32, sb);
    g.output("y", matmul(a, b));
    const HostTensor ta = nonzero(DType::kF32, sa, 7), tb = nonzero(DType::kF32, sb, 8);
    const HostTensor y = run(g, {{"a", ta}, {"b", tb}}).at("y");
    Shape want_shape = sa;
    want_shape[sa.rank() - 1] = sb[1];
    EXPECT_EQ(y.shape, want_shape);
    expect_close(y, reference_matmul(ta, tb));
  }
}

TEST(InterpreterOpsTest, EveryOpOfTheTableIsCovered) {
  std::set<std::string> covered = {"sum", "mean", "max", "cast", "dropout", "matmul",
                                   // composites_test.cpp checks these against their textbook definitions
                                   "layer_norm", "rms_norm", "softmax", "log_softmax"};
  for (const UnaryCase& c : unary_cases()) covered.insert(c.name);
  for (const BinaryCase& c : binary_cases()) covered.insert(c.name);
  for (const OpInfo& info : callable_ops()) EXPECT_TRUE(covered.contains(std::string(info.name))) << info.name;
}

// The value of `t` read at output coordinate `coord` under NumPy broadcasting.
double broadcast_at(const HostTensor& t, const std::vector<int64_t>& coord) {
  const int offset = static_cast<int>(coord.size()) - t.shape.rank();
  int64_t index = 0;
  for (int d = 0; d < t.shape.rank(); ++d) index = index * t.shape[d] + (t.shape[d] == 1 ? 0 : coord[offset + d]);
  return t.values[index];
}

TEST(InterpreterOpsTest, Broadcasting) {
  const std::pair<Shape, Shape> cases[] = {
      {{6, 5}, {5}},
      {{5}, {6, 5}},
      {{6, 5}, {6, 1}},
      {{6, 1}, {6, 5}},
      {{6, 1}, {1, 5}},
      {{1, 5}, {6, 1}},
      {{4, 3, 5}, {3, 1}},
      {{3, 1}, {4, 3, 5}},
      {{2, 3, 4, 5}, {3, 1, 5}},
      {{2, 1, 4, 1}, {1, 3, 1, 5}},
      {{1}, {2, 3, 4, 5}},
      {{7, 1, 1}, {7, 1, 1}},
  };
  for (const auto& [sa, sb] : cases) {
    SCOPED_TRACE(sa.to_string() + " - " + sb.to_string());
    Graph g;
    auto a = g.input("a", DType::kF32, sa);
    auto b = g.input("b", DType::kF32, sb);
    g.output("y", a - b);  // sub: operand order matters
    const HostTensor ta = nonzero(DType::kF32, sa, 9), tb = nonzero(DType::kF32, sb, 10);
    const HostTensor y = run(g, {{"a", ta}, {"b", tb}}).at("y");
    const Shape out = *broadcast_shapes(sa, sb);
    ASSERT_EQ(y.shape, out);
    std::vector<double> want;
    std::vector<int64_t> coord(out.rank(), 0);
    for (int64_t i = 0; i < out.numel(); ++i) {
      int64_t rest = i;
      for (int d = out.rank() - 1; d >= 0; --d) {
        coord[d] = rest % out[d];
        rest /= out[d];
      }
      want.push_back(broadcast_at(ta, coord) - broadcast_at(tb, coord));
    }
    expect_close(y, want, 0.0);
  }
}

TEST(InterpreterOpsTest, LiteralOperandsOnBothSides) {
  const HostTensor in = nonzero(DType::kF32, kShape, 11, /*positive=*/true);
  struct Case {
    std::string what;
    std::function<Value(Value)> build;
    std::function<double(double)> expected;
  };
  const Case cases[] = {
      {"x - 0.5", [](Value x) { return x - 0.5; }, [](double x) { return x - 0.5; }},
      {"0.5 - x", [](Value x) { return 0.5 - x; }, [](double x) { return 0.5 - x; }},
      {"2 / x", [](Value x) { return 2.0 / x; }, [](double x) { return 2.0 / x; }},
      {"x / 2", [](Value x) { return x / 2.0; }, [](double x) { return x * 0.5; }},
      {"pow(x, 2)", [](Value x) { return pow(x, 2.0); }, [](double x) { return x * x; }},
      {"pow(2, x)", [](Value x) { return pow(2.0, x); }, [](double x) { return std::exp2(x); }},
      {"maximum(1, x)", [](Value x) { return maximum(1.0, x); }, [](double x) { return x > 1 ? x : 1.0; }},
      {"minimum(x, 1)", [](Value x) { return minimum(x, 1.0); }, [](double x) { return x < 1 ? x : 1.0; }},
      {"3 * x + 1", [](Value x) { return 3.0 * x + 1.0; }, [](double x) { return 3 * x + 1; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Graph g;
    auto x = g.input("x", DType::kF32, kShape);
    g.output("y", c.build(x));
    expect_close(run(g, {{"x", in}}).at("y"), map(in, c.expected));
  }
}

// A literal is the float32 constant the kernels compute with, not the
// float64 value written: where rounding to float32 makes an exponent an
// integer, or an even one, pow's result changes sign or stops being NaN.
TEST(InterpreterOpsTest, LiteralsMeanTheirFloat32Value) {
  const Shape shape{1, 3};
  const HostTensor in{DType::kF32, shape, {-1.0, -2.0, 1.0}};
  Graph g;
  auto x = g.input("x", DType::kF32, shape);
  g.output("even", pow(x, 16777217.0));  // 16777216 in float32: even
  g.output("whole", pow(x, 3.0000001));  // 3 in float32
  g.output("tenth", x + 0.1);            // 0.100000001490116...
  const TensorMap out = run(g, {{"x", in}});
  expect_close(out.at("even"), {1.0, std::pow(2.0, 16777216.0), 1.0}, 0.0);
  expect_close(out.at("whole"), {-1.0, -8.0, 1.0}, 0.0);
  const double tenth = static_cast<float>(0.1);
  expect_close(out.at("tenth"), {-1.0 + tenth, -2.0 + tenth, 1.0 + tenth}, 0.0);
  EXPECT_THAT(print_graph(g), HasSubstr("pow(x, 16777217)")) << "the graph keeps the literal as written";
}

TEST(InterpreterOpsTest, TypePromotion) {
  const Shape shape{4, 8};
  const HostTensor h = nonzero(DType::kF16, shape, 12), b = nonzero(DType::kBF16, shape, 13);
  const HostTensor f = nonzero(DType::kF32, shape, 14);
  Graph g;
  auto vh = g.input("h", DType::kF16, shape);
  auto vb = g.input("b", DType::kBF16, shape);
  auto vf = g.input("f", DType::kF32, shape);
  g.output("hb", vh + vb);
  g.output("fh", vf * vh);
  g.output("bb", vb + vb);
  g.output("b_literal", vb + 0.1);  // a literal does not promote: stays bf16
  g.output("h_literal", 0.1 * vh);
  const TensorMap out = run(g, {{"h", h}, {"b", b}, {"f", f}}, Rounding::kOutputsOnly);
  EXPECT_EQ(out.at("hb").dtype, DType::kF32);
  EXPECT_EQ(out.at("fh").dtype, DType::kF32);
  EXPECT_EQ(out.at("bb").dtype, DType::kBF16);
  EXPECT_EQ(out.at("b_literal").dtype, DType::kBF16);
  EXPECT_EQ(out.at("h_literal").dtype, DType::kF16);
  for (int64_t i = 0; i < shape.numel(); ++i) {
    EXPECT_EQ(out.at("hb").values[i], round_to_dtype(h.values[i] + b.values[i], DType::kF32));
    EXPECT_EQ(out.at("fh").values[i], round_to_dtype(f.values[i] * h.values[i], DType::kF32));
    EXPECT_EQ(out.at("bb").values[i], round_to_dtype(2 * b.values[i], DType::kBF16));
    EXPECT_EQ(out.at("b_literal").values[i], round_to_dtype(b.values[i] + 0.1, DType::kBF16));
    EXPECT_EQ(out.at("h_literal").values[i], round_to_dtype(0.1 * h.values[i], DType::kF16));
  }
}

TEST(InterpreterOpsTest, RoundingModes) {
  const Shape shape{1000};
  const HostTensor in = nonzero(DType::kBF16, shape, 15);
  Graph g;
  auto x = g.input("x", DType::kBF16, shape);
  auto t1 = x * 1.37;
  auto t2 = exp(t1);
  g.output("y", t2 - x);
  const TensorMap inputs{{"x", in}};
  const HostTensor every = run(g, inputs, Rounding::kEveryOp).at("y");
  const HostTensor outputs_only = run(g, inputs, Rounding::kOutputsOnly).at("y");
  const HostTensor stored = run(g, inputs, Rounding::kStoredNodes, {t1.id()}).at("y");
  const HostTensor exact = run(g, inputs, Rounding::kNone).at("y");
  auto r = [](double v) { return round_to_dtype(v, DType::kBF16); };
  const double k = static_cast<float>(1.37);  // the literal's value: its float32 one
  int64_t differ = 0;
  for (int64_t i = 0; i < in.numel(); ++i) {
    const double v = in.values[i];
    EXPECT_EQ(every.values[i], r(r(std::exp(r(v * k))) - v)) << i;
    EXPECT_EQ(outputs_only.values[i], r(std::exp(v * k) - v)) << i;
    EXPECT_EQ(stored.values[i], r(std::exp(r(v * k)) - v)) << i;
    EXPECT_EQ(exact.values[i], std::exp(v * k) - v) << i;
    EXPECT_EQ(outputs_only.values[i], r(exact.values[i])) << i;  // one rounding of the float64 value
    differ += every.values[i] != outputs_only.values[i];
  }
  EXPECT_GT(differ, 50) << "rounding every op of a bf16 chain should change many results";
}

TEST(InterpreterOpsTest, IntermediatesUsedTwiceAndOutputsInTheMiddle) {
  const Shape shape{3, 4};
  const HostTensor in = nonzero(DType::kF32, shape, 16);
  Graph g;
  auto x = g.input("x", DType::kF32, shape);
  auto h = x + 1.0;
  sqrt(exp(h));  // dead code: evaluated or not, it changes nothing
  g.output("h", h);
  g.output("z", exp(h) + h * 2.0);
  const TensorMap out = run(g, {{"x", in}});
  expect_close(out.at("h"), map(in, [](double v) { return v + 1; }), 0.0);
  expect_close(out.at("z"), map(in, [](double v) { return std::exp(v + 1) + 2 * (v + 1); }));
}

TEST(InterpreterOpsTest, NaNAndInfinityPropagate) {
  Graph g;
  auto x = g.input("x", DType::kF32, {2, 4});
  g.output("max_lit", maximum(x, 1.0));
  g.output("lit_max", maximum(1.0, x));
  g.output("min_lit", minimum(x, 0.0));
  g.output("relu_x", relu(x));
  g.output("rowmax", max(x));
  g.output("rowsum", sum(x));
  g.output("log_x", log(x));
  g.output("inv_x", reciprocal(x));
  g.output("drop", dropout(x, 0.5, 1));
  const HostTensor in{DType::kF32, {2, 4}, {kNaN, 1, -kInf, 3, kInf, -1, 0, 2}};
  const TensorMap out = run(g, {{"x", in}}, Rounding::kEveryOp);
  expect_close(out.at("max_lit"), {kNaN, 1, 1, 3, kInf, 1, 1, 2});
  expect_close(out.at("lit_max"), {kNaN, 1, 1, 3, kInf, 1, 1, 2});
  expect_close(out.at("min_lit"), {kNaN, 0, -kInf, 0, 0, -1, 0, 0});
  expect_close(out.at("relu_x"), {kNaN, 1, 0, 3, kInf, 0, 0, 2});
  expect_close(out.at("rowmax"), {kNaN, kInf});
  expect_close(out.at("rowsum"), {kNaN, kInf});
  expect_close(out.at("log_x"), {kNaN, 0, kNaN, std::log(3.0f), kInf, kNaN, -kInf, std::log(2.0f)}, 1e-7);
  expect_close(out.at("inv_x"), {kNaN, 1, -0.0, 1 / 3.0f, 0, -1, kInf, 0.5}, 1e-7);
  // Dropout multiplies by the mask, as PyTorch does: a dropped NaN or infinity becomes NaN.
  const HostTensor& drop = out.at("drop");
  EXPECT_TRUE(std::isnan(drop.values[0]));
  EXPECT_EQ(std::isnan(drop.values[4]), !dropout_keeps(1, 4, 0.5));
}

TEST(InterpreterOpsTest, RejectsBadInputs) {
  Graph g;
  auto x = g.input("x", DType::kBF16, {2, 3});
  g.output("y", relu(x));
  const HostTensor good = nonzero(DType::kBF16, {2, 3}, 17);
  auto error = [&](const TensorMap& inputs, InterpretOptions options = {}) {
    absl::StatusOr<TensorMap> out = interpret(g, inputs, options);
    EXPECT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(out.status().message());
  };
  EXPECT_EQ(error({}), "missing input 'x' (expected bf16[2, 3])");
  EXPECT_EQ(error({{"x", good}, {"z", good}}), "unexpected input 'z': the graph's inputs are x");
  EXPECT_EQ(error({{"x", nonzero(DType::kF32, {2, 3}, 1)}}), "input 'x': expected bf16[2, 3], got f32[2, 3]");
  EXPECT_EQ(error({{"x", nonzero(DType::kBF16, {3, 2}, 1)}}), "input 'x': expected bf16[2, 3], got bf16[3, 2]");
  EXPECT_EQ(error({{"x", HostTensor{DType::kBF16, {2, 3}, {1, 2, 3}}}}),
            "input 'x': shape [2, 3] needs 6 values, the tensor holds 3");
  EXPECT_EQ(error({{"x", HostTensor{DType::kBF16, {2, 3}, {1, 2, 3, 4, 0.1, 6}}}}),
            "input 'x': element 4 is 0.10000000000000001, which bf16 cannot represent");
  EXPECT_THAT(error({{"x", good}}, {Rounding::kStoredNodes, {7}}), HasSubstr("stored node id 7"));
  EXPECT_EQ(error({{"x", good}}, {.perturbation = -0.5}), "perturbation -0.5 is not a finite number >= 0 (0: none)");
  EXPECT_THAT(error({{"x", good}}, {.perturbation = std::nan("")}), HasSubstr("is not a finite number >= 0"));
  EXPECT_TRUE(interpret(g, {{"x", good}}).ok());

  Graph no_output;
  no_output.input("x", DType::kF32, {2});
  const absl::StatusOr<TensorMap> bad = interpret(no_output, {{"x", HostTensor{DType::kF32, {2}, {1, 2}}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("no output"));
}

TEST(InterpreterRandomTest, NormalValuesAreDeterministicExactAndStandard) {
  const Shape shape{317, 331};  // odd element count: the last Box-Muller pair is half used
  for (DType dtype : kAllDTypes) {
    const HostTensor a = HostTensor::random_normal(dtype, shape, 99);
    const HostTensor b = HostTensor::random_normal(dtype, shape, 99);
    const HostTensor c = HostTensor::random_normal(dtype, shape, 100);
    EXPECT_EQ(a.values, b.values);
    EXPECT_NE(a.values, c.values);
    double total = 0, squares = 0;
    for (double v : a.values) {
      ASSERT_EQ(round_to_dtype(v, dtype), v);
      total += v;
      squares += v * v;
    }
    const double n = static_cast<double>(a.numel());
    const double mean = total / n, variance = squares / n - mean * mean;
    EXPECT_NEAR(mean, 0.0, 6 / std::sqrt(n));
    EXPECT_NEAR(variance, 1.0, 6 * std::sqrt(2 / n) + 0.01);  // + 16-bit rounding
  }
  // The generator is part of the contract: these values must never change.
  const HostTensor pinned = HostTensor::random_normal(DType::kF32, {4}, 0);
  EXPECT_THAT(pinned.values, ::testing::ElementsAre(-0x1.cf9fbap-2, 0x1.a9813ep-3, 0x1.53470ep+1, -0x1.f63166p-2));
}

TEST(InterpreterRandomTest, RandomInputsDifferPerInputAndFollowTheSeed) {
  Graph g;
  auto x = g.input("x", DType::kBF16, {16, 8});
  auto b = g.input("b", DType::kF16, {16, 8});
  g.output("y", x + b);
  const TensorMap one = random_inputs(g, 5), same = random_inputs(g, 5), other = random_inputs(g, 6);
  ASSERT_EQ(one.size(), 2u);
  EXPECT_EQ(one.at("x").dtype, DType::kBF16);
  EXPECT_EQ(one.at("b").dtype, DType::kF16);
  EXPECT_EQ(one.at("x").shape, (Shape{16, 8}));
  EXPECT_EQ(one.at("x").values, same.at("x").values);
  EXPECT_NE(one.at("x").values, other.at("x").values);
  int64_t equal = 0;
  for (int64_t i = 0; i < 128; ++i) equal += one.at("x").values[i] == one.at("b").values[i];
  EXPECT_LT(equal, 10);
  EXPECT_TRUE(interpret(g, one).ok());
}

// No input of one seed repeats an input of another: a symmetric mix of seed
// and input index once gave seed 1's first input the values of seed 2's
// second (found by trying `fusejit run --seed 1` and `--seed 2`).
TEST(InterpreterRandomTest, NoInputOfOneSeedRepeatsAnotherSeedsInputs) {
  Graph g;
  std::vector<std::string> names;
  for (int i = 0; i < 6; ++i) names.push_back("in" + std::to_string(i));
  Value sum = g.input(names[0], DType::kF32, {32});
  for (int i = 1; i < 6; ++i) sum = sum + g.input(names[i], DType::kF32, {32});
  g.output("y", sum);
  std::set<std::vector<double>> seen;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    const TensorMap inputs = random_inputs(g, seed);
    for (const std::string& name : names) {
      EXPECT_TRUE(seen.insert(inputs.at(name).values).second) << "seed " << seed << ", input " << name;
    }
  }
}

}  // namespace
}  // namespace fusejit
