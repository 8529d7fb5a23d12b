// The CPU backend against the reference interpreter: every example graph
// and the fusion tests' graphs in every dtype, both plans; odd extents, rows
// beyond the persistent limit, NaN and infinity, misaligned buffers,
// poisoned outputs, dropout bit for bit; and the failures it must report.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include <absl/strings/match.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "codegen/cpu/cpu_emitter.h"
#include "codegen/expr.h"
#include "fusejit.h"
#include "ir/messages.h"
#include "runtime/file_io.h"
#include "runtime/host_compiler.h"
#include "runtime/kernel_cache.h"
#include "runtime/runtime_test_util.h"
#include "runtime/thread_pool.h"
#include "runtime/worker_scratch.h"
#include "support/example_graphs.h"
#include "support/graph_variants.h"
#include "support/loaded_plan_checks.h"
#include "support/run_command.h"

namespace fusejit {
namespace {

// The process's CPU backend. Without one (no host compiler), each test that
// asks fails with the reason (an exception gtest reports), not a null
// dereference.
Backend& cpu() {
  static std::unique_ptr<Backend> backend = [] {
    absl::StatusOr<std::unique_ptr<Backend>> b = make_cpu_backend();
    if (!b.ok()) throw std::runtime_error("no CPU backend: " + std::string(status_text(b.status())));
    return *std::move(b);
  }();
  return *backend;
}

// The outputs of `plan` run on the CPU with poisoned outputs (so that an
// element no kernel writes shows up).
absl::StatusOr<TensorMap> run_on_cpu(const FusionPlan& plan, const TensorMap& inputs,
                                     const LoadOptions& options = {}) {
  absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = cpu().load(plan, options);
  if (!loaded.ok()) return loaded.status();
  absl::Status s = (*loaded)->set_inputs(inputs);
  if (s.ok()) s = (*loaded)->poison_outputs();
  if (s.ok()) s = (*loaded)->run();
  if (!s.ok()) return s;
  return (*loaded)->outputs();
}

// Runs `plan` on the CPU and checks every output against the reference
// result of that plan.
void expect_matches_reference(const FusionPlan& plan, const TensorMap& inputs, const LoadOptions& options = {}) {
  SCOPED_TRACE(print_graph(*plan.graph) + describe(plan));
  absl::StatusOr<TensorMap> out = run_on_cpu(plan, inputs, options);
  ASSERT_TRUE(out.ok()) << out.status();
  absl::StatusOr<TensorMap> ref = interpret_plan(plan, inputs);
  ASSERT_TRUE(ref.ok()) << ref.status();
  for (int32_t id : plan.graph->outputs()) {
    const Node& n = plan.graph->node(id);
    const Comparison c = compare_tensors(out->at(n.name), ref->at(n.name));
    EXPECT_TRUE(c.within(n.dtype)) << n.name << ": relative error " << c.relative_error << " (tolerance "
                                   << tolerance(n.dtype) << ") " << c.mismatch;
  }
}

void expect_both_plans_match(const Graph& graph, const FusionOptions& options = {}, uint64_t seed = 5) {
  const TensorMap inputs = random_inputs(graph, seed);
  expect_matches_reference(make_unfused_plan(graph, options), inputs);
  expect_matches_reference(make_fused_plan(graph, options), inputs);
}

Graph parse(const std::string& text) {
  absl::StatusOr<Graph> g = parse_graph(text);
  EXPECT_TRUE(g.ok()) << g.status() << "\n" << text;
  return g.ok() ? *std::move(g) : Graph();
}

// The generated source of the plan's first kernel after the embedded
// helpers: the kernel's own code.
std::string kernel_body(const FusionPlan& plan) {
  EXPECT_EQ(plan.kernels.size(), 1u) << "the body of the first of several kernels";
  const std::string source = emit_cpu_kernel(plan, 0).source;
  return source.substr(source.find("end of fusejit CPU helpers"));
}

// A row kernel's working arrays come from the plan's per-thread scratch,
// taken at the first run and kept: rows of 100,000 floats run again use
// the same memory rather than allocating (and faulting in) 0.4 MB per array
// on every call. The generated code allocates nothing itself.
TEST(CpuBackend, RowKernelsKeepTheirWorkingMemoryBetweenRuns) {
  const Graph g = parse(
      "input x: f32[1, 100000]\ninput b: f32[100000]\nh = add(x, b)\ng = gelu(h)\ny = layer_norm(g)\noutput y");
  const FusionPlan plan = make_fused_plan(g);
  ASSERT_EQ(plan.kernels.size(), 1u);
  const CpuKernelSource code = emit_cpu_kernel(plan, 0);
  EXPECT_GE(code.scratch_floats, 100000) << "g, which LayerNorm's loops read again, is an array of the row";
  EXPECT_EQ(code.source.find("alloc("), std::string::npos) << code.source;
  absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = cpu().load(plan, {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->working_memory_bytes(), 0) << "nothing is taken before a run";
  ASSERT_TRUE((*loaded)->set_inputs(random_inputs(g, 3)).ok());
  ASSERT_TRUE((*loaded)->run().ok());
  const int64_t held = (*loaded)->working_memory_bytes();
  EXPECT_GE(held, code.scratch_floats * 4);
  ASSERT_TRUE((*loaded)->run().ok());
  EXPECT_EQ((*loaded)->working_memory_bytes(), held) << "the second run took new working memory";
  // The kernel computed the right thing in it.
  expect_matches_reference(plan, random_inputs(g, 4));
}

// A reduction of a value a loop computes accumulates inside that loop: no
// array of squares and no separate pass over it in LayerNorm; a read is
// still reduced over its array. Rows whose length is not a multiple of the
// 32 lanes get a tail loop; others do not. The results match the reference
// either way.
TEST(CpuBackend, RowReductionsRunInTheLoopThatComputesTheirOperand) {
  for (int64_t n : {int64_t{4096}, int64_t{333}}) {
    SCOPED_TRACE(n);
    const Graph g = parse(fmt::format("input x: f32[8, {0}]\ninput b: f32[{0}]\nh = add(x, b)\ny = layer_norm(h)\n"
                                      "m = max(x)\noutput y, m",
                                      n));
    const FusionPlan plan = make_fused_plan(g);
    ASSERT_EQ(plan.kernels.size(), 1u);
    const std::string body = kernel_body(plan);
    size_t reducing_loops = 0;
    for (size_t at = body.find("fj_lanes_combine("); at != std::string::npos;
         at = body.find("fj_lanes_combine(", at + 1)) {
      ++reducing_loops;
    }
    EXPECT_EQ(reducing_loops, 2u) << "two reducing loops\n" << body;
    EXPECT_NE(body.find("fj_reduce_span(r_x,"), std::string::npos) << "max(x) reduces the read's array\n" << body;
    EXPECT_EQ(body.find("a_square"), std::string::npos) << "the squares need no array\n" << body;
    EXPECT_EQ(body.find("c0 + j < kN") != std::string::npos, n % kCpuReduceLanes != 0) << body;
    expect_matches_reference(plan, random_inputs(g, 6));
  }
}

// A row kernel requests the next row of each read that changes from row to
// row a block at a time, in the row's last element loop, each block the
// columns it works on, when that row is short enough to wait in the cache
// (kCpuPrefetchRowBytes); [N] reads are loaded once per call and need
// none; rows of 100,000 floats stream by themselves. The last loop is
// written in blocks for it even when nothing else needs blocks (RMSNorm's
// loop after its one reduction, with a small output). Row lengths with and
// without a tail.
TEST(CpuBackend, RowKernelsRequestTheNextRowWhenItIsShort) {
  for (int64_t n : {int64_t{1024}, int64_t{1000}, int64_t{100000}}) {
    SCOPED_TRACE(n);
    const Graph g = parse(fmt::format("input x: f32[8, {0}]\ninput b: f32[{0}]\nh = add(x, b)\ny = layer_norm(h)\n"
                                      "output y",
                                      n));
    const FusionPlan plan = make_fused_plan(g);
    ASSERT_EQ(plan.kernels.size(), 1u);
    const std::string body = kernel_body(plan);
    const bool short_row = n * 4 <= kCpuPrefetchRowBytes;
    EXPECT_EQ(body.find(fmt::format("if (row + 1 < end) fj_prefetch_span(p_x + ((row + 1) * {}) + c0, 32);", n)) !=
                  std::string::npos,
              short_row)
        << body;
    EXPECT_EQ(body.find("fj_prefetch_span(p_b"), std::string::npos) << body;
    expect_matches_reference(plan, random_inputs(g, 12));
  }
  // Three reads, one of them bf16; requested in the last loop only, after
  // the variance's loop (the one before it).
  const Graph g = parse(
      "input x: f32[8, 1024]\ninput r: f32[8, 1024]\ninput s: bf16[8, 1024]\n"
      "h = add(x, r)\nk = add(h, s)\ny = rms_norm(k)\noutput y");
  const FusionPlan plan = make_fused_plan(g);
  ASSERT_EQ(plan.kernels.size(), 1u);
  const std::string body = kernel_body(plan);
  const size_t last_loop = body.rfind("for (; c0 + 32 <= kN; c0 += 32)");
  ASSERT_NE(last_loop, std::string::npos) << body;
  for (const char* read : {"p_x", "p_r", "p_s"}) {
    const std::string request =
        fmt::format("if (row + 1 < end) fj_prefetch_span({} + ((row + 1) * 1024) + c0, 32);", read);
    EXPECT_EQ(body.find(request), body.rfind(request)) << "requested once\n" << body;
    EXPECT_GT(body.find(request), last_loop) << request << "\n" << body;
  }
  expect_matches_reference(plan, random_inputs(g, 12));
}

// A pointwise kernel requests each read that streams through it
// kCpuPrefetchAheadBytes ahead of the tile it works on: reads of the
// iteration's shape, in a space collapsed to one row or not. A broadcast
// [N] row or [B, 1, N] block is read again by other rows and an [M, 1]
// column is one value per row, so none of them is requested. The last
// tiles request lines past the end of their tensors; the kernels still
// match the reference.
TEST(CpuBackend, PointwiseKernelsRequestStreamedReadsAhead) {
  const std::string ahead = std::to_string(kCpuPrefetchAheadBytes);
  {
    const Graph g = parse(
        "input x: bf16[2, 3, 1000]\ninput b: bf16[1000]\ninput s: f32[2, 3, 1]\n"
        "input t: f32[2, 1, 1000]\nh = add(x, b)\nk = mul(h, s)\nm = add(k, t)\ny = gelu(m)\n"
        "output y");
    const FusionPlan plan = make_fused_plan(g);
    ASSERT_EQ(plan.kernels.size(), 1u);
    const std::string body = kernel_body(plan);
    EXPECT_NE(body.find("fj_prefetch_span(p_x + i, n, " + ahead + ");"), std::string::npos) << body;
    for (const char* read : {"p_b", "p_s", "p_t"}) {
      EXPECT_EQ(body.find(fmt::format("fj_prefetch_span({}", read)), std::string::npos) << read << "\n" << body;
    }
    expect_matches_reference(plan, random_inputs(g, 21));
  }
  {
    const Graph g = parse("input x: f32[7, 333]\ninput r: f16[7, 333]\nz = add(x, r)\noutput z");
    const FusionPlan plan = make_fused_plan(g);
    ASSERT_EQ(plan.kernels.size(), 1u);
    const std::string body = kernel_body(plan);
    for (const char* read : {"p_x", "p_r"}) {
      EXPECT_NE(body.find(fmt::format("fj_prefetch_span({} + i, n, {});", read, ahead)), std::string::npos) << body;
    }
    expect_matches_reference(plan, random_inputs(g, 22));
  }
}

// An f32 row kernel reads its rows where they lie; a 16-bit one converts
// each row into an f32 array first. Both match the reference, on aligned
// and on misaligned buffers.
TEST(CpuBackend, Float32RowsAreReadInPlace) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Graph g = parse(fmt::format("input x: {0}[6, 333]\ninput g: {0}[333]\ny = layer_norm(x, g)\noutput y",
                                      dtype_name(dtype)));
    const FusionPlan plan = make_fused_plan(g);
    ASSERT_EQ(plan.kernels.size(), 1u);
    const std::string body = kernel_body(plan);
    const bool f32 = dtype == DType::kF32;
    EXPECT_EQ(body.find("const float* __restrict r_x = p_x + (row * 333);") != std::string::npos, f32) << body;
    EXPECT_EQ(body.find("const float* __restrict r_g = p_g;") != std::string::npos, f32) << body;
    EXPECT_EQ(body.find("fj_load_span(p_x") == std::string::npos, f32) << body;
    EXPECT_EQ(emit_cpu_kernel(plan, 0).scratch_floats, (f32 ? 0 : 2) * 336)
        << "no array for x - mean, computed again; bf16 x and g converted";
    expect_matches_reference(plan, random_inputs(g, 14));
    expect_matches_reference(plan, random_inputs(g, 15), LoadOptions{.misalign_bytes = 4});
  }
}

// A cheap value with at most one operand that varies along the loop (a
// read, an array, a dropout result, a value itself computed again), which
// a later loop needs, is computed again there instead of kept in an array
// (LayerNorm's x - mean; a bias add after a dropout; a chain of two).
// A costlier one (exp), one of two such operands (x + b: two loads cost
// more than an array's one), or one that dropout takes whole anyway, keeps
// its array. Every case matches the reference.
TEST(CpuBackend, LaterLoopsComputeCheapValuesAgain) {
  struct Case {
    const char* graph;
    std::vector<std::string> recomputed;  // the values computed again
    const char* array;                    // the array kept, or nullptr
  };
  const Case cases[] = {
      {"input x: f32[6, 256]\ny = layer_norm(x)\noutput y", {"const float v_sub_"}, nullptr},
      {"input x: bf16[6, 256]\nh = mul(x, 0.5)\nd = dropout(x, p=0.25, seed=3)\ny = mul(d, h)\noutput y",
       {"const float v_h = "},
       nullptr},
      {"input x: bf16[6, 256]\ninput b: bf16[256]\nh = add(x, b)\nd = dropout(x, p=0.25, seed=3)\n"
       "y = mul(d, h)\noutput y",
       {},
       "a_h"},
      {"input x: f32[6, 256]\nh = exp(x)\nd = dropout(x, p=0.25, seed=3)\ny = mul(d, h)\noutput y", {}, "a_h"},
      {"input x: f32[6, 256]\ninput b: f32[256]\nh = add(x, b)\nd = dropout(h, p=0.25, seed=3)\n"
       "y = mul(d, h)\noutput y",
       {},
       "a_h"},
      // h, an output stored in its own loop, kept in an array; h - mean
      // computed again from it in the last loop (written twice: 32-lane
      // blocks and a tail, as 333 is no multiple of 32).
      {"input x: f32[6, 333]\ninput b: f32[333]\nh = add(x, b)\ny = layer_norm(h)\nz = add(y, h)\n"
       "output h, y, z",
       {"const float v_sub_"},
       "a_h"},
      // A chain: h = 2x and h - mean, both computed again from x.
      {"input x: f32[6, 333]\nh = mul(x, 2.0)\ny = layer_norm(h)\noutput y",
       {"const float v_h = ", "const float v_sub_"},
       nullptr},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.graph);
    const Graph g = parse(c.graph);
    const FusionPlan plan = make_fused_plan(g);
    ASSERT_EQ(plan.kernels.size(), 1u);
    const std::string body = kernel_body(plan);
    // Every line computed again computes one of the expected values, and
    // each of them is computed again somewhere.
    std::set<std::string> seen;
    for (size_t at = body.find("// computed again"); at != std::string::npos;
         at = body.find("// computed again", at + 1)) {
      const size_t line = body.rfind('\n', at) + 1;
      const std::string text = body.substr(line, at - line);
      const auto expected = std::find_if(c.recomputed.begin(), c.recomputed.end(),
                                         [&](const std::string& r) { return text.find(r) != std::string::npos; });
      EXPECT_NE(expected, c.recomputed.end()) << text << "\n" << body;
      if (expected != c.recomputed.end()) seen.insert(*expected);
    }
    EXPECT_EQ(seen.size(), c.recomputed.size()) << body;
    // An array is written element by element in its loop.
    if (c.array != nullptr) EXPECT_NE(body.find(fmt::format("{}[c] = ", c.array)), std::string::npos) << body;
    if (c.array == nullptr) EXPECT_EQ(body.find("a_h[c] = "), std::string::npos) << body;
    expect_matches_reference(plan, random_inputs(g, 31));
  }
}

