#include "cost/report.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cost/cpu_conversions.h"
#include "cost/machine_load.h"
#include "fusion/cpu_work_split.h"
#include "fusion/fusion_boundaries.h"
#include "ir/counted.h"

namespace fusejit {

std::string group_digits(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

std::string_view bound_name(const KernelCost& c) {
  if (!c.compute_bound) return "memory";
  return c.instructions > 0 ? "issue" : "compute";
}

std::string format_device(const DeviceSpec& d) {
  std::string text = fmt::format("{}: {}\n", d.name, d.description);
  // A CPU has no tensor cores: its matmul runs at the FP32 peak, shown once.
  const std::string tensor =
      d.peak_tensor_tflops > 0 && d.peak_tensor_tflops != d.peak_f32_tflops
          ? fmt::format("; tensor {:.4g} TFLOP/s (ridge {:.1f} FLOP/B)", d.peak_tensor_tflops, d.ridge_tensor())
          : std::string();
  text += fmt::format("  bandwidth {:.0f} GB/s; fp32 {:.3g} TFLOP/s (ridge {:.1f} FLOP/B){}; launch {:.1f} us; {}\n",
                      d.bandwidth_gbps, d.peak_f32_tflops, d.ridge_f32(), tensor, d.launch_overhead_us,
                      d.persistent_row_limit == kAnyRowLength
                          ? std::string("rows of any length read once")
                          : fmt::format("persistent rows up to {} elements", d.persistent_row_limit));
  if (!d.models_instructions() && d.compute_units > 1) {
    const std::string alone = d.thread_bandwidth_gbps > 0
                                  ? fmt::format("one copying alone gets {:.0f} GB/s", d.thread_bandwidth_gbps)
                                  : std::string("each gets an even share of the bandwidth");
    text += fmt::format("  {} threads: {}; a kernel whose work splits over fewer takes as long as its largest share\n",
                        d.compute_units, alone);
  }
  if (d.models_instructions()) {
    const double per_byte = d.issue_tops * 1e3 / d.bandwidth_gbps;
    text += fmt::format("  instructions {:.3g}e12/s (SMs x FP32 lanes x clock), {:.1f} per byte moved ({:.0f} per "
                        "bf16 element read and written): generated kernels are charged by their estimated SASS "
                        "instructions, not FLOPs\n",
                        d.issue_tops, per_byte, 4 * per_byte);
  }
  if (d.overlap < 1) {
    text += d.overlap == 0 ? std::string(
                                 "  memory and compute times add (a CPU core overlaps them little): a kernel takes "
                                 "their sum plus the launch\n")
                           : fmt::format(
                                 "  memory and compute overlap {:.0f}%: a kernel takes the longer of its two "
                                 "times plus {:.0f}% of the shorter\n",
                                 100 * d.overlap, 100 * (1 - d.overlap));
  }
  if (d.measured) {
    std::vector<std::string> classes;
    for (int c = 0; c < kNumCostClasses; ++c) {
      const double ridge = d.class_tflops[c] * 1e3 / d.bandwidth_gbps;
      classes.push_back(fmt::format("{} {:.3g} TFLOP/s (ridge {:.2f})", cost_class_name(static_cast<CostClass>(c)),
                                    d.class_tflops[c], ridge));
    }
    text += fmt::format("  measured op classes: {}\n", fmt::join(classes, "; "));
    if (d.matmul_pack_gelems > 0) {
      text += fmt::format(
          "  matmul: B packed at {:.3g}e9 elements/s (all threads), once per block of up to {} rows of each "
          "thread's share; the matmul class is the multiply-adds' rate\n",
          d.matmul_pack_gelems, kCpuMatmulRowBlock);
    }
    const std::string native_bf16 =
        d.native_bf16_stores
            ? fmt::format(" ({:g} stored from an array, with AVX512-BF16's vcvtneps2bf16)", kCpuNarrowBf16Native)
            : "";
    const std::string native_f16 =
        d.native_f16_stores ? fmt::format(" ({:g} stored from an array, with F16C's vcvtps2ph)", kCpuNarrowF16Native)
                            : "";
    text += fmt::format(
        "  16-bit conversions at the simple class's rate, per element: bf16 widen {:g}, round {:g}{}; "
        "f16 widen {:g}, round {:g}{} (vector operations, not FLOPs)\n",
        kCpuWidenBf16, kCpuNarrowBf16, native_bf16, kCpuWidenF16, kCpuNarrowF16, native_f16);
    if (d.others_busy_share > kBusyShare) {
      text += fmt::format(
          "  measured while other programs took {} of the time of the CPUs fusejit runs on: the "
          "figures may be low; {}\n",
          busy_share_text(d.others_busy_share),
          d.busy_remeasures < kMaxBusyRemeasures
              ? "a process that finds them idle measures them again"
              : "measured again as often as fusejit does by itself; `fusejit devices --remeasure` "
                "measures them now");
    }
  }
  return text;
}

namespace {

// Two decimals, or two significant digits below 0.01 us: a plan of a few
// elements showed "0.00 us -> 0.00 us" beside a speedup.
std::string microseconds(double us) {
  return us == 0 || std::abs(us) >= 0.01 ? fmt::format("{:.2f}", us) : fmt::format("{:.2g}", us);
}

// The kernel's ops for the table's 34-character column: as many as fit,
// then "+N more" (a kernel of a 2,000-op graph made an 8,000-character
// line). --json lists them all.
std::string ops_column(const std::vector<std::string>& ops) {
  constexpr size_t kWidth = 34;
  std::string text;
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string next = (text.empty() ? "" : ",") + ops[i];
    const size_t rest = ops.size() - i - 1;
    // Room for this op, and for ",+N more" after it unless it is the last.
    const size_t tail = rest == 0 ? 0 : fmt::format(",+{} more", rest).size();
    if (text.size() + next.size() + tail > kWidth) {
      return text + fmt::format("{}+{} more", text.empty() ? "" : ",", ops.size() - i);
    }
    text += next;
  }
  return text;
}

}  // namespace

std::string format_plan_table(const FusionPlan& plan, const PlanCost& cost) {
  // On a GPU, the instructions per element that set a generated kernel's
  // compute time; a kernel bound by them is "issue"-bound. The column is
  // there in a plan of library matmuls only too (mlp_block's fused plan),
  // as in its unfused plan beside it.
  const bool instructions =
      cost.models_instructions ||
      std::any_of(cost.kernels.begin(), cost.kernels.end(), [](const KernelCost& c) { return c.instructions > 0; });
  std::string text = fmt::format("{} plan: {}\n", plan.label, counted(std::ssize(plan.kernels), "kernel"));
  const size_t name_width = name_column_width(34, plan.kernels);
  text += fmt::format("  {:<{}} {:<9} {:<34} {:>15} {:>15} {:>9} {}{:<8} {:>12}\n", "kernel", name_width, "kind", "ops",
                      "bytes", "FLOPs", "FLOP/B", instructions ? "instr/elem " : "", "bound", "predicted us");
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const Kernel& k = plan.kernels[i];
    const KernelCost& c = cost.kernels[i];
    std::string kind(kernel_kind_name(k.kind));
    if (k.row_strategy == RowStrategy::kReread) kind += "*";
    std::string per_element;
    if (instructions) {
      per_element = c.instructions > 0 ? fmt::format("{:>10.1f} ", c.instructions / k.iteration.numel())
                                       : fmt::format("{:>10} ", "-");
    }
    text += fmt::format("  {:<{}} {:<9} {:<34} {:>15} {:>15.4g} {:>9.4g} {}{:<8} {:>12}\n", k.name, name_width, kind,
                        ops_column(k.user_ops), group_digits(c.bytes()), c.flops, c.intensity, per_element,
                        bound_name(c), microseconds(c.predicted_us));
  }
  text += fmt::format("  {:<{}} {:<9} {:<34} {:>15} {:>15.4g} {:>9} {}{:<8} {:>12}\n", "total", name_width, "", "",
                      group_digits(cost.bytes), cost.flops, "", instructions ? std::string(11, ' ') : "", "",
                      microseconds(cost.predicted_us));
  return text;
}

