// Comparing results with the reference: the strict relative error, and the
// roundoff scale that the perturbed reference gives ill-conditioned results.
#include "ir/compare.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "ir/interpreter.h"
#include "ir/text_format.h"

namespace fusejit {
namespace {

Graph parse(const char* text) {
  absl::StatusOr<Graph> g = parse_graph(text);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? std::move(*g) : Graph{};
}

TensorMap interpret_ok(const Graph& g, const TensorMap& inputs, double perturbation = 0, uint64_t seed = 0) {
  InterpretOptions options;
  options.perturbation = perturbation;
  options.perturbation_seed = seed;
  absl::StatusOr<TensorMap> out = interpret(g, inputs, options);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : TensorMap{};
}

// LayerNorm of each row of x, then the mean of each row, computed in float32
// the way a kernel would: the result is 0 plus float32 rounding noise.
HostTensor mean_of_layer_norm_in_f32(const HostTensor& x, int64_t len) {
  HostTensor out{DType::kF32, Shape({x.numel() / len}), {}};
  for (int64_t r = 0; r < x.numel() / len; ++r) {
    float sum = 0, sq = 0;
    for (int64_t i = 0; i < len; ++i) sum += static_cast<float>(x.values[r * len + i]);
    const float mu = sum / static_cast<float>(len);
    for (int64_t i = 0; i < len; ++i) {
      const float d = static_cast<float>(x.values[r * len + i]) - mu;
      sq += d * d;
    }
    const float rstd = 1.0f / std::sqrt(sq / static_cast<float>(len) + 1e-5f);
    float total = 0;
    for (int64_t i = 0; i < len; ++i) total += (static_cast<float>(x.values[r * len + i]) - mu) * rstd;
    out.values.push_back(total / static_cast<float>(len));
  }
  return out;
}

TEST(Compare, StrictRelativeError) {
  const HostTensor ref{DType::kF32, Shape({4}), {1, -2, 3, -4}};
  HostTensor out = ref;
  EXPECT_EQ(compare_tensors(out, ref).relative_error, 0);
  out.values[2] = 3.001;  // 1e-3 / sqrt(30): over f32's tolerance
  const Comparison c = compare_tensors(out, ref);
  EXPECT_NEAR(c.relative_error, 1e-3 / std::sqrt(30.0), 1e-9);
  EXPECT_FALSE(c.within(DType::kF32));
  EXPECT_TRUE(c.within(DType::kBF16));
  // Over the tolerance, the element that differs most is named.
  EXPECT_EQ(c.mismatch, "it differs most at element 2: 3.001 where the reference has 3");
  EXPECT_EQ(compare_tensors(ref, ref).mismatch, "") << "within the tolerance: nothing to say";
  HostTensor rows{DType::kF32, Shape({2, 3}), {1, 2, 3, 4, 5, 6}};
  HostTensor wrong_rows = rows;
  wrong_rows.values[4] = 0;
  wrong_rows.values[0] = 1.5;
  EXPECT_EQ(compare_tensors(wrong_rows, rows).mismatch,
            "it differs most at element 4 (row 1, column 1): 0 where the reference has 5");
  out.values[2] = std::nan("");
  EXPECT_FALSE(compare_tensors(out, ref).within(DType::kBF16));
  EXPECT_NE(compare_tensors(out, ref).mismatch.find("element 2"), std::string::npos);
}

// One wrong element per row of 4096 is a norm-wise error of about 0.02,
// inside bf16's 3e-2: the element bound catches it, and still accepts the
// rounding a bf16 result legitimately carries in every element.
TEST(Compare, AFewWrongElementsAmongManyRightOnesAreCaught) {
  const Graph g = parse("input x: bf16[8, 4096]\ny = gelu(x)\noutput y\n");
  const HostTensor ref = interpret_ok(g, random_inputs(g, 9)).at("y");
  HostTensor rounded = ref;  // each element off by up to half a bf16 ulp, and a few by more
  for (size_t i = 0; i < rounded.values.size(); ++i) rounded.values[i] *= 1 + (i % 7 == 0 ? 0x1p-7 : 0x1p-9);
  const Comparison fine = compare_tensors(rounded, ref);
  EXPECT_TRUE(fine.within(DType::kBF16)) << fine.relative_error << " " << fine.element_error << " " << fine.mismatch;

  double square_sum = 0;
  for (double v : ref.values) square_sum += v * v;
  const double rms = std::sqrt(square_sum / static_cast<double>(ref.values.size()));
  HostTensor wrong = ref;  // in each row, the first element of 1 to 1.5 rms is zeroed (a dropped element)
  for (int64_t r = 0; r < 8; ++r) {
    int64_t c = 0;
    while (c < 4095 && (std::fabs(ref.values[r * 4096 + c]) < rms || std::fabs(ref.values[r * 4096 + c]) > 1.5 * rms)) {
      ++c;
    }
    wrong.values[r * 4096 + c] = 0;
  }
  const Comparison c = compare_tensors(wrong, ref);
  EXPECT_LE(c.relative_error, tolerance(DType::kBF16)) << "the norm alone would accept it";
  EXPECT_FALSE(c.within(DType::kBF16));
  EXPECT_GT(c.element_error, 0.5);
  EXPECT_NE(c.mismatch.find(", column "), std::string::npos) << c.mismatch;
  EXPECT_NE(c.mismatch.find("is 0 where the reference has"), std::string::npos) << c.mismatch;
  EXPECT_NE(c.mismatch.find("over the 0.12 one element may be off"), std::string::npos) << c.mismatch;
}

// An element near 0 in a tensor of ordinary values is judged against the
// tensor's scale, not its own: its absolute error is what rounding leaves.
TEST(Compare, ElementsNearZeroAreJudgedAgainstTheTensorsScale) {
  const HostTensor ref{DType::kF32, Shape({4}), {1e-9, 2, -3, 4}};
  HostTensor out = ref;
  out.values[0] = 1e-5;  // 10^4 times its own size, 4e-6 of the rms
  const Comparison c = compare_tensors(out, ref);
  EXPECT_TRUE(c.within(DType::kF32)) << c.element_error << " " << c.mismatch;
  EXPECT_NEAR(c.element_error, (1e-5 - 1e-9) / (1e-9 + std::sqrt((1e-18 + 4 + 9 + 16) / 4)), 1e-12);
}

TEST(Compare, PerturbationMovesEveryComputedValueByAtMostItsSize) {
  const Graph g = parse("input x: f32[64]\ny = exp(x)\noutput y\n");
  const TensorMap inputs = random_inputs(g, 3);
  const TensorMap exact = interpret_ok(g, inputs);
  const TensorMap moved = interpret_ok(g, inputs, 1e-3, 5);
  const TensorMap again = interpret_ok(g, inputs, 1e-3, 5);
  int changed = 0;
  for (size_t i = 0; i < 64; ++i) {
    const double e = exact.at("y").values[i], m = moved.at("y").values[i];
    EXPECT_LE(std::fabs(m - e), 1.001e-3 * std::fabs(e)) << "element " << i;  // plus the f32 rounding of y
    changed += m != e;
    EXPECT_EQ(m, again.at("y").values[i]) << "the same seed perturbs the same way";
  }
  EXPECT_GT(changed, 48);
}

// A reduction's perturbation scales with the sum of |terms| (its rounding
// error bound) times the square root of their number (roundings of running
// sums add up), not with its result: 1000 - 999.75 is 0.25, but a float32
// sum of those terms is off by up to ~1000 ulps of 0.25.
TEST(Compare, ReductionsArePerturbedInProportionToTheirTerms) {
  const Graph g = parse("input x: f32[1, 2]\ns = sum(x)\noutput s\n");
  const TensorMap inputs{{"x", HostTensor{DType::kF32, Shape({1, 2}), {1000.0, -999.75}}}};
  double largest = 0;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    const TensorMap moved = interpret_ok(g, inputs, 1e-6, seed);
    largest = std::max(largest, std::fabs(moved.at("s").values[0] - 0.25));
  }
  EXPECT_GT(largest, 1e-6 * 0.25 * 100) << "moved in proportion to the result only";
  EXPECT_LE(largest, 1e-6 * 1999.75 * std::sqrt(2.0) * 1.001);
  EXPECT_GT(largest, 1e-6 * 1999.75 * 1.001 / 2) << "about sqrt(2) of one rounding of the sum of |terms|";
}

// A mean of LayerNorm outputs is mathematically 0: a float32 kernel's answer
// is rounding noise far over 1e-5 of the float64 reference's (also noise),
// and only the roundoff scale judges it fairly.
TEST(Compare, IllConditionedResultJudgedAgainstRoundoffNoise) {
  const Graph g = parse("input x: f32[16, 8]\ny = layer_norm(x)\nm = mean(y)\noutput m\n");
  const TensorMap inputs = random_inputs(g, 21);
  const TensorMap ref = interpret_ok(g, inputs);
  const TensorMap perturbed = interpret_ok(g, inputs, kRoundoffPerturbation, 11);
  const HostTensor f32 = mean_of_layer_norm_in_f32(inputs.at("x"), 8);
  HostTensor out = ref.at("m");
  out.values = f32.values;

  EXPECT_FALSE(compare_tensors(out, ref.at("m")).within(DType::kF32)) << "strictly, noise is not within 1e-5";
  const Comparison fair = compare_tensors(out, ref.at("m"), perturbed.at("m"));
  EXPECT_TRUE(fair.within(DType::kF32)) << fair.relative_error;

  // A real error in the same output still fails: 1e-3 where the terms are ~1.
  out.values[5] += 1e-3;
  EXPECT_FALSE(compare_tensors(out, ref.at("m"), perturbed.at("m")).within(DType::kF32));
}

// A well-conditioned result gains nothing from the perturbed reference.
TEST(Compare, WellConditionedResultKeepsStrictTolerance) {
  const Graph g = parse("input x: f32[16, 64]\ny = layer_norm(x)\noutput y\n");
  const TensorMap inputs = random_inputs(g, 4);
  const TensorMap ref = interpret_ok(g, inputs);
  const TensorMap perturbed = interpret_ok(g, inputs, kRoundoffPerturbation, 11);
  HostTensor out = ref.at("y");
  for (double& v : out.values) v *= 1 + 3e-5;  // 3x f32's tolerance
  EXPECT_FALSE(compare_tensors(out, ref.at("y"), perturbed.at("y")).within(DType::kF32));
  EXPECT_NEAR(compare_tensors(out, ref.at("y"), perturbed.at("y")).relative_error, 3e-5, 1e-6);
}

// Values that do not fill their shape (a tensor built by hand) are named
// as such, not as a shape that differs from the same shape.
// Skipped elements count for nothing, neither their error nor their size
// in the norm; flags that do not match the values are a mismatch.
TEST(Compare, SkippedElementsAreLeftOut) {
  const HostTensor ref{DType::kF32, Shape({4}), {1, 1e30, 2, 3}};
  const HostTensor out{DType::kF32, Shape({4}), {1, std::nan(""), 2, 3.5}};
  const std::vector<char> skip = {0, 1, 0, 0};
  const Comparison c = compare_tensors(out, ref, &skip);
  EXPECT_EQ(c.skipped, 1);
  EXPECT_DOUBLE_EQ(c.relative_error, 0.5 / std::sqrt(1 + 4 + 9)) << "1e30 is not in the norm";
  EXPECT_TRUE(std::isnan(compare_tensors(out, ref).relative_error)) << "unskipped, the NaN is a mismatch";
  const std::vector<char> short_flags = {0, 1};
  const Comparison bad = compare_tensors(out, ref, &short_flags);
  EXPECT_TRUE(std::isnan(bad.relative_error));
  EXPECT_NE(bad.mismatch.find("2 flags of elements to skip for 4 values"), std::string::npos) << bad.mismatch;
}

TEST(Compare, ValuesThatDoNotFillTheShapeAreAMismatch) {
  const HostTensor ref{DType::kF32, Shape({4}), {1, 2, 3, 4}};
  HostTensor out = ref;
  out.values.resize(2);
  EXPECT_EQ(compare_tensors(out, ref).mismatch, "the result holds 2 values where its shape [4] needs 4");
  EXPECT_TRUE(std::isnan(compare_tensors(out, ref).relative_error));
  EXPECT_EQ(compare_tensors(ref, out).mismatch, "the reference holds 2 values where its shape [4] needs 4");
}

// A result tagged with another dtype than the reference's is not that
// result, however close its values.
TEST(Compare, ADtypeMismatchIsAMismatch) {
  const HostTensor ref{DType::kF32, Shape({3}), {1.0, 2.0, 3.0}};
  HostTensor out = ref;
  out.dtype = DType::kBF16;
  const Comparison c = compare_tensors(out, ref);
  EXPECT_TRUE(std::isnan(c.relative_error));
  EXPECT_EQ(c.mismatch, "dtype bf16 where the reference has f32");
  EXPECT_FALSE(c.within(DType::kBF16));
}

}  // namespace
}  // namespace fusejit