// Pointwise tiles read their spans where they lie (dense, broadcast along
// rows; a per-row operand is one value): f32 as the floats they are, a
// 16-bit span widened where the loop uses it. Only a 16-bit read that
// dropout takes as a whole is converted into an f32 array. All checked
// against the reference with odd row lengths and misaligned buffers.
TEST(CpuBackend, PointwiseTilesAreReadWhereTheyLie) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::string type(storage_type(dtype));
    const Graph g = parse(fmt::format("input x: {0}[5, 333]\ninput b: {0}[333]\ninput s: {0}[5, 1]\n"
                                      "h = add(x, b)\ny = mul(h, s)\noutput y",
                                      dtype_name(dtype)));
    const FusionPlan plan = make_fused_plan(g);
    const std::string body = kernel_body(plan);
    EXPECT_NE(body.find("const " + type + "* __restrict r_x = p_x + i;"), std::string::npos) << body;
    EXPECT_NE(body.find("const " + type + "* __restrict r_b = p_b + col;"), std::string::npos) << body;
    const bool f32 = dtype == DType::kF32;
    EXPECT_NE(body.find(f32 ? "((r_x[c]) + " : "((fj_to_float(r_x[c])) + "), std::string::npos) << body;
    EXPECT_EQ(body.find("fj_load_span("), std::string::npos) << body;
    EXPECT_NE(body.find("const float r_s = fj_to_float(p_s[(row)]);"), std::string::npos) << body;
    expect_matches_reference(plan, random_inputs(g, 16));
    expect_matches_reference(plan, random_inputs(g, 17), LoadOptions{.misalign_bytes = 4});

    // Dropout of a read takes its span whole (fj_dropout_span): an f32
    // span where it lies, a 16-bit one converted first, and the loop's
    // element-wise use of the same read (mul) takes the converted array;
    // the other read (r) is widened in the loop.
    const Graph d = parse(fmt::format("input x: {0}[3, 1001]\ninput r: {0}[3, 1001]\n"
                                      "k = dropout(x, p=0.25, seed=5)\ny = add(k, r)\nz = mul(y, x)\noutput z",
                                      dtype_name(dtype)));
    const FusionPlan dropout_plan = make_fused_plan(d);
    const std::string dropout_body = kernel_body(dropout_plan);
    EXPECT_EQ(dropout_body.find("fj_load_span(p_x + i, r_x, n);") != std::string::npos, !f32) << dropout_body;
    EXPECT_EQ(dropout_body.find("fj_load_span(p_r"), std::string::npos) << dropout_body;
    EXPECT_NE(dropout_body.find(f32 ? " + (r_r[c]))" : " + (fj_to_float(r_r[c])))"), std::string::npos) << dropout_body;
    EXPECT_NE(dropout_body.find(" * (r_x[c]))"), std::string::npos) << dropout_body;
    expect_matches_reference(dropout_plan, random_inputs(d, 18),
                             LoadOptions{.misalign_bytes = static_cast<int>(dtype_size(dtype))});
  }
  // Every operand dense: the space is one long row of tiles.
  const Graph dense = parse("input x: f32[7, 1001]\ninput r: f32[7, 1001]\ny = add(x, r)\noutput y");
  const FusionPlan plan = make_fused_plan(dense);
  EXPECT_NE(kernel_body(plan).find("const float* __restrict r_r = p_r + i;"), std::string::npos) << kernel_body(plan);
  expect_matches_reference(plan, random_inputs(dense, 18), LoadOptions{.misalign_bytes = 4});
}

// Kernels index typed pointers, so an offset that splits an element is
// refused when the plan is loaded (as the CUDA backend refuses it), naming
// the tensor; one element's size is accepted.
TEST(CpuBackend, AnOffsetThatSplitsAnElementIsRefused) {
  const Graph g = parse("input x: f32[4, 8]\ny = neg(x)\noutput y");
  absl::StatusOr<std::unique_ptr<LoadedPlan>> bad = cpu().load(make_fused_plan(g), {.misalign_bytes = 2});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("misalign_bytes 2 would misalign the 4-byte elements of"), std::string::npos)
      << bad.status();
  EXPECT_TRUE(cpu().load(make_fused_plan(g), {.misalign_bytes = 4}).ok());
}

// Outputs of 16 MiB and more are written with streaming stores: by row
// kernels a block of 32 elements at a time from the loop that computes
// them (fj_stream_block), by pointwise ones a tile at a time from its
// array (fj_stream_span). Every element lands, from both kinds of kernel,
// for rows whose starts fall at every 4-byte offset within the 32-byte
// stores (blocks that are not aligned take plain stores), with the buffers
// aligned and misaligned, and the tails of 4099 elements too; in f32, bf16
// and f16 (each converted by its own vector instructions).
TEST(CpuBackend, StreamedOutputsMatchTheReference) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const int64_t rows = dtype == DType::kF32 ? 1024 : 2048;
    const Graph g = parse(fmt::format("input x: {0}[{1}, 4099]\ninput res: {0}[{1}, 4099]\nr = add(x, res)\n"
                                      "y = layer_norm(r)\noutput r, y",
                                      dtype_name(dtype), rows));
    ASSERT_GE(g.node(g.outputs()[0]).shape.numel() * dtype_size(dtype), kCpuStreamingStoreBytes);
    for (const FusionPlan& plan : {make_fused_plan(g), make_unfused_plan(g)}) {
      for (size_t k = 0; k < plan.kernels.size(); ++k) {
        const bool row = plan.kernels[k].kind == KernelKind::kRow;
        EXPECT_NE(emit_cpu_kernel(plan, k).source.find(row ? "fj_stream_block(p_" : "fj_stream_span(p_"),
                  std::string::npos)
            << k;
      }
      expect_matches_reference(plan, random_inputs(g, 19));
      expect_matches_reference(plan, random_inputs(g, 20), LoadOptions{.misalign_bytes = 4});
    }
  }
}

