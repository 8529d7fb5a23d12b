// The fused plan computes what the unfused plan computes. Both run through
// the reference interpreter, each storing (and so rounding to its dtype)
// exactly the values its kernels write; the results must agree within the
// rounding of the dtypes involved.
#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "fusejit.h"
#include "support/graph_resize.h"

namespace fusejit {
namespace {

double tolerance(DType t) {
  switch (t) {
    case DType::kF32: return 1e-6;
    case DType::kF16: return 4e-3;
    case DType::kBF16: return 3e-2;
  }
  return 0;
}

// ||a - b|| / ||b||; NaN where either holds a NaN the other does not.
double relative_error(const HostTensor& a, const HostTensor& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.values.size(); ++i) {
    if (std::isnan(a.values[i]) != std::isnan(b.values[i])) return NAN;
    if (std::isnan(a.values[i])) continue;
    diff += (a.values[i] - b.values[i]) * (a.values[i] - b.values[i]);
    norm += b.values[i] * b.values[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

TensorMap run_plan(const FusionPlan& plan, const TensorMap& inputs) {
  InterpretOptions options;
  options.rounding = Rounding::kStoredNodes;
  for (const Kernel& k : plan.kernels) options.stored.insert(options.stored.end(), k.writes.begin(), k.writes.end());
  absl::StatusOr<TensorMap> out = interpret(*plan.graph, inputs, options);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : TensorMap{};
}

void expect_same_values(const Graph& graph, const FusionOptions& options = {}) {
  const FusionPlan unfused = make_unfused_plan(graph, options);
  const FusionPlan fused = make_fused_plan(graph, options);
  SCOPED_TRACE(print_graph(graph) + describe(fused));
  const TensorMap inputs = random_inputs(graph, 11);
  const TensorMap a = run_plan(unfused, inputs);
  const TensorMap b = run_plan(fused, inputs);
  ASSERT_EQ(a.size(), graph.outputs().size());
  ASSERT_EQ(b.size(), graph.outputs().size());
  for (int32_t id : graph.outputs()) {
    const Node& n = graph.node(id);
    const double err = relative_error(b.at(n.name), a.at(n.name));
    EXPECT_LE(err, tolerance(n.dtype)) << n.name;  // NaN fails too
  }
}

TEST(PlanEquivalence, EveryExampleGraphShrunk) {
  const std::string dir = std::string(FUSEJIT_SOURCE_DIR) + "/examples/graphs";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".fj") continue;
    absl::StatusOr<Graph> g = parse_graph_file(entry.path().string());
    ASSERT_TRUE(g.ok()) << g.status();
    expect_same_values(testing::shrink(*g));
  }
}

TEST(PlanEquivalence, GraphsOfManyShapes) {
  const char* graphs[] = {
      // diamond
      "input x: f32[33, 70]\ninput b: f32[70]\nh = add(x, b)\np = exp(h)\nq = tanh(h)\ny = mul(p, q)\noutput y\n",
      // one value used by two reductions, and an intermediate output
      "input x: bf16[9, 130]\nh = exp(x)\ns = sum(h)\nm = max(h)\ny = add(s, m)\noutput h, y\n",
      // broadcasts both ways
      "input c: f16[40, 1]\ninput r: f16[1, 50]\ninput x: f16[40, 50]\nt = add(c, r)\ny = mul(t, x)\noutput y\n",
      // matmul with an epilogue, mixed dtypes
      "input a: bf16[12, 40]\ninput w: f16[40, 24]\ninput b: bf16[24]\nm = matmul(a, w)\n"
      "h = add(m, b)\ny = gelu(h, approximate=tanh)\noutput y\n",
      // a kernel in between forbids the merge
      "input x: f32[16, 16]\ninput w: f32[16, 16]\na = exp(x)\nm = matmul(a, w)\ny = add(a, m)\noutput y\n",
      // siblings, several outputs, a cast
      "input x: f32[20, 31]\ne = exp(x)\nl = log(e)\nc = cast(l, dtype=bf16)\noutput e, c\n",
      // composites of every kind, rank 3
      "input x: bf16[3, 5, 64]\ninput g: bf16[64]\nr = rms_norm(x, g)\ns = softmax(r)\nl = log_softmax(x)\n"
      "y = add(s, l)\nn = layer_norm(y, g)\noutput n\n",
      // dropout before a reduction
      "input x: f32[8, 300]\nd = dropout(x, p=0.3, seed=7)\ny = softmax(d)\noutput y\n",
  };
  for (const char* text : graphs) {
    absl::StatusOr<Graph> g = parse_graph(text);
    ASSERT_TRUE(g.ok()) << g.status();
    expect_same_values(*g);
  }
}

TEST(PlanEquivalence, RereadRowKernels) {
  absl::StatusOr<Graph> g = parse_graph(
      "input x: f32[4, 3000]\ninput gamma: f32[3000]\nn = layer_norm(x, gamma)\ns = softmax(n)\noutput s\n");
  ASSERT_TRUE(g.ok()) << g.status();
  FusionOptions options;
  options.persistent_row_limit = 1024;
  ASSERT_EQ(make_fused_plan(*g, options).kernels[0].row_strategy, RowStrategy::kReread);
  expect_same_values(*g, options);
}

}  // namespace
}  // namespace fusejit
