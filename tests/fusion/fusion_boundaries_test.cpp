// Why the kernels of a fused plan are apart: each rule of the fusion pass
// that can keep two kernels apart, named for a graph it applies to.
#include "fusion/fusion_boundaries.h"

#include <gtest/gtest.h>

#include "fusejit.h"

namespace fusejit {
namespace {

std::vector<FusionBoundary> boundaries_of(const std::string& text, const FusionOptions& options = {}) {
  const Graph g = parse_graph(text).value();
  return fusion_boundaries(make_fused_plan(g, options), options);
}

TEST(FusionBoundaries, OneKernelHasNone) {
  EXPECT_TRUE(boundaries_of("input x: f32[8, 16]\ne = exp(x)\ny = softmax(e)\noutput y\n").empty());
}

TEST(FusionBoundaries, AMatmulRunsByItself) {
  const auto b = boundaries_of("input a: f32[16, 32]\ninput w: f32[32, 8]\nh = exp(a)\ny = matmul(h, w)\noutput y\n");
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].producer, 0);
  EXPECT_EQ(b[0].consumer, 1);
  EXPECT_EQ(b[0].tensors, std::vector<std::string>{"h"});
  EXPECT_EQ(b[0].reason,
            "a matmul runs as a library call (cuBLAS on a GPU, the generated GEMM on the CPU) that reads its operands "
            "from memory");
}

// What follows a matmul and is not part of its epilogue is named with the reason.
TEST(FusionBoundaries, WhatTheMatmulEpilogueRefusesIsNamed) {
  const std::string head = "input a: f32[16, 32]\ninput w: f32[32, 8]\ninput b: f32[8]\nh = matmul(a, w)\n";
  const std::pair<std::string, std::string> cases[] = {
      {"y = exp(h)\noutput y\n", "exp 'y' is not an epilogue op; a matmul kernel's epilogue (cuBLASLt's) takes"},
      {"s = add(h, b)\ny = gelu(s)\noutput y\n", "gelu 'y' (approximate=none, the erf form) is not an epilogue op"},
      {"s = add(h, b)\ny = relu(s)\noutput y, s\n",
       "s is stored (a graph output, or read by another op too), so the epilogue ends with it"},
      {"s = add(h, b)\ny = relu(s)\nz = exp(y)\noutput y, z\n", "exp 'z' comes after y, the activation that ends"},
      {"s = add(h, b)\ny = gelu(s, approximate=tanh)\noutput y\n",
       "gelu 'y' is in f32, and cuBLASLt's GELU is not known to be as exact as f32's tolerance asks"},
      {"input c: f16[32, 8]\nk = matmul(a, c)\ny = relu(k)\noutput y, h\n",
       "matmul 'k' multiplies f32 by f16, and an epilogue needs its operands, bias and result in one dtype"},
      {"r = relu(h)\ny = add(r, b)\noutput y\n", "add 'y' comes after r, the activation that ends the matmul's"},
      {"input m: f32[16, 8]\ny = add(h, m)\noutput y\n", "add 'y' adds m (f32[16, 8]), not a f32[8] vector"},
      {"y = sum(h)\noutput y\n", "a reduction of h's rows follows, and a matmul kernel's epilogue is elementwise"},
      {"y = layer_norm(h)\noutput y\n", "a reduction of h's rows follows"},
  };
  for (const auto& [tail, reason] : cases) {
    SCOPED_TRACE(tail);
    const auto b = boundaries_of(head + tail);
    ASSERT_EQ(b.size(), 1u);
    EXPECT_TRUE(b[0].reason.starts_with("a matmul runs as a library call: " + reason)) << b[0].reason;
  }
}

TEST(FusionBoundaries, AComputedBiasIsReadByTheEpilogue) {
  const auto b = boundaries_of(
      "input a: f32[16, 32]\ninput w: f32[32, 8]\ninput c: f32[8]\nb = exp(c)\nh = matmul(a, w)\ny = add(h, b)\n"
      "output y\n");
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].tensors, std::vector<std::string>{"b"});
  EXPECT_EQ(b[0].reason,
            "a matmul's epilogue, run by the library call (cuBLASLt on a GPU), reads its bias from memory");
}

// A bias computed in the kernel that reads the product (so after the
// matmul runs) cannot be the epilogue's: the reason names it. Found by a
// probe, which got "a kernel of its own".
TEST(FusionBoundaries, ABiasComputedAfterTheMatmulIsNamed) {
  const auto b = boundaries_of(
      "input x: bf16[1, 32]\ninput w: bf16[32, 16]\ninput b: bf16[1, 16]\nb2 = neg(b)\nh = matmul(x, w)\n"
      "hb = add(h, b2)\ny = relu(hb)\nz = add(y, b)\noutput z\n");
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].reason,
            "a matmul runs as a library call: add 'hb' adds b2, which a later kernel computes (k1_neg_add_relu_add), "
            "and an epilogue reads its bias from memory when the matmul runs");
}