// The same bits as a reduction over an array (fj_reduce_span): graph A
// reduces a value its loop computes (the reduction joins the loop), graph B
// reduces the same values given as an input (fj_reduce_span over the read's
// array). Row lengths with and without a tail of the 32 lanes.
TEST(CpuBackend, ReductionsInTheirLoopGiveTheBitsOfASeparatePass) {
  for (int64_t n : {int64_t{15}, int64_t{31}, int64_t{32}, int64_t{33}, int64_t{333}, int64_t{4096}}) {
    SCOPED_TRACE(n);
    const Graph a = parse(fmt::format("input x: f32[3, {0}]\ninput b: f32[{0}]\nh = add(x, b)\ne = exp(h)\n"
                                      "s = sum(e)\nm = mean(e)\nmx = max(e)\noutput e, s, m, mx",
                                      n));
    const FusionPlan fused = make_fused_plan(a);
    ASSERT_EQ(fused.kernels.size(), 1u);
    absl::StatusOr<TensorMap> out_a = run_on_cpu(fused, random_inputs(a, 8));
    ASSERT_TRUE(out_a.ok()) << out_a.status();
    const Graph b = parse(fmt::format("input e: f32[3, {0}]\ns = sum(e)\nm = mean(e)\nmx = max(e)\noutput s, m, mx", n));
    absl::StatusOr<TensorMap> out_b = run_on_cpu(make_fused_plan(b), {{"e", out_a->at("e")}});
    ASSERT_TRUE(out_b.ok()) << out_b.status();
    for (const char* name : {"s", "m", "mx"}) {
      EXPECT_EQ(out_a->at(name).values, out_b->at(name).values) << name;
    }
  }
}

// A 16-bit value that is stored and also used in its loop is rounded once,
// to the bits it is stored as (not rounded, then converted again for the
// store). The stored tensor has the reference's values exactly (infinity
// where the sum overflows; NaN where the reference has NaN, payload not
// compared), in a pointwise and in a row kernel. A node named like the
// bits' local (h_bits) does not clash with it.
TEST(CpuBackend, StoredSixteenBitValuesAreRoundedOnceToTheirBits) {
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    const std::string t(dtype_name(dtype));
    for (const char* use : {"g = gelu(h)", "g = layer_norm(h)"}) {
      SCOPED_TRACE(t + ": " + use);
      const Graph g = parse(fmt::format(
          "input x: {0}[4, 1000]\ninput b: {0}[4, 1000]\nh = add(x, b)\n{1}\nh_bits = mul(h, 0.5)\n"
          "output h, g, h_bits",
          t, use));
      const FusionPlan plan = make_fused_plan(g);
      ASSERT_EQ(plan.kernels.size(), 1u);
      const std::string body = kernel_body(plan);
      const std::string to_bits = dtype == DType::kF16 ? "fj_float_to_half_bits" : "fj_float_to_bf16_bits";
      EXPECT_NE(body.find("const uint16_t u_h = " + to_bits + "("), std::string::npos) << body;
      EXPECT_EQ(body.find("fj_round_"), std::string::npos) << "h is rounded twice\n" << body;
      TensorMap inputs = random_inputs(g, 9);
      std::vector<double>& x = inputs.at("x").values;
      const double largest = dtype == DType::kF16 ? 65504.0 : 3.3895313892515355e38;
      x[3] = largest;  // + b[3] overflows to infinity (a row of LayerNorm's NaN)
      inputs.at("b").values[3] = largest / 2;
      x[1000 + 7] = std::numeric_limits<double>::quiet_NaN();
      x[2000 + 9] = -std::numeric_limits<double>::infinity();
      expect_matches_reference(plan, inputs);
      absl::StatusOr<TensorMap> out = run_on_cpu(plan, inputs);
      ASSERT_TRUE(out.ok()) << out.status();
      absl::StatusOr<TensorMap> ref = interpret_plan(plan, inputs);
      ASSERT_TRUE(ref.ok()) << ref.status();
      const std::vector<double>& got = out->at("h").values;
      const std::vector<double>& want = ref->at("h").values;
      EXPECT_TRUE(std::isinf(want[3]) && std::isnan(want[1007]));
      for (size_t i = 0; i < want.size(); ++i) {
        const bool same = std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i];
        ASSERT_TRUE(same) << "h[" << i << "] = " << got[i] << ", the reference has " << want[i];
      }
    }
  }
}

// Separate plans may run on separate threads (runtime/backend.h): their
// kernels take the process's thread pool in turn. Two threads that each ran
// their own plan 50 times used to deadlock in the pool; each result must
// also equal the one run alone (bit for bit: the same kernels, chunks and
// data). A hang is reported and ends the test binary rather than ctest's
// timeout.
TEST(CpuBackend, SeparatePlansRunOnSeparateThreads) {
  const Graph g = parse(
      "input x: bf16[512, 2048]\ninput b: bf16[2048]\n"
      "h = add(x, b)\ng = gelu(h)\nd = dropout(g, p=0.1, seed=3)\n"
      "y = layer_norm(d)\noutput y\n");
  const FusionPlan plan = make_fused_plan(g);
  const TensorMap inputs = random_inputs(g, 9);
  absl::StatusOr<TensorMap> alone = run_on_cpu(plan, inputs);
  ASSERT_TRUE(alone.ok()) << alone.status();
  auto work = [&]() -> std::string {
    absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = cpu().load(plan);
    if (!loaded.ok()) return std::string(loaded.status().message());
    if (absl::Status s = (*loaded)->set_inputs(inputs); !s.ok()) return std::string(s.message());
    for (int i = 0; i < 50; ++i) {
      if (absl::Status s = (*loaded)->run(); !s.ok()) return std::string(s.message());
    }
    absl::StatusOr<TensorMap> out = (*loaded)->outputs();
    if (!out.ok()) return std::string(out.status().message());
    return out->at("y").values == alone->at("y").values ? "" : "results differ from the plan run alone";
  };
  std::future<std::string> first = std::async(std::launch::async, work);
  std::future<std::string> second = std::async(std::launch::async, work);
  for (std::future<std::string>* f : {&first, &second}) {
    if (f->wait_for(std::chrono::minutes(2)) != std::future_status::ready) {
      std::fprintf(stderr, "CpuBackend.SeparatePlansRunOnSeparateThreads: still running after 2 minutes (deadlock)\n");
      std::_Exit(1);
    }
    EXPECT_EQ(f->get(), "");
  }
}

// A child of fork() has only the thread that forked, not the pool's
// workers: its first kernel waited for them forever, and its exit() joined
// them forever (found by a new-user trial). The child runs the parent's
// loaded plan again, and a new one, on its own pool, and exits normally;
// the parent gives it a minute.
TEST(CpuBackend, AForkedChildRunsPlansAndExits) {
  const Graph g = parse("input x: f32[256, 1024]\ny = softmax(x)\noutput y\n");
  const FusionPlan plan = make_fused_plan(g);
  const TensorMap inputs = random_inputs(g, 4);
  absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = cpu().load(plan);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE((*loaded)->set_inputs(inputs).ok());
  ASSERT_TRUE((*loaded)->run().ok());
  const TensorMap parent = *(*loaded)->outputs();
  if (ThreadPool::global().size() < 2) GTEST_SKIP() << "a pool of one thread has no workers for a child to lose";
  std::fflush(nullptr);
  const pid_t child = fork();
  ASSERT_GE(child, 0) << std::strerror(errno);
  if (child == 0) {
    bool same = false;
    try {  // nothing may return into gtest, which would run the rest of the suite here too
      const bool again = (*loaded)->run().ok() && (*loaded)->outputs()->at("y").values == parent.at("y").values;
      absl::StatusOr<TensorMap> fresh = run_on_cpu(plan, inputs);
      same = again && fresh.ok() && fresh->at("y").values == parent.at("y").values;
    } catch (...) {
      std::_Exit(4);
    }
    std::exit(same ? 0 : 3);  // exit(), not _exit(): static destructors run
  }
  int status = 0;
  pid_t done = 0;
  for (int waited_ms = 0; (done = waitpid(child, &status, WNOHANG)) == 0 && waited_ms < 60000; waited_ms += 20) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (done == 0) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    FAIL() << "the forked child still ran after a minute (a hang in the thread pool)";
  }
  ASSERT_TRUE(WIFEXITED(status)) << "the child ended by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3: the child's results differ from the parent's, or its runs failed; 4: "
                                       "they threw";
}

TEST(WorkerScratch, GrowsOnlyAndIsAligned) {
  WorkerScratch scratch(ThreadPool::global().size());
  EXPECT_EQ(scratch.total_bytes(), 0);
  float* a = scratch.get(1000);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  EXPECT_EQ(scratch.get(10), a) << "a smaller request reuses the buffer";
  EXPECT_EQ(scratch.get(1000), a);
  float* b = scratch.get(1 << 20);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 64, 0u);
  EXPECT_GE(scratch.total_bytes(), int64_t{4} << 20);
  b[(1 << 20) - 1] = 1.0f;  // all of it is usable
  EXPECT_EQ(scratch.get(std::numeric_limits<int64_t>::max()), nullptr) << "a size that overflows is refused";
}

TEST(CpuBackend, EveryExampleInEveryDtype) {
  for (const auto& file : testing::example_graph_files()) {
    SCOPED_TRACE(file.string());
    const Graph g = testing::parse_file_or_throw(file);
    for (DType dtype : kAllDTypes) expect_both_plans_match(testing::with_input_dtype(testing::shrink(g, 300), dtype));
  }
}

TEST(CpuBackend, DemoExampleAtFullSize) {
  absl::StatusOr<Graph> g = parse_graph_file(std::string(FUSEJIT_SOURCE_DIR) +
                                             "/examples/graphs/bias_gelu_dropout_layernorm.fj");
  ASSERT_TRUE(g.ok()) << g.status();
  const TensorMap inputs = random_inputs(*g, 3);
  expect_matches_reference(make_fused_plan(*g), inputs);
}

TEST(CpuBackend, GraphsOfManyShapes) {
  for (const std::string& text : testing::varied_graph_texts()) {
    const Graph g = parse(text);
    expect_both_plans_match(g);
    for (DType dtype : {DType::kF16, DType::kBF16}) {
      const Graph typed = testing::with_input_dtype(g, dtype);
      expect_matches_reference(make_fused_plan(typed), random_inputs(typed, 6));
    }
  }
}

std::string chain_with_columns(int64_t cols) {
  return fmt::format(
      "input x: f32[7, {0}]\ninput b: f32[{0}]\ninput gamma: f32[{0}]\ninput beta: f32[{0}]\n"
      "h = add(x, b)\ng = gelu(h)\nd = dropout(g, p=0.25, seed=9)\n"
      "y = layer_norm(d, gamma, beta, eps=1e-5)\ns = softmax(h)\nr = rms_norm(x, gamma, eps=1e-6)\n"
      "output y, s, r, g\n",
      cols);
}

TEST(CpuBackend, OddColumnCounts) {
  for (int64_t cols : {1, 3, 1000, 4097}) {
    SCOPED_TRACE(cols);
    for (DType dtype : kAllDTypes) expect_both_plans_match(testing::with_input_dtype(parse(chain_with_columns(cols)), dtype));
  }
}

