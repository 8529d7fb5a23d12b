// Generated CUDA: golden files, NVRTC compiles of every kernel, and the
// properties the design asks of the fused demo kernel. No GPU is needed.
//
// Golden files live in tests/golden/cuda/<example>/<kernel>.cu (the kernel
// source without the shared device helpers). After an intended change to
// the generator, regenerate them with
//   FUSEJIT_UPDATE_GOLDEN=1 ./build/tests/fusejit_tests --gtest_filter='CudaGolden*'
// and review the diff.
#include <cstdlib>
#include <filesystem>
#include <set>

#include <absl/strings/match.h>
#include <gtest/gtest.h>

#include "codegen/cpu/cpu_emitter.h"
#include "fusejit.h"
#include "fusion/gpu_row_shape.h"
#include "fusion/matmul_epilogue.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/occupancy.h"
#include "runtime/runtime_test_util.h"
#include "support/error_of.h"
#include "support/example_graphs.h"
#include "support/graph_variants.h"
#include "support/requirements.h"
#include "support/run_command.h"

namespace fusejit {
namespace {

const std::string kSource = FUSEJIT_SOURCE_DIR;

TEST(CudaGolden, ExampleKernelsMatchTheirGoldenFiles) {
  const bool update = std::getenv("FUSEJIT_UPDATE_GOLDEN") != nullptr;
  for (const auto& file : testing::example_graph_files()) {
    const FusionPlan plan = make_fused_plan(testing::parse_file_or_throw(file), fusion_options_for(gpu_device("h100")));
    const std::filesystem::path dir = std::filesystem::path(kSource) / "tests/golden/cuda" / file.stem();
    std::set<std::string> expected;
    for (const CudaKernelSource& k : emit_cuda(plan)) {
      const std::filesystem::path golden = dir / (k.name + ".cu");
      expected.insert(golden.filename().string());
      const std::string actual = without_helpers(k.source);
      if (update) {
        std::filesystem::create_directories(dir);
        testing::write_file(golden.string(), actual);
        continue;
      }
      ASSERT_TRUE(std::filesystem::exists(golden))
          << golden << " is missing; run with FUSEJIT_UPDATE_GOLDEN=1 to create it";
      EXPECT_EQ(actual, testing::read_file(golden.string()))
          << k.name << " differs from " << golden << "; if intended, regenerate with FUSEJIT_UPDATE_GOLDEN=1";
    }
    // A golden file of a kernel the plan no longer has is stale: it would
    // document code nothing generates (mlp_block's bias-GeLU kernel, once
    // the matmul's epilogue took it). Regenerating removes it.
    if (!std::filesystem::is_directory(dir)) continue;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (expected.contains(entry.path().filename().string())) continue;
      if (update) {
        std::filesystem::remove(entry.path());
      } else {
        ADD_FAILURE() << entry.path() << " is the golden file of no kernel of " << file.filename()
                      << "'s fused plan; regenerate with FUSEJIT_UPDATE_GOLDEN=1 to remove it";
      }
    }
    if (update && std::filesystem::is_empty(dir)) std::filesystem::remove(dir);
  }
}

TEST(CudaCodegen, GeneratedSourceIsDeterministicAndNamesItsOps) {
  const Graph g = testing::parse_file_or_throw(testing::example_graph_dir() / "bias_gelu_dropout_layernorm.fj");
  const std::vector<CudaKernelSource> a = emit_cuda(make_fused_plan(g));
  const std::vector<CudaKernelSource> b = emit_cuda(make_fused_plan(g));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].source, b[0].source);
  for (const char* statement : {"h = add(x, b)", "g = gelu(h)", "d = dropout(g, p=0.1)  (seed: s_d)"}) {
    EXPECT_NE(a[0].source.find(statement), std::string::npos) << statement;
  }
  // The seed is an argument: another seed is the same code (one cache entry).
  std::string text = print_graph(g);
  text.replace(text.find("seed=42"), 7, "seed=43");
  absl::StatusOr<Graph> reseeded = parse_graph(text);
  ASSERT_TRUE(reseeded.ok()) << reseeded.status();
  EXPECT_EQ(emit_cuda(make_fused_plan(*reseeded))[0].source, a[0].source);
  EXPECT_EQ(emit_cpu(make_fused_plan(*reseeded))[0].source, emit_cpu(make_fused_plan(g))[0].source);
  EXPECT_NE(a[0].source.find(std::string(cuda_helpers_source()).substr(0, 200)), std::string::npos);
  EXPECT_EQ(a[0].variant, CudaVariant::kBlockPerRow);
  EXPECT_EQ(a[0].vector_width, 8);  // 16 bytes of bf16
  EXPECT_TRUE(a[0].has_vector_path);
  EXPECT_EQ(a[0].count, 8192);      // rows: a runtime argument
  EXPECT_NE(a[0].source.find("constexpr int kN = 4096;"), std::string::npos);  // row length: compile time
}

// Mistakes in a call of the emitters' public API are Errors that name the
// function and what was wrong, never a crash or a std::out_of_range.
TEST(CudaCodegen, MistakesInTheCallAreErrorsNamingThem) {
  Graph g;
  auto a = g.input("a", DType::kF32, {8, 16});
  auto b = g.input("b", DType::kF32, {16, 4});
  g.output("y", exp(matmul(a, b)));
  const FusionPlan plan = make_unfused_plan(g);
  ASSERT_EQ(plan.kernels.size(), 2u) << describe(plan);
  using testing::error_of;
  EXPECT_EQ(error_of([&] { emit_cuda_kernel(plan, 2); }),
            "emit_cuda_kernel: kernel index 2 is out of range; the unfused plan has 2 kernels");
  EXPECT_EQ(error_of([&] { cuda_row_shape_candidates(plan, -1, CudaAccess::kVector); }),
            "cuda_row_shape_candidates: kernel index -1 is out of range; the unfused plan has 2 kernels");
  EXPECT_EQ(
      error_of([&] { emit_cuda_kernel(plan, 0); }),
      "emit_cuda_kernel: kernel " + plan.kernels[0].name + " is a matmul, which runs through cuBLAS and has no source");
  EXPECT_EQ(error_of([&] { emit_cpu_kernel(plan, 5); }),
            "emit_cpu_kernel: kernel index 5 is out of range; the unfused plan has 2 kernels");
  Graph one;
  one.output("y", exp(one.input("x", DType::kF32, {8})));
  EXPECT_EQ(error_of([&] { emit_cpu_kernel(make_fused_plan(one), 1); }),
            "emit_cpu_kernel: kernel index 1 is out of range; the fused plan has 1 kernel");
  FusionPlan orphan = plan;
  orphan.graph = nullptr;
  EXPECT_TRUE(error_of([&] { emit_cuda(orphan); }).starts_with("emit_cuda_kernel: the unfused plan has no graph"));
  EXPECT_TRUE(error_of([&] { emit_cpu(orphan); }).starts_with("emit_cpu_kernel: the unfused plan has no graph"));
  // The generated kernel of the plan still emits.
  EXPECT_EQ(error_of([&] { emit_cuda_kernel(plan, 1); }), "no error");
  EXPECT_EQ(error_of([&] { emit_cpu_kernel(plan, 0); }), "no error");
}

