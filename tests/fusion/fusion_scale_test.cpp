// The fusion pass on graphs of thousands of ops: whole models, not single
// blocks. Planning once searched the kernel DAG for every candidate merge,
// which took 200 s for 200 stacked transformer layers (O(n^4)); these graphs
// are far beyond what that pass finished in a test's time, and the plans
// must still be exactly the one-layer plan repeated.
#include <gtest/gtest.h>

#include "fusejit.h"

namespace fusejit {
namespace {

constexpr int64_t kTokens = 64, kHidden = 256, kFfn = 1024;

// `layers` transformer MLP layers, each ending in a residual add and a
// softmax-gated product, with the weights shared by every layer (as when a
// graph is built by calling one layer function repeatedly).
Graph stacked_layers(int layers) {
  Graph g;
  Value x = g.input("x", DType::kF32, {kTokens, kHidden});
  Value w1 = g.input("w1", DType::kF32, {kHidden, kFfn});
  Value b1 = g.input("b1", DType::kF32, {kFfn});
  Value w2 = g.input("w2", DType::kF32, {kFfn, kHidden});
  Value b2 = g.input("b2", DType::kF32, {kHidden});
  Value gamma = g.input("gamma", DType::kF32, {kHidden});
  Value beta = g.input("beta", DType::kF32, {kHidden});
  Value h = x;
  for (int i = 0; i < layers; ++i) {
    Value n = layer_norm(h, gamma, beta);
    Value a = gelu(matmul(n, w1) + b1);
    Value r = h + dropout(matmul(a, w2) + b2, 0.1, static_cast<uint64_t>(i));
    h = softmax(r) * r;
  }
  g.output("y", h);
  return g;
}

std::vector<std::string> kinds(const FusionPlan& plan) {
  std::vector<std::string> out;
  for (const Kernel& k : plan.kernels) out.emplace_back(kernel_kind_name(k.kind));
  return out;
}

// Each layer is four kernels: the first matmul; bias + GeLU; the second
// matmul; and one row kernel for bias, dropout, the residual add, softmax,
// the product and the next layer's LayerNorm. The first LayerNorm is a
// kernel of its own: 4 * layers + 1.
TEST(FusionScale, ThousandsOfLayersPlanAsOneLayerRepeated) {
  constexpr int kLayers = 1500;  // 22,500 graph nodes once composites are expanded
  const FusionPlan fused = make_fused_plan(stacked_layers(kLayers));
  ASSERT_EQ(fused.kernels.size(), 4u * kLayers + 1);
  const std::vector<std::string> k = kinds(fused);
  EXPECT_EQ(k[0], "row");
  for (int i = 0; i < kLayers; ++i) {
    const std::vector<std::string> layer(k.begin() + 1 + 4 * i, k.begin() + 5 + 4 * i);
    ASSERT_EQ(layer, (std::vector<std::string>{"matmul", "pointwise", "matmul", "row"})) << "layer " << i;
  }
  // What leaves each kernel: bias + GeLU writes the second matmul's operand;
  // each layer's row kernel writes the residual stream (read by the next
  // layer's residual add) and the next layer's normalized input; the last
  // writes y alone.
  for (int i = 0; i < kLayers; ++i) {
    EXPECT_EQ(fused.kernels[2 + 4 * i].writes.size(), 1u) << "layer " << i;
    EXPECT_EQ(fused.kernels[4 + 4 * i].writes.size(), i + 1 < kLayers ? 2u : 1u) << "layer " << i;
  }
}

// Siblings reading one input merge until a kernel holds max_kernel_tensors
// tensors: each kernel reads x and writes one output per branch, so it takes
// 255 branches (1 read + 255 writes = 256) and 2000 branches need
// ceil(2000 / 255) = 8 kernels, the last with 2000 - 7 * 255 = 215.
TEST(FusionScale, ThousandsOfSiblingsMergeUpToTheTensorLimit) {
  constexpr int kBranches = 2000;
  Graph g;
  Value x = g.input("x", DType::kF32, {kTokens, kHidden});
  for (int i = 0; i < kBranches; ++i) g.output("t" + std::to_string(i), tanh(x * static_cast<double>(i + 1)));
  FusionOptions options;
  ASSERT_EQ(options.max_kernel_tensors, 256);
  options.max_kernel_nodes = 1 << 30;  // the tensor limit alone (255 branches are 510 nodes)
  const FusionPlan fused = make_fused_plan(g, options);
  ASSERT_EQ(fused.kernels.size(), 8u) << describe(fused);
  for (size_t i = 0; i < fused.kernels.size(); ++i) {
    EXPECT_EQ(fused.kernels[i].reads.size(), 1u);
    EXPECT_EQ(fused.kernels[i].writes.size(), i + 1 < fused.kernels.size() ? 255u : 215u) << i;
  }
}

// A chain of 20,000 pointwise ops: without a node limit one kernel (one
// read, one write), planned in a test's time; with the default limit of 256
// nodes a kernel, 79 kernels (78 of 256 and one of 32), each reading what the
// one before wrote.
TEST(FusionScale, LongPointwiseChainIsSplitAtTheNodeLimit) {
  Graph g;
  Value v = g.input("x", DType::kF32, {kTokens, kHidden});
  for (int i = 0; i < 20000; ++i) v = i % 2 == 0 ? tanh(v) : v * 0.5;
  g.output("y", v);
  const FusionPlan whole = make_fused_plan(g, {.max_kernel_nodes = 1 << 30});
  ASSERT_EQ(whole.kernels.size(), 1u);
  EXPECT_EQ(whole.kernels[0].nodes.size(), 20000u);
  EXPECT_EQ(whole.kernels[0].reads.size(), 1u);
  EXPECT_EQ(whole.kernels[0].writes.size(), 1u);
  const FusionPlan fused = make_fused_plan(g);
  ASSERT_EQ(fused.kernels.size(), 79u);
  for (size_t i = 0; i < fused.kernels.size(); ++i) {
    EXPECT_EQ(fused.kernels[i].nodes.size(), i + 1 < fused.kernels.size() ? 256u : 32u) << i;
    EXPECT_EQ(fused.kernels[i].reads.size(), 1u) << i;
    EXPECT_EQ(fused.kernels[i].writes.size(), 1u) << i;
  }
}

// 50 bias-GeLU-dropout-LayerNorm layers with no matmul between them (500
// nodes) fuse into row kernels of at most 256 nodes, which together compute
// what the graph does.
TEST(FusionScale, ALongRowChainIsSplitIntoKernelsWithinTheNodeLimit) {
  Graph g;
  Value v = g.input("x", DType::kF32, {4, 64});
  Value b = g.input("b", DType::kF32, {64});
  for (int i = 0; i < 50; ++i) v = layer_norm(dropout(gelu(v + b), 0.1, static_cast<uint64_t>(i)));
  g.output("y", v);
  const FusionPlan fused = make_fused_plan(g);
  ASSERT_EQ(fused.kernels.size(), 2u);
  for (const Kernel& k : fused.kernels) {
    EXPECT_LE(k.nodes.size(), 256u) << k.name;
    EXPECT_EQ(k.kind, KernelKind::kRow) << k.name;
  }
  const TensorMap inputs = random_inputs(g, 5);
  absl::StatusOr<TensorMap> planned = interpret_plan(fused, inputs);
  absl::StatusOr<TensorMap> reference = interpret(g, inputs);
  ASSERT_TRUE(planned.ok() && reference.ok());
  EXPECT_TRUE(compare_tensors(planned->at("y"), reference->at("y")).within(DType::kF32));
}

}  // namespace
}  // namespace fusejit
