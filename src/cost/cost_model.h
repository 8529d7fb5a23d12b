// The roofline cost model: bytes, FLOPs, intensity and predicted time of
// each kernel of a plan on a device, and what fusion saves.
//
// bytes = every global tensor a kernel reads, once, at its own size (a
// broadcast bias [N] costs N elements, not M x N), plus every tensor it
// writes. A row kernel that cannot keep its row on chip re-reads the
// row-shaped inputs once per reduction stage plus once for the output.
// On a CPU an output written with ordinary stores is also read, once
// (write-allocate; fusion/cpu_output_stores.h). A broadcast operand whose
// next use lies beyond the device's cache is read again on each use
// (broadcast_reread_bytes).
// FLOPs = sum over the kernel's nodes of elements x the op table's weight
// (a reduction counts its input elements; a matmul 2 x M x N x K; work a
// re-reading row kernel recomputes counts again, but a reduction once).
// time = max(bytes / bandwidth, compute time) + launch overhead on a GPU;
// on a CPU, whose cores overlap the two little, their sum + launch
// (DeviceSpec::overlap). On a GPU
// the compute time of a generated kernel is its estimated instructions
// (gpu_instructions.h) at the device's issue rate; on a CPU it is each cost
// class's FLOPs at that class's measured rate plus the kernel's 16-bit
// storage conversions (cpu_conversions.h) at the simple class's rate. A
// matmul's is its FLOPs at the GPU's FP32 (f32) or tensor (bf16/f16) peak,
// or on the CPU at the measured rate of the generated GEMM (its matmul class).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "cost/device.h"
#include "fusion/kernel_bytes.h"  // is_row_shaped, kernel_bytes
#include "fusion/plan.h"

namespace fusejit {

struct KernelCost {
  std::string name;
  int64_t bytes_read = 0;  // including the two below
  int64_t bytes_written = 0;
  // CPU: outputs read before they are written (cpu_write_allocated_bytes); 0 on a GPU.
  int64_t write_allocate_bytes = 0;
  // Broadcast reads the cache loses before their next use (broadcast_reread_bytes).
  int64_t broadcast_reread_bytes = 0;
  double flops = 0;
  std::array<double, kNumCostClasses> class_flops{};  // flops split by cost class
  double instructions = 0;  // GPU thread-instructions (gpu_instructions.h); 0 where not modelled
  // GPU: the share of the SMs the kernel's blocks occupy (gpu_kernel_blocks), which its
  // instructions issue on; 0 on a CPU and for a matmul.
  double active_sm_share = 0;
  double conversion_ops = 0;  // CPU: 16-bit widen/narrow operations (cpu_conversions.h); 0 on a GPU
  double intensity = 0;    // flops / bytes
  std::string unit;        // "fp32" (CUDA cores / SIMD) or "tensor" (bf16/f16 matmul)
  bool compute_bound = false;
  int threads = 0;  // CPU: threads the kernel's work is split over (fusion/cpu_work_split.h); 0 on a GPU
  double memory_us = 0;
  double compute_us = 0;
  double predicted_us = 0;

  int64_t bytes() const { return bytes_read + bytes_written; }
};

struct PlanCost {
  std::vector<KernelCost> kernels;
  int64_t bytes = 0;
  double flops = 0;
  double predicted_us = 0;
  // Whether the device prices generated kernels by instructions (a GPU):
  // tables show their instructions per element, "-" for a library matmul.
  bool models_instructions = false;
};

struct PlanComparison {
  PlanCost unfused;
  PlanCost fused;
  int64_t bytes_saved = 0;
  int kernels_saved = 0;
  double predicted_speedup = 0;  // unfused time / fused time
};

// `kernel` is one of a plan of plan.graph (usually one of plan.kernels; a
// copy or a kernel of the other plan of the same graph will do). Throws
// fusejit::Error when the plan has no graph or the kernel names a node the
// graph lacks (a kernel of another graph's plan).
KernelCost estimate_kernel(const FusionPlan& plan, const Kernel& kernel, const DeviceSpec& device);
PlanCost estimate_plan(const FusionPlan& plan, const DeviceSpec& device);
// Throws fusejit::Error when the two plans are plans of different graphs.
PlanComparison compare_plans(const FusionPlan& unfused, const FusionPlan& fused, const DeviceSpec& device);

// FusionOptions that match the device: its persistent row limit, and
// kernels weighed by their predicted time on it (FusionOptions::kernel_weight)
// where it has a bandwidth to predict with (cpu_identity() has none: bytes).
FusionOptions fusion_options_for(const DeviceSpec& device);

}  // namespace fusejit