TEST(CudaCodegen, VariantFollowsTheRowLength) {
  auto variant_for = [](int64_t n, int64_t limit) {
    Graph g;
    auto x = g.input("x", DType::kF32, {4, n});
    g.output("y", softmax(x));
    FusionOptions options;
    options.persistent_row_limit = limit;
    return emit_cuda(make_fused_plan(g, options))[0];
  };
  EXPECT_EQ(variant_for(256, 16384).variant, CudaVariant::kWarpPerRow);
  EXPECT_EQ(variant_for(4096, 16384).variant, CudaVariant::kBlockPerRow);
  EXPECT_EQ(variant_for(32768, 16384).variant, CudaVariant::kReread);
  EXPECT_FALSE(variant_for(1001, 16384).has_vector_path);  // 1001 is not a multiple of 4
  EXPECT_TRUE(variant_for(1000, 16384).has_vector_path);
}

// A row of fewer than 32 chunks (16-byte accesses, or elements without a
// vector path) gets one lane per chunk, rounded up to a power of two, and
// its warp holds other rows; each lane holds what it would with a whole
// warp.
TEST(CudaCodegen, ShortRowsGetALanePerChunk) {
  struct Case {
    DType dtype;
    int64_t n;
    int threads;
  };
  for (const Case& c :
       {Case{DType::kBF16, 8, 1}, Case{DType::kF32, 8, 2}, Case{DType::kBF16, 64, 8}, Case{DType::kF32, 3, 4},
        Case{DType::kF32, 1, 1}, Case{DType::kF32, 96, 32}, Case{DType::kF32, 256, 32}}) {
    Graph g;
    auto x = g.input("x", c.dtype, {100, c.n});
    g.output("y", softmax(x));
    const FusionPlan plan = make_fused_plan(g);
    const CudaKernelSource k = emit_cuda_kernel(plan, 0, CudaAccess::kVector);
    SCOPED_TRACE(fmt::format("{}[100, {}]", c.dtype, c.n));
    EXPECT_EQ(k.variant, CudaVariant::kWarpPerRow);
    EXPECT_EQ(k.block_threads, c.threads);
    EXPECT_EQ(k.block_threads * k.rows_per_block, 128);
    EXPECT_TRUE(absl::StrContains(k.source, fmt::format("constexpr int kThreads = {};", c.threads)));
    if (c.threads < 32) {
      EXPECT_TRUE(absl::StrContains(k.source, "fj_warp_reduce<kThreads>("));
      EXPECT_TRUE(absl::StrContains(cuda_launch_shape(k), fmt::format("{} rows per warp", 32 / c.threads)));
    } else {
      EXPECT_FALSE(absl::StrContains(k.source, "fj_live"));  // a whole warp's row needs no row guard
    }
  }
}

// One Philox block decides 8 consecutive elements (ir/philox.h): f32
// kernels with dropout give a thread 8 of them (two 16-byte accesses) where
// rows are a multiple of 8 long, and 4, drawing a whole block for half of
// it, where they are only a multiple of 4. Both widths run on the emulator
// (GpuBackend.DropoutMaskEqualsTheReferenceBitForBit).
TEST(CudaCodegen, F32DropoutTakesAWholePhiloxBlockPerThreadWhereRowsAllow) {
  auto kernel_for = [](const std::string& text) {
    absl::StatusOr<Graph> g = parse_graph(text);
    EXPECT_TRUE(g.ok()) << g.status();
    return emit_cuda(make_fused_plan(*g))[0];
  };
  // The generated code, helpers left out (they define both fj_dropout8 and
  // fj_dropout4): a row kernel calls the one its width takes; a pointwise
  // kernel's width is its kVec (its body has a branch for either).
  const std::string pointwise = "input x: f32[64, {}]\ny = dropout(x, p=0.1, seed=5)\noutput y\n";
  const std::string row = "input x: f32[64, {}]\nd = dropout(x, p=0.1, seed=5)\ny = layer_norm(d)\noutput y\n";
  for (const std::string& text : {pointwise, row}) {
    const CudaKernelSource eight = kernel_for(fmt::format(fmt::runtime(text), 4096));
    const CudaKernelSource four = kernel_for(fmt::format(fmt::runtime(text), 4100));
    EXPECT_EQ(eight.vector_width, 8) << text;
    EXPECT_EQ(four.vector_width, 4) << text;
    EXPECT_NE(without_helpers(eight.source).find("constexpr int kVec = 8;"), std::string::npos) << text;
    EXPECT_NE(without_helpers(four.source).find("constexpr int kVec = 4;"), std::string::npos) << text;
  }
  const std::string row_eight = without_helpers(kernel_for(fmt::format(fmt::runtime(row), 4096)).source);
  const std::string row_four = without_helpers(kernel_for(fmt::format(fmt::runtime(row), 4100)).source);
  EXPECT_NE(row_eight.find("fj_dropout8("), std::string::npos);
  EXPECT_EQ(row_eight.find("fj_dropout4("), std::string::npos);
  EXPECT_NE(row_four.find("fj_dropout4("), std::string::npos);
  EXPECT_EQ(row_four.find("fj_dropout8("), std::string::npos);
  // Without dropout an f32 kernel keeps one 16-byte access per thread and step.
  EXPECT_EQ(kernel_for("input x: f32[64, 4096]\ny = gelu(x)\noutput y\n").vector_width, 4);
}

