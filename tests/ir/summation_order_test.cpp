// Where a float32 sum depends on the order of its terms (summation_order.h),
// checked against every order of small sums added up in float32, and the
// flags the reference interpreter derives from it.
#include "ir/summation_order.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "ir/interpreter.h"
#include "ir/text_format.h"

namespace fusejit {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool order_dependent(const std::vector<double>& terms) {
  detail::SumOrderCheck sum;
  for (double t : terms) sum.add(t);
  return sum.order_dependent();
}

// What a float32 sum came out as: finite values differ by rounding only.
enum class Outcome { kFinite, kPlusInf, kMinusInf, kNaN };
Outcome outcome(float v) {
  if (std::isnan(v)) return Outcome::kNaN;
  if (std::isinf(v)) return v > 0 ? Outcome::kPlusInf : Outcome::kMinusInf;
  return Outcome::kFinite;
}

// Terms [begin, end) added as a balanced tree, as lanes combine.
float tree_sum(const std::vector<float>& t, size_t begin, size_t end) {
  if (end - begin == 1) return t[begin];
  const size_t mid = begin + (end - begin) / 2;
  return tree_sum(t, begin, mid) + tree_sum(t, mid, end);
}

// The outcomes of every order: each permutation added left to right and as
// a tree.
std::set<Outcome> outcomes_of_every_order(const std::vector<double>& terms) {
  std::vector<float> t(terms.begin(), terms.end());
  std::sort(t.begin(), t.end());  // no NaN among them
  std::set<Outcome> seen;
  do {
    float running = 0;
    for (float v : t) running += v;
    seen.insert(outcome(running));
    seen.insert(outcome(tree_sum(t, 0, t.size())));
  } while (std::next_permutation(t.begin(), t.end()));
  return seen;
}

TEST(SumOrder, NamedCases) {
  EXPECT_TRUE(order_dependent({3e38, 3e38, -3e38})) << "3e38 from one side, inf from the other";
  EXPECT_TRUE(order_dependent({3e38, 3e38, -kInf})) << "-inf, or inf + -inf = NaN";
  EXPECT_TRUE(order_dependent({2e38, 2e38, -2e38, -2e38})) << "0, inf, -inf or NaN";
  EXPECT_FALSE(order_dependent({3e38, -3e38, 1})) << "nothing overflows";
  EXPECT_FALSE(order_dependent({3e38, 3e38})) << "inf in every order";
  EXPECT_FALSE(order_dependent({3e38, 3e38, -1})) << "inf in every order";
  EXPECT_FALSE(order_dependent({3e38, -kInf})) << "-inf in every order";
  EXPECT_FALSE(order_dependent({kInf, -kInf, 3e38, 3e38, -3e38})) << "NaN in every order";
  EXPECT_FALSE(order_dependent({std::nan(""), 3e38, 3e38, -3e38})) << "NaN in every order";
  // At float32's edge: FLT_MAX + 1e34 is past the rounding point in every
  // order; FLT_MAX - FLT_MAX is one exact addition; FLT_MAX beside small
  // terms absorbs them in every order (a fixed margin once flagged all
  // three, and with them every row holding FLT_MAX).
  const double max = std::numeric_limits<float>::max();
  EXPECT_FALSE(order_dependent({max, 1e34}));
  EXPECT_FALSE(order_dependent({max, -max}));
  std::vector<double> beside_small = {max};
  for (int i = 0; i < 1023; ++i) beside_small.push_back(std::sin(i) * 3);
  EXPECT_FALSE(order_dependent(beside_small));
  // But 32770 terms just below 2^103 beside it: left to right each is
  // absorbed (FLT_MAX), from the right they add up first (infinity). A
  // margin sized for 16384 terms missed it.
  std::vector<double> long_row = {max};
  long_row.insert(long_row.end(), 32770, 0x1.fffffep102);
  EXPECT_TRUE(order_dependent(long_row));
  // (Those two answers, added in float32 both ways.)
  float left = static_cast<float>(max), right = 0;
  for (int i = 0; i < 32770; ++i) left += 0x1.fffffep102f;
  for (int i = 0; i < 32770; ++i) right += 0x1.fffffep102f;
  right += static_cast<float>(max);
  EXPECT_EQ(left, static_cast<float>(max));
  EXPECT_TRUE(std::isinf(right));
}

// The check against brute force: over random sums of up to 6 terms drawn
// from magnitudes around float32's limit (none of whose partial sums falls
// within a margin of it), the check says "depends on the order" exactly
// where some two orders of adding them in float32 disagree on whether the
// result is finite, an infinity, or NaN.
TEST(SumOrder, AgreesWithEveryOrderOfSmallSums) {
  const double magnitudes[] = {1, 1e38, 1.5e38, 2e38, 3e38, kInf};
  std::mt19937_64 rng(7);
  int dependent = 0, independent = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<double> terms(2 + rng() % 5);
    for (double& t : terms) t = magnitudes[rng() % std::size(magnitudes)] * (rng() % 2 ? 1 : -1);
    const bool expected = outcomes_of_every_order(terms).size() > 1;
    EXPECT_EQ(order_dependent(terms), expected) << ::testing::PrintToString(terms);
    (expected ? dependent : independent)++;
  }
  EXPECT_GT(dependent, 300);
  EXPECT_GT(independent, 300);
}