std::string format_saving(const PlanComparison& c) {
  const double percent = c.unfused.bytes > 0 ? 100.0 * static_cast<double>(c.bytes_saved) /
                                                   static_cast<double>(c.unfused.bytes)
                                             : 0.0;
  return fmt::format(
             "fusion saves {} bytes ({:.1f}% of the unfused traffic) and {} kernel launch{}; "
             "predicted speedup {:.2f}x ({} us -> {} us)\n",
             group_digits(c.bytes_saved), percent, c.kernels_saved, c.kernels_saved == 1 ? "" : "es",
             c.predicted_speedup, microseconds(c.unfused.predicted_us), microseconds(c.fused.predicted_us)) +
         (c.predicted_speedup > 0 && c.predicted_speedup < 1
              ? "note: the fused plan is predicted slower than the unfused one on this device: the fusion pass "
                "joins ops by its rules and weighs predicted time only in choosing what a row* kernel gives up, "
                "and here what fusion costs (work on fewer busy SMs or threads, ops recomputed in each pass of a "
                "row* kernel) outweighs what it saves\n"
              : "");
}

std::string format_idle_threads(const PlanComparison& c, const DeviceSpec& device) {
  std::vector<std::string> plans;
  for (const auto& [label, cost] : {std::pair{"unfused", &c.unfused}, std::pair{"fused", &c.fused}}) {
    // The first few by name: a 20,000-kernel plan made one 330,000-character
    // line. --json gives every kernel's threads.
    constexpr size_t kNamed = 6;
    std::vector<std::string> kernels;
    size_t count = 0;
    for (const KernelCost& k : cost->kernels) {
      if (k.threads > 0 && k.threads < device.compute_units && count++ < kNamed) {
        kernels.push_back(fmt::format("{} on {}", k.name, k.threads));
      }
    }
    if (count > kNamed) kernels.push_back(fmt::format("and {} more (--json says which)", count - kNamed));
    if (!kernels.empty()) plans.push_back(fmt::format("{} {}", label, fmt::join(kernels, ", ")));
  }
  if (plans.empty()) return "";
  return fmt::format(
      "too little work to split over all {} threads: {}; each is predicted at the time of its largest share\n",
      device.compute_units, fmt::join(plans, "; "));
}