// The generated code, helpers left out, of the first kernel of the fused
// plan of graph `text`.
std::string fused_kernel_body(const std::string& text) {
  absl::StatusOr<Graph> g = parse_graph(text);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? without_helpers(emit_cuda(make_fused_plan(*g))[0].source) : std::string();
}

// The exact GeLU from which only 16-bit values are computed takes the
// shorter polynomial (fj_math.cuh: fj_gelu_none_16bit); an f32 one, or a
// 16-bit one an f32 value is computed from, keeps the f32-accurate one, and
// the tanh form has one helper. Both bounds are checked on the host
// (CudaHelpersOnHost/CudaGelu).
TEST(CudaCodegen, GeluTakesTheShorterPolynomialOnlyForA16BitResult) {
  auto body_for = [](const std::string& dtype, const std::string& approximate) {
    return fused_kernel_body(
        fmt::format("input x: {}[64, 4096]\ny = gelu(x, approximate={})\noutput y\n", dtype, approximate));
  };
  EXPECT_NE(body_for("f32", "none").find("fj_gelu_none(("), std::string::npos);
  for (const char* dtype : {"f16", "bf16"}) {
    EXPECT_NE(body_for(dtype, "none").find("fj_gelu_none_16bit(("), std::string::npos) << dtype;
    EXPECT_EQ(body_for(dtype, "none").find("fj_gelu_none(("), std::string::npos) << dtype;
  }
  for (const char* dtype : {"f32", "f16", "bf16"}) {
    EXPECT_NE(body_for(dtype, "tanh").find("fj_gelu_tanh(("), std::string::npos) << dtype;
  }
  // An f32 output computed from a bf16 GeLU: judged at f32's tolerance.
  absl::StatusOr<Graph> cast = parse_graph(
      "input x: bf16[64, 4096]\ng = gelu(x)\ngf = cast(g, dtype=f32)\nxf = cast(x, dtype=f32)\ny = sub(gf, xf)\n"
      "output y\n");
  ASSERT_TRUE(cast.ok()) << cast.status();
  const std::string body = without_helpers(emit_cuda(make_fused_plan(*cast))[0].source);
  EXPECT_NE(body.find("fj_gelu_none(("), std::string::npos) << body;
  EXPECT_EQ(body.find("fj_gelu_none_16bit(("), std::string::npos) << body;
}

// dropout(gelu(x)) in one helper (fusion/gelu_dropout.h): where the GeLU
// is 16-bit and only the dropout uses it, a kernel whose threads hold 8
// elements computes both with fj_gelu_dropout8 from the GeLU's operand, and
// the GeLU alone only where groups of 8 do not apply. Both run on the
// emulator against the reference (GpuBackend.GeluFoldedIntoDropoutMatchesTheReference).
TEST(CudaCodegen, AGeluOnlyADropoutUsesIsComputedWithIt) {
  const std::string pointwise = "input x: {}[64, 4096]\ng = gelu(x)\ny = dropout(g, p=0.1, seed=5)\noutput y{}\n";
  const std::string row =
      "input x: {}[64, 4096]\ng = gelu(x)\nd = dropout(g, p=0.1, seed=5)\ny = layer_norm(d)\noutput y{}\n";
  for (const std::string& text : {pointwise, row}) {
    for (const char* dtype : {"bf16", "f16"}) {
      const std::string folded = fused_kernel_body(fmt::format(fmt::runtime(text), dtype, ""));
      EXPECT_NE(folded.find("fj_gelu_dropout8(r_x + "), std::string::npos) << folded;
      if (text == row) EXPECT_EQ(folded.find("fj_gelu_none_16bit("), std::string::npos) << folded;
      // g written out: computed on its own, and dropped as it is stored.
      const std::string output = fused_kernel_body(fmt::format(fmt::runtime(text), dtype, ", g"));
      EXPECT_EQ(output.find("fj_gelu_dropout8("), std::string::npos) << output;
      EXPECT_NE(output.find("fj_dropout8(v_g + "), std::string::npos) << output;
    }
    // An f32 GeLU takes the f32 helper, which has no such fold.
    EXPECT_EQ(fused_kernel_body(fmt::format(fmt::runtime(text), "f32", "")).find("fj_gelu_dropout8("),
              std::string::npos);
  }
  // Another user of g in the kernel: no fold.
  const std::string shared = fused_kernel_body(
      "input x: bf16[64, 4096]\ng = gelu(x)\nd = dropout(g, p=0.1, seed=5)\ny = add(d, g)\noutput y\n");
  EXPECT_EQ(shared.find("fj_gelu_dropout8("), std::string::npos) << shared;
}

// rsqrt of a value known to be at least FLT_MIN (ir/value_bounds.h), as in
// LayerNorm and RMSNorm, takes rsqrt.approx.ftz; an rsqrt of anything else
// keeps rsqrtf, which is right for subnormal inputs too.
TEST(CudaCodegen, RsqrtOfANormsVarianceFlushesSubnormalsAndNoOtherDoes) {
  for (const char* op : {"layer_norm(x)", "rms_norm(x)"}) {
    const std::string body = fused_kernel_body(fmt::format("input x: bf16[64, 4096]\ny = {}\noutput y\n", op));
    EXPECT_NE(body.find("fj_rsqrt_normal("), std::string::npos) << body;
  }
  for (const char* text : {"input x: f32[64, 4096]\ny = rsqrt(x)\noutput y\n",
                           "input x: f32[64, 4096]\ns = square(x)\ny = rsqrt(s)\noutput y\n"}) {
    const std::string body = fused_kernel_body(text);
    EXPECT_NE(body.find("fj_rsqrt(("), std::string::npos) << body;
    EXPECT_EQ(body.find("fj_rsqrt_normal("), std::string::npos) << body;
  }
}