TEST(CpuBackend, RowsBeyondThePersistentLimit) {
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Graph g = testing::with_input_dtype(parse(chain_with_columns(4097)), dtype);
    FusionOptions options;
    options.persistent_row_limit = 1024;
    const FusionPlan fused = make_fused_plan(g, options);
    bool reread = false;
    for (const Kernel& k : fused.kernels) reread |= k.row_strategy == RowStrategy::kReread;
    ASSERT_TRUE(reread) << describe(fused);
    expect_matches_reference(fused, random_inputs(g, 8));
  }
}

TEST(CpuBackend, MisalignedBuffers) {
  for (DType dtype : kAllDTypes) {
    const Graph g = testing::with_input_dtype(parse(chain_with_columns(1000)), dtype);
    expect_matches_reference(make_fused_plan(g), random_inputs(g, 2), LoadOptions{.misalign_bytes = 4});
  }
}

TEST(CpuBackend, NanAndInfinityPropagateAsInTheReference) {
  const Graph g = parse(
      "input x: f32[4, 40]\n"
      "e = exp(x)\nl = log(x)\nt = tanh(x)\nf = erf(x)\ns = sigmoid(x)\nq = silu(x)\nr = relu(x)\n"
      "m = maximum(x, 0.5)\nn = minimum(x, 0.5)\ng = gelu(x)\nk = gelu(x, approximate=tanh)\n"
      "a = sqrt(x)\nw = rsqrt(x)\nsm = softmax(x)\nmx = max(x)\n"
      "output e, l, t, f, s, q, r, m, n, g, k, a, w, sm, mx\n");
  TensorMap inputs = random_inputs(g, 4);
  std::vector<double>& v = inputs.at("x").values;
  const double inf = std::numeric_limits<double>::infinity();
  const double specials[] = {std::numeric_limits<double>::quiet_NaN(), inf, -inf, 0.0, -0.0, 100.0, -100.0};
  // Rows 0 and 1 hold specials among ordinary values; rows 2 and 3 stay finite,
  // so the softmax and max of those rows check ordinary values next to them.
  for (size_t i = 0; i < std::size(specials); ++i) {
    v[i * 5] = specials[i];
    v[40 + i * 3] = specials[(i + 1) % std::size(specials)];
  }
  expect_both_plans_match(g);  // random inputs: ordinary values everywhere
  expect_matches_reference(make_unfused_plan(g), inputs);
  expect_matches_reference(make_fused_plan(g), inputs);
}

// A row whose sum (or sum of squares) exceeds float32's range gives
// infinity in the kernel's float32 accumulator, as it does in PyTorch's:
// judged against float32 arithmetic, whose reference rounds each mean's
// sum to float32 (InterpretOptions::float32_intermediates), so the
// finite-in-float64 answer is not demanded, and nothing else is excused.
TEST(CpuBackend, ASumBeyondFloat32IsJudgedByFloat32Arithmetic) {
  struct Case {
    const char* graph;
    double value;  // every element of the overflowing row
  };
  for (const Case& c : {Case{"input x: f32[2, 4096]\ny = mean(x)\noutput y\n", 1e35},
                        Case{"input x: f32[2, 4096]\ny = layer_norm(x)\noutput y\n", 1e35},
                        Case{"input x: f32[2, 64]\ny = rms_norm(x)\noutput y\n", 1e19}}) {
    SCOPED_TRACE(c.graph);
    const Graph g = parse(c.graph);
    TensorMap inputs = random_inputs(g, 8);
    std::vector<double>& x = inputs.at("x").values;
    std::fill(x.begin(), x.begin() + static_cast<int64_t>(x.size() / 2),
              static_cast<float>(c.value));  // row 0; row 1 stays N(0, 1)
    absl::StatusOr<TensorMap> f64 = interpret(g, inputs);
    absl::StatusOr<TensorMap> f32 = interpret(g, inputs, {.float32_intermediates = true});
    ASSERT_TRUE(f64.ok()) << f64.status();
    ASSERT_TRUE(f32.ok()) << f32.status();
    EXPECT_TRUE(std::isfinite(f64->at("y").values[0])) << "float64 holds the sum";
    EXPECT_FALSE(compare_tensors(f32->at("y"), f64->at("y")).within(DType::kF32)) << "float32's does not";
    for (const FusionPlan& plan : {make_unfused_plan(g), make_fused_plan(g)}) {
      absl::StatusOr<TensorMap> out = run_on_cpu(plan, inputs);
      ASSERT_TRUE(out.ok()) << out.status();
      absl::StatusOr<std::string> verdict = first_wrong_output(plan, inputs, *out);
      ASSERT_TRUE(verdict.ok()) << verdict.status();
      EXPECT_EQ(*verdict, "") << plan.label;
      // The well-scaled row is still held to float64.
      TensorMap wrong = *out;
      const size_t last = wrong.at("y").values.size() - 1;
      wrong.at("y").values[last] += 1e-2 * std::fabs(wrong.at("y").values[last]) + 1e-2;
      verdict = first_wrong_output(plan, inputs, wrong);
      ASSERT_TRUE(verdict.ok()) << verdict.status();
      EXPECT_NE(*verdict, "") << plan.label;
    }
  }
}

// Literals that float32 rounds to another kind of exponent (an even
// integer, an integer) give the kernels' result in the reference as well:
// the two used to differ in sign, or NaN against finite values.
TEST(CpuBackend, LiteralsRoundedToFloat32MatchTheReference) {
  const Graph g = parse("input x: f32[2, 40]\ne = pow(x, 16777217)\nw = pow(x, 3.0000001)\noutput e, w\n");
  TensorMap inputs = random_inputs(g, 6);
  for (double& v : inputs.at("x").values) v = -std::fabs(v);  // negative bases: pow's sign and NaN cases
  expect_matches_reference(make_unfused_plan(g), inputs);
  expect_matches_reference(make_fused_plan(g), inputs);
}

// A plan that cannot be run is an error naming why, not a crash (a null
// graph) or outputs no kernel wrote (zeros, as if computed).
TEST(CpuBackend, UnrunnablePlansAreRefused) {
  const FusionPlan empty;
  absl::StatusOr<TensorMap> none = run_plan(cpu(), empty, {});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(none.status().message(), "has no graph")) << none.status();
  EXPECT_EQ(interpret_plan(empty, {}).status().code(), absl::StatusCode::kInvalidArgument);

  const Graph g = parse("input x: f32[4, 8]\ny = exp(x)\noutput y\n");
  FusionPlan gutted = make_fused_plan(g);
  gutted.kernels.clear();
  absl::StatusOr<TensorMap> zeros = run_plan(cpu(), gutted, random_inputs(g, 1));
  EXPECT_EQ(zeros.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(zeros.status().message(), "no kernel writes the graph's output y")) << zeros.status();

  FusionPlan foreign = make_fused_plan(g);
  foreign.kernels[0].nodes.push_back(99);
  EXPECT_TRUE(absl::StrContains(run_plan(cpu(), foreign, random_inputs(g, 1)).status().message(),
                                "names node 99, which its graph of 2 nodes lacks"));
}

TEST(CpuBackend, DropoutMaskIsTheReferenceMaskBitForBit) {
  const Graph g = parse("input x: f32[37, 1001]\ny = dropout(x, p=0.5, seed=123)\noutput y\n");
  const TensorMap inputs = random_inputs(g, 1);
  absl::StatusOr<TensorMap> out = run_plan(cpu(), make_fused_plan(g), inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  absl::StatusOr<TensorMap> ref = interpret(g, inputs);
  ASSERT_TRUE(ref.ok()) << ref.status();
  const std::vector<double>& a = out->at("y").values;
  const std::vector<double>& b = ref->at("y").values;
  int64_t dropped = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i], b[i]) << "element " << i;  // x * 2 exactly, or 0
    dropped += b[i] == 0;
  }
  EXPECT_GT(dropped, static_cast<int64_t>(a.size()) / 3);
  EXPECT_LT(dropped, static_cast<int64_t>(a.size()) * 2 / 3);
}

// The blocked GEMM (codegen/cpu/matmul.cpp) at shapes around its blocks:
// rows, columns and depth below, at and above one block and not multiples
// of the micro-kernel's tile, rows split unevenly between threads, several
// row blocks in one thread's share (400 rows on two threads), in every
// dtype and mixed, against the float64 reference on random data.
TEST(CpuBackend, MatmulAtShapesAroundItsBlocks) {
  struct Shape {
    int64_t m, k, n;
  };
  for (const Shape& s : {Shape{1, 1, 1}, Shape{5, 7, 3}, Shape{7, 257, 33}, Shape{133, 64, 257}, Shape{97, 513, 40},
                         Shape{264, 300, 512}, Shape{400, 70, 40}}) {
    for (const char* types : {"f32 f32", "bf16 bf16", "f16 f16", "f32 bf16"}) {
      const std::string a = std::string(types).substr(0, std::string(types).find(' '));
      const std::string b = std::string(types).substr(std::string(types).find(' ') + 1);
      SCOPED_TRACE(fmt::format("[{}, {}] {} x [{}, {}] {}", s.m, s.k, a, s.k, s.n, b));
      expect_both_plans_match(parse(fmt::format("input x: {}[{}, {}]\ninput w: {}[{}, {}]\ny = matmul(x, w)\noutput y\n",
                                                a, s.m, s.k, b, s.k, s.n)));
    }
  }
}

// Row kernels of one row length and different row counts share one
// source (the count is an argument): each runs its own rows. Found by a
// probe: both ran the first one's, leaving a larger second one's rows
// unwritten (NaN) or overrunning a smaller one's buffers (heap corruption).
TEST(CpuBackend, KernelsSharingCodeRunTheirOwnSizes) {
  for (const char* text :
       {"input a: f32[8, 48]\ninput c: f32[3, 48]\ns1 = softmax(a)\ns2 = softmax(c)\noutput s1, s2\n",
        "input a: f32[3, 48]\ninput c: f32[8, 48]\ns1 = softmax(a)\ns2 = softmax(c)\noutput s1, s2\n",
        "input a: bf16[7, 600]\ninput c: bf16[30, 600]\ns1 = layer_norm(a)\ns2 = rms_norm(c)\ns3 = layer_norm(c)\n"
        "output s1, s2, s3\n"}) {
    SCOPED_TRACE(text);
    expect_both_plans_match(parse(text));
  }
}

