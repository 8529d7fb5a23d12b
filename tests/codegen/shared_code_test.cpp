// group_same_code: the kernels of a plan that are the same code, found by
// comparing the code each target generates for their neutral plans.
#include <gtest/gtest.h>

#include "codegen/cpu/cpu_emitter.h"
#include "codegen/cuda/cuda_emitter.h"
#include "codegen/kernel_names.h"
#include "codegen/shared_code.h"
#include "fusejit.h"
#include "support/graph_variants.h"

namespace fusejit {
namespace {

using testing::parse_or_throw;

std::vector<int> all_kernels(const FusionPlan& plan) {
  std::vector<int> out;
  for (size_t i = 0; i < plan.kernels.size(); ++i) out.push_back(static_cast<int>(i));
  return out;
}

// The kernels a CUDA plan generates code for: matmuls run through cuBLAS.
std::vector<int> generated_cuda_kernels(const FusionPlan& plan) {
  std::vector<int> out;
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    if (plan.kernels[i].kind != KernelKind::kMatmul) out.push_back(static_cast<int>(i));
  }
  return out;
}

std::string cpu_source(const FusionPlan& plan, int index, int) { return emit_cpu_kernel(plan, index).source; }
std::string cuda_source(const FusionPlan& plan, int index, int) { return emit_cuda_kernel(plan, index).source; }

std::vector<std::vector<int>> members(const std::vector<CodeGroup>& groups) {
  std::vector<std::vector<int>> out;
  for (const CodeGroup& g : groups) out.push_back(g.members);
  return out;
}

TEST(SharedCode, EachLayerRunsTheFirstLayersKernels) {
  const FusionPlan plan = make_fused_plan(parse_or_throw(testing::stacked_layers_text(4)));
  ASSERT_EQ(plan.kernels.size(), 8u);  // a matmul and a row kernel per layer
  const std::vector<CodeGroup> groups = group_same_code(plan, all_kernels(plan), cpu_source);
  EXPECT_EQ(members(groups), (std::vector<std::vector<int>>{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  for (const CodeGroup& group : groups) {
    ASSERT_NE(group.neutral, nullptr);
    const CpuKernelSource code = emit_cpu_kernel(group.code_plan(plan), group.code_index());
    // Named after what it is, not where: the first member's ops and a hash
    // of the code; each member's own parameters match the shared code's one
    // for one (what a backend passes them in).
    const std::string& first_name = plan.kernels[group.members.front()].name;  // "k1_add_dropout_layer_norm"
    EXPECT_TRUE(code.name.starts_with(first_name.substr(first_name.find('_') + 1) + "_")) << code.name;
    EXPECT_EQ(code.name.size(), first_name.size() - first_name.find('_') + 16) << code.name;
    for (int m : group.members) {
      const std::vector<KernelParam> own = emit::kernel_params(plan, plan.kernels[m]);
      ASSERT_EQ(own.size(), code.params.size()) << plan.kernels[m].name;
      for (size_t i = 0; i < own.size(); ++i) {
        EXPECT_EQ(own[i].kind, code.params[i].kind);
        EXPECT_EQ(own[i].dtype, code.params[i].dtype);
        EXPECT_EQ(own[i].written, code.params[i].written);
      }
    }
  }
  // The row kernels draw dropout masks: their seeds are a parameter, and each
  // layer passes its own.
  const std::vector<uint64_t> first = emit::dropout_seeds(*plan.graph, plan.kernels[1]);
  const std::vector<uint64_t> second = emit::dropout_seeds(*plan.graph, plan.kernels[3]);
  EXPECT_EQ(first, std::vector<uint64_t>{1000});
  EXPECT_EQ(second, std::vector<uint64_t>{1007});
  EXPECT_EQ(emit::kernel_params(plan, plan.kernels[1]).back().kind, ParamKind::kDropoutSeeds);
}

// The same layer in a graph of another depth is the same code under the same
// name, so the kernel cache serves both.
TEST(SharedCode, SharedCodeIsNamedTheSameInEveryGraph) {
  // The sources each group compiles (names included), for a graph of `layers` layers.
  auto sources = [](int layers) {
    const FusionPlan plan = make_fused_plan(parse_or_throw(testing::stacked_layers_text(layers)));
    std::vector<std::string> out;
    for (const CodeGroup& group : group_same_code(plan, generated_cuda_kernels(plan), cuda_source)) {
      out.push_back(emit_cuda_kernel(group.code_plan(plan), group.code_index()).source);
    }
    return out;
  };
  // The layers' row kernels (dropout, LayerNorm; the bias is added in the
  // matmul's epilogue) are one group, its code named by what it does, so 2
  // layers and 5 compile the same source.
  const std::vector<std::string> two = sources(2), five = sources(5);
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(two, five);
  EXPECT_EQ(two[0].find("k1_dropout_layer_norm"), std::string::npos) << "the shared name, not the first member's";
  EXPECT_NE(two[0].find(" dropout_layer_norm_"), std::string::npos) << two[0].substr(0, 300);
}

TEST(SharedCode, AKernelOfItsOwnKeepsTheUsersNames) {
  const FusionPlan plan =
      make_fused_plan(parse_or_throw("input x: f32[8, 32]\ninput b: f32[32]\nh = add(x, b)\ny = gelu(h)\noutput y\n"));
  const std::vector<CodeGroup> groups = group_same_code(plan, all_kernels(plan), cuda_source);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].neutral, nullptr);
  EXPECT_EQ(&groups[0].code_plan(plan), &plan);
  EXPECT_EQ(groups[0].code_index(), 0);
  EXPECT_NE(emit_cuda_kernel(plan, 0).source.find("p_x"), std::string::npos);
}

TEST(SharedCode, OnlyTheSeedAndTheNamesMayDiffer) {
  // Unfused: one kernel per op. a and b are the same code, and so are k and
  // l: operands are numbered in the order the kernel reads them, and each
  // kernel passes its own tensors in that order.
  const Graph g = parse_or_throw(
      "input x: f32[8, 32]\ninput y: f32[8, 32]\ninput z: bf16[8, 32]\ninput s: f32[8, 16]\n"
      "a = dropout(x, p=0.5, seed=1)\nb = dropout(y, p=0.5, seed=2)\nc = dropout(x, p=0.25, seed=1)\n"
      "d = dropout(z, p=0.5, seed=1)\ne = dropout(s, p=0.5, seed=1)\nf = add(x, y)\nh = add(x, x)\n"
      "i = add(x, 1.0)\nj = add(x, 2.0)\nk = sub(y, x)\nl = sub(x, y)\noutput a, b, c, d, e, f, h, i, j, k, l\n");
  const FusionPlan plan = make_unfused_plan(g);
  ASSERT_EQ(plan.kernels.size(), 11u);
  const std::vector<std::vector<int>> want = {{0, 1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9, 10}};
  EXPECT_EQ(members(group_same_code(plan, all_kernels(plan), cpu_source)), want);
  EXPECT_EQ(members(group_same_code(plan, all_kernels(plan), cuda_source)), want);
}

TEST(SharedCode, ACudaAccessVariantOfItsOwnIsAGroupOfItsOwn) {
  const FusionPlan plan = make_fused_plan(parse_or_throw(testing::stacked_layers_text(3)));
  // The row kernels; the second layer's buffers are not 16-byte aligned.
  const std::vector<CodeGroup> groups =
      group_same_code(plan, {1, 3, 5}, [](const FusionPlan& p, int index, int member) {
        return emit_cuda_kernel(p, index, member == 3 ? CudaAccess::kScalar : CudaAccess::kVector).source;
      });
  EXPECT_EQ(members(groups), (std::vector<std::vector<int>>{{1, 5}, {3}}));
}

}  // namespace
}  // namespace fusejit