nlohmann::json device_json(const DeviceSpec& d) {
  nlohmann::json classes;
  for (int c = 0; c < kNumCostClasses; ++c) {
    classes[std::string(cost_class_name(static_cast<CostClass>(c)))] = d.class_tflops[c];
  }
  return {
      {"name", d.name},
      {"description", d.description},
      {"bandwidth_gbps", d.bandwidth_gbps},
      // A CPU: threads and one thread's copy bandwidth (0: unmeasured); null on a GPU.
      {"threads", d.models_instructions() ? nlohmann::json() : nlohmann::json(d.compute_units)},
      {"thread_bandwidth_gbps", d.models_instructions() ? nlohmann::json() : nlohmann::json(d.thread_bandwidth_gbps)},
      {"peak_tflops", {{"f32", d.peak_f32_tflops}, {"bf16_tensor", d.peak_tensor_tflops}}},
      // A GPU charges generated kernels by instructions (issue_tops), not by class.
      {"class_tflops", d.models_instructions() ? nlohmann::json() : classes},
      {"ridge_f32", d.ridge_f32()},
      {"ridge_tensor", d.ridge_tensor()},
      {"issue_tops", d.models_instructions() ? nlohmann::json(d.issue_tops) : nlohmann::json()},
      // A CPU: elements of B its GEMM packs per second (1e9/s, all
      // threads), null where not modelled (DeviceSpec::matmul_pack_gelems).
      {"matmul_pack_gelems", d.matmul_pack_gelems > 0 ? nlohmann::json(d.matmul_pack_gelems) : nlohmann::json()},
      {"launch_overhead_us", d.launch_overhead_us},
      // The share of the shorter of memory and compute time hidden under
      // the longer (DeviceSpec::overlap).
      {"overlap", d.overlap},
      {"persistent_row_limit",
       d.persistent_row_limit == kAnyRowLength ? nlohmann::json() : nlohmann::json(d.persistent_row_limit)},
      {"measured", d.measured},
      // A measured device: the share of the machine's CPU time other
      // programs took while it was measured (above 0.1 its figures may be
      // low); null for a datasheet's, or where /proc/stat cannot be read.
      {"others_busy_share",
       d.measured && d.others_busy_share >= 0 ? nlohmann::json(d.others_busy_share) : nlohmann::json()},
      // A CPU whose kernels round bf16 (f16) outputs stored from arrays
      // with vcvtneps2bf16 (vcvtps2ph), which conversion_ops prices
      // lower; null on a GPU.
      {"native_bf16_stores", d.models_instructions() ? nlohmann::json() : nlohmann::json(d.native_bf16_stores)},
      {"native_f16_stores", d.models_instructions() ? nlohmann::json() : nlohmann::json(d.native_f16_stores)}};
}