// The GEMM's epilogues (fusion/matmul_epilogue.h): bias, relu, bias then
// relu, bias then a tanh GeLU, applied to each block of C before it is
// rounded, at shapes that cross the blocks (the bias indexed by the block's
// columns), in every dtype, against the reference on random data; and NaN
// or infinity in the bias reach their column.
TEST(CpuBackend, MatmulEpiloguesMatchTheReference) {
  struct Shape {
    int64_t m, k, n;
  };
  const char* epilogues[] = {"s = add(h, b)\noutput s\n", "y = relu(h)\noutput y\n",
                             "s = add(b, h)\ny = relu(s)\noutput y\n",
                             "s = add(h, b)\ny = gelu(s, approximate=tanh)\noutput y\n"};
  for (const Shape& s : {Shape{5, 7, 3}, Shape{133, 64, 257}, Shape{97, 300, 520}}) {
    for (const char* dtype : {"f32", "bf16", "f16"}) {
      for (const char* epilogue : epilogues) {
        SCOPED_TRACE(fmt::format("[{}, {}] x [{}, {}] {}: {}", s.m, s.k, s.k, s.n, dtype, epilogue));
        const Graph g =
            parse(fmt::format("input x: {0}[{1}, {2}]\ninput w: {0}[{2}, {3}]\ninput b: {0}[{3}]\n"
                              "h = matmul(x, w)\n{4}",
                              dtype, s.m, s.k, s.n, epilogue));
        // In f32 the tanh GeLU is a kernel of its own (fusion/matmul_epilogue.h).
        const size_t kernels =
            std::string_view(dtype) == "f32" && std::string_view(epilogue).find("gelu") != std::string_view::npos ? 2
                                                                                                                  : 1;
        ASSERT_EQ(make_fused_plan(g).kernels.size(), kernels) << describe(make_fused_plan(g));
        expect_both_plans_match(g);
      }
    }
  }
  const Graph g = parse(
      "input x: f32[9, 40]\ninput w: f32[40, 300]\ninput b: f32[300]\nh = matmul(x, w)\n"
      "y = add(h, b)\noutput y\n");
  TensorMap inputs = random_inputs(g, 4);
  inputs.at("b").values[3] = std::numeric_limits<double>::quiet_NaN();
  inputs.at("b").values[290] = -std::numeric_limits<double>::infinity();
  absl::StatusOr<TensorMap> out = run_on_cpu(make_fused_plan(g), inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  for (int64_t i = 0; i < 9; ++i) {
    for (int64_t j = 0; j < 300; ++j) {
      const double v = out->at("y").values[i * 300 + j];
      ASSERT_EQ(std::isnan(v), j == 3) << i << ", " << j;
      ASSERT_EQ(v == -std::numeric_limits<double>::infinity(), j == 290) << i << ", " << j;
    }
  }
}

// y = matmul(x, w), x [m, k] and w [k, n] of `dtype`.
Graph matmul_graph(std::string_view dtype, int64_t m, int64_t k, int64_t n) {
  return parse(
      fmt::format("input x: {0}[{1}, {2}]\ninput w: {0}[{2}, {3}]\ny = matmul(x, w)\noutput y\n", dtype, m, k, n));
}

// NaN and infinity in A or B reach exactly the outputs whose row or column
// they are in, as in the reference: the zeros the GEMM pads its blocks with
// (and, for two bf16 operands, the zero that completes the last pair of an
// odd depth) never meet them in an element that is kept.
TEST(CpuBackend, MatmulPropagatesNanAndInfinityToTheirRowsAndColumns) {
  for (const char* dtype : {"f32", "bf16"}) {
    SCOPED_TRACE(dtype);
    const Graph g = matmul_graph(dtype, 13, 301, 70);
    TensorMap inputs = random_inputs(g, 9);
    inputs.at("x").values[2 * 301 + 17] = std::numeric_limits<double>::quiet_NaN();  // row 2
    inputs.at("w").values[300 * 70 + 69] = std::numeric_limits<double>::infinity();  // column 69, the last k
    const FusionPlan plan = make_fused_plan(g);
    absl::StatusOr<TensorMap> out = run_on_cpu(plan, inputs);
    ASSERT_TRUE(out.ok()) << out.status();
    absl::StatusOr<TensorMap> ref = interpret_plan(plan, inputs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    int64_t nonfinite = 0;
    for (int64_t i = 0; i < 13; ++i) {
      for (int64_t j = 0; j < 70; ++j) {
        const double got = out->at("y").values[i * 70 + j], want = ref->at("y").values[i * 70 + j];
        ASSERT_EQ(std::isnan(got), std::isnan(want)) << i << ", " << j;
        ASSERT_EQ(std::isinf(got), std::isinf(want)) << i << ", " << j;
        if (std::isinf(want)) EXPECT_EQ(std::signbit(got), std::signbit(want)) << i << ", " << j;
        nonfinite += !std::isfinite(want);
      }
    }
    EXPECT_EQ(nonfinite, 70 + 12);  // row 2 whole, and column 69 in the other rows
  }
}

// Values that the bf16 GEMM's dot-product instruction would get wrong (it
// reads subnormal inputs as zero and flushes subnormal sums; found by a
// probe), which codegen/cpu/matmul.cpp keeps as IEEE arithmetic does, in
// each dtype and at a shape of several blocks:
// - every x subnormal times large weights: 2^-130 x 2^100, summed, is a
//   normal number (the f32 path, many subnormals);
// - normal values whose products are subnormal: 2^-70 x 2^-70 (values
//   tiny for these weights, so many that the f32 path runs);
// - a few subnormals among small normal values, beside large values of the
//   other operand, in x and in w (the dot products, then each tiny value's
//   products added apart);
// - a subnormal and an infinity in one block (0 x inf would be NaN).
TEST(CpuBackend, MatmulKeepsSubnormalOperands) {
  for (const char* dtype : {"bf16", "f32", "f16"}) {
    SCOPED_TRACE(dtype);
    const Graph g = matmul_graph(dtype, 140, 301, 300);
    const FusionPlan plan = make_fused_plan(g);
    auto expect_matches = [&](const TensorMap& inputs, const char* what) {
      SCOPED_TRACE(what);
      expect_matches_reference(plan, inputs);
    };
    const bool bf16 = std::string_view(dtype) == "bf16", f16 = std::string_view(dtype) == "f16";
    // f16 has no 2^-130 or 2^100: its own subnormals (2^-20) and large values.
    const double tiny = f16 ? std::ldexp(1.0, -20) : std::ldexp(1.0, -130);
    const double large = f16 ? 1.0 : std::ldexp(1.0, 100);
    TensorMap all = random_inputs(g, 3);
    for (double& v : all.at("x").values) v = tiny;
    for (double& v : all.at("w").values) v = large;
    expect_matches(all, "every x subnormal");
    // (bf16 only: f32 results this small are subnormal, precise to a few
    // bits whatever computes them, and f16 has no such exponents.)
    if (bf16) {
      TensorMap small = random_inputs(g, 4);
      for (double& v : small.at("x").values) v = std::ldexp(v, -70);
      for (double& v : small.at("w").values) v = std::ldexp(v, -70);
      expect_matches(small, "subnormal products");
    }
    TensorMap few = random_inputs(g, 5);
    // Rows of small normal values (f16 has none as small: zeros), and
    // subnormals whose products with w's large rows outweigh them all, each
    // of them, so that one left out is a wrong result: at both ends of the
    // bf16 path's groups of 32 in the first k block of 256, and in every
    // fourth row at the second block's (of 45: one group, then 13 values
    // searched one by one; more rows would make it take the f32 path). At
    // 2^-60 the small values are not tiny themselves (a row of tiny values
    // takes the f32 path too), only the subnormals are.
    const std::vector<int64_t> first_block = {7, 31, 32, 63, 255}, second_block = {256, 287, 288, 300};
    for (int64_t i = 0; i < 140; ++i) {
      for (int64_t k = 0; k < 301; ++k) {
        double& v = few.at("x").values[i * 301 + k];
        v = f16 ? 0.0 : std::ldexp(v, -60);
      }
      for (int64_t k : first_block) few.at("x").values[i * 301 + k] = tiny;
      for (int64_t k : second_block) few.at("x").values[i * 301 + k] = i % 4 == 0 ? tiny : 0.0;
    }
    for (const std::vector<int64_t>* block : {&first_block, &second_block}) {
      for (int64_t k : *block) {
        for (int64_t j = 0; j < 300; ++j) few.at("w").values[k * 300 + j] = large;
      }
    }
    expect_matches(few, "a few subnormals of x");
    // The same down a column: w's values small, and its row 200 zeros but
    // for a subnormal at [200, 5], which meets x's large column 200.
    TensorMap column = random_inputs(g, 7);
    for (double& v : column.at("w").values) v = f16 ? 0.0 : std::ldexp(v, -100);
    for (int64_t j = 0; j < 300; ++j) column.at("w").values[200 * 300 + j] = 0.0;
    column.at("w").values[200 * 300 + 5] = tiny;
    for (int64_t i = 0; i < 140; ++i) column.at("x").values[i * 301 + 200] = large;
    expect_matches(column, "a subnormal of w");
    TensorMap infinite = random_inputs(g, 6);
    infinite.at("x").values[3 * 301 + 10] = tiny;
    infinite.at("w").values[10 * 300 + 4] = std::numeric_limits<double>::infinity();
    absl::StatusOr<TensorMap> out = run_on_cpu(plan, infinite);
    ASSERT_TRUE(out.ok()) << out.status();
    absl::StatusOr<TensorMap> ref = interpret_plan(plan, infinite);
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_EQ(out->at("y").values[3 * 300 + 4], ref->at("y").values[3 * 300 + 4]);
    EXPECT_TRUE(std::isinf(ref->at("y").values[3 * 300 + 4]));
  }
}

// Found by a review of the bf16 dot-product path, each where the f32 path
// was right: sums flushed to zero where every product is small though the
// block's largest values are not (they never meet); a subnormal sum left by
// one k block and dropped by the next; and a pair added k + 1 first, which
// overflowed M + M - M (M the largest bf16). The remaining values are zeros.
TEST(CpuBackend, MatmulSumsAsIeeeArithmeticDoes) {
  const double m = 3.3895313892515355e38;
  struct Case {
    const char* what;
    int64_t rows, depth, cols;
    std::vector<std::pair<int64_t, double>> x, w;  // (flat index, value)
  };
  const Case cases[] = {
      {"small products, large maxima",
       4,
       2,
       3,
       {{0, 1.0}, {3, std::ldexp(1.0, -70)}, {5, std::ldexp(1.0, -71)}},
       {{3, std::ldexp(1.0, -60)}, {4, std::ldexp(1.0, -62)}}},
      {"a subnormal sum across k blocks",
       2,
       512,
       2,
       {{512, std::ldexp(1.0, -70)}, {513, std::ldexp(1.0, -70)}, {256, 1.0}},
       {{0, std::ldexp(1.0, -60)}, {3, std::ldexp(1.0, -58)}, {515, 1.0}}},
      // A second column of ordinary values: an earlier design computed a
      // block that was all infinite or tiny again by the f32 path, which
      // hid the order.
      {"M + M - M in increasing k",
       1,
       4,
       2,
       {{0, 1.0}, {1, 1.0}, {2, 1.0}, {3, 1.0}},
       {{0, m}, {4, -m}, {6, m}, {1, 1.0}}},
  };
  for (const char* dtype : {"bf16", "f32"}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(fmt::format("{}: {}", dtype, c.what));
      const Graph g = matmul_graph(dtype, c.rows, c.depth, c.cols);
      TensorMap inputs = random_inputs(g, 1);
      for (double& v : inputs.at("x").values) v = 0;
      for (double& v : inputs.at("w").values) v = 0;
      for (const auto& [i, v] : c.x) inputs.at("x").values[i] = v;
      for (const auto& [i, v] : c.w) inputs.at("w").values[i] = v;
      expect_matches_reference(make_fused_plan(g), inputs);
    }
  }
}

// Each element as IEEE arithmetic has it, however large the others in its
// block of C are (a review found small normal results flushed to zero beside
// large ones, and which rows depended on the thread count; the norm-wise
// comparison hid it, a log of the result showed -inf):
// - x's row 1 is 2^-64, w is 2^-64: each product 2^-128, the sum 2^-120
//   (tiny values by the thousand: the f32 path);
// - a few tiny values in x's row 1 and w's first rows, beside ones: row 1
//   is 4 x 2^-128 = 2^-126 (the dot products, then each tiny value's
//   products, a product of two tiny values counted once);
// - x's row 1 2^-120, normal, and w 2^-10: the products 2^-130, so x's
//   values are tiny for these weights (ta = 142 - tb), and row 1 is 2^-122.
TEST(CpuBackend, MatmulKeepsEachSmallResultBesideLargeOnes) {
  struct Case {
    const char* what;
    std::function<double(int64_t k)> x1, w;  // x's row 1 and w's rows (x's row 0 is ones)
    double y0, y1;
  };
  const double t = std::ldexp(1.0, -64);
  const Case cases[] = {
      {"all of w tiny", [&](int64_t) { return t; }, [&](int64_t) { return t; }, 256 * t, std::ldexp(1.0, -120)},
      // 252 + 4 x 2^-64 rounds to 252.
      {"a few tiny values", [&](int64_t k) { return k < 4 ? t : 0.0; }, [&](int64_t k) { return k < 4 ? t : 1.0; },
       252.0, std::ldexp(1.0, -126)},
      {"small x beside small weights", [](int64_t) { return std::ldexp(1.0, -120); },
       [](int64_t) { return std::ldexp(1.0, -10); }, 0.25, std::ldexp(1.0, -122)},
  };
  for (const char* dtype : {"bf16", "f32"}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(fmt::format("{}: {}", dtype, c.what));
      const Graph g = matmul_graph(dtype, 2, 256, 40);
      TensorMap inputs = random_inputs(g, 1);
      std::vector<double>& x = inputs.at("x").values;
      std::vector<double>& w = inputs.at("w").values;
      for (int64_t k = 0; k < 256; ++k) {
        x[k] = 1.0;
        x[256 + k] = c.x1(k);
        for (int64_t j = 0; j < 40; ++j) w[k * 40 + j] = c.w(k);
      }
      absl::StatusOr<TensorMap> out = run_on_cpu(make_fused_plan(g), inputs);
      ASSERT_TRUE(out.ok()) << out.status();
      for (int64_t j = 0; j < 40; ++j) {
        ASSERT_EQ(out->at("y").values[j], c.y0) << j;
        ASSERT_EQ(out->at("y").values[40 + j], c.y1) << j;
      }
    }
  }
}

