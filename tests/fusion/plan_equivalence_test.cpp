// The fused plan computes what the unfused plan computes. Both run through
// the reference interpreter, each storing (and so rounding to its dtype)
// exactly the values its kernels write; the results must agree within the
// rounding of the dtypes involved.
#include <cmath>

#include <gtest/gtest.h>

#include "fusejit.h"
#include "support/example_graphs.h"
#include "support/graph_variants.h"

namespace fusejit {
namespace {

TensorMap run_plan(const FusionPlan& plan, const TensorMap& inputs) {
  absl::StatusOr<TensorMap> out = interpret_plan(plan, inputs);
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
  for (const auto& file : testing::example_graph_files()) {
    SCOPED_TRACE(file.string());
    expect_same_values(testing::shrink(testing::parse_file_or_throw(file)));
  }
}

TEST(PlanEquivalence, GraphsOfManyShapes) {
  for (const std::string& text : testing::varied_graph_texts()) {
    absl::StatusOr<Graph> g = parse_graph(text);
    ASSERT_TRUE(g.ok()) << g.status() << "\n" << text;
    expect_same_values(*g);
    for (DType dtype : kAllDTypes) expect_same_values(testing::with_input_dtype(*g, dtype));
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