// An f32 tensor of `values`, each rounded to float32 first.
HostTensor f32_tensor(Shape shape, std::vector<double> values) {
  for (double& v : values) v = static_cast<float>(v);
  return HostTensor{DType::kF32, std::move(shape), std::move(values)};
}

absl::StatusOr<TensorMap> interpret_with_flags(const std::string& text, const TensorMap& inputs,
                                               std::map<std::string, std::vector<char>>& flags) {
  absl::StatusOr<Graph> g = parse_graph(text);
  if (!g.ok()) return g.status();
  InterpretOptions options;
  options.float32_intermediates = true;
  options.order_dependent = &flags;
  return interpret(*g, inputs, options);
}

// Row 0's sum depends on the order; row 1 overflows in every order; row 2
// is ordinary. Sums, LayerNorm (through its expansion's mean) and whatever
// a flagged value reaches are flagged in row 0 only; max and elementwise ops
// of inputs flag nothing.
TEST(SumOrder, TheInterpreterFlagsWhatAnOrderDependentSumReaches) {
  HostTensor x{DType::kF32, Shape({3, 64}), std::vector<double>(3 * 64)};
  for (size_t i = 0; i < x.values.size(); ++i) x.values[i] = static_cast<float>(std::sin(0.1 * i));
  const double big = static_cast<float>(3e38);
  x.values[0] = big, x.values[16] = big, x.values[1] = -big;
  x.values[64] = big, x.values[80] = big;
  std::map<std::string, std::vector<char>> flags = {{"stale", {1}}};
  absl::StatusOr<TensorMap> out = interpret_with_flags(
      "input x: f32[3, 64]\ns = sum(x)\nt = mul(s, 2)\ny = layer_norm(x)\nm = max(x)\nz = add(x, 1)\n"
      "output s, t, y, m, z\n",
      {{"x", x}}, flags);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(flags.count("stale"), 0u) << "the map is filled afresh";
  EXPECT_EQ(flags["s"], (std::vector<char>{1, 0, 0}));
  EXPECT_EQ(flags["t"], (std::vector<char>{1, 0, 0}));
  ASSERT_EQ(flags["y"].size(), 3u * 64);
  for (int64_t i = 0; i < 3 * 64; ++i) EXPECT_EQ(flags["y"][i], i < 64) << "element " << i;
  EXPECT_EQ(flags.count("m"), 0u);
  EXPECT_EQ(flags.count("z"), 0u);
  EXPECT_TRUE(std::isinf(out->at("s").values[1])) << "row 1 overflows in every order, and the reference says so";
}