// A k block that the bf16 path sends to the f32 path (here for B's tiny
// values, 2^-100, in its second k block) adds in increasing k like the rest:
// 1.5 x 2^127 - 1.5 x 2^127 - 1.5 x 2^127 is finite. Found by a review,
// where the fallback's sums were kept apart and added last, and
// -1.5 x 2^127 - 1.5 x 2^127 overflowed to -inf.
TEST(CpuBackend, MatmulFallbackKeepsTheOrderOfItsSums) {
  for (const char* dtype : {"bf16", "f32"}) {
    SCOPED_TRACE(dtype);
    const Graph g = matmul_graph(dtype, 1, 512, 40);
    TensorMap inputs = random_inputs(g, 1);
    std::vector<double>& x = inputs.at("x").values;
    std::vector<double>& w = inputs.at("w").values;
    std::fill(x.begin(), x.end(), 0.0);
    std::fill(w.begin(), w.end(), 0.0);
    x[0] = 1.5 * std::ldexp(1.0, 63);
    x[256] = x[257] = -1.5 * std::ldexp(1.0, 63);
    w[0] = w[256 * 40] = w[257 * 40] = std::ldexp(1.0, 64);
    for (int64_t k = 256; k < 512; ++k) {
      for (int64_t j = 1; j < 40; ++j) w[k * 40 + j] = std::ldexp(1.0, -100);
    }
    absl::StatusOr<TensorMap> out = run_on_cpu(make_fused_plan(g), inputs);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->at("y").values[0], -1.5 * std::ldexp(1.0, 127));
    // A subnormal sum the fallback leaves (2^-30 x 2^-100) survives the
    // dot products of the next k block, which would read it as zero: it
    // is kept apart (C keeps its multiple of 2^-126, here 0).
    const Graph g2 = matmul_graph(dtype, 2, 512, 40);
    TensorMap in2 = random_inputs(g2, 1);
    std::vector<double>& x2 = in2.at("x").values;
    std::vector<double>& w2 = in2.at("w").values;
    std::fill(x2.begin(), x2.end(), 0.0);
    for (int64_t k = 0; k < 512; ++k) {
      for (int64_t j = 0; j < 40; ++j) w2[k * 40 + j] = k < 256 ? std::ldexp(1.0, -100) : 1.0;
    }
    x2[512] = std::ldexp(1.0, -30);  // x[1, 0]
    x2[256] = 1.0;                   // x[0, 256]: the second k block's dot products run
    out = run_on_cpu(make_fused_plan(g2), in2);
    ASSERT_TRUE(out.ok()) << out.status();
    for (int64_t j = 0; j < 40; ++j) {
      ASSERT_EQ(out->at("y").values[j], 1.0) << j;
      ASSERT_EQ(out->at("y").values[40 + j], std::ldexp(1.0, -130)) << j;
    }
  }
}

#if defined(__x86_64__)
// A GEMM of two bf16 operands multiplies pairs with vdpbf16ps exactly where
// the kernels are compiled for AVX512-BF16 (FJ_BF16_DOT, fj_kernel.h); the
// f32 path, elsewhere, is checked by NarrowerVectorPathsMatchTheReference.
TEST(CpuBackend, Bf16GemmUsesDotProductsWhereTheCpuHasThem) {
  const std::string source = std::string(cpu_helpers_source()) +
                             "extern \"C\" int dot(void* const* args, long long, long long, float*) {\n"
                             "  *static_cast<int*>(args[0]) = FJ_BF16_DOT;\n  return 0;\n}\n";
  absl::StatusOr<std::unique_ptr<HostModule>> m = compile_host_module("dot", source, {"dot"}, nullptr);
  ASSERT_TRUE(m.ok()) << m.status();
  int dot = -1;
  void* args[] = {&dot};
  ASSERT_EQ((*m)->entry("dot")(args, 0, 1, nullptr), 0);
  EXPECT_EQ(dot, __builtin_cpu_supports("avx512bf16") ? 1 : 0);
  const Graph g = parse("input x: bf16[8, 16]\ninput w: bf16[16, 8]\ny = matmul(x, w)\noutput y\n");
  const std::vector<CpuKernelSource> kernels = emit_cpu(make_fused_plan(g));
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_NE(kernels[0].source.find("#if FJ_BF16_DOT"), std::string::npos);
  EXPECT_NE(kernels[0].source.find("fj_dot_bf16_pairs(c50, a + k * kMR + 5, b0)"), std::string::npos);
}
#endif

// Found by `fusejit fuzz`: a matmul nothing uses is still a kernel of the
// unfused plan, with nothing to write.
TEST(CpuBackend, AMatmulWhoseResultIsUnusedRuns) {
  const Graph g = parse("input x: f32[3, 64]\ninput w: bf16[64, 4]\nm = matmul(x, w)\ny = sigmoid(x)\noutput y\n");
  expect_both_plans_match(g);
}

// Found by `fusejit fuzz`: dropout of a tensor of one element (its operand
// is a single value, not an array), and dropout of a per-row value inside a
// row kernel, which draws at the row's index, not at its first element's.
TEST(CpuBackend, DropoutOfSingleValues) {
  for (const char* text : {"input x: f16[1]\ny = dropout(x, p=0.1, seed=94)\noutput y\n",
                           "input x: f32[1, 1]\ny = dropout(x, p=0.5, seed=448)\noutput y\n",
                           "input x: bf16[2, 5, 5, 17]\ns = sum(x)\ny = dropout(s, p=0.1, seed=54)\noutput y\n",
                           "input x: f32[64, 8]\nm = max(x)\nd = dropout(m, p=0.5, seed=7)\ny = sub(x, d)\noutput y, d\n"}) {
    expect_both_plans_match(parse(text));
  }
}

// A kernel takes at most FusionOptions::max_kernel_tensors tensors: 600
// inputs added up are split into kernels that each fit, and still compute
// the sum.
TEST(CpuBackend, GraphWiderThanOneKernelsParameters) {
  std::string text;
  for (int i = 0; i < 600; ++i) text += fmt::format("input x{}: f32[3, 5]\n", i);
  std::string prev = "x0";
  for (int i = 1; i < 600; ++i) {
    text += fmt::format("s{} = add({}, x{})\n", i, prev, i);
    prev = fmt::format("s{}", i);
  }
  text += "output " + prev + "\n";
  const Graph g = parse(text);
  const FusionPlan fused = make_fused_plan(g);
  ASSERT_EQ(fused.kernels.size(), 3u) << describe(fused);
  for (const Kernel& k : fused.kernels) {
    EXPECT_LE(static_cast<int>(k.reads.size() + k.writes.size()), FusionOptions{}.max_kernel_tensors) << k.name;
  }
  expect_matches_reference(fused, random_inputs(g, 3));
}

// Found by the fuzzer: LayerNorm of a row near 1e25 squares its deviations
// to infinity in float32, and the kernel returns zeros where float64 gives
// the normalised row. That is float32 arithmetic, not a wrong kernel: the
// outputs equal the reference computed with float32 intermediates, and the
// rows that do not overflow still match the float64 reference.
TEST(CpuBackend, Float32OverflowInsideLayerNormMatchesFloat32Arithmetic) {
  const Graph g = parse("input x: f32[3, 256]\ny = layer_norm(x)\noutput y\n");
  TensorMap inputs = random_inputs(g, 9);
  for (int64_t c = 0; c < 256; ++c) inputs.at("x").values[256 + c] = static_cast<float>(inputs.at("x").values[256 + c] * 1e25);
  for (const FusionPlan& plan : {make_unfused_plan(g), make_fused_plan(g)}) {
    absl::StatusOr<TensorMap> out = run_on_cpu(plan, inputs);
    ASSERT_TRUE(out.ok()) << out.status();
    absl::StatusOr<TensorMap> exact = interpret_plan(plan, inputs);
    ASSERT_TRUE(exact.ok());
    EXPECT_FALSE(compare_tensors(out->at("y"), exact->at("y")).within(DType::kF32)) << plan.label;
    absl::StatusOr<std::string> verdict = first_wrong_output(plan, inputs, *out);
    ASSERT_TRUE(verdict.ok()) << verdict.status();
    EXPECT_EQ(*verdict, "") << plan.label;
  }
}

