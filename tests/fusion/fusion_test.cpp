// Kernel counts, kinds and exact byte counts of the unfused and fused plans
// for graphs of many shapes. Expected bytes are written out by hand from the
// shapes: each global tensor read once at its own size, each write once.
#include <cmath>
#include <limits>
#include <set>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <gtest/gtest.h>

#include "fusejit.h"
#include "support/error_of.h"
#include "support/graph_variants.h"

namespace fusejit {
namespace {

constexpr int64_t M = 512, N = 1024;

// Costs on h100; the device only matters for the row limit and time.
PlanCost cost_of(const FusionPlan& plan) { return estimate_plan(plan, gpu_device("h100")); }

std::vector<std::string> kinds(const FusionPlan& plan) {
  std::vector<std::string> out;
  for (const Kernel& k : plan.kernels) out.emplace_back(kernel_kind_name(k.kind));
  return out;
}

std::vector<std::string> written(const FusionPlan& plan, int kernel) {
  std::vector<std::string> out;
  for (int32_t id : plan.kernels[kernel].writes) out.push_back(plan.graph->node(id).name);
  return out;
}

using Strings = std::vector<std::string>;

// The planners refuse what they cannot plan, with the verifier's reasons,
// instead of planning nothing or reading past a node list.
TEST(Fusion, AGraphThatDoesNotVerifyIsNotPlanned) {
  using testing::error_of;
  Graph no_output;
  exp(no_output.input("x", DType::kF32, {4, 8}));
  for (auto plan : {make_fused_plan, make_unfused_plan}) {
    EXPECT_EQ(error_of([&] { plan(no_output, {}); }),
              "cannot plan a graph that does not verify:\nerror: the graph has no output");
  }

  Graph dangling;  // an operand that names a node after it: only Graph::append can make this
  dangling.input("x", DType::kF32, {4});
  Node n;
  n.op = Op::kNeg;
  n.name = "y";
  n.dtype = DType::kF32;
  n.shape = Shape({4});
  n.operands = {Operand::value(5)};
  dangling.add_output(dangling.append(std::move(n)));
  const std::string error = error_of([&] { make_fused_plan(dangling); });
  EXPECT_TRUE(error.starts_with("cannot plan a graph that does not verify:\n")) << error;
  EXPECT_NE(error.find("node 5"), std::string::npos) << error;

  Graph fine;
  fine.output("y", exp(fine.input("x", DType::kF32, {4, 8})));
  for (int too_few : {0, 3}) {  // layer_norm(x, gamma, beta) alone takes 4
    EXPECT_EQ(error_of([&] { make_fused_plan(fine, {.max_kernel_tensors = too_few}); }),
              fmt::format("FusionOptions::max_kernel_tensors must be at least 4 (layer_norm's 3 operands and its "
                          "result, one kernel in the unfused plan), got {}",
                          too_few));
  }
  EXPECT_EQ(error_of([&] { make_fused_plan(fine, {.max_kernel_nodes = 0}); }),
            "FusionOptions::max_kernel_nodes must be at least 1, got 0");
  EXPECT_EQ(error_of([&] { make_unfused_plan(fine, {.persistent_row_limit = -5}); }),
            "FusionOptions::persistent_row_limit must be at least 1 element, got -5");
  // The least limit holds for every kernel, composites included.
  Graph wide;
  const Value x = wide.input("x", DType::kF32, {4, 8});
  const Value b = wide.input("b", DType::kF32, {8});
  wide.output("y", layer_norm(add(x, b), wide.input("gamma", DType::kF32, {8}), wide.input("beta", DType::kF32, {8})));
  for (const FusionPlan& plan : {make_fused_plan(wide, {.persistent_row_limit = 1, .max_kernel_tensors = 4}),
                                 make_fused_plan(wide, {.max_kernel_tensors = 4}),
                                 make_unfused_plan(wide, {.max_kernel_tensors = 4})}) {
    for (const Kernel& k : plan.kernels) EXPECT_LE(k.reads.size() + k.writes.size(), 4u) << plan.label << " " << k.name;
  }
}

TEST(Fusion, BiasGeluDropoutLayerNormIsOneRowKernel) {
  Graph g;
  auto x = g.input("x", DType::kBF16, {M, N});
  auto b = g.input("b", DType::kBF16, {N});
  auto gamma = g.input("gamma", DType::kBF16, {N});
  auto beta = g.input("beta", DType::kBF16, {N});
  g.output("y", layer_norm(dropout(gelu(x + b), 0.1, 42), gamma, beta));

  const FusionPlan unfused = make_unfused_plan(g);
  EXPECT_EQ(kinds(unfused), (Strings{"pointwise", "pointwise", "pointwise", "row"})) << describe(unfused);
  // add reads x and b, writes h; gelu and dropout read and write M x N; layer_norm reads d, gamma, beta, writes y.
  const int64_t mn = M * N * 2, n = N * 2;
  EXPECT_EQ(cost_of(unfused).bytes, (mn + n + mn) + 2 * (mn + mn) + (mn + 2 * n + mn));

  const FusionPlan fused = make_fused_plan(g);
  ASSERT_EQ(kinds(fused), (Strings{"row"})) << describe(fused);
  EXPECT_EQ(fused.kernels[0].user_ops, (Strings{"add", "gelu", "dropout", "layer_norm"}));
  EXPECT_EQ(fused.kernels[0].name, "k0_add_gelu_dropout_layer_norm");
  EXPECT_EQ(fused.kernels[0].reduction_stages, 2);
  EXPECT_EQ(fused.kernels[0].row_strategy, RowStrategy::kPersistent);
  EXPECT_EQ(written(fused, 0), (Strings{"y"}));
  EXPECT_EQ(cost_of(fused).bytes, mn + 3 * n + mn);  // read x, b, gamma, beta once; write y once
}

TEST(Fusion, SoftmaxIsOneRowKernelWithTwoStages) {
  Graph g;
  auto x = g.input("x", DType::kF16, {M, N});
  g.output("y", softmax(x * 0.125));
  const FusionPlan fused = make_fused_plan(g);
  ASSERT_EQ(kinds(fused), (Strings{"row"})) << describe(fused);
  EXPECT_EQ(fused.kernels[0].reduction_stages, 2);  // max, then sum of exp
  EXPECT_EQ(cost_of(fused).bytes, 2 * M * N * 2);
  EXPECT_EQ(kinds(make_unfused_plan(g)), (Strings{"pointwise", "row"}));
}

TEST(Fusion, DiamondIsOneKernel) {
  Graph g;
  auto x = g.input("x", DType::kF32, {M, N});
  auto b = g.input("b", DType::kF32, {N});
  auto h = x + b;
  g.output("y", exp(h) * tanh(h));
  const FusionPlan fused = make_fused_plan(g);
  ASSERT_EQ(kinds(fused), (Strings{"pointwise"})) << describe(fused);
  EXPECT_EQ(cost_of(fused).bytes, 4 * (M * N + N + M * N));
  EXPECT_EQ(make_unfused_plan(g).kernels.size(), 4u);
}

TEST(Fusion, ValueUsedByTwoReductionsSharesTheRowKernel) {
  Graph g;
  auto x = g.input("x", DType::kF32, {M, N});
  auto h = exp(x);
  g.output("y", sum(h) + max(h));
  const FusionPlan fused = make_fused_plan(g);
  ASSERT_EQ(kinds(fused), (Strings{"row"})) << describe(fused);
  EXPECT_EQ(fused.kernels[0].reduction_stages, 1);  // the two reductions are independent
  EXPECT_EQ(cost_of(fused).bytes, 4 * (M * N + M));
}

TEST(Fusion, IntermediateOutputsAreWrittenOnce) {
  Graph g;
  auto x = g.input("x", DType::kBF16, {M, N});
  auto b = g.input("b", DType::kBF16, {N});
  auto h = x + b;
  g.output("h", h);
  g.output("y", gelu(h));
  const FusionPlan fused = make_fused_plan(g);
  ASSERT_EQ(kinds(fused), (Strings{"pointwise"})) << describe(fused);
  EXPECT_EQ(written(fused, 0), (Strings{"h", "y"}));
  EXPECT_EQ(cost_of(fused).bytes, 2 * (M * N + N + 2 * M * N));
}

TEST(Fusion, BroadcastsInBothDirectionsAreReadAtTheirOwnSize) {
  Graph g;
  auto col = g.input("col", DType::kF32, {M, 1});
  auto row = g.input("row", DType::kF32, {1, N});
  auto x = g.input("x", DType::kF32, {M, N});
  g.output("y", relu(col + row) * x);
  const FusionPlan fused = make_fused_plan(g);
  ASSERT_EQ(kinds(fused), (Strings{"pointwise"})) << describe(fused);
  EXPECT_EQ(cost_of(fused).bytes, 4 * (M + N + M * N + M * N));
}

TEST(Fusion, RowScalarInputBroadcastOverRows) {
  Graph g;
  auto x = g.input("x", DType::kF32, {M, N});
  auto s = g.input("s", DType::kF32, {M, 1});
  g.output("y", x * s - s);
  const FusionPlan fused = make_fused_plan(g);
  ASSERT_EQ(kinds(fused), (Strings{"pointwise"}));
  EXPECT_EQ(cost_of(fused).bytes, 4 * (M * N + M + M * N));
}

TEST(Fusion, RowsOverThePersistentLimitAreReread) {
  Graph g;
  const int64_t long_row = 65536;
  auto x = g.input("x", DType::kF32, {64, long_row});
  g.output("y", softmax(x));
  FusionOptions options;
  options.persistent_row_limit = 16384;
  const FusionPlan fused = make_fused_plan(g, options);
  ASSERT_EQ(kinds(fused), (Strings{"row"}));
  EXPECT_EQ(fused.kernels[0].row_strategy, RowStrategy::kReread);
  EXPECT_EQ(fused.kernels[0].row_passes, 3);  // max pass, sum pass, output pass
  const int64_t tensor = 64 * long_row * 4;
  EXPECT_EQ(estimate_plan(fused, gpu_device("h100")).bytes, 3 * tensor + tensor);
  // The same row under the limit is read once.
  options.persistent_row_limit = long_row;
  EXPECT_EQ(estimate_plan(make_fused_plan(g, options), gpu_device("h100")).bytes, 2 * tensor);
}

// A re-reading kernel's passes load and compute only what their reductions
// and stores need: in y = layer_norm(layer_norm(x, g1) + h, g2) the
// residual h is needed from the third pass on, the second norm's gamma in
// the last only. Charged that way, the fused kernel moves 9 tensors' bytes
// against the unfused plan's 11; charged every read in every pass it was
// 11, no saving (a new-user trial, 2026-12-04).
TEST(Fusion, ReReadingPassesLoadOnlyWhatTheyNeed) {
  Graph g;
  const int64_t rows = 64, cols = 32768;
  auto x = g.input("x", DType::kBF16, {rows, cols});
  auto h = g.input("h", DType::kBF16, {rows, cols});
  auto g1 = g.input("g1", DType::kBF16, {cols});
  auto g2 = g.input("g2", DType::kBF16, {cols});
  auto r = layer_norm(x, g1) + h;
  g.output("y", layer_norm(r, g2));
  FusionOptions options;
  options.persistent_row_limit = 16384;
  const FusionPlan fused = make_fused_plan(g, options);
  ASSERT_EQ(fused.kernels.size(), 1u) << describe(fused);
  const Kernel& k = fused.kernels[0];
  ASSERT_EQ(k.row_strategy, RowStrategy::kReread);
  ASSERT_EQ(k.row_passes, 5);  // two means and two variances, then the store
  const std::vector<std::set<int32_t>> needs = row_pass_needs(*fused.graph, k);
  ASSERT_EQ(needs.size(), 5u);
  auto passes_of = [&](const std::string& name) {
    std::vector<int> out;
    const int32_t id = *fused.graph->find(name);
    for (int p = 0; p < 5; ++p) {
      if (needs[static_cast<size_t>(p)].contains(id)) out.push_back(p);
    }
    return out;
  };
  EXPECT_EQ(passes_of("x"), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(passes_of("h"), (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(passes_of("g1"), (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(passes_of("g2"), (std::vector<int>{4}));
  EXPECT_EQ(passes_of(r.name()), (std::vector<int>{2, 3, 4}));

  const int64_t tensor = rows * cols * 2;
  const DeviceSpec h100 = gpu_device("h100");
  EXPECT_EQ(estimate_plan(fused, h100).bytes, (5 + 3 + 1) * tensor + 2 * cols * 2);  // x 5, h 3, y; g1, g2 once
  EXPECT_EQ(estimate_plan(make_unfused_plan(g, options), h100).bytes, 11 * tensor + 2 * cols * 2);
}

// A re-reading kernel gives up the ops at its ends that cost it more bytes
// than they save: each input of an op fused early is loaded in every later
// pass.
TEST(Fusion, ReReadingKernelsLeaveOutOpsThatWouldCostThemBytes) {
  const int64_t rows = 64, cols = 32768, tensor = rows * cols * 2;
  FusionOptions options;
  options.persistent_row_limit = 16384;
  const DeviceSpec h100 = gpu_device("h100");
  // x + h1 + h2 under three layer_norms: fused whole, x, h1 and h2 would be
  // loaded in all 7 passes (22 tensors); the adds apart, in one kernel,
  // cost 4, the norms together 8 (t 7 times, y once); the unfused plan 18.
  {
    Graph g;
    auto x = g.input("x", DType::kBF16, {rows, cols});
    auto h1 = g.input("h1", DType::kBF16, {rows, cols});
    auto h2 = g.input("h2", DType::kBF16, {rows, cols});
    g.output("y", layer_norm(layer_norm(layer_norm(x + h1 + h2))));
    const FusionPlan fused = make_fused_plan(g, options);
    EXPECT_EQ(kinds(fused), (Strings{"pointwise", "row"})) << describe(fused);
    EXPECT_EQ(fused.kernels[0].user_ops, (Strings{"add", "add"}));
    EXPECT_EQ(estimate_plan(fused, h100).bytes, 12 * tensor);
    EXPECT_EQ(estimate_plan(make_unfused_plan(g, options), h100).bytes, 18 * tensor);
  }
  // The pre-LN pair with the residual sum r an output too: r leaves the
  // first kernel (x 3 times, h once, r written), the second norm reads it
  // 3 times and writes y: 9 tensors, where one kernel would move 10.
  {
    Graph g;
    auto x = g.input("x", DType::kBF16, {rows, cols});
    auto h = g.input("h", DType::kBF16, {rows, cols});
    auto r = layer_norm(x) + h;
    g.output("r", r);
    g.output("y", layer_norm(r));
    const FusionPlan fused = make_fused_plan(g, options);
    ASSERT_EQ(fused.kernels.size(), 2u) << describe(fused);
    EXPECT_EQ(fused.kernels[0].user_ops, (Strings{"layer_norm", "add"}));
    EXPECT_EQ(fused.kernels[1].user_ops, (Strings{"layer_norm"}));
    EXPECT_EQ(estimate_plan(fused, h100).bytes, 9 * tensor);
  }
  // Rows on chip are read once: nothing to leave out.
  {
    Graph g;
    auto x = g.input("x", DType::kBF16, {rows, 4096});
    auto h1 = g.input("h1", DType::kBF16, {rows, 4096});
    g.output("y", layer_norm(layer_norm(x + h1)));
    EXPECT_EQ(make_fused_plan(g, options).kernels.size(), 1u);
  }
}

// FusionOptions::kernel_weight decides what a re-reading kernel gives up.
// By bytes, a GeLU stays in its softmax's kernel: x loaded in each of 3
// passes and y written, 4 tensors, against 6 with the GeLU apart. By the
// work computed (what a cost model on a device of few busy SMs sees), it
// goes to a kernel of its own, which computes it once rather than in
// every pass.
TEST(Fusion, ReReadingKernelsGiveUpWhatTheKernelWeightSays) {
  Graph g;
  auto x = g.input("x", DType::kF32, {4, 32768});
  g.output("y", softmax(gelu(x)));
  FusionOptions options;
  options.persistent_row_limit = 16384;
  const FusionPlan by_bytes = make_fused_plan(g, options);
  ASSERT_EQ(kinds(by_bytes), (Strings{"row"})) << describe(by_bytes);
  EXPECT_EQ(by_bytes.kernels[0].row_strategy, RowStrategy::kReread);

  int weighed = 0;
  options.kernel_weight = [&weighed](const FusionPlan& plan, const Kernel& kernel) {
    ++weighed;
    double computed = 0;
    for (int count : compute_counts(*plan.graph, kernel)) computed += count;
    return computed;
  };
  const FusionPlan by_work = make_fused_plan(g, options);
  ASSERT_EQ(kinds(by_work), (Strings{"pointwise", "row"})) << describe(by_work);
  EXPECT_EQ(by_work.kernels[0].user_ops, (Strings{"gelu"}));
  EXPECT_EQ(by_work.kernels[1].user_ops, (Strings{"softmax"}));
  EXPECT_GT(weighed, 0);
  EXPECT_TRUE(verify_plan(by_work).ok());

  // A chain of layers, each bias add, GeLU, LayerNorm, is cut into runs
  // anywhere, not only at its ends. A GeLU before a LayerNorm would be
  // computed in each of its 3 passes; one after it, only in the last,
  // where the row is written, so it stays as the LayerNorm's epilogue (a
  // tie keeps the longer run): [add, gelu], then [layer_norm, add, gelu]
  // for each later layer, then [layer_norm]. 2 layers are 6 ops, every run
  // weighed; 14 are 42, more than kRereadSplitShortRun.
  for (const int layers : {2, 14}) {
    Graph chain;
    Value h = chain.input("x", DType::kF32, {4, 32768});
    for (int l = 0; l < layers; ++l) {
      h = layer_norm(gelu(h + chain.input(fmt::format("b{}", l), DType::kF32, {32768})));
    }
    chain.output("y", h);
    FusionOptions limits = options;
    limits.max_kernel_nodes = 1000;  // one group for the whole chain, cut only by the weight
    const FusionPlan plan = make_fused_plan(chain, limits);
    ASSERT_EQ(std::ssize(plan.kernels), layers + 1) << describe(plan);
    EXPECT_EQ(plan.kernels.front().user_ops, (Strings{"add", "gelu"}));
    for (int l = 1; l < layers; ++l) {
      const Kernel& k = plan.kernels[static_cast<size_t>(l)];
      EXPECT_EQ(k.user_ops, (Strings{"layer_norm", "add", "gelu"})) << k.name;
      EXPECT_EQ(k.row_strategy, RowStrategy::kReread) << k.name;
    }
    EXPECT_EQ(plan.kernels.back().user_ops, (Strings{"layer_norm"}));
    limits.kernel_weight = nullptr;  // by bytes the chain stays one kernel
    EXPECT_EQ(make_fused_plan(chain, limits).kernels.size(), 1u);
  }
}

// A weight that is not finite is never better. Here every cut of the
// softmax's kernel weighs inf (a kernel of 3 passes or more), and the
// rms_norm's kernel is cut: the softmax's kernel stays whole, and the plan
// still computes both outputs.
TEST(Fusion, AKernelWhoseCutsHaveNoFiniteWeightStaysWhole) {
  Graph g;
  auto x1 = g.input("x1", DType::kF32, {4, 2048});
  auto x2 = g.input("x2", DType::kF32, {4, 2048});
  g.output("y1", softmax(gelu(x1)));
  g.output("y2", rms_norm(gelu(x2)));
  FusionOptions options;
  options.persistent_row_limit = 1024;
  options.kernel_weight = [](const FusionPlan& plan, const Kernel& kernel) {
    if (kernel.row_passes >= 3) return std::numeric_limits<double>::infinity();
    double computed = 0;
    for (int count : compute_counts(*plan.graph, kernel)) computed += count;
    return computed;
  };
  const FusionPlan plan = make_fused_plan(g, options);
  ASSERT_TRUE(verify_plan(plan).ok()) << describe(plan);
  Strings ops;
  for (const Kernel& k : plan.kernels) ops.push_back(fmt::format("{}", fmt::join(k.user_ops, "+")));
  EXPECT_EQ(ops, (Strings{"gelu+softmax", "gelu", "rms_norm"})) << describe(plan);

  options.kernel_weight = [](const FusionPlan&, const Kernel&) { return std::nan(""); };
  EXPECT_EQ(make_fused_plan(g, options).kernels.size(), 2u);
}

// A device that cannot predict times (what is known of a CPU before it is
// measured) plans by bytes, rather than weighing every kernel NaN.
TEST(Fusion, ADeviceWithoutFiguresWeighsBytes) {
  EXPECT_FALSE(fusion_options_for(cpu_identity()).kernel_weight);
  EXPECT_TRUE(fusion_options_for(gpu_device("h100")).kernel_weight);
}

// The node limit can cut a composite: a re-reading kernel that gives up a
// layer_norm's elementwise tail (its normalizing multiply) runs it as a
// pointwise kernel, over the whole chip, not as a row kernel without a
// reduction. Four bias-GeLU-LayerNorm layers over 8 rows, weighed by time
// on an H100, with the node limit cutting them at every size from 2 to 14.
TEST(Fusion, ACutCompositesElementwiseTailRunsPointwise) {
  Graph g;
  Value h = g.input("x", DType::kF32, {8, 32768});
  for (int l = 0; l < 4; ++l) h = layer_norm(gelu(h + g.input(fmt::format("b{}", l), DType::kF32, {32768})));
  g.output("y", h);
  for (int limit = 2; limit <= 14; ++limit) {
    FusionOptions options = fusion_options_for(gpu_device("h100"));
    options.max_kernel_nodes = limit;
    const FusionPlan plan = make_fused_plan(g, options);
    ASSERT_TRUE(verify_plan(plan).ok()) << describe(plan);
    for (const Kernel& k : plan.kernels) {
      if (k.kind != KernelKind::kRow) continue;
      bool reduces = false;
      for (int32_t id : k.nodes) reduces = reduces || plan.graph->node(id).info().kind == OpKind::kReduce;
      EXPECT_TRUE(reduces) << "node limit " << limit << ": " << k.name << " is a row kernel without a reduction";
    }
  }
}

TEST(Fusion, LoneMatmulIsOneLibraryKernel) {
  Graph g;
  auto a = g.input("a", DType::kBF16, {M, N});
  auto w = g.input("w", DType::kBF16, {N, 256});
  g.output("y", matmul(a, w));
  for (const FusionPlan& plan : {make_unfused_plan(g), make_fused_plan(g)}) {
    ASSERT_EQ(kinds(plan), (Strings{"matmul"}));
    EXPECT_EQ(cost_of(plan).bytes, 2 * (M * N + N * 256 + M * 256));
  }
}

// The add of a bias vector, then relu or a tanh GeLU, run inside the GEMM
// (fusion/matmul_epilogue.h); an erf GeLU, which cuBLASLt does not run,
// forms the next kernel.
TEST(Fusion, MatmulTakesABiasAndActivationEpilogue) {
  for (const char* approximate : {"none", "tanh"}) {
    SCOPED_TRACE(approximate);
    Graph g;
    auto a = g.input("a", DType::kBF16, {M, N});
    auto w = g.input("w", DType::kBF16, {N, 256});
    auto bias = g.input("bias", DType::kBF16, {256});
    g.output("y", gelu(matmul(a, w) + bias, approximate));
    const FusionPlan fused = make_fused_plan(g);
    const int64_t mm = 2 * (M * N + N * 256 + 256 + M * 256);  // the product with its bias added
    if (std::string_view(approximate) == "tanh") {
      ASSERT_EQ(kinds(fused), (Strings{"matmul"})) << describe(fused);
      EXPECT_EQ(fused.kernels[0].user_ops, (Strings{"matmul", "add", "gelu"}));
      EXPECT_EQ(fused.kernels[0].name, "k0_matmul_add_gelu");
      EXPECT_EQ(cost_of(fused).bytes, mm);
    } else {
      ASSERT_EQ(kinds(fused), (Strings{"matmul", "pointwise"})) << describe(fused);
      EXPECT_EQ(fused.kernels[0].user_ops, (Strings{"matmul", "add"}));
      EXPECT_EQ(fused.kernels[1].user_ops, (Strings{"gelu"}));
      EXPECT_EQ(cost_of(fused).bytes, mm + 2 * (M * 256 + M * 256));
    }
    EXPECT_EQ(kinds(make_unfused_plan(g)), (Strings{"matmul", "pointwise", "pointwise"}));
  }
}

// Each graph's fused plan, as the user ops of each kernel: what the epilogue
// refuses stays in a kernel of its own.
TEST(Fusion, MatmulEpilogueTakesOnlyWhatTheGemmCanRun) {
  const std::string head = "input a: bf16[64, 32]\ninput w: bf16[32, 16]\ninput b: bf16[16]\nh = matmul(a, w)\n";
  const std::vector<std::pair<std::string, std::vector<Strings>>> cases = {
      // the bias on either side of the add; relu alone
      {"s = add(b, h)\ny = relu(s)\noutput y\n", {{"matmul", "add", "relu"}}},
      {"y = relu(h)\noutput y\n", {{"matmul", "relu"}}},
      // an activation ends the epilogue: the add after it is a kernel of its own
      {"r = relu(h)\ny = add(r, b)\noutput y\n", {{"matmul", "relu"}, {"add"}}},
      // the product is used twice (or is an output): it is stored, and nothing joins it
      {"s = add(h, b)\ny = relu(s)\noutput y, h\n", {{"matmul"}, {"add", "relu"}}},
      {"s = add(h, b)\nt = mul(h, h)\ny = add(s, t)\noutput y\n", {{"matmul"}, {"add", "mul", "add"}}},
      // the biased value is used twice: it is stored, and the activation is not fused
      {"s = add(h, b)\ny = relu(s)\nz = exp(s)\noutput y, z\n", {{"matmul", "add"}, {"relu", "exp"}}},
      // not a bias vector: a whole matrix, a literal, a vector of another dtype
      {"input m: bf16[64, 16]\ny = add(h, m)\noutput y\n", {{"matmul"}, {"add"}}},
      {"y = add(h, 1.5)\noutput y\n", {{"matmul"}, {"add"}}},
      {"input c: f32[16]\ny = add(h, c)\noutput y\n", {{"matmul"}, {"add"}}},
      // not an epilogue op
      {"y = sigmoid(h)\noutput y\n", {{"matmul"}, {"sigmoid"}}},
      // the product added to itself: it has two uses
      {"y = add(h, h)\noutput y\n", {{"matmul"}, {"add"}}},
      // a bias computed by a kernel before the matmul's
      {"input c: bf16[16]\nd = exp(c)\ny = add(h, d)\noutput y\n", {{"exp"}, {"matmul", "add"}}},
  };
  for (const auto& [tail, expected] : cases) {
    SCOPED_TRACE(tail);
    const FusionPlan fused = make_fused_plan(testing::parse_or_throw(head + tail));
    std::vector<Strings> got;
    for (const Kernel& k : fused.kernels) got.push_back(k.user_ops);
    EXPECT_EQ(got, expected) << describe(fused);
  }
  // A batched product [B, M, K] x [K, N] takes a bias of [N], [1, N] or [1, 1, N].
  for (const char* bias : {"16", "1, 16", "1, 1, 16"}) {
    const FusionPlan batched = make_fused_plan(testing::parse_or_throw(
        fmt::format("input a: f16[3, 64, 32]\ninput w: f16[32, 16]\ninput b: f16[{}]\nh = matmul(a, w)\ns = add(h, b)\n"
                    "y = gelu(s, approximate=tanh)\noutput y\n",
                    bias)));
    EXPECT_EQ(batched.kernels.size(), 1u) << bias << "\n" << describe(batched);
  }
  // In f32 the tanh GeLU is a kernel of its own (matmul_epilogue.h); relu is not.
  const std::string f32 =
      "input a: f32[64, 32]\ninput w: f32[32, 16]\ninput b: f32[16]\nh = matmul(a, w)\n"
      "s = add(h, b)\n";
  EXPECT_EQ(kinds(make_fused_plan(testing::parse_or_throw(f32 + "y = gelu(s, approximate=tanh)\noutput y\n"))),
            (Strings{"matmul", "pointwise"}));
  EXPECT_EQ(kinds(make_fused_plan(testing::parse_or_throw(f32 + "y = relu(s)\noutput y\n"))), (Strings{"matmul"}));
  // A matmul of two dtypes widens its operands first: no epilogue.
  const FusionPlan mixed = make_fused_plan(testing::parse_or_throw(
      "input a: bf16[64, 32]\ninput w: f32[32, 16]\ninput b: f32[16]\nh = matmul(a, w)\ny = relu(h)\noutput y\n"));
  EXPECT_EQ(kinds(mixed), (Strings{"matmul", "pointwise"})) << describe(mixed);
}

TEST(Fusion, MlpBlockIsTwoGemmsWithEpilogues) {
  Graph g;
  auto x = g.input("x", DType::kBF16, {M, N});
  auto w1 = g.input("w1", DType::kBF16, {N, 4 * N});
  auto b1 = g.input("b1", DType::kBF16, {4 * N});
  auto w2 = g.input("w2", DType::kBF16, {4 * N, N});
  g.output("y", matmul(gelu(matmul(x, w1) + b1, "tanh"), w2));
  const FusionPlan fused = make_fused_plan(g);
  ASSERT_EQ(kinds(fused), (Strings{"matmul", "matmul"}));
  EXPECT_EQ(fused.kernels[0].user_ops, (Strings{"matmul", "add", "gelu"}));
  EXPECT_EQ(fused.kernels[1].user_ops, (Strings{"matmul"}));
  EXPECT_EQ(make_unfused_plan(g).kernels.size(), 4u);
}

TEST(Fusion, MixedDtypesCountEachTensorAtItsOwnSize) {
  Graph g;
  auto x = g.input("x", DType::kF16, {M, N});
  auto b = g.input("b", DType::kBF16, {N});
  auto y = x + b;  // f16 with bf16 gives f32
  g.output("y", cast(y * 2.0, DType::kBF16));
  const FusionPlan fused = make_fused_plan(g);
  ASSERT_EQ(kinds(fused), (Strings{"pointwise"}));
  EXPECT_EQ(cost_of(fused).bytes, 2 * M * N + 2 * N + 2 * M * N);
  // Unfused: add writes f32, mul reads and writes f32, cast reads f32 and writes bf16.
  EXPECT_EQ(cost_of(make_unfused_plan(g)).bytes,
            (2 * M * N + 2 * N + 4 * M * N) + (4 * M * N + 4 * M * N) + (4 * M * N + 2 * M * N));
}

TEST(Fusion, SiblingsReadingTheSameInputShareAKernel) {
  Graph g;
  auto x = g.input("x", DType::kF32, {M, N});
  g.output("e", exp(x));
  g.output("l", log(abs(x)));
  const FusionPlan fused = make_fused_plan(g);
  ASSERT_EQ(kinds(fused), (Strings{"pointwise"})) << describe(fused);
  EXPECT_EQ(cost_of(fused).bytes, 4 * 3 * M * N);
}

TEST(Fusion, RmsNormWithSiluGateIsOneRowKernel) {
  Graph g;
  auto x = g.input("x", DType::kBF16, {M, N});
  auto w = g.input("w", DType::kBF16, {N});
  auto gate = g.input("gate", DType::kBF16, {M, N});
  auto normalized = rms_norm(x, w);  // named first: C++ leaves operand order unspecified
  g.output("y", normalized * silu(gate));
  const FusionPlan fused = make_fused_plan(g);
  ASSERT_EQ(kinds(fused), (Strings{"row"})) << describe(fused);
  EXPECT_EQ(cost_of(fused).bytes, 2 * (M * N + N + M * N + M * N));
  EXPECT_EQ(kinds(make_unfused_plan(g)), (Strings{"row", "pointwise", "pointwise"}));
}

TEST(Fusion, ResidualLayerNormWritesBothOutputs) {
  Graph g;
  auto x = g.input("x", DType::kBF16, {M, N});
  auto r = g.input("residual", DType::kBF16, {M, N});
  auto h = x + r;
  g.output("h", h);
  g.output("y", layer_norm(h));
  const FusionPlan fused = make_fused_plan(g);
  ASSERT_EQ(kinds(fused), (Strings{"row"})) << describe(fused);
  EXPECT_EQ(written(fused, 0), (Strings{"h", "y"}));
  EXPECT_EQ(cost_of(fused).bytes, 2 * 4 * M * N);
}

TEST(Fusion, SingleOpGraph) {
  Graph g;
  auto x = g.input("x", DType::kF32, {7});
  g.output("y", neg(x));
  for (const FusionPlan& plan : {make_unfused_plan(g), make_fused_plan(g)}) {
    ASSERT_EQ(kinds(plan), (Strings{"pointwise"}));
    EXPECT_EQ(cost_of(plan).bytes, 2 * 7 * 4);
  }
}

// Values no output depends on are not computed by either plan, and neither
// is what only they read: the bytes are those of the live ops alone.
TEST(Fusion, OpsNoOutputDependsOnAreNotComputed) {
  Graph g;
  auto x = g.input("x", DType::kF32, {M, N});
  auto w = g.input("w", DType::kF32, {M, N});  // read only by dead ops
  auto dead = exp(add(x, w));
  g.output("y", relu(x));
  (void)sum(dead);
  EXPECT_EQ(g.unused_nodes().size(), 3u);  // add, exp, sum
  for (const FusionPlan& plan : {make_unfused_plan(g), make_fused_plan(g)}) {
    ASSERT_EQ(kinds(plan), (Strings{"pointwise"})) << describe(plan);
    EXPECT_EQ(plan.kernels[0].user_ops, (Strings{"relu"}));
    EXPECT_EQ(cost_of(plan).bytes, 2 * M * N * 4);
  }
}

TEST(Fusion, VectorPrologueOfAnotherShapeIsItsOwnKernel) {
  Graph g;
  auto x = g.input("x", DType::kF32, {M, N});
  auto gamma = g.input("gamma", DType::kF32, {N});
  g.output("y", layer_norm(x, gamma * 2.0));
  const FusionPlan fused = make_fused_plan(g);
  ASSERT_EQ(kinds(fused), (Strings{"pointwise", "row"})) << describe(fused);
  EXPECT_EQ(fused.kernels[0].iteration, Shape{N});
  EXPECT_EQ(cost_of(fused).bytes, 4 * (N + N) + 4 * (M * N + N + M * N));
}

TEST(Fusion, NeverMergesAcrossAKernelInBetween) {
  // a feeds a matmul and also, with the matmul's result, a later add: putting
  // the add with a would make a's kernel wait for the matmul that waits for it.
  Graph g;
  auto x = g.input("x", DType::kF32, {M, N});
  auto w = g.input("w", DType::kF32, {N, N});
  auto a = exp(x);
  g.output("y", a + matmul(a, w));
  const FusionPlan fused = make_fused_plan(g);
  EXPECT_EQ(kinds(fused), (Strings{"pointwise", "matmul", "pointwise"})) << describe(fused);
  EXPECT_EQ(written(fused, 0).size(), 1u);
}

// Rule 6: a kernel takes at most max_kernel_tensors tensors. A chain adding
// up 20 inputs with a limit of 8 tensors: each kernel reads 7 (x0..x6 first,
// then the running sum and 6 more inputs) and writes 1; the last reads s18
// and x19.
TEST(Fusion, KernelsNeverTakeMoreThanTheTensorLimit) {
  Graph g;
  Value sum = g.input("x0", DType::kF32, {M, N});
  for (int i = 1; i < 20; ++i) sum = sum + g.input("x" + std::to_string(i), DType::kF32, {M, N});
  g.output("y", sum);
  FusionOptions options;
  options.max_kernel_tensors = 8;
  const FusionPlan fused = make_fused_plan(g, options);
  ASSERT_EQ(fused.kernels.size(), 4u) << describe(fused);  // 7 + 6 + 6 + 1 inputs = 20
  for (const Kernel& k : fused.kernels) EXPECT_LE(k.reads.size() + k.writes.size(), 8u) << k.name;
  // With the default limit (256) the chain is one kernel.
  EXPECT_EQ(make_fused_plan(g).kernels.size(), 1u);
}

TEST(Fusion, PlansAreDeterministic) {
  auto build = [] {
    Graph g;
    auto x = g.input("x", DType::kBF16, {M, N});
    auto r = g.input("r", DType::kBF16, {M, N});
    auto h = x + r;
    g.output("h", h);
    g.output("y", softmax(h) + layer_norm(h));
    return g;
  };
  EXPECT_EQ(describe(make_fused_plan(build())), describe(make_fused_plan(build())));
  EXPECT_EQ(describe(make_unfused_plan(build())), describe(make_unfused_plan(build())));
}

}  // namespace
}  // namespace fusejit
