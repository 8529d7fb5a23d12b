// neutral_kernel_plan: a kernel as a plan of its own whose names say nothing
// about the graph it came from.
#include <gtest/gtest.h>

#include "fusejit.h"
#include "fusion/kernel_plan.h"
#include "support/graph_variants.h"

namespace fusejit {
namespace {

using testing::parse_or_throw;

TEST(NeutralKernelPlan, ReadsBecomeInputsAndNodesFollowInOrder) {
  const Graph g = parse_or_throw(
      "input x: bf16[8, 32]\ninput b: f32[32]\nh = add(x, b)\nd = dropout(h, p=0.25, seed=99)\n"
      "y = mul(d, 2.5)\noutput h, y\n");
  const FusionPlan plan = make_fused_plan(g);
  ASSERT_EQ(plan.kernels.size(), 1u);
  const FusionPlan neutral = neutral_kernel_plan(plan, 0, "shared");
  const Graph& n = *neutral.graph;
  EXPECT_EQ(neutral.label, plan.label);
  ASSERT_EQ(neutral.kernels.size(), 1u);
  const Kernel& k = neutral.kernels[0];
  EXPECT_EQ(k.name, "shared");
  EXPECT_EQ(k.kind, plan.kernels[0].kind);
  EXPECT_EQ(k.iteration, plan.kernels[0].iteration);
  EXPECT_EQ(k.user_ops, plan.kernels[0].user_ops);
  // Two inputs in read order with the read tensors' types, then the three nodes.
  ASSERT_EQ(n.num_nodes(), 5);
  EXPECT_EQ(describe(n.node(0)), "in0: bf16[8, 32]");
  EXPECT_EQ(describe(n.node(1)), "in1: f32[32]");
  EXPECT_EQ(k.reads, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(k.nodes, (std::vector<int32_t>{2, 3, 4}));
  EXPECT_EQ(print_statement(n, n.node(2)), "t0 = add(in0, in1)");
  // The seed is zeroed (code takes it as an argument); p stays (it is in the code).
  EXPECT_EQ(print_statement(n, n.node(3)), "t1 = dropout(t0, p=0.25)");
  EXPECT_EQ(print_statement(n, n.node(4)), "t2 = mul(t1, 2.5)");
  // Writes (h and y) are the neutral graph's outputs.
  EXPECT_EQ(k.writes, (std::vector<int32_t>{2, 4}));
  EXPECT_EQ(n.outputs(), k.writes);
}

TEST(NeutralKernelPlan, TheSameKernelOfTwoLayersGivesEqualPlans) {
  const Graph g = parse_or_throw(testing::stacked_layers_text(3));
  const FusionPlan plan = make_fused_plan(g);
  // matmul, row kernel, per layer.
  ASSERT_EQ(plan.kernels.size(), 6u);
  for (int layer = 1; layer < 3; ++layer) {
    for (int k = 0; k < 2; ++k) {
      const int other = 2 * layer + k;
      SCOPED_TRACE(plan.kernels[other].name);
      // The originals differ in their tensors' names ...
      const Graph& fused = *plan.graph;  // composites expanded: not g
      EXPECT_NE(fused.node(plan.kernels[k].writes[0]).name, fused.node(plan.kernels[other].writes[0]).name);
      const FusionPlan a = neutral_kernel_plan(plan, k, "same");
      const FusionPlan b = neutral_kernel_plan(plan, other, "same");
      // ... the neutral plans are equal, node for node.
      EXPECT_TRUE(*a.graph == *b.graph) << print_graph(*a.graph) << "\nvs\n" << print_graph(*b.graph);
      EXPECT_EQ(a.kernels[0].nodes, b.kernels[0].nodes);
      EXPECT_EQ(a.kernels[0].reads, b.kernels[0].reads);
      EXPECT_EQ(a.kernels[0].writes, b.kernels[0].writes);
    }
  }
}

TEST(NeutralKernelPlan, WhatTheCodeDependsOnStillTellsKernelsApart) {
  // The unfused plan: one kernel per op. Each op after the first differs
  // from it in one thing the code depends on, except the seed.
  const Graph g = parse_or_throw(
      "input x: f32[8, 32]\ninput y: f32[8, 32]\ninput z: bf16[8, 32]\ninput s: f32[8, 16]\n"
      "a = dropout(x, p=0.5, seed=1)\n"
      "b = dropout(y, p=0.5, seed=2)\n"    // other tensor, other seed: the same
      "c = dropout(x, p=0.25, seed=1)\n"   // p
      "d = dropout(z, p=0.5, seed=1)\n"    // dtype
      "e = dropout(s, p=0.5, seed=1)\n"    // shape
      "f = add(x, y)\n"
      "h = add(x, x)\n"                    // one read instead of two
      "i = add(x, 1.0)\n"
      "j = add(x, 2.0)\n"                  // literal
      "output a, b, c, d, e, f, h, i, j\n");
  const FusionPlan plan = make_unfused_plan(g);
  ASSERT_EQ(plan.kernels.size(), 9u);
  std::vector<std::shared_ptr<const Graph>> graphs;
  for (int k = 0; k < 9; ++k) graphs.push_back(neutral_kernel_plan(plan, k, "k").graph);
  EXPECT_TRUE(*graphs[0] == *graphs[1]);
  for (int k : {2, 3, 4}) EXPECT_FALSE(*graphs[0] == *graphs[k]) << plan.kernels[k].name;
  EXPECT_FALSE(*graphs[5] == *graphs[6]);
  EXPECT_FALSE(*graphs[7] == *graphs[8]);
}

}  // namespace
}  // namespace fusejit
