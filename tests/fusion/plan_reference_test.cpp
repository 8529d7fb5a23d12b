// Judging a backend's outputs (first_wrong_output): the float64 reference,
// and the float32-intermediates reference that tells float32 overflow inside
// a kernel apart from a wrong kernel, without accepting anything else.
#include "fusion/plan_reference.h"

#include <cmath>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "ir/compare.h"
#include "ir/text_format.h"

namespace fusejit {
namespace {

constexpr int64_t kCols = 64;

// Row 0 of x is N(0, 1); row 1 is N(0, 1) * 1e25, whose squared deviations
// overflow float32 (about 3.4e38) but not float64.
TensorMap layer_norm_inputs() {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal;
  HostTensor x{DType::kF32, Shape({2, kCols}), {}};
  for (int64_t i = 0; i < 2 * kCols; ++i) {
    x.values.push_back(static_cast<float>(normal(rng) * (i < kCols ? 1.0 : 1e25)));
  }
  return {{"x", x}};
}

FusionPlan layer_norm_plan() {
  absl::StatusOr<Graph> g = parse_graph("input x: f32[2, 64]\ny = layer_norm(x)\noutput y\n");
  EXPECT_TRUE(g.ok()) << g.status();
  return make_fused_plan(*g);
}

TEST(PlanReference, Float32OverflowInsideAKernelIsJudgedByFloat32Arithmetic) {
  const FusionPlan plan = layer_norm_plan();
  const TensorMap inputs = layer_norm_inputs();
  absl::StatusOr<TensorMap> exact = interpret_plan(plan, inputs);
  absl::StatusOr<TensorMap> f32 = interpret_plan(plan, inputs, {.float32_intermediates = true});
  ASSERT_TRUE(exact.ok() && f32.ok());
  const HostTensor& y64 = exact->at("y");
  const HostTensor& y32 = f32->at("y");
  // Float64 normalises the large row; float32 squares it to infinity, so its
  // reciprocal standard deviation is 0 and the row comes out as zeros.
  for (int64_t c = 0; c < kCols; ++c) {
    EXPECT_EQ(y32.values[kCols + c], 0.0) << "column " << c;
    EXPECT_NEAR(y32.values[c], y64.values[c], 1e-5) << "the small row agrees, column " << c;
  }
  EXPECT_GT(std::fabs(y64.values[kCols]), 1e-3);
  EXPECT_FALSE(compare_tensors(y32, y64).within(DType::kF32)) << "the two references must differ here";

  // What a float32 kernel computes passes.
  absl::StatusOr<std::string> verdict = first_wrong_output(plan, inputs, *f32);
  ASSERT_TRUE(verdict.ok()) << verdict.status();
  EXPECT_EQ(*verdict, "");

  // The float32 reference excuses the overflowing row only: an error of 1e-3
  // in the well-scaled row is still reported, with the float64 comparison.
  TensorMap wrong = *f32;
  wrong.at("y").values[5] += 1e-3 * std::fabs(wrong.at("y").values[5]) + 1e-3;
  verdict = first_wrong_output(plan, inputs, wrong);
  ASSERT_TRUE(verdict.ok()) << verdict.status();
  EXPECT_NE(verdict->find("output y (f32[2, 64]) has relative error"), std::string::npos) << *verdict;

  // And zeros where float32 does not overflow are wrong.
  TensorMap zeros = *exact;
  for (int64_t c = 0; c < kCols; ++c) zeros.at("y").values[c] = 0;
  verdict = first_wrong_output(plan, inputs, zeros);
  ASSERT_TRUE(verdict.ok());
  EXPECT_NE(*verdict, "");
}

// bench passes the float64 reference it already computed; the judgement
// is made against that reference, not a recomputed one.
TEST(PlanReference, AGivenFloat64ReferenceIsTheOneUsed) {
  const FusionPlan plan = layer_norm_plan();
  const TensorMap inputs = layer_norm_inputs();
  absl::StatusOr<TensorMap> exact = interpret_plan(plan, inputs);
  ASSERT_TRUE(exact.ok());
  absl::StatusOr<std::string> verdict = first_wrong_output(plan, inputs, *exact, &*exact);
  ASSERT_TRUE(verdict.ok());
  EXPECT_EQ(*verdict, "");
  TensorMap shifted = *exact;
  for (double& v : shifted.at("y").values) v += 1;
  verdict = first_wrong_output(plan, inputs, shifted, &shifted);
  ASSERT_TRUE(verdict.ok());
  EXPECT_EQ(*verdict, "") << "judged against the reference given";
  verdict = first_wrong_output(plan, inputs, shifted);
  ASSERT_TRUE(verdict.ok());
  EXPECT_NE(*verdict, "") << "judged against the reference it computes";
}

// Row 0 of x sums 3e38 + 3e38 - 3e38 (with small terms): 3e38 in float64,
// and in float32 3e38 or inf depending on the order a kernel adds them in
// (32 lanes and a tree on the CPU: elements 0 and 16 share a lane and meet
// first). Each answer is right there and is not compared; the rest of the
// tensor, and every other row, is judged as strictly as ever.
TEST(PlanReference, ASumThatOverflowsInSomeOrdersOnlyAcceptsEachAnswer) {
  absl::StatusOr<Graph> g = parse_graph("input x: f32[3, 64]\ns = sum(x)\nt = add(x, 1)\noutput s, t\n");
  ASSERT_TRUE(g.ok()) << g.status();
  const FusionPlan plan = make_fused_plan(*g);
  HostTensor x = HostTensor::random_normal(DType::kF32, {3, 64}, 5);
  const double big = static_cast<float>(3e38);
  x.values[0] = big, x.values[16] = big, x.values[1] = -big;
  x.values[64] = big, x.values[80] = big;  // row 1: inf in every order
  const TensorMap inputs = {{"x", x}};
  absl::StatusOr<TensorMap> exact = interpret_plan(plan, inputs);
  ASSERT_TRUE(exact.ok()) << exact.status();
  ASSERT_TRUE(std::isfinite(exact->at("s").values[0]));
  ASSERT_TRUE(std::isinf(exact->at("s").values[1]));

  for (double row0 : {std::numeric_limits<double>::infinity(), exact->at("s").values[0]}) {
    TensorMap outputs = *exact;
    outputs.at("s").values[0] = row0;
    int64_t not_compared = -1;
    absl::StatusOr<std::string> verdict = first_wrong_output(plan, inputs, outputs, nullptr, &not_compared);
    ASSERT_TRUE(verdict.ok()) << verdict.status();
    EXPECT_EQ(*verdict, "") << "row 0 as " << row0;
    // Counted where the float32 reference was needed, that is where the
    // float64 one fails.
    EXPECT_EQ(not_compared, std::isinf(row0) ? 1 : 0);
  }

  TensorMap wrong_elsewhere = *exact;
  wrong_elsewhere.at("s").values[0] = std::numeric_limits<double>::infinity();
  wrong_elsewhere.at("s").values[2] += 1;  // an ordinary row, wrong
  absl::StatusOr<std::string> verdict = first_wrong_output(plan, inputs, wrong_elsewhere);
  ASSERT_TRUE(verdict.ok());
  EXPECT_NE(verdict->find("output s "), std::string::npos) << *verdict;

  TensorMap finite_overflow = *exact;
  finite_overflow.at("s").values[1] = big;  // row 1 is inf in every order
  verdict = first_wrong_output(plan, inputs, finite_overflow);
  ASSERT_TRUE(verdict.ok());
  EXPECT_NE(verdict->find("element 1"), std::string::npos) << *verdict;

  TensorMap wrong_t = *exact;
  wrong_t.at("s").values[0] = std::numeric_limits<double>::infinity();
  wrong_t.at("t").values[0] = 0;  // t depends on no sum: judged strictly
  verdict = first_wrong_output(plan, inputs, wrong_t);
  ASSERT_TRUE(verdict.ok());
  EXPECT_NE(verdict->find("output t "), std::string::npos) << *verdict;
}

TEST(PlanReference, MissingOutputIsReported) {
  const FusionPlan plan = layer_norm_plan();
  absl::StatusOr<std::string> verdict = first_wrong_output(plan, layer_norm_inputs(), {});
  ASSERT_TRUE(verdict.ok());
  EXPECT_EQ(*verdict, "output y is missing");
}

}  // namespace
}  // namespace fusejit