TEST(CudaCodegen, SixtyFourBitIndicesFromTwoToTheThirtyOneElements) {
  auto pointwise = [](int64_t rows) {
    Graph g;
    auto x = g.input("x", DType::kBF16, {rows, 65536});
    g.output("y", relu(x));
    return emit_cuda(make_fused_plan(g))[0];
  };
  EXPECT_FALSE(pointwise(16384).index_64bit);
  const CudaKernelSource big = pointwise(32768);  // 2^31 elements
  EXPECT_TRUE(big.index_64bit);
  EXPECT_NE(big.source.find("const long long n"), std::string::npos);
  // A row kernel's element index is row * kN with a 64-bit row at any size,
  // so the same source serves 8 rows and 2^20 rows of 4096.
  Graph g;
  auto x = g.input("x", DType::kBF16, {8, 4096});
  g.output("y", softmax(x));
  const CudaKernelSource row = emit_cuda(make_fused_plan(g))[0];
  EXPECT_TRUE(row.index_64bit);
  EXPECT_NE(row.source.find("long long row"), std::string::npos);
  EXPECT_EQ(row.source.find("int row"), std::string::npos);
}

class CudaNvrtcTest : public ::testing::Test {
 protected:
  void SetUp() override { FUSEJIT_REQUIRE_NVRTC(); }
};

// Every distinct kernel source of `graph`'s fused and unfused plans, in
// both access variants, compiles for `arch`; returns how many were compiled.
int compile_all(const Graph& graph, const std::string& arch, std::set<std::string>& seen) {
  CudaCompileOptions options;
  options.arch = arch;
  int compiled = 0;
  for (const FusionPlan& plan : {make_unfused_plan(graph), make_fused_plan(graph)}) {
    std::vector<CudaKernelSource> kernels = emit_cuda(plan);
    for (CudaKernelSource& k : emit_cuda(plan, CudaAccess::kScalar)) kernels.push_back(std::move(k));
    for (const CudaKernelSource& k : kernels) {
      if (!seen.insert(arch + k.source).second) continue;
      absl::StatusOr<CompiledKernel> result = compile_cuda(k.name, k.source, options, nullptr);
      EXPECT_TRUE(result.ok()) << k.name << " for " << arch << ":\n" << status_text(result.status());
      ++compiled;
    }
  }
  return compiled;
}

TEST_F(CudaNvrtcTest, EveryExampleKernelInEveryDtypeCompilesForSm80AndSm90) {
  std::set<std::string> seen;
  int compiled = 0;
  for (const auto& file : testing::example_graph_files()) {
    const Graph g = testing::parse_file_or_throw(file);
    for (DType dtype : kAllDTypes) {
      for (const char* arch : {"sm_80", "sm_90"}) compiled += compile_all(testing::with_input_dtype(g, dtype), arch, seen);
    }
  }
  EXPECT_GT(compiled, 30);
}

TEST_F(CudaNvrtcTest, EveryKernelOfTheFusionTestGraphsCompiles) {
  std::set<std::string> seen;
  for (const std::string& text : testing::varied_graph_texts()) {
    absl::StatusOr<Graph> g = parse_graph(text);
    ASSERT_TRUE(g.ok()) << g.status();
    for (DType dtype : kAllDTypes) {
      for (const char* arch : {"sm_80", "sm_90"}) compile_all(testing::with_input_dtype(*g, dtype), arch, seen);
    }
  }
  // Rows over the persistent limit: the re-reading variant.
  absl::StatusOr<Graph> g = parse_graph("input x: bf16[4, 40000]\ninput w: bf16[40000]\ny = rms_norm(x, w)\noutput y\n");
  ASSERT_TRUE(g.ok());
  const std::vector<CudaKernelSource> k = emit_cuda(make_fused_plan(*g));
  ASSERT_EQ(k[0].variant, CudaVariant::kReread);
  CudaCompileOptions options;
  EXPECT_TRUE(compile_cuda(k[0].name, k[0].source, options, nullptr).ok());
}

// Where cuBLASLt cannot run a matmul's epilogue, a generated kernel does
// (runtime/cuda_backend_matmul.h): it compiles in every dtype and both
// accesses, for each epilogue mlp_block and the fusion tests use.
TEST_F(CudaNvrtcTest, MatmulEpilogueKernelsCompile) {
  for (DType dtype : kAllDTypes) {
    for (const char* tail : {"s = add(h, b)\ny = gelu(s, approximate=tanh)\noutput y\n", "y = relu(h)\noutput y\n",
                             "s = add(b, h)\ny = relu(s)\noutput y\n", "s = add(h, b)\noutput s\n"}) {
      const Graph g = testing::with_input_dtype(
          testing::parse_or_throw(
              std::string("input x: f32[64, 32]\ninput w: f32[32, 96]\ninput b: f32[96]\nh = matmul(x, w)\n") + tail),
          dtype);
      const FusionPlan plan = make_fused_plan(g);
      ASSERT_GE(plan.kernels[0].nodes.size(), 2u) << describe(plan);  // f32's GeLU is a kernel of its own
      const Node& last = plan.graph->node(plan.kernels[0].nodes.back());
      const std::string computes = last.op == Op::kAdd ? " + " : last.op == Op::kRelu ? "fj_relu(" : "fj_gelu_tanh(";
      for (CudaAccess access : {CudaAccess::kVector, CudaAccess::kScalar}) {
        const CudaMatmulEpilogue e = emit_cuda_matmul_epilogue(plan, 0, access);
        const CudaKernelSource& k = e.source;
        // The f32 product, the bias, the output: nodes of the plan's graph.
        std::vector<int32_t> tensors = {plan.kernels[0].nodes.front()};
        const MatmulEpilogue epilogue = matmul_epilogue(*plan.graph, plan.kernels[0]);
        if (epilogue.bias >= 0) tensors.push_back(epilogue.bias);
        tensors.push_back(plan.kernels[0].nodes.back());
        std::sort(tensors.begin(), tensors.begin() + (epilogue.bias >= 0 ? 2 : 1));
        std::vector<int32_t> got = e.tensors;
        std::sort(got.begin(), got.end() - 1);
        EXPECT_EQ(got, tensors);
        EXPECT_NE(k.source.find("const float* __restrict__"), std::string::npos) << "the product is read as f32";
        EXPECT_EQ(k.name, plan.kernels[0].name + "_epilogue" +
                              (k.access == CudaAccess::kScalar && k.has_vector_path ? "_scalar" : ""));
        // The product (and the bias) in, the epilogue's last value out: as
        // many tensors as the matmul kernel reads.
        EXPECT_EQ(k.params.size(), plan.kernels[0].reads.size());
        EXPECT_NE(k.source.find(computes), std::string::npos) << computes << "\n" << k.source;
        absl::StatusOr<CompiledKernel> c = compile_cuda(k.name, k.source, {.arch = "sm_90"}, nullptr);
        EXPECT_TRUE(c.ok()) << fmt::format("{} {}: {}", dtype, tail, status_text(c.status()));
      }
    }
  }
}