TEST(FusionBoundaries, AnotherIterationSpaceIsNamed) {
  const auto b = boundaries_of(
      "input x: f32[1024, 512]\ninput y: f32[1024, 300]\ns = sum(x)\nt = add(y, s)\nu = mul(x, s)\noutput t, u\n");
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].tensors, std::vector<std::string>{"s"});
  EXPECT_EQ(b[0].reason,
            "add 't' runs over [1024, 300]; k0_sum_mul runs over [1024, 512] and its per-row values over [1024, 1]");
}

TEST(FusionBoundaries, TheLimitsOfAKernelAreNamed) {
  FusionOptions options;
  options.max_kernel_tensors = 4;
  const auto b = boundaries_of(
      "input a: f32[64]\ninput b: f32[64]\ninput c: f32[64]\ninput d: f32[64]\nx = add(a, b)\ny = add(x, c)\n"
      "z = add(y, d)\noutput z\n",
      options);
  ASSERT_FALSE(b.empty());
  EXPECT_NE(b[0].reason.find("more than a kernel may take (max_kernel_tensors 4)"), std::string::npos) << b[0].reason;

  // Dropouts' Philox keys are counted apart, so that the figures add up:
  // one kernel would read a, b and c and write z (4), plus 10 for each of
  // the 2 dropouts' keys.
  options = {};
  options.max_kernel_tensors = 20;
  const auto d = boundaries_of(
      "input a: f32[64]\ninput b: f32[64]\ninput c: f32[64]\nx = dropout(a, p=0.5, seed=1)\ny = add(x, b)\n"
      "w = dropout(y, p=0.5, seed=2)\nz = add(w, c)\noutput z\n",
      options);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NE(d[0].reason.find("together they would take 24 tensors (4 read or written, and 10 for each of 2 "
                             "dropouts' Philox keys), more than"),
            std::string::npos)
      << d[0].reason;

  options = {};
  options.max_kernel_nodes = 2;
  const auto n = boundaries_of("input a: f32[64]\nx = exp(a)\ny = exp(x)\nz = exp(y)\noutput z\n", options);
  ASSERT_FALSE(n.empty());
  EXPECT_NE(n[0].reason.find("nodes, more than a kernel may hold (max_kernel_nodes 2)"), std::string::npos)
      << n[0].reason;
}

// exp(x) and the add could share a kernel by shape, but the matmul runs
// between them: it needs a, and the add needs its result.
TEST(FusionBoundaries, AKernelInBetweenIsNamed) {
  const auto b = boundaries_of(
      "input x: f32[64, 32]\ninput w: f32[32, 32]\na = exp(x)\nm = matmul(a, w)\ny = add(a, m)\noutput y\n");
  ASSERT_EQ(b.size(), 3u);
  const FusionBoundary& apart = b[1];  // k0 -> k2, after k0 -> k1
  EXPECT_EQ(apart.producer, 0);
  EXPECT_EQ(apart.consumer, 2);
  EXPECT_EQ(apart.tensors, std::vector<std::string>{"a"});
  EXPECT_TRUE(apart.reason.starts_with("k1_matmul runs between them")) << apart.reason;
}

// Two row kernels over rows of different lengths never share a kernel,
// though the add that joins their sums could run in either.
TEST(FusionBoundaries, KernelsOfSpacesThatNeverMeetAreNamed) {
  const auto b =
      boundaries_of("input a: f32[64, 512]\ninput b: f32[64, 300]\ns = sum(a)\nt = sum(b)\nu = add(s, t)\noutput u\n");
  ASSERT_EQ(b.size(), 1u);
  EXPECT_NE(b[0].reason.find("no kernel runs over both"), std::string::npos) << b[0].reason;
}

// A row* kernel kept apart by a matmul between is blamed on the matmul,
// not on its long rows (it gave up nothing).
TEST(FusionBoundaries, ARowStarKernelIsNotBlamedForWhatAnotherRuleDid) {
  const auto b = boundaries_of(
      "input x: f32[8, 32768]\ninput w: f32[32768, 32768]\na = layer_norm(x)\nm = matmul(a, w)\ny = add(a, m)\n"
      "output y\n");
  ASSERT_EQ(b.size(), 3u);
  EXPECT_TRUE(b[1].reason.starts_with("k1_matmul runs between them")) << b[1].reason;
}

// Rows too long to keep on chip: the adds before three LayerNorms are left
// out of the re-reading kernel, which would load their inputs in each pass.
TEST(FusionBoundaries, ARereadingRowKernelGivesUpOpsThatWouldBeLoadedInEachPass) {
  const auto b = boundaries_of(
      "input x: f32[64, 32768]\ninput h1: f32[64, 32768]\ninput h2: f32[64, 32768]\na = add(x, h1)\n"
      "b = add(a, h2)\nl1 = layer_norm(b)\nl2 = layer_norm(l1)\nl3 = layer_norm(l2)\noutput l3\n");
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].tensors, std::vector<std::string>{"b"});
  EXPECT_NE(b[0].reason.find("rows of 32768 elements are longer than the device keeps on chip (16384)"),
            std::string::npos)
      << b[0].reason;
  EXPECT_NE(b[0].reason.find("in 7 passes"), std::string::npos) << b[0].reason;
}

}  // namespace
}  // namespace fusejit