// A matmul's terms are its products a[i, k] * b[k, j]. Row 0 of a x b has
// no overflow (column 0 sums 1.5e38 + 1.5e38 - 1.5e38, never past 3e38);
// row 1 doubles that, 3e38 + 3e38 - 3e38, which overflows in some orders;
// row 2's column 0 sums 1.5e58 + 1.5e58 - 1.5e38, inf in every order, and
// its column 2 sums 1e40 - 1e40, products past float32's range alone: inf,
// -inf or NaN depending on the order and on multiply-adds.
TEST(SumOrder, TheInterpreterFlagsMatmulSumsByTheirProducts) {
  const HostTensor a = f32_tensor(Shape({3, 3}), {1, 1, 1, 2, 2, 2, 1e20, 1e20, 1});
  const HostTensor b = f32_tensor(Shape({3, 3}), {1.5e38, 1, 1e20, 1.5e38, 2, -1e20, -1.5e38, 3, 0});
  std::map<std::string, std::vector<char>> flags;
  absl::StatusOr<TensorMap> out = interpret_with_flags(
      "input a: f32[3, 3]\ninput b: f32[3, 3]\nc = matmul(a, b)\noutput c\n", {{"a", a}, {"b", b}}, flags);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(flags["c"], (std::vector<char>{0, 0, 0, 1, 0, 0, 0, 0, 1}));
}

// A NaN in a row of a (or a column of b) makes each of its sums NaN in every
// order, however large the other products: nothing to flag.
TEST(SumOrder, AMatmulSumWithANaNIsNaNInEveryOrder) {
  const HostTensor a = f32_tensor(Shape({2, 3}), {std::nan(""), 2e19, 2e19, 2e19, 2e19, 2e19});
  const HostTensor b = f32_tensor(Shape({3, 1}), {1.5e19, 1.5e19, -1.5e19});
  std::map<std::string, std::vector<char>> flags;
  absl::StatusOr<TensorMap> out = interpret_with_flags(
      "input a: f32[2, 3]\ninput b: f32[3, 1]\nc = matmul(a, b)\noutput c\n", {{"a", a}, {"b", b}}, flags);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(flags["c"], (std::vector<char>{0, 1})) << "row 1 sums 3e38 + 3e38 - 3e38: order-dependent";
}

// 2e19 x 2e19 overflows float32, but fma(2e19, 2e19, -1e38) is 3e38, and
// NVRTC contracts a product and the sum that takes it into one: the sum has
// two right answers. 1e20 x 1e20 is past any such rescue (above 2^129).
TEST(SumOrder, AProductAMultiplyAddCanKeepIsFlagged) {
  const HostTensor x = f32_tensor(Shape({2, 2}), {2e19, 1e38, 1e20, 1e38});
  const HostTensor y = f32_tensor(Shape({2, 2}), {2e19, -1, 1e20, -1});
  std::map<std::string, std::vector<char>> flags;
  absl::StatusOr<TensorMap> out = interpret_with_flags(
      "input x: f32[2, 2]\ninput y: f32[2, 2]\nm = mul(x, y)\ns = sum(m)\noutput m, s\n", {{"x", x}, {"y", y}}, flags);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(flags["m"], (std::vector<char>{1, 0, 0, 0}));
  EXPECT_EQ(flags["s"], (std::vector<char>{1, 0}));
}

TEST(SumOrder, FlagsNeedFloat32Intermediates) {
  absl::StatusOr<Graph> g = parse_graph("input x: f32[2, 4]\ns = sum(x)\noutput s\n");
  ASSERT_TRUE(g.ok());
  std::map<std::string, std::vector<char>> flags;
  InterpretOptions options;
  options.order_dependent = &flags;
  absl::StatusOr<TensorMap> out = interpret(*g, {{"x", HostTensor::random_normal(DType::kF32, {2, 4}, 1)}}, options);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("float32_intermediates"), std::string::npos) << out.status();
}

}  // namespace
}  // namespace fusejit