TEST_F(CudaNvrtcTest, FusedDemoKernelHasNoSpillsAndUses16ByteLoads) {
  const Graph g = testing::parse_file_or_throw(testing::example_graph_dir() / "bias_gelu_dropout_layernorm.fj");
  const CudaKernelSource k = emit_cuda(make_fused_plan(g))[0];
  for (const char* arch : {"sm_80", "sm_90"}) {
    CudaCompileOptions options;
    options.arch = arch;
    absl::StatusOr<CompiledKernel> c = compile_cuda(k.name, k.source, options, nullptr);
    ASSERT_TRUE(c.ok()) << status_text(c.status());
    EXPECT_GT(c->ptxas.registers, 0) << c->log;
    EXPECT_EQ(c->ptxas.spill_store_bytes, 0) << c->log;
    EXPECT_EQ(c->ptxas.spill_load_bytes, 0) << c->log;
    EXPECT_NE(c->ptx.find("ld.global.nc.v4"), std::string::npos) << "no 16-byte global loads in the PTX";
    EXPECT_NE(c->ptx.find("st.global.v4"), std::string::npos) << "no 16-byte global stores in the PTX";
  }
}

// Two savings in the instructions the GPU issues per element
// (bench/results/2026-12-01-gpu-instructions.md), checked in the PTX:
// NaN-propagating maximum/minimum is sm_80's one max.NaN / min.NaN, not a
// NaN test and a select around fmaxf; and a block reduction's second stage
// takes log2(warps) shuffles (a 512-thread block: 4), not 5, so each
// reduction of the demo's LayerNorm shuffles 5 + 4 times.
int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_F(CudaNvrtcTest, MaximumIsOneInstructionAndBlockReductionsShuffleLog2WarpsTimes) {
  const absl::StatusOr<Graph> g = parse_graph(
      "input x: f32[64, 4096]\ninput z: f32[64, 4096]\nm = maximum(x, z)\nn = minimum(x, z)\n"
      "r = max(m)\ny = sub(n, r)\noutput y\n");
  ASSERT_TRUE(g.ok()) << g.status();
  const CudaKernelSource k = emit_cuda(make_fused_plan(*g, fusion_options_for(gpu_device("h100"))))[0];
  ASSERT_EQ(k.variant, CudaVariant::kBlockPerRow);
  ASSERT_EQ(k.block_threads, 512);
  absl::StatusOr<CompiledKernel> c = compile_cuda(k.name, k.source, {.arch = "sm_80"}, nullptr);
  ASSERT_TRUE(c.ok()) << status_text(c.status());
  EXPECT_NE(c->ptx.find("max.NaN.f32"), std::string::npos);
  EXPECT_NE(c->ptx.find("min.NaN.f32"), std::string::npos);
  EXPECT_EQ(c->ptx.find("setp.nan"), std::string::npos) << "a NaN test is left in the PTX";
  // A T4 (sm_75) has no max.NaN: the same kernel spells the check out there.
  absl::StatusOr<CompiledKernel> t4 = compile_cuda(k.name, k.source, {.arch = "sm_75"}, nullptr);
  ASSERT_TRUE(t4.ok()) << status_text(t4.status());
  EXPECT_EQ(t4->ptx.find("max.NaN"), std::string::npos);

  const Graph demo = testing::parse_file_or_throw(testing::example_graph_dir() / "bias_gelu_dropout_layernorm.fj");
  const CudaKernelSource d = emit_cuda(make_fused_plan(demo, fusion_options_for(gpu_device("h100"))))[0];
  ASSERT_EQ(d.block_threads, 512);
  absl::StatusOr<CompiledKernel> dc = compile_cuda(d.name, d.source, {.arch = "sm_90"}, nullptr);
  ASSERT_TRUE(dc.ok()) << status_text(dc.status());
  EXPECT_EQ(count_of(dc->ptx, "shfl.sync.bfly"), 2 * (5 + 4));
}

// What the demo kernel computes once, before its row loop, stays there
// (bench/results/2026-12-03-gpu-loop-invariants.md): the Philox round keys
// are a parameter, not sums of the seed; each thread's shared-memory slots
// are computed once (fj_make_reduce_slots); the [N] vectors are widened
// once (fj_keep). In the PTX: no add of a Weyl constant (0x9E3779B9 is
// -1640531527 as PTX prints a 32-bit immediate).
TEST_F(CudaNvrtcTest, DemoKernelComputesItsInvariantsOnce) {
  const Graph demo = testing::parse_file_or_throw(testing::example_graph_dir() / "bias_gelu_dropout_layernorm.fj");
  const CudaKernelSource k = emit_cuda(make_fused_plan(demo))[0];
  absl::StatusOr<CompiledKernel> c = compile_cuda(k.name, k.source, {.arch = "sm_90"}, nullptr);
  ASSERT_TRUE(c.ok()) << status_text(c.status());
  EXPECT_EQ(c->ptx.find("-1640531527"), std::string::npos) << "a Philox key is added up in the kernel";
  EXPECT_NE(k.source.find("fj_make_reduce_slots<"), std::string::npos);
  EXPECT_EQ(count_of(without_helpers(k.source), "fj_keep("), 3);  // b, gamma, beta
}

