// The differential fuzzer: its graphs are valid and varied, its shrinker
// finds small reproducers, and a short fixed-seed run finds no mismatch.
#include <cmath>
#include <limits>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "fusejit.h"
#include "runtime/fuzz.h"
#include "runtime/runtime_test_util.h"

namespace fusejit {
namespace {

TEST(Fuzz, GeneratedGraphsVerifyAndCoverTheOpTable) {
  std::set<std::string> seen;
  const char* features[] = {"matmul(",     "dropout(",     "layer_norm(", "rms_norm(", "softmax(", "log_softmax(",
                            "cast(",       "sum(",         "mean(",       "max(",      "gelu(",    "approximate=tanh",
                            "maximum(",    "pow(",         "erf(",        "4097]",     "1000]",    ": f16[",
                            ": bf16[",     ": f32[",       ", 1]",        "3]"};
  for (uint64_t seed = 0; seed < 400; ++seed) {
    const std::string text = random_graph_text(seed);
    ASSERT_EQ(text, random_graph_text(seed)) << "not deterministic";
    absl::StatusOr<Graph> g = parse_graph(text);
    ASSERT_TRUE(g.ok()) << g.status() << "\n" << text;
    for (const char* f : features) {
      if (testing::contains(text, f)) seen.insert(f);
    }
  }
  for (const char* f : features) EXPECT_TRUE(seen.contains(f)) << "no generated graph has " << f;
}

// Linear layers whose bias and activation become the matmul's epilogue
// (fusion/matmul_epilogue.h) are among the graphs, with and without the activation.
TEST(Fuzz, GeneratedGraphsHoldMatmulEpilogues) {
  int with_activation = 0, bias_only = 0;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    const FusionPlan plan = make_fused_plan(*parse_graph(random_graph_text(seed)));
    for (const Kernel& k : plan.kernels) {
      if (k.kind != KernelKind::kMatmul || k.nodes.size() < 2) continue;
      (k.nodes.size() == 3 ? with_activation : bias_only) += 1;
    }
  }
  EXPECT_GT(with_activation, 5);
  EXPECT_GT(bias_only, 5);
}

TEST(Fuzz, ShrinkingKeepsTheFailureAndDropsTheRest) {
  const std::string text =
      "input x: f32[4, 8]\ninput b: f32[8]\na = add(x, b)\ne = exp(a)\nt = tanh(e)\ns = softmax(t)\n"
      "m = mul(s, 2)\noutput m, a\n";
  const auto fails = [](const std::string& t) { return testing::contains(t, "= exp("); };  // "exp is miscompiled"
  const std::string shrunk = shrink_graph_text(text, fails);
  EXPECT_EQ(shrunk, "input x: f32[4, 8]\ne = exp(x)\noutput e\n");
}

// A short fixed-seed run on the CPU (with NVRTC compiles where it is here).
void expect_no_mismatch(uint64_t seed, bool special_values) {
  absl::StatusOr<std::unique_ptr<Backend>> cpu = make_cpu_backend();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  FuzzOptions options;
  options.graphs = 12;
  options.seed = seed;
  options.backend = cpu->get();
  options.cuda_compile = !special_values && nvrtc_available();  // the inputs do not change what compiles
  options.special_values = special_values;
  const FuzzResult r = run_fuzz(options);
  EXPECT_EQ(r.graphs, 12);
  EXPECT_GT(r.kernels, 12);
  EXPECT_EQ(r.mismatches, 0);
  for (const FuzzFailure& f : r.failures) ADD_FAILURE() << "seed " << f.seed << ": " << f.what << "\n" << f.graph;
}

TEST(Fuzz, FixedSeedRunFindsNoMismatch) { expect_no_mismatch(2026, /*special_values=*/false); }

// The same with special values among the inputs: infinities, NaN, signed
// zeros, subnormals, and sums and squares past float32's range.
TEST(Fuzz, FixedSeedRunWithSpecialValuesFindsNoMismatch) { expect_no_mismatch(2027, /*special_values=*/true); }

// Special-value inputs: valid inputs of their dtypes, the same for the same
// seed, specials in about one row in 4 and there in about one element in
// 8, each kind of special present, and none that the dtype cannot hold (f16
// gets no 3e38).
TEST(Fuzz, SpecialValueInputsHoldEveryKindInEveryDtype) {
  absl::StatusOr<Graph> g = parse_graph(
      "input a: f32[256, 64]\ninput b: f16[256, 64]\ninput c: bf16[256, 64]\n"
      "ya = abs(a)\nyb = abs(b)\nyc = abs(c)\noutput ya, yb, yc\n");
  ASSERT_TRUE(g.ok()) << g.status();
  const TensorMap inputs = special_value_inputs(*g, 3);
  ASSERT_TRUE(check_inputs(*g, inputs).ok()) << check_inputs(*g, inputs);
  const TensorMap again = special_value_inputs(*g, 3);
  const TensorMap normal = random_inputs(*g, 3);
  for (const auto& [name, t] : inputs) {
    int nan = 0, plus_inf = 0, minus_inf = 0, minus_zero = 0, huge = 0, subnormal = 0, changed = 0;
    std::set<int64_t> rows;  // those with a special
    const double largest = t.dtype == DType::kF16 ? 65504.0 : 3.3e38;
    for (size_t i = 0; i < t.values.size(); ++i) {
      const double v = t.values[i];
      nan += std::isnan(v);
      plus_inf += v == std::numeric_limits<double>::infinity();
      minus_inf += v == -std::numeric_limits<double>::infinity();
      minus_zero += v == 0 && std::signbit(v);
      huge += std::isfinite(v) && std::fabs(v) >= largest;
      subnormal += v != 0 && std::fabs(v) < (t.dtype == DType::kF16 ? 0x1p-14 : 0x1p-126);
      if (!(v == normal.at(name).values[i]) || std::signbit(v) != std::signbit(normal.at(name).values[i])) {
        ++changed;
        rows.insert(static_cast<int64_t>(i) / 64);
      }
      const double w = again.at(name).values[i];
      EXPECT_TRUE((std::isnan(v) && std::isnan(w)) || (v == w && std::signbit(v) == std::signbit(w))) << name << i;
      if (t.dtype == DType::kF16 && std::isfinite(v)) EXPECT_LE(std::fabs(v), 65504.0) << "element " << i;
    }
    EXPECT_GT(rows.size(), 256u / 8) << name;
    EXPECT_LT(rows.size(), 256u * 3 / 8) << name;
    EXPECT_GT(changed, static_cast<int>(rows.size()) * 64 / 16) << name;
    EXPECT_LT(changed, static_cast<int>(rows.size()) * 64 / 5) << name;
    for (int count : {nan, plus_inf, minus_inf, minus_zero, huge, subnormal}) {
      EXPECT_GT(count, 0) << name << ": NaN " << nan << ", +inf " << plus_inf << ", -inf " << minus_inf << ", -0 "
                          << minus_zero << ", largest " << huge << ", subnormal " << subnormal;
    }
  }
}

// A stop asked for while a graph is checked (an interrupt, which may have
// killed that graph's compiler) ends the run without counting that graph:
// a killed compile must not pass for a mismatch, nor the graph for checked.
TEST(Fuzz, AStopDuringAGraphLeavesItUncounted) {
  FuzzOptions options;
  options.graphs = 50;
  options.seed = 7;
  options.cuda_compile = false;  // nothing runs: only the plans are made
  int asked = 0;
  options.stop_requested = [&] { return ++asked > 5; };  // before graph 1, after it, before 2, after it, before 3
  const FuzzResult r = run_fuzz(options);
  EXPECT_EQ(r.graphs, 2);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.mismatches, 0);
  options.stop_requested = nullptr;
  options.graphs = 3;
  EXPECT_FALSE(run_fuzz(options).stopped);
}

}  // namespace
}  // namespace fusejit
