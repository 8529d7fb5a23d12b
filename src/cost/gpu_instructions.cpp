#include "cost/gpu_instructions.h"

#include "cost/cost_model.h"
#include "fusion/gpu_row_shape.h"

namespace fusejit {
namespace {

double stream_cost(const Node& n) { return dtype_size(n.dtype) >= 4 ? kStream4Byte : kStream2Byte; }

// Elements an op computes (a reduction: the elements it combines).
double op_elements(const Graph& graph, const Node& n) {
  const Node& counted = n.info().kind == OpKind::kReduce ? graph.node(n.operands[0].node) : n;
  return static_cast<double>(counted.shape.numel());
}

}  // namespace

double gpu_instructions(const FusionPlan& plan, const Kernel& kernel) {
  if (kernel.kind == KernelKind::kMatmul) return 0;
  const Graph& graph = *plan.graph;
  const bool row = kernel.kind == KernelKind::kRow;
  const double elements = static_cast<double>(kernel.iteration.numel());
  const bool reread = kernel.row_strategy == RowStrategy::kReread;

  double per_element = row ? kLoopRow : kLoopPointwise;
  for (int32_t id : kernel.reads) {
    const Node& n = graph.node(id);
    if (!row) {
      const bool broadcast = n.shape.numel() < kernel.iteration.numel();
      per_element += stream_cost(n) + (broadcast ? kBroadcastIndex : 0);
    } else if (is_row_shaped(n, kernel)) {
      per_element += stream_cost(n) * (reread ? kernel.row_passes : 1);
    }
  }
  for (int32_t id : kernel.writes) {
    const Node& n = graph.node(id);
    if (!row || is_row_shaped(n, kernel)) per_element += stream_cost(n);
  }
  double total = per_element * elements;

  const std::vector<int> levels = reread ? reduction_levels(graph, kernel) : std::vector<int>(kernel.nodes.size(), 0);
  for (size_t i = 0; i < kernel.nodes.size(); ++i) {
    const Node& n = graph.node(kernel.nodes[i]);
    const double times = reread ? static_cast<double>(kernel.row_passes - levels[i]) : 1.0;
    total += times * op_elements(graph, n) * n.info().gpu_instructions;
  }
  if (row) {
    const GpuRowShape shape = gpu_row_shape(kernel.iteration.last(), kernel.row_strategy);
    const double rows = elements / static_cast<double>(kernel.iteration.last());
    const double per_thread = shape.warp_per_row ? kWarpReduce : kBlockReduce;
    for (int32_t id : kernel.nodes) {
      if (graph.node(id).info().kind == OpKind::kReduce) total += rows * shape.threads * per_thread;
    }
  }
  return total;
}

}  // namespace fusejit