TEST(CpuBackend, WrongInputsAreRejectedByName) {
  const Graph g = parse("input x: f32[4, 8]\ny = exp(x)\noutput y\n");
  absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = cpu().load(make_fused_plan(g));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  TensorMap inputs = random_inputs(g, 1);
  inputs.at("x").shape = Shape({8, 4});
  absl::Status s = (*loaded)->set_inputs(inputs);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(status_text(s)).find("input 'x'"), std::string::npos) << s;
  EXPECT_FALSE((*loaded)->set_inputs({}).ok());

  // Refused inputs change nothing: the inputs and results of before stay
  // (a library user's bad call does not throw away a good run).
  const TensorMap good = random_inputs(g, 2);
  ASSERT_TRUE((*loaded)->set_inputs(good).ok());
  ASSERT_TRUE((*loaded)->run().ok());
  absl::StatusOr<TensorMap> before = (*loaded)->outputs();
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ((*loaded)->set_inputs(inputs).code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<TensorMap> after = (*loaded)->outputs();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->at("y").values, before->at("y").values);
  ASSERT_TRUE((*loaded)->run().ok()) << "the good inputs are still there to run on";
}

// Tensors in their storage form go in and come out as they are, with the
// HostTensor path's results bit for bit.
TEST(CpuBackend, RawInputsAndOutputsGiveTheHostTensorResults) { testing::expect_raw_io_matches_host_tensors(cpu()); }

// A training step's new dropout seed, set on the loaded plan, draws the
// mask that seed draws in the reference, without compiling again.
TEST(CpuBackend, ANewDropoutSeedDrawsThatSeedsMask) { testing::expect_new_dropout_seed_draws_that_seeds_mask(cpu()); }

// A LoadedPlan refuses calls out of order, with the reason, instead of
// running on inputs nobody gave or returning outputs no kernel wrote for
// them (the checks live in LoadedPlan itself, so every backend has them).
TEST(CpuBackend, CallsOutOfOrderAreRefusedWithTheReason) {
  const Graph g = parse("input x: f32[4, 8]\ny = exp(x)\nz = softmax(y)\noutput z\n");
  const FusionPlan plan = make_unfused_plan(g);
  ASSERT_EQ(plan.kernels.size(), 2u);
  absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = cpu().load(plan);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  LoadedPlan& p = **loaded;
  auto expect_refused = [](const absl::Status& s, absl::StatusCode code, std::string_view says) {
    EXPECT_EQ(s.code(), code) << s;
    EXPECT_NE(std::string(status_text(s)).find(says), std::string::npos) << s;
  };

  expect_refused(p.run_kernel(0), absl::StatusCode::kFailedPrecondition, "run_kernel(0) before set_inputs()");
  expect_refused(p.time_kernel(1).status(), absl::StatusCode::kFailedPrecondition, "time_kernel(1) before set_inputs()");
  expect_refused(p.run(), absl::StatusCode::kFailedPrecondition, "run() before set_inputs()");
  expect_refused(p.outputs().status(), absl::StatusCode::kFailedPrecondition, "outputs() before set_inputs()");

  const TensorMap inputs = random_inputs(g, 3);
  ASSERT_TRUE(p.set_inputs(inputs).ok());
  expect_refused(p.run_kernel(2), absl::StatusCode::kOutOfRange, "run_kernel(2): the plan has 2 kernels");
  expect_refused(p.time_kernel(size_t(-1)).status(), absl::StatusCode::kOutOfRange, "the plan has 2 kernels");
  expect_refused(p.measure_kernel_bytes(7).status(), absl::StatusCode::kOutOfRange, "the plan has 2 kernels");
  expect_refused(p.outputs().status(), absl::StatusCode::kFailedPrecondition, "before kernel 0 (k0_exp) ran");
  ASSERT_TRUE(p.run_kernel(0).ok());
  expect_refused(p.outputs().status(), absl::StatusCode::kFailedPrecondition, "before kernel 1 (k1_softmax) ran");
  ASSERT_TRUE(p.time_kernel(1).ok());
  absl::StatusOr<TensorMap> first = p.outputs();
  ASSERT_TRUE(first.ok()) << first.status();

  // New inputs make the old outputs stale until the plan runs on them, and
  // the old intermediates too: kernel 1 would read exp of the old inputs.
  const TensorMap other = random_inputs(g, 4);
  ASSERT_TRUE(p.set_inputs(other).ok());
  expect_refused(p.outputs().status(), absl::StatusCode::kFailedPrecondition,
                 "outputs() before kernel 0 (k0_exp) ran after the last set_inputs(): run() the plan");
  for (absl::Status s : {p.run_kernel(1), p.time_kernel(1).status(), p.measure_kernel_bytes(1).status()}) {
    expect_refused(s, absl::StatusCode::kFailedPrecondition,
                   "before kernel 0 (k0_exp), which writes y for kernel 1 (k1_softmax), ran after the last "
                   "set_inputs(): run the plan's kernels in order");
  }
  ASSERT_TRUE(p.run_kernel(0).ok());
  ASSERT_TRUE(p.run_kernel(1).ok());
  absl::StatusOr<TensorMap> on_other = p.outputs();
  ASSERT_TRUE(on_other.ok()) << on_other.status();
  absl::StatusOr<TensorMap> other_ref = interpret_plan(plan, other);
  ASSERT_TRUE(other_ref.ok()) << other_ref.status();
  EXPECT_TRUE(compare_tensors(on_other->at("z"), other_ref->at("z")).within(DType::kF32));

  // Poison overwrites the intermediates too: kernel 1 waits for kernel 0
  // again, while outputs() shows the poison (as poison_outputs() says).
  ASSERT_TRUE(p.poison_outputs().ok());
  EXPECT_TRUE(p.outputs().ok());
  expect_refused(p.run_kernel(1), absl::StatusCode::kFailedPrecondition, "ran after the last poison_outputs()");

  // The errors name the call that made the results stale (they blamed
  // set_inputs() after a set_input() or a new seed; a new-user trial).
  std::vector<float> x_values(static_cast<size_t>(g.node(*g.find("x")).shape.numel()), 0.5f);
  ASSERT_TRUE(p.set_input("x", x_values.data(), x_values.size() * sizeof(float)).ok());
  expect_refused(p.run_kernel(1), absl::StatusCode::kFailedPrecondition, "ran after the last set_input(\"x\")");
  expect_refused(p.outputs().status(), absl::StatusCode::kFailedPrecondition,
                 "outputs() before kernel 0 (k0_exp) ran after the last set_input(\"x\")");

  ASSERT_TRUE(p.set_inputs(inputs).ok());
  ASSERT_TRUE(p.run().ok());
  absl::StatusOr<TensorMap> again = p.outputs();
  ASSERT_TRUE(again.ok()) << again.status();
  absl::StatusOr<TensorMap> ref = interpret_plan(plan, inputs);
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_TRUE(compare_tensors(again->at("z"), ref->at("z")).within(DType::kF32));
  EXPECT_EQ(again->at("z").values, first->at("z").values);
}

TEST(CpuBackend, LayersRunTheFirstLayersCodeWithTheirOwnSeeds) {
  const Graph g = parse(testing::stacked_layers_text(3));
  const FusionPlan plan = make_fused_plan(g);
  ASSERT_EQ(plan.kernels.size(), 6u);  // a matmul and a row kernel per layer
  // Every layer's dropout result is an output: a mask drawn with another
  // layer's seed would differ from the reference in about half its elements.
  expect_matches_reference(plan, random_inputs(g, 3));
  absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = cpu().load(plan);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::vector<LoadedKernelInfo>& kernels = (*loaded)->kernels();
  for (size_t k = 0; k < kernels.size(); ++k) {
    SCOPED_TRACE(kernels[k].name);
    EXPECT_EQ(kernels[k].name, plan.kernels[k].name);
    if (k < 2) {
      EXPECT_EQ(kernels[k].shares_code_with, "");
    } else {
      EXPECT_EQ(kernels[k].shares_code_with, plan.kernels[k % 2].name);
      EXPECT_EQ(kernels[k].compile_ms, 0.0);
    }
  }
}

TEST(CpuBackend, KernelsAreCachedAcrossLoads) {
  const Graph g = parse("input x: f32[3, 5]\ny = tanh(x)\noutput y\n");
  absl::StatusOr<std::unique_ptr<LoadedPlan>> first = cpu().load(make_fused_plan(g));
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<LoadedPlan>> second = cpu().load(make_fused_plan(g));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE((*second)->kernels().at(0).cache_hit);
}

// sizeof(fj_vec) in a module compiled as kernels are compiled now (flags
// and $FUSEJIT_CXXFLAGS included); 0 if it does not compile.
int compiled_vec_bytes() {
  const std::string source = std::string(cpu_helpers_source()) +
                             "extern \"C\" int width(void* const* args, long long, long long, float*) {\n"
                             "  *static_cast<int*>(args[0]) = static_cast<int>(sizeof(fj_vec));\n  return 0;\n}\n";
  absl::StatusOr<std::unique_ptr<HostModule>> m = compile_host_module("width", source, {"width"}, nullptr);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return 0;
  int bytes = 0;
  void* args[] = {&bytes};
  EXPECT_EQ((*m)->entry("width")(args, 0, 1, nullptr), 0);
  return bytes;
}

// Kernels are vectorized with 512-bit registers wherever the CPU has
// AVX-512 (compilers prefer 256 bits when tuning for Intel), and the
// reduction lanes (fj_vec) are as wide: a kernel compiled with these flags
// reports 64 bytes there.
TEST(HostCompiler, VectorizesWithTheWidestVectorsTheCpuHas) {
  const std::vector<std::string> flags = host_compile_flags();
  const bool prefers_512 =
      std::find(flags.begin(), flags.end(), "-mprefer-vector-width=512") != flags.end();
  EXPECT_EQ(prefers_512, __builtin_cpu_supports("avx512f") != 0);
  EXPECT_EQ(compiled_vec_bytes(), __builtin_cpu_supports("avx512f") ? 64 : __builtin_cpu_supports("avx") ? 32 : 16);
}

#if defined(__x86_64__)
// $FUSEJIT_CXXFLAGS that enable what this CPU lacks (XOP: AMD's Bulldozer
// family only) would make kernels that die of SIGILL, from the cache too:
// refused before anything is compiled or loaded, naming the flag and the
// instruction set.
TEST(HostCompiler, FlagsForInstructionSetsTheCpuLacksAreRefused) {
  const std::string cpuinfo = testing::read_file("/proc/cpuinfo");
  if (testing::contains(cpuinfo, " xop ") || testing::contains(cpuinfo, " xop\n")) GTEST_SKIP() << "this CPU has XOP";
  testing::ScopedEnv env("FUSEJIT_CXXFLAGS", "-mxop");
  const std::string source = "extern \"C\" int one(void* const*, long long, long long, float*) { return 0; }\n";
  absl::StatusOr<std::unique_ptr<HostModule>> m = compile_host_module("one", source, {"one"}, nullptr);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition) << m.status();
  const std::string message(status_text(m.status()));
  EXPECT_TRUE(testing::contains(message, "FUSEJIT_CXXFLAGS ('-mxop') enables instruction sets this CPU lacks"))
      << message;
  EXPECT_TRUE(testing::contains(message, "__XOP__")) << message;
}
#endif