nlohmann::json kernel_json(const FusionPlan& plan, const Kernel& k, const KernelCost& c) {
  auto names = [&](const std::vector<int32_t>& ids) {
    std::vector<std::string> out;
    for (int32_t id : ids) out.push_back(plan.graph->node(id).name);
    return out;
  };
  nlohmann::json j = {
      {"name", k.name},
      {"kind", kernel_kind_name(k.kind)},
      {"ops", k.user_ops},
      {"reads", names(k.reads)},
      {"writes", names(k.writes)},
      {"iteration", std::vector<int64_t>(k.iteration.begin(), k.iteration.end())},
      {"bytes", c.bytes()},
      {"bytes_read", c.bytes_read},
      {"bytes_written", c.bytes_written},
      // CPU: the part of bytes_read that is outputs read before they are written; null on a GPU.
      {"write_allocate_bytes", c.threads > 0 ? nlohmann::json(c.write_allocate_bytes) : nlohmann::json()},
      // The part of bytes_read that is broadcast reads read again (kernel_bytes.h).
      {"broadcast_reread_bytes", c.broadcast_reread_bytes},
      {"flops", c.flops},
      {"intensity", c.intensity},
      {"unit", c.unit},
      {"bound", bound_name(c)},
      {"instructions", c.instructions > 0 ? nlohmann::json(c.instructions) : nlohmann::json()},
      // GPU: the share of SMs its blocks occupy, which its instructions issue on; null elsewhere.
      {"active_sm_share", c.active_sm_share > 0 ? nlohmann::json(c.active_sm_share) : nlohmann::json()},
      // CPU: 16-bit widen/narrow operations, charged beside the FLOPs.
      {"conversion_ops", c.conversion_ops > 0 ? nlohmann::json(c.conversion_ops) : nlohmann::json()},
      // CPU: threads its work is split over; null on a GPU.
      {"threads", c.threads > 0 ? nlohmann::json(c.threads) : nlohmann::json()},
      {"memory_us", c.memory_us},
      {"compute_us", c.compute_us},
      {"predicted_us", c.predicted_us}};
  if (k.kind == KernelKind::kRow) {
    j["row_strategy"] = row_strategy_name(k.row_strategy);
    j["reduction_stages"] = k.reduction_stages;
    j["row_passes"] = k.row_passes;
  }
  return j;
}

std::string format_boundaries(const FusionPlan& fused, const FusionOptions& options) {
  const std::vector<FusionBoundary> boundaries = fusion_boundaries(fused, options);
  if (boundaries.empty()) return "";
  std::string text = "why the fused kernels are apart:\n";
  for (const FusionBoundary& b : boundaries) {
    text += fmt::format("  {} -> {} ({}): {}\n", fused.kernels[static_cast<size_t>(b.producer)].name,
                        fused.kernels[static_cast<size_t>(b.consumer)].name, fmt::join(b.tensors, ", "), b.reason);
  }
  return text;
}

nlohmann::json boundaries_json(const FusionPlan& fused, const FusionOptions& options) {
  nlohmann::json out = nlohmann::json::array();
  for (const FusionBoundary& b : fusion_boundaries(fused, options)) {
    out.push_back({{"from", fused.kernels[static_cast<size_t>(b.producer)].name},
                   {"to", fused.kernels[static_cast<size_t>(b.consumer)].name},
                   {"tensors", b.tensors},
                   {"reason", b.reason}});
  }
  return out;
}

nlohmann::json plan_json(const FusionPlan& plan, const PlanCost& cost) {
  nlohmann::json kernels = nlohmann::json::array();
  for (size_t i = 0; i < plan.kernels.size(); ++i) kernels.push_back(kernel_json(plan, plan.kernels[i], cost.kernels[i]));
  return {{"num_kernels", plan.kernels.size()},
          {"bytes", cost.bytes},
          {"flops", cost.flops},
          {"predicted_us", cost.predicted_us},
          {"kernels", kernels}};
}

nlohmann::json comparison_json(const DeviceSpec& device, const FusionPlan& unfused, const FusionPlan& fused,
                               const PlanComparison& c) {
  return {{"device", device_json(device)},
          {"unfused", plan_json(unfused, c.unfused)},
          {"fused", plan_json(fused, c.fused)},
          {"bytes_saved", c.bytes_saved},
          {"kernels_saved", c.kernels_saved},
          {"predicted_speedup", c.predicted_speedup}};
}

}  // namespace fusejit
