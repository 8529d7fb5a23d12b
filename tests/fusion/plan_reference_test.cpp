// Judging a backend's outputs (first_wrong_output): the float64 reference,
// and the float32-intermediates reference that tells float32 overflow inside
// a kernel apart from a wrong kernel, without accepting anything else.
#include "fusion/plan_reference.h"

#include <cmath>
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

TEST(PlanReference, MissingOutputIsReported) {
  const FusionPlan plan = layer_norm_plan();
  absl::StatusOr<std::string> verdict = first_wrong_output(plan, layer_norm_inputs(), {});
  ASSERT_TRUE(verdict.ok());
  EXPECT_EQ(*verdict, "output y is missing");
}

}  // namespace
}  // namespace fusejit
