#include "cost/cpu_conversions.h"

#include "cost/cost_model.h"
#include "fusion/cpu_output_stores.h"

namespace fusejit {
namespace {

double widen_ops(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return kCpuWidenBf16;
    case DType::kF16: return kCpuWidenF16;
    case DType::kF32: break;
  }
  return 0;
}

double narrow_ops(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return kCpuNarrowBf16;
    case DType::kF16: return kCpuNarrowF16;
    case DType::kF32: break;
  }
  return 0;
}

}  // namespace

double cpu_conversion_ops(const FusionPlan& plan, const Kernel& kernel, const DeviceSpec& device) {
  if (kernel.kind == KernelKind::kMatmul) return 0;
  const Graph& graph = *plan.graph;
  const double loop_elements = static_cast<double>(kernel.iteration.numel());
  const bool row = kernel.kind == KernelKind::kRow;
  double ops = 0;
  for (int32_t id : kernel.reads) {
    const Node& n = graph.node(id);
    // A row kernel converts a row-shaped read row by row and an [N] vector
    // once; a pointwise tile widens every element it uses, a broadcast
    // operand's included.
    const bool per_loop_element = row ? is_row_shaped(n, kernel) : n.shape.numel() > 1;
    ops += widen_ops(n.dtype) * (per_loop_element ? loop_elements : static_cast<double>(n.shape.numel()));
  }
  // A write stored from an array narrows natively where it can; one stored
  // in its loop by the portable code.
  auto store_ops = [&](const Node& n) {
    if (cpu_stores_from_array(kernel, n)) {
      if (n.dtype == DType::kBF16 && device.native_bf16_stores) return kCpuNarrowBf16Native;
      if (n.dtype == DType::kF16 && device.native_f16_stores) return kCpuNarrowF16Native;
    }
    return narrow_ops(n.dtype);
  };
  for (int32_t id : kernel.writes) {
    const Node& n = graph.node(id);
    ops += store_ops(n) * static_cast<double>(n.shape.numel());
  }
  // A stored value the kernel also uses is used as stored: rounded in its
  // loop and widened again. Where its loop stores it, the rounding is the
  // store's (counted with the writes); where it is stored from an array,
  // the array holds the rounded value and the store narrows it once more.
  for (int32_t id : kernel.nodes) {
    if (rounds_in_kernel(graph, kernel, id)) {
      const Node& n = graph.node(id);
      const double rounded_in_loop = cpu_stores_from_array(kernel, n) ? narrow_ops(n.dtype) : 0;
      ops += (rounded_in_loop + widen_ops(n.dtype)) * static_cast<double>(n.shape.numel());
    }
  }
  return ops;
}

}  // namespace fusejit