// GeLU's clamp (|x| past 4 sqrt 2) is a select, so its polynomial runs
// unconditionally: NVVM once made it a branch around the polynomial in the
// demo kernel, 38 more instructions per 8 elements
// (bench/results/2026-12-01-gelu-16-bit.md). The demo kernel has no more
// branches in its PTX with its GeLU (bf16: the 16-bit helper) or in f32
// than with a negation in its place.
TEST_F(CudaNvrtcTest, GeluInTheDemoKernelIsBranchFree) {
  const Graph demo = testing::parse_file_or_throw(testing::example_graph_dir() / "bias_gelu_dropout_layernorm.fj");
  auto branches_of = [&](DType dtype, bool negation) {
    std::string text = print_graph(demo);
    const size_t gelu = text.find("gelu(");
    EXPECT_NE(gelu, std::string::npos) << text;
    if (negation && gelu != std::string::npos) text.replace(gelu, 5, "neg(");
    const Graph g = testing::with_input_dtype(testing::parse_or_throw(text), dtype);
    const CudaKernelSource k = emit_cuda(make_fused_plan(g))[0];
    absl::StatusOr<CompiledKernel> c = compile_cuda(k.name, k.source, {.arch = "sm_90"}, nullptr);
    EXPECT_TRUE(c.ok()) << status_text(c.status());
    return c.ok() ? count_of(c->ptx, "bra") : -1;
  };
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const int neg = branches_of(dtype, true);
    EXPECT_GT(neg, 0) << dtype_name(dtype);  // the row loop has its own
    EXPECT_EQ(branches_of(dtype, false), neg) << dtype_name(dtype);
  }
}

// The demo's fused plan at its GPU size, [16384, 4096] bf16.
FusionPlan demo_plan_at_gpu_size() {
  const absl::StatusOr<Graph> g = parse_graph(
      "input x: bf16[16384, 4096]\ninput b: bf16[4096]\ninput gamma: bf16[4096]\n"
      "input beta: bf16[4096]\nh = add(x, b)\ng = gelu(h)\nd = dropout(g, p=0.1, seed=42)\n"
      "y = layer_norm(d, gamma, beta)\noutput y\n");
  EXPECT_TRUE(g.ok()) << g.status();
  return make_fused_plan(*g, fusion_options_for(gpu_device("h200")));
}

// The demo kernel at its GPU size with FUSEJIT_ROW_PREFETCH=1 and 2: the
// loads of the next row (of the row after it) are issued during this row's
// math, as plain loads (fj_load_raw_early), for a few more registers, no
// spills and the same occupancy as without (that it is faster is for a
// GPU to show; the emulated GPU tests show it computes the same).
TEST_F(CudaNvrtcTest, RowPrefetchLoadsTheNextRowWithoutLosingOccupancy) {
  const FusionPlan plan = demo_plan_at_gpu_size();
  std::string last_ptx;
  const auto compile = [&](const std::optional<std::string>& prefetch, const std::optional<std::string>& threads) {
    testing::ScopedEnv p("FUSEJIT_ROW_PREFETCH", prefetch);
    testing::ScopedEnv t("FUSEJIT_ROW_BLOCK_THREADS", threads);
    const CudaKernelSource k = emit_cuda(plan)[0];
    absl::StatusOr<CompiledKernel> c = compile_cuda(k.name, k.source, {.arch = "sm_90"}, nullptr);
    EXPECT_TRUE(c.ok()) << status_text(c.status());
    if (c.ok()) last_ptx = c->ptx;
    return std::make_pair(k, c.ok() ? c->ptxas : PtxasReport{});
  };
  const auto blocks_per_sm = [](const CudaKernelSource& k, const PtxasReport& r) {
    return theoretical_occupancy(sm_limits(9, 0), k.block_threads, r.registers, r.shared_bytes).blocks_per_sm;
  };
  const auto [plain, plain_report] = compile(std::nullopt, std::nullopt);
  const auto [ahead, ahead_report] = compile("1", std::nullopt);
  EXPECT_EQ(plain.source.find("fj_next_row"), std::string::npos);
  EXPECT_EQ(ahead.prefetch_rows, 1);
  EXPECT_NE(ahead.source.find("const long long fj_next_row = row + fj_row_step;"), std::string::npos) << ahead.source;
  EXPECT_NE(ahead.source.find("fj_load_raw_early<fj_bf16, kVec>(p_x + (fj_next_row * 4096) + j, r_x_raw + c * "),
            std::string::npos)
      << ahead.source;
  // The early load is a plain (not .nc) load ahead of the row's first
  // barrier in the PTX: NVVM did not sink it to its use.
  const size_t early = last_ptx.find("ld.global.v4.u32");
  ASSERT_NE(early, std::string::npos) << last_ptx;
  EXPECT_LT(early, last_ptx.find("bar.sync")) << last_ptx;
  EXPECT_FALSE(ahead_report.has_spills());
  EXPECT_LE(ahead_report.registers, plain_report.registers + 10);
  EXPECT_EQ(blocks_per_sm(ahead, ahead_report), blocks_per_sm(plain, plain_report));
  // Two rows ahead: the row after the next is loaded into r_x_raw1, which
  // moves up into r_x_raw once this row's chunks are widened.
  const auto [two, two_report] = compile("2", std::nullopt);
  EXPECT_EQ(two.prefetch_rows, 2);
  EXPECT_NE(two.source.find("if ((row + fj_row_step) < rows)"), std::string::npos) << two.source;
  EXPECT_NE(two.source.find("fj_load_raw<fj_bf16, kVec>(p_x + ((row + fj_row_step) * 4096) + j, r_x_raw1 + c * "),
            std::string::npos)
      << two.source;
  EXPECT_NE(two.source.find("r_x_raw[c] = r_x_raw1[c];"), std::string::npos) << two.source;
  EXPECT_NE(two.source.find("const long long fj_next_row = row + 2 * fj_row_step;"), std::string::npos) << two.source;
  EXPECT_NE(two.source.find("fj_load_raw_early<fj_bf16, kVec>(p_x + (fj_next_row * 4096) + j, r_x_raw1 + c * "),
            std::string::npos)
      << two.source;
  EXPECT_FALSE(two_report.has_spills());
  EXPECT_EQ(blocks_per_sm(two, two_report), blocks_per_sm(plain, plain_report));
  // Other values force nothing.
  for (const char* ignored : {"3", "-1", "12", "yes"}) {
    EXPECT_EQ(compile(ignored, std::nullopt).first.source, plain.source) << ignored;
  }

  // The scalar variant (misaligned buffers) never prefetches.
  {
    testing::ScopedEnv p("FUSEJIT_ROW_PREFETCH", "2");
    EXPECT_EQ(emit_cuda(plan, CudaAccess::kScalar)[0].source.find("fj_next_row"), std::string::npos);
  }
  // Block sizes: a power of two from 32 to 1024 is taken, anything else ignored.
  const auto [wide, wide_report] = compile(std::nullopt, "256");
  EXPECT_EQ(wide.block_threads, 256);
  EXPECT_NE(wide.source.find("constexpr int kThreads = 256;"), std::string::npos);
  EXPECT_FALSE(wide_report.has_spills());
  for (const char* bad : {"100", "2048", "16", "abc", "512x"}) {
    testing::ScopedEnv t("FUSEJIT_ROW_BLOCK_THREADS", bad);
    EXPECT_EQ(emit_cuda(plan)[0].block_threads, plain.block_threads) << bad;
  }
}

