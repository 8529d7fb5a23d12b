// The differential fuzzer: its graphs are valid and varied, its shrinker
// finds small reproducers, and a short fixed-seed run finds no mismatch.
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "fusejit.h"
#include "runtime/fuzz.h"

namespace fusejit {
namespace {

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

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
      if (has(text, f)) seen.insert(f);
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
  const auto fails = [](const std::string& t) { return has(t, "= exp("); };  // "exp is miscompiled"
  const std::string shrunk = shrink_graph_text(text, fails);
  EXPECT_EQ(shrunk, "input x: f32[4, 8]\ne = exp(x)\noutput e\n");
}

TEST(Fuzz, FixedSeedRunFindsNoMismatch) {
  absl::StatusOr<std::unique_ptr<Backend>> cpu = make_cpu_backend();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  FuzzOptions options;
  options.graphs = 12;
  options.seed = 2026;
  options.backend = cpu->get();
  options.cuda_compile = nvrtc_available();
  const FuzzResult r = run_fuzz(options);
  EXPECT_EQ(r.graphs, 12);
  EXPECT_GT(r.kernels, 12);
  EXPECT_EQ(r.mismatches, 0);
  for (const FuzzFailure& f : r.failures) ADD_FAILURE() << "seed " << f.seed << ": " << f.what << "\n" << f.graph;
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