// GCC links a constructor into -ffast-math objects that turns on
// flush-to-zero for the thread that loads them; loading a kernel leaves
// the caller's floating-point environment as it was (subnormals stay).
TEST(HostCompiler, LoadingAFastMathKernelKeepsSubnormals) {
  testing::ScopedEnv env("FUSEJIT_CXXFLAGS", "-ffast-math");
  const std::string source =
      "extern \"C\" int fast_math_one(void* const*, long long, long long, float*) { return 0; }\n";
  absl::StatusOr<std::unique_ptr<HostModule>> m =
      compile_host_module("fast_math_one", source, {"fast_math_one"}, nullptr);
  ASSERT_TRUE(m.ok()) << m.status();
  volatile float tiny = 1e-40f;  // subnormal in float32
  EXPECT_GT(tiny * 2.0f, 0.0f) << "flush-to-zero is on after loading the kernel";
}

#if defined(__x86_64__)
// $FUSEJIT_CXXFLAGS narrows what -march=native enables, so this machine also
// runs the paths kernels take on narrower CPUs: the bf16 GEMM in f32
// without AVX512-BF16, 32-byte vectors and streams, the GEMM's 16- and
// 8-float panels, multiply-add without FMA, no streaming at all with SSE
// only; each is checked against the reference, and the kernels report the
// fj_vec width the flags imply.
TEST(CpuBackend, NarrowerVectorPathsMatchTheReference) {
  struct Narrower {
    const char* flags;
    int vec_bytes;
  };
  for (const Narrower& n :
       {Narrower{"-mno-avx512bf16", __builtin_cpu_supports("avx512f") ? 64 : 32}, Narrower{"-mno-avx512f", 32},
        Narrower{"-mno-avx2 -mno-fma", 32}, Narrower{"-mno-avx", 16}}) {
    SCOPED_TRACE(n.flags);
    testing::ScopedEnv env("FUSEJIT_CXXFLAGS", std::string(n.flags));
    EXPECT_EQ(compiled_vec_bytes(), n.vec_bytes);
    for (const char* text : {
             "input x: f32[133, 64]\ninput w: f32[64, 257]\ny = matmul(x, w)\noutput y\n",
             "input x: bf16[97, 513]\ninput w: bf16[513, 40]\ny = matmul(x, w)\noutput y\n",
             "input x: f16[400, 70]\ninput w: f16[70, 40]\ny = matmul(x, w)\noutput y\n",
             // Outputs of 16 MiB and more are streamed.
             "input x: f32[2048, 2048]\ninput r: f32[2048, 2048]\ny = add(x, r)\noutput y\n",
             "input x: bf16[4096, 2048]\ny = gelu(x)\noutput y\n",
             "input x: bf16[64, 1024]\ninput b: bf16[1024]\ninput g: bf16[1024]\ninput bb: bf16[1024]\n"
             "h = add(x, b)\na = gelu(h)\nd = dropout(a, p=0.1, seed=3)\ny = layer_norm(d, g, bb)\noutput y\n",
             "input x: f32[64, 1000]\ny = softmax(x)\noutput y\n"}) {
      expect_both_plans_match(parse(text));
    }
  }
}
#endif

TEST(HostCompiler, ACompileErrorReportsTheLogAndNumberedSource) {
  // 40 lines with the error on line 30: the message numbers the lines
  // around it, the report every line.
  std::string source = "extern \"C\" int broken(void* const*, long long, long long) {\n";
  for (int line = 2; line < 30; ++line) source += "  // filler " + std::to_string(line) + "\n";
  source += "  return x;\n";
  for (int line = 31; line < 40; ++line) source += "  // filler " + std::to_string(line) + "\n";
  source += "}\n";
  absl::StatusOr<std::unique_ptr<HostModule>> k = compile_host_module("broken", source, {"broken"}, nullptr);
  ASSERT_FALSE(k.ok());
  const std::string message(status_text(k.status()));
  EXPECT_NE(message.find("failed to compile kernel 'broken'"), std::string::npos) << message;
  EXPECT_NE(message.find("  30 |   return x;"), std::string::npos) << message;
  EXPECT_NE(message.find("  27 |   // filler 27"), std::string::npos) << message;
  EXPECT_NE(message.find("  33 |   // filler 33"), std::string::npos) << message;
  EXPECT_EQ(message.find("   2 |   // filler 2"), std::string::npos) << message;
  EXPECT_NE(message.find("was not declared"), std::string::npos) << message;
  const size_t at = message.rfind("report, with the whole source: ");
  ASSERT_NE(at, std::string::npos) << message;
  const std::string path = message.substr(at + 31);
  ASSERT_TRUE(std::filesystem::exists(path)) << message;
  const std::string report = testing::read_file(path);
  EXPECT_NE(report.find("   2 |   // filler 2"), std::string::npos) << report;
  EXPECT_NE(report.find("  40 | }"), std::string::npos) << report;
  EXPECT_NE(report.find("was not declared"), std::string::npos) << report;
}

// Several kernels in one module: each entry point is its own function, and
// asking for an entry the source lacks is an error naming it.
TEST(HostCompiler, OneModuleHoldsSeveralEntryPoints) {
  const std::string source =
      "extern \"C\" int one(void* const*, long long, long long, float*) { return 1; }\n"
      "extern \"C\" int two(void* const*, long long, long long, float*) { return 2; }\n";
  absl::StatusOr<std::unique_ptr<HostModule>> m = compile_host_module("pair", source, {"one", "two"}, nullptr);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->entry("one")(nullptr, 0, 0, nullptr), 1);
  EXPECT_EQ((*m)->entry("two")(nullptr, 0, 0, nullptr), 2);
  EXPECT_EQ((*m)->entry("three"), nullptr);
  absl::StatusOr<std::unique_ptr<HostModule>> missing = compile_host_module("pair", source, {"one", "three"}, nullptr);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string(status_text(missing.status())).find("no entry point 'three'"), std::string::npos)
      << missing.status();
}

// A cache entry whose digest is right but whose object cannot be used (a
// cache shared with a machine of another libc or architecture, or an
// object without the entry point) is removed with a warning naming it and
// compiled again, rather than failing every later run.
TEST(HostCompiler, ACachedObjectThatCannotBeLoadedIsCompiledAgain) {
  const testing::TempDir dir("fusejit-unloadable");
  KernelCache cache(dir.path());
  const std::string source = "extern \"C\" int seven(void* const*, long long, long long, float*) { return 7; }\n";
  absl::StatusOr<std::unique_ptr<HostModule>> first = compile_host_module("seven", source, {"seven"}, &cache);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string key = (*first)->cache_key();
  const std::string other = "extern \"C\" int eight(void* const*, long long, long long, float*) { return 8; }\n";
  absl::StatusOr<std::unique_ptr<HostModule>> eight = compile_host_module("eight", other, {"eight"}, &cache);
  ASSERT_TRUE(eight.ok()) << eight.status();
  const std::optional<CacheEntry> eight_entry = cache.lookup((*eight)->cache_key());
  for (const std::string& object : {std::string("\x7f"
                                                "ELF") +
                                        std::string(4000, '\0'),
                                    std::string(), std::string("not an object")}) {
    KernelCache(dir.path()).store(key, CacheEntry{.blobs = {{"so", object}}});
    ScopedWarningSink warnings;
    KernelCache fresh(dir.path());
    absl::StatusOr<std::unique_ptr<HostModule>> again = compile_host_module("seven", source, {"seven"}, &fresh);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_FALSE((*again)->cache_hit());
    EXPECT_EQ((*again)->entry("seven")(nullptr, 0, 0, nullptr), 7);
    ASSERT_EQ(warnings.messages().size(), 1u) << warnings.text();
    EXPECT_NE(warnings.messages()[0].find(fresh.entry_path(key)), std::string::npos) << warnings.text();
    EXPECT_NE(warnings.messages()[0].find("cannot be used"), std::string::npos) << warnings.text();
    const absl::StatusOr<std::string> temporary = temporary_directory();
    ASSERT_TRUE(temporary.ok()) << temporary.status();
    EXPECT_EQ(warnings.messages()[0].find(*temporary + "/fusejit-cxx-"), std::string::npos)
        << "names no temporary file that is gone: " << warnings.text();
    // The good object replaced it once it loaded: the next process finds it.
    KernelCache next(dir.path());
    absl::StatusOr<std::unique_ptr<HostModule>> hit = compile_host_module("seven", source, {"seven"}, &next);
    ASSERT_TRUE(hit.ok()) << hit.status();
    EXPECT_TRUE((*hit)->cache_hit());
  }
  // A loadable object without the entry point (another kernel's).
  ASSERT_TRUE(eight_entry.has_value());
  KernelCache(dir.path()).store(key, *eight_entry);
  ScopedWarningSink warnings;
  KernelCache fresh(dir.path());
  absl::StatusOr<std::unique_ptr<HostModule>> again = compile_host_module("seven", source, {"seven"}, &fresh);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->entry("seven")(nullptr, 0, 0, nullptr), 7);
  ASSERT_EQ(warnings.messages().size(), 1u) << warnings.text();
  EXPECT_NE(warnings.messages()[0].find("no entry point 'seven'"), std::string::npos) << warnings.text();
}

TEST(HostCompiler, AMissingCompilerIsAClearErrorFromTheCommandLine) {
  const std::string dir = testing::make_temp_dir("fusejit-nocxx");
  auto run_with = [&](const std::string& cxx) {
    return testing::run_command("CXX=" + cxx + " FUSEJIT_CACHE_DIR=" + dir + " " + std::string(FUSEJIT_CLI_PATH) +
                                " run " + FUSEJIT_SOURCE_DIR + "/examples/graphs/softmax.fj --backend cpu");
  };
  const auto r = run_with("/nonexistent/c++");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("no C++ compiler"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/c++"), std::string::npos) << r.err;
  // A program that is not a compiler: its first line is quoted, the advice
  // ends the one-line message.
  const auto not_cxx = run_with("false");
  EXPECT_EQ(not_cxx.exit_code, 1) << not_cxx.out << not_cxx.err;
  EXPECT_NE(not_cxx.err.find("`false (from $CXX) --version` failed (exit 1"), std::string::npos) << not_cxx.err;
  EXPECT_NE(not_cxx.err.find("; install g++ or set $CXX\n"), std::string::npos) << not_cxx.err;
  EXPECT_EQ(std::count(not_cxx.err.begin(), not_cxx.err.end(), '\n'), 1) << not_cxx.err;
}

// The compiler is probed once per value of $CXX: a program that found
// none can set $CXX and try again.
TEST(HostCompiler, AProgramCanSetCxxAfterAFailedProbe) {
  const absl::StatusOr<HostCompiler> before = find_host_compiler();
  ASSERT_TRUE(before.ok()) << before.status();
  {
    testing::ScopedEnv cxx("CXX", "false");
    const absl::StatusOr<HostCompiler> failed = find_host_compiler();
    ASSERT_FALSE(failed.ok());
    EXPECT_NE(status_text(failed.status()).find("`false (from $CXX) --version` failed"), std::string::npos)
        << failed.status();
  }
  const absl::StatusOr<HostCompiler> after = find_host_compiler();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->identity, before->identity);
}

}  // namespace
}  // namespace fusejit