// The launch shapes the CUDA runtime times for a block-per-row kernel
// (runtime/cuda_row_tuning.h): the default first, then half and twice its
// threads where each thread still has an access of the row, and the
// prefetching ones (one row ahead, two at the default threads); each is
// what the experiment variables would emit, compiles without spills and
// fits on an SM.
TEST_F(CudaNvrtcTest, BlockPerRowKernelsOfferLaunchShapesThatAllFit) {
  const FusionPlan plan = demo_plan_at_gpu_size();
  const std::vector<CudaRowShape> shapes = cuda_row_shape_candidates(plan, 0, CudaAccess::kVector);
  const std::vector<CudaRowShape> want = {{},
                                          {.block_threads = 256},
                                          {.prefetch_rows = 1},
                                          {.prefetch_rows = 2},
                                          {.block_threads = 256, .prefetch_rows = 1}};
  EXPECT_EQ(shapes, want);
  std::set<std::string> names;
  for (const CudaRowShape& shape : shapes) {
    const CudaKernelSource k = emit_cuda_kernel(plan, 0, CudaAccess::kVector, shape);
    names.insert(cuda_launch_shape(k));
    EXPECT_EQ(k.block_threads, shape.block_threads > 0 ? shape.block_threads : 512);
    EXPECT_EQ(k.prefetch_rows, shape.prefetch_rows);
    {
      testing::ScopedEnv t("FUSEJIT_ROW_BLOCK_THREADS",
                           shape.block_threads > 0 ? std::optional(std::to_string(shape.block_threads)) : std::nullopt);
      testing::ScopedEnv p("FUSEJIT_ROW_PREFETCH",
                           shape.prefetch_rows > 0 ? std::optional(std::to_string(shape.prefetch_rows)) : std::nullopt);
      EXPECT_EQ(emit_cuda(plan)[0].source, k.source) << cuda_launch_shape(k);
      // A shape fixed by the environment is not tuned.
      EXPECT_EQ(cuda_row_shape_candidates(plan, 0, CudaAccess::kVector).size(), shape == CudaRowShape{} ? 5u : 0u);
    }
    absl::StatusOr<CompiledKernel> c = compile_cuda(k.name, k.source, {.arch = "sm_90"}, nullptr);
    ASSERT_TRUE(c.ok()) << status_text(c.status());
    EXPECT_FALSE(c->ptxas.has_spills()) << cuda_launch_shape(k);
    EXPECT_GT(theoretical_occupancy(sm_limits(9, 0), k.block_threads, c->ptxas.registers, c->ptxas.shared_bytes)
                  .blocks_per_sm,
              0)
        << cuda_launch_shape(k);
  }
  // Not 1024 threads: 8 bf16 to an access, half of them would have none of a row of 4096.
  EXPECT_EQ(names, (std::set<std::string>{
                       "512 threads per row", "256 threads per row", "512 threads per row, next row prefetched",
                       "512 threads per row, next 2 rows prefetched", "256 threads per row, next row prefetched"}));
  // Misaligned buffers (the scalar variant) never prefetch.
  EXPECT_EQ(cuda_row_shape_candidates(plan, 0, CudaAccess::kScalar),
            (std::vector<CudaRowShape>{{}, {.block_threads = 256}, {.block_threads = 1024}}));
}

