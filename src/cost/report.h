// How plans and their costs read: tables for people, JSON for programs.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "cost/cost_model.h"

namespace fusejit {

// "h100: NVIDIA H100 SXM5 80 GB (datasheet)\n  bandwidth 3350 GB/s, ..., ridge points ..."
std::string format_device(const DeviceSpec& device);
// What limits a kernel: "memory", "compute" (FLOPs at a peak), or "issue"
// (a GPU issuing its instructions: cost/gpu_instructions.h).
std::string_view bound_name(const KernelCost& cost);
// One row per kernel (kernel, kind, ops, bytes, FLOPs, intensity, on a GPU
// instructions per element, bound, predicted µs) and a total.
std::string format_plan_table(const FusionPlan& plan, const PlanCost& cost);
// "fusion saves 603,979,776 bytes (75.0%) and 3 kernels; predicted speedup 3.96x (...)"
std::string format_saving(const PlanComparison& comparison);
// On a CPU, the kernels whose work splits over fewer threads than it has
// (KernelCost::threads), each with its thread count, or "" when none does.
std::string format_idle_threads(const PlanComparison& comparison, const DeviceSpec& device);
// The width of a table's kernel column: `minimum`, or the longest name of
// `kernels` (anything with a `name`), so that a long name ("k12_add_gelu_mul_
// sigmoid_and_5_more") does not push its row's other columns out of line.
template <typename Kernels>
size_t name_column_width(size_t minimum, const Kernels& kernels) {
  size_t width = minimum;
  for (const auto& k : kernels) width = std::max(width, k.name.size());
  return width;
}
// 1234567 -> "1,234,567"
std::string group_digits(int64_t value);

nlohmann::json device_json(const DeviceSpec& device);
nlohmann::json kernel_json(const FusionPlan& plan, const Kernel& kernel, const KernelCost& cost);
nlohmann::json plan_json(const FusionPlan& plan, const PlanCost& cost);
// Why the fused plan's kernels are apart (fusion/fusion_boundaries.h), a
// line per pair of kernels a tensor passes between; empty for one kernel.
std::string format_boundaries(const FusionPlan& fused, const FusionOptions& options);
nlohmann::json boundaries_json(const FusionPlan& fused, const FusionOptions& options);
// The object `fusejit plan --json` prints.
nlohmann::json comparison_json(const DeviceSpec& device, const FusionPlan& unfused, const FusionPlan& fused,
                               const PlanComparison& comparison);

}  // namespace fusejit
