#include "cost/cost_model.h"

#include <algorithm>

#include <fmt/format.h>

#include "cost/cpu_conversions.h"
#include "cost/gpu_instructions.h"
#include "fusion/cpu_output_stores.h"
#include "fusion/cpu_work_split.h"
#include "fusion/gpu_row_shape.h"
#include "fusion/kernel_bytes.h"
#include "fusion/plan_verify.h"
#include "ir/error.h"

namespace fusejit {
namespace {

// FLOPs of one node, split by cost class.
void add_node_flops(const Graph& graph, int32_t id, double times, std::array<double, kNumCostClasses>& out) {
  const Node& n = graph.node(id);
  const OpInfo& info = n.info();
  switch (info.kind) {
    case OpKind::kInput: return;
    case OpKind::kReduce: {
      const double elements = static_cast<double>(graph.node(n.operands[0].node).shape.numel());
      out[static_cast<int>(info.cost_class)] += times * elements * info.flops;
      return;
    }
    case OpKind::kMatmul: {
      const double k = static_cast<double>(graph.node(n.operands[0].node).shape.last());
      out[static_cast<int>(graph.cost_class(id))] += times * static_cast<double>(n.shape.numel()) * k * info.flops;
      return;
    }
    default:
      out[static_cast<int>(graph.cost_class(id))] += times * static_cast<double>(n.shape.numel()) * info.flops;
      return;
  }
}

// The traffic a GPU adds to a matmul of operands of two dtypes, which
// cuBLAS cannot take together: each 16-bit operand is first widened into an
// f32 scratch copy by a kernel of its own (runtime/cuda_backend_matmul.cpp),
// which reads it and writes the copy, and the f32 GEMM reads the copy in
// its place. The CPU's generated GEMM widens as it loads and adds nothing.
// kernel_bytes() counts each operand once at its own size: that is the
// widening kernel's read; the copy's write and the GEMM's read of it come on top.
struct Widening {
  int64_t extra_read = 0;     // the GEMM's reads of the f32 copies
  int64_t extra_written = 0;  // the copies
  int64_t widen_bytes = 0;    // what the widening kernels themselves move
  int launches = 0;
};
Widening gpu_matmul_widening(const Graph& graph, const Kernel& kernel) {
  Widening w;
  const Node& mm = graph.node(kernel.nodes[0]);
  const Node& a = graph.node(mm.operands[0].node);
  const Node& b = graph.node(mm.operands[1].node);
  if (a.dtype == mm.dtype && b.dtype == mm.dtype) return w;
  for (const Node* operand : {&a, &b}) {
    if (operand->dtype == DType::kF32) continue;
    const int64_t n = operand->shape.numel();
    const int64_t copy = n * dtype_size(DType::kF32);
    w.extra_read += copy;
    w.extra_written += copy;
    w.widen_bytes += n * dtype_size(operand->dtype) + copy;
    ++w.launches;
  }
  return w;
}

// A CPU kernel whose work items (rows, say) give fewer or uneven chunks
// than the machine has threads takes as long as its largest chunk: that
// share of the FLOPs at one thread's share of the compute rate, and of the
// bytes at what one thread gets of the bandwidth with `chunks` threads
// copying, min(its own copy rate, bandwidth / chunks). An even split over
// every thread keeps the whole machine's figures.
void charge_idle_cpu_threads(const Graph& graph, const Kernel& kernel, const DeviceSpec& device, KernelCost& cost) {
  const int threads = std::max(device.compute_units, 1);
  const CpuWorkSplit split = cpu_work_split(graph, kernel);
  const CpuChunks chunks = cpu_chunks(split.count, split.grain, threads);
  cost.threads = static_cast<int>(std::max<int64_t>(chunks.chunks, 1));
  if (split.count <= 0 || threads == 1) return;
  const double share = static_cast<double>(chunks.chunk) / static_cast<double>(split.count);
  const double even_share_gbps = device.bandwidth_gbps / threads;
  // Never below an even share: a noisy one-thread copy must not slow down
  // the kernels that use every thread.
  const double thread_gbps = std::max(device.thread_bandwidth_gbps, even_share_gbps);
  const double gbps_each = std::min(thread_gbps, device.bandwidth_gbps / static_cast<double>(cost.threads));
  cost.memory_us *= share * device.bandwidth_gbps / gbps_each;
  cost.compute_us *= share * threads;
}

}  // namespace

FusionOptions fusion_options_for(const DeviceSpec& device) {
  FusionOptions options;
  options.persistent_row_limit = device.persistent_row_limit;
  // A device that cannot predict times (cpu_identity(): no bandwidth, no
  // rates measured) weighs bytes: its times would all be NaN.
  if (device.bandwidth_gbps > 0) {
    options.kernel_weight = [device](const FusionPlan& plan, const Kernel& kernel) {
      return estimate_kernel(plan, kernel, device).predicted_us;
    };
  }
  return options;
}

KernelCost estimate_kernel(const FusionPlan& plan, const Kernel& kernel, const DeviceSpec& device) {
  if (absl::Status s = verify_kernel_of(plan, kernel); !s.ok()) {
    throw Error(fmt::format("estimate_kernel: {}", status_text(s)));
  }
  const Graph& graph = *plan.graph;
  KernelCost cost;
  cost.name = kernel.name;
  const KernelBytes bytes = kernel_bytes(graph, kernel);  // fusion/kernel_bytes.h
  cost.bytes_read = bytes.read;
  cost.bytes_written = bytes.written;
  if (!device.models_instructions()) {
    cost.write_allocate_bytes = cpu_write_allocated_bytes(graph, kernel);
    cost.bytes_read += cost.write_allocate_bytes;
  }
  cost.broadcast_reread_bytes = broadcast_reread_bytes(graph, kernel, device.cache_bytes);
  cost.bytes_read += cost.broadcast_reread_bytes;
  // The widening kernels run before the GEMM, each memory-bound: their time
  // adds to the GEMM's rather than hiding under its compute.
  int launches = 1;
  double widen_us = 0;
  if (kernel.kind == KernelKind::kMatmul && device.models_instructions()) {
    const Widening w = gpu_matmul_widening(graph, kernel);
    cost.bytes_read += w.extra_read;
    cost.bytes_written += w.extra_written;
    launches += w.launches;
    widen_us = static_cast<double>(w.widen_bytes) / (device.bandwidth_gbps * 1e9) * 1e6;
  }

  const std::vector<int> counts = compute_counts(graph, kernel);  // a re-reading kernel recomputes
  for (size_t i = 0; i < kernel.nodes.size(); ++i) {
    add_node_flops(graph, kernel.nodes[i], counts[i], cost.class_flops);
  }
  double compute_seconds = 0;
  for (int c = 0; c < kNumCostClasses; ++c) {
    cost.flops += cost.class_flops[c];
    if (cost.class_flops[c] > 0) compute_seconds += cost.class_flops[c] / (device.class_tflops[c] * 1e12);
  }
  const bool tensor_matmul = kernel.kind == KernelKind::kMatmul && graph.node(kernel.nodes[0]).dtype != DType::kF32;
  cost.unit = tensor_matmul ? "tensor" : "fp32";
  // A GPU runs an f32 matmul on its FP32 units (SGEMM), a bf16/f16 one on
  // tensor cores (the matmul class). The CPU runs both through the same
  // generated GEMM, whose measured rate is its matmul class.
  if (kernel.kind == KernelKind::kMatmul && !tensor_matmul && device.models_instructions()) {
    compute_seconds = cost.flops / (device.peak_f32_tflops * 1e12);
  }
  if (kernel.kind == KernelKind::kMatmul && !device.models_instructions() && device.matmul_pack_gelems > 0) {
    // The CPU GEMM packs B once per row block of each thread's rows, over
    // all threads as the classes' rates are (charge_idle_cpu_threads below
    // takes the largest share).
    compute_seconds += static_cast<double>(cpu_matmul_packed_elements(graph, kernel, device.compute_units)) /
                       (device.matmul_pack_gelems * 1e9);
  }
  if (kernel.kind != KernelKind::kMatmul) {
    if (device.models_instructions()) {
      cost.instructions = gpu_instructions(plan, kernel);
      // Only SMs with a block issue: a softmax over 4 rows of 1M elements
      // runs 4 blocks, and 128 of an H100's 132 SMs stay idle. The memory
      // time is left at the whole chip's bandwidth: what a few SMs can draw
      // is unmeasured here.
      const int64_t blocks = gpu_kernel_blocks(graph, kernel);
      cost.active_sm_share =
          device.compute_units > 0 && blocks > 0
              ? std::min(1.0, static_cast<double>(blocks) / static_cast<double>(device.compute_units))
              : 1.0;
      compute_seconds = cost.instructions / (device.issue_tops * cost.active_sm_share * 1e12);
    } else {
      // The CPU: storage conversions run on the vector units beside the
      // arithmetic, at about the rate of simple arithmetic. Not FLOPs, so
      // they lower the kernel's compute roof rather than raise its intensity.
      cost.conversion_ops = cpu_conversion_ops(plan, kernel, device);
      const double simple_tflops = device.class_tflops[static_cast<int>(CostClass::kSimple)];
      if (cost.conversion_ops > 0 && simple_tflops > 0) compute_seconds += cost.conversion_ops / (simple_tflops * 1e12);
    }
  }
  cost.intensity = cost.bytes() > 0 ? cost.flops / static_cast<double>(cost.bytes()) : 0;
  cost.memory_us = static_cast<double>(cost.bytes()) / (device.bandwidth_gbps * 1e9) * 1e6;
  cost.compute_us = compute_seconds * 1e6;
  if (!device.models_instructions()) charge_idle_cpu_threads(graph, kernel, device, cost);
  const double main_memory_us = cost.memory_us - widen_us;  // the GEMM's own traffic
  cost.compute_bound = cost.compute_us > main_memory_us;
  // What the device does not overlap of the shorter time adds to the longer
  // (DeviceSpec::overlap: 1 on a GPU, 0 on a CPU).
  const double exposed = device.overlap < 1 ? (1 - device.overlap) * std::min(main_memory_us, cost.compute_us) : 0.0;
  // A CPU kernel of one chunk runs on the calling thread, waking no pool
  // thread (ThreadPool::parallel_for): the pool's hand-off, which the
  // launch overhead measures, is not paid. A graph of 600 one-chunk
  // kernels was predicted 6x slow when each paid it.
  const bool launched = device.models_instructions() || cost.threads > 1;
  cost.predicted_us = std::max(main_memory_us, cost.compute_us) + exposed + widen_us +
                      (launched ? launches * device.launch_overhead_us : 0.0);
  return cost;
}

PlanCost estimate_plan(const FusionPlan& plan, const DeviceSpec& device) {
  PlanCost cost;
  cost.models_instructions = device.models_instructions();
  for (const Kernel& k : plan.kernels) {
    cost.kernels.push_back(estimate_kernel(plan, k, device));
    cost.bytes += cost.kernels.back().bytes();
    cost.flops += cost.kernels.back().flops;
    cost.predicted_us += cost.kernels.back().predicted_us;
  }
  return cost;
}

PlanComparison compare_plans(const FusionPlan& unfused, const FusionPlan& fused, const DeviceSpec& device) {
  // Bytes saved and a speedup mean something only between two plans of one
  // graph; plans of two graphs would give a confident, meaningless figure.
  for (const FusionPlan* p : {&unfused, &fused}) {
    if (!p->graph) {
      throw Error(
          fmt::format("compare_plans: the {} plan{} has no graph (a default-constructed FusionPlan); make "
                      "plans with make_unfused_plan() and make_fused_plan()",
                      p == &unfused ? "first (unfused)" : "second (fused)",
                      p->label.empty() ? "" : fmt::format(" '{}'", p->label)));
    }
  }
  if (unfused.graph != fused.graph && !(*unfused.graph == *fused.graph)) {
    throw Error(
        fmt::format("compare_plans: the '{}' and '{}' plans are plans of different graphs; compare two plans of "
                    "one graph",
                    unfused.label, fused.label));
  }
  PlanComparison c;
  c.unfused = estimate_plan(unfused, device);
  c.fused = estimate_plan(fused, device);
  c.bytes_saved = c.unfused.bytes - c.fused.bytes;
  c.kernels_saved = static_cast<int>(unfused.kernels.size()) - static_cast<int>(fused.kernels.size());
  c.predicted_speedup = c.fused.predicted_us > 0 ? c.unfused.predicted_us / c.fused.predicted_us : 0;
  return c;
}

}  // namespace fusejit