// A row kernel keeps kGpuRowKeptVectors [N] vectors in registers for all its
// rows and loads the others in every row, where first used: 20 fused
// bias-GeLU-dropout-LayerNorm layers, each with its own bias, gamma and
// beta, read 60. Keeping all of them took ptxas to 255 registers and 1920
// bytes of spill stores and loads together at rows of 1024, 5232 at the
// demo's 4096; loads
// left where the compiler could hoist them out of the row loop (no
// fj_opaque) took 154 registers at rows of 1024.
TEST_F(CudaNvrtcTest, RowKernelsKeepAFewVectorsAndLoadTheRestPerRow) {
  constexpr int kLayers = 20;
  for (int64_t n : {1024, 4096}) {
    SCOPED_TRACE(fmt::format("rows of {}", n));
    Graph g;
    Value h = g.input("x", DType::kBF16, {64, n});
    for (int i = 0; i < kLayers; ++i) {
      const Value b = g.input(fmt::format("b{}", i), DType::kBF16, {n});
      const Value gamma = g.input(fmt::format("g{}", i), DType::kBF16, {n});
      const Value beta = g.input(fmt::format("e{}", i), DType::kBF16, {n});
      h = layer_norm(dropout(gelu(h + b), 0.1, static_cast<uint64_t>(i)), gamma, beta);
    }
    g.output("y", h);
    const FusionPlan plan = make_fused_plan(g);
    ASSERT_EQ(plan.kernels[0].kind, KernelKind::kRow);
    const GpuRowVectors row_vectors = gpu_row_vectors(*plan.graph, plan.kernels[0]);
    const std::vector<int32_t>& kept = row_vectors.kept;
    ASSERT_EQ(kept.size(), static_cast<size_t>(kGpuRowKeptVectors));
    EXPECT_EQ(plan.graph->node(kept[0]).name, "b0");
    EXPECT_EQ(plan.graph->node(kept[3]).name, "b1");
    const CudaKernelSource k = emit_cuda(plan)[0];
    int vectors = 0;
    for (int32_t id : plan.kernels[0].reads) vectors += plan.graph->node(id).shape.rank() == 1 ? 1 : 0;
    ASSERT_GT(vectors, kGpuRowKeptVectors + 20);
    EXPECT_EQ(row_vectors.reloaded.size(), static_cast<size_t>(vectors - kGpuRowKeptVectors));
    // Each vector is loaded once: kept ones before the row loop, the others in it.
    const size_t loop = k.source.find("for (; row < rows; row += fj_row_step)");
    EXPECT_EQ(count_of(k.source, "fj_keep(r_"), kGpuRowKeptVectors);
    EXPECT_EQ(count_of(k.source, "fj_opaque(fj_at_"), vectors - kGpuRowKeptVectors);
    EXPECT_LT(k.source.find("fj_keep(r_b1[k])"), loop);
    EXPECT_GT(k.source.find("fj_opaque(fj_at_g1)"), loop);
    absl::StatusOr<CompiledKernel> c = compile_cuda(k.name, k.source, {.arch = "sm_90"}, nullptr);
    ASSERT_TRUE(c.ok()) << status_text(c.status());
    EXPECT_LT(c->ptxas.registers, 128) << c->log;
    // ptxas (CUDA 13) still spills 16 bytes each way at rows of 1024, with 72 registers.
    EXPECT_LE(c->ptxas.spill_bytes(), 16) << c->log;
  }
}

// The row count is an argument of every kernel and appears nowhere in its
// source, so a plan of the same graph for another batch size is a kernel
// cache hit (and kernels compiled for the examples' 8192 rows serve the
// GPU demo's 16384: scripts/prefill-gpu-cache.sh). Until a pointwise
// kernel needs 64-bit indices: 2^31 elements change its code.
TEST(CudaCodegen, TheRowCountIsNotInTheSource) {
  const auto graph = [](int64_t rows) {
    Graph g;
    const Value x = g.input("x", DType::kBF16, {rows, 4096});
    const Value h = gelu(x + g.input("b", DType::kBF16, {4096}));
    g.output("y", layer_norm(dropout(h, 0.1, 7), g.input("gamma", DType::kBF16, {4096}),
                             g.input("beta", DType::kBF16, {4096})));
    g.output("s", softmax(h));
    return g;
  };
  const Graph small = graph(8192), large = graph(16384), huge = graph(int64_t{1} << 19);
  for (bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "fused" : "unfused");
    const auto plan = [&](const Graph& g) { return fused ? make_fused_plan(g) : make_unfused_plan(g); };
    const std::vector<CudaKernelSource> a = emit_cuda(plan(small)), b = emit_cuda(plan(large)),
                                        c = emit_cuda(plan(huge));
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) {
      EXPECT_EQ(a[k].source, b[k].source) << a[k].name;
      // A row kernel's offsets are 64-bit at any size (row * kN, a long long row).
      if (plan(small).kernels[k].kind == KernelKind::kRow) {
        EXPECT_EQ(a[k].source, c[k].source) << a[k].name;
      } else {
        EXPECT_NE(a[k].source, c[k].source) << a[k].name << ": 2^31 elements need 64-bit indices";
      }
    }
    const FusionPlan cpu_small = plan(small), cpu_large = plan(large);
    for (size_t k = 0; k < cpu_small.kernels.size(); ++k) {
      if (cpu_small.kernels[k].kind != KernelKind::kRow) continue;  // a CPU pointwise loop's length is a constant
      EXPECT_EQ(emit_cpu_kernel(cpu_small, static_cast<int>(k)).source,
                emit_cpu_kernel(cpu_large, static_cast<int>(k)).source)
          << cpu_small.kernels[k].name;
    }
  }
}

TEST(CudaCodegen, OnlyBlockPerRowKernelsHaveLaunchShapesToChoose) {
  const auto candidates = [](const std::string& text, const FusionOptions& options = {}) {
    const absl::StatusOr<Graph> g = parse_graph(text);
    EXPECT_TRUE(g.ok()) << g.status();
    const FusionPlan plan = make_fused_plan(*g, options);
    return cuda_row_shape_candidates(plan, 0, CudaAccess::kVector).size();
  };
  // A warp per row, a pointwise kernel, a re-reading row kernel: one shape each.
  EXPECT_EQ(candidates("input x: f32[64, 512]\ny = softmax(x)\noutput y\n"), 0u);
  EXPECT_EQ(candidates("input x: f32[64, 4096]\ny = gelu(x)\noutput y\n"), 0u);
  EXPECT_EQ(candidates("input x: f32[64, 4096]\ny = softmax(x)\noutput y\n", {.persistent_row_limit = 1024}), 0u);
  // Rows of 16384 (1024 threads of 16): neither fewer threads nor more fit; prefetching one row does (two
  // rows ahead of 16 elements a thread would double the registers).
  EXPECT_EQ(candidates("input x: bf16[64, 16384]\ny = softmax(x)\noutput y\n"), 2u);
  // Rows of 1001 f32 (128 threads of 8; no 16-byte path, so no prefetch): 64 and 256 threads.
  EXPECT_EQ(candidates("input x: f32[64, 1001]\ny = softmax(x)\noutput y\n"), 3u);
}

}  // namespace
}  // namespace fusejit
