#include "cost/gpu_instructions.h"

#include <algorithm>

#include "cost/cost_model.h"
#include "fusion/gelu_dropout.h"
#include "fusion/gpu_row_shape.h"
#include "fusion/gpu_vector_width.h"
#include "ir/philox.h"

namespace fusejit {
namespace {

double stream_cost(const Node& n) { return dtype_size(n.dtype) >= 4 ? kStream4Byte : kStream2Byte; }

// The op table's weight, but for GeLU's other helpers: the table holds one
// weight per op, the erf form's 17 (a degree-10 polynomial and one ex2).
// The tanh form is one ex2 and one rcp, and the erf form where only 16-bit
// values are computed from it (Graph::is_16bit_gelu) a degree-6 polynomial
// with no clamp (codegen/cuda/fj_math.cuh; single-op kernels,
// bench/sass_count.py with CUDA 13's ptxas: f32 12.25 and bf16 13.6, less
// the loop and streams). Where such a GeLU folds into the dropout of it
// (fusion/gelu_dropout.h), the pair takes one multiply per element fewer.
constexpr double kGeluTanhInstructions = 10.5;
constexpr double kGeluNone16BitInstructions = 11.0;
constexpr double kGeluDropoutFoldSaving = 1.0;

double op_instructions(const Graph& graph, const Kernel& kernel, int32_t id) {
  const Node& n = graph.node(id);
  if (n.op == Op::kGelu && n.attrs.get_enum("approximate") == "tanh") return kGeluTanhInstructions;
  if (graph.is_16bit_gelu(id)) return kGeluNone16BitInstructions;
  if (n.op == Op::kDropout && !gpu_has_vector_path(graph, kernel)) {  // one element to a thread
    return n.info().gpu_instructions + kDropoutScalarInstructions;
  }
  // f32 data in rows of 4 times an odd number: 4 to a thread (gpu_vector_width)
  if (n.op == Op::kDropout && gpu_vector_width(graph, kernel) < kDropoutGroup) {
    return n.info().gpu_instructions + kDropoutHalfBlockInstructions;
  }
  if (n.op == Op::kDropout && gelu_folded_into_dropout(graph, kernel, id) >= 0) {
    return n.info().gpu_instructions - kGeluDropoutFoldSaving;
  }
  return n.info().gpu_instructions;
}

// Elements an op computes (a reduction: the elements it combines).
double op_elements(const Graph& graph, const Node& n) {
  const Node& counted = n.info().kind == OpKind::kReduce ? graph.node(n.operands[0].node) : n;
  return static_cast<double>(counted.shape.numel());
}

}  // namespace

double warp_reduce_instructions(int threads) {
  int shuffles = 0;
  for (int lanes = threads; lanes > 1; lanes /= 2) ++shuffles;
  return kWarpReduce * shuffles / 5;
}

double block_reduce_instructions(int threads) {
  int shuffles = 0;
  for (int warps = threads / 32; warps > 1; warps /= 2) ++shuffles;
  return kBlockReduceBase + kBlockReducePerShuffle * shuffles;
}

double gpu_instructions(const FusionPlan& plan, const Kernel& kernel) {
  if (kernel.kind == KernelKind::kMatmul) return 0;
  const Graph& graph = *plan.graph;
  const bool row = kernel.kind == KernelKind::kRow;
  const double elements = static_cast<double>(kernel.iteration.numel());
  const bool reread = kernel.row_strategy == RowStrategy::kReread;
  const int passes = reread ? kernel.row_passes : 1;

  // A re-reading kernel runs its loop once per pass and loads, in each pass
  // that needs it (row_pass_needs), each read that varies along the row
  // ([N] vectors included).
  // A pointwise kernel's loop costs about the same per step whatever a
  // step holds: per element, less the more elements a thread takes at once.
  const int step = gpu_has_vector_path(graph, kernel) ? gpu_vector_width(graph, kernel) : 1;
  double per_element = row ? kLoopRow * passes : kLoopPointwiseStep / step;
  const std::vector<int> passes_needing = row_pass_counts(graph, kernel).reads;
  const std::vector<int32_t> reloaded = gpu_row_vectors(graph, kernel).reloaded;
  for (size_t r = 0; r < kernel.reads.size(); ++r) {
    const int32_t id = kernel.reads[r];
    const Node& n = graph.node(id);
    // A persistent kernel loads an [N] vector once per thread, but for
    // those beyond the ones it keeps, which it loads again in every row.
    const bool reloaded_vector = std::find(reloaded.begin(), reloaded.end(), id) != reloaded.end();
    if (!row) {
      const bool broadcast = n.shape.numel() < kernel.iteration.numel();
      per_element += stream_cost(n) + (broadcast ? kBroadcastIndex : 0);
    } else if (reread ? n.shape.last() == kernel.iteration.last()
                      : is_streamed_along_row(n, kernel) || reloaded_vector) {
      per_element += stream_cost(n) * (reread ? std::max(1, passes_needing[r]) : 1);
    }
  }
  for (int32_t id : kernel.writes) {
    const Node& n = graph.node(id);
    if (!row || is_streamed_along_row(n, kernel)) per_element += stream_cost(n);
  }
  double total = per_element * elements;

  const std::vector<int> counts = compute_counts(graph, kernel);  // a re-reading kernel recomputes
  for (size_t i = 0; i < kernel.nodes.size(); ++i) {
    const Node& n = graph.node(kernel.nodes[i]);
    const double rounding = rounds_in_kernel(graph, kernel, kernel.nodes[i]) ? kRoundInKernel : 0;
    total += counts[i] * op_elements(graph, n) * (op_instructions(graph, kernel, kernel.nodes[i]) + rounding);
  }
  if (row) {
    const GpuRowShape shape = gpu_row_shape(graph, kernel);
    const double rows = elements / static_cast<double>(kernel.iteration.last());
    const double per_thread =
        shape.warp_per_row ? warp_reduce_instructions(shape.threads) : block_reduce_instructions(shape.threads);
    int reductions = 0;
    for (int32_t id : kernel.nodes) reductions += graph.node(id).info().kind == OpKind::kReduce ? 1 : 0;
    const bool buffer_flip = !shape.warp_per_row && reductions % 2 == 1;
    total += rows * shape.threads * (reductions * per_thread + (buffer_flip ? kBufferFlip : 0));
  }
  return total;
}

}  // namespace fusejit
