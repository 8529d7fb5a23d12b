#include "runtime/bench_report.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cost/report.h"
#include "cost/streaming_copy.h"
#include "ir/counted.h"

namespace fusejit {
namespace {

double percent(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }
double ratio(double part, double whole) { return whole > 0 ? part / whole : 0.0; }

// The compute roof of a kernel: what the cost model assumed (per op class
// on a CPU), else the FP32 peak.
double peak_gflops(const BenchResult& r, const KernelBench& k) {
  return k.compute_roof_gflops > 0 ? k.compute_roof_gflops : r.device.peak_f32_tflops * 1e3;
}

// The memory roof of a kernel: the measured ceiling, or the share of it
// the cost model gives a kernel that runs on fewer threads than the CPU has.
double memory_roof_gflops(const BenchResult& r, const KernelBench& k) {
  return r.ceiling_gbps * k.bandwidth_share * k.intensity;
}

// The FLOP/s a kernel of this intensity can reach, as the cost model
// prices it: the lower of the two roofs where the device overlaps memory
// and compute time (a GPU), the harmonic sum where it adds them (a CPU,
// overlap 0), in between for a partial overlap. With the lower roof, a CPU
// kernel that ran exactly as predicted showed between 50% and 100%.
double attainable_gflops(const BenchResult& r, const KernelBench& k) {
  const double compute = peak_gflops(r, k), memory = memory_roof_gflops(r, k);
  if (compute <= 0 || memory <= 0) return std::min(compute, memory);
  const double per_flop_compute = 1 / compute, per_flop_memory = 1 / memory;
  const double overlap = std::clamp(r.device.overlap, 0.0, 1.0);
  return 1 /
         (std::max(per_flop_compute, per_flop_memory) + (1 - overlap) * std::min(per_flop_compute, per_flop_memory));
}

std::string plan_table(const BenchResult& r, const PlanBench& p) {
  std::string t = fmt::format("{} plan: {}\n", p.label, counted(std::ssize(p.kernels), "kernel"));
  const size_t name_width = name_column_width(40, p.kernels);
  t += fmt::format("  {:<{}} {:>15} {:>11} {:>11} {:>11} {:>9} {:>10}  {}\n", "kernel", name_width, "bytes (pred.)",
                   "pred. us", "median us", "min us", "GB/s", "% ceiling", "measured bytes");
  for (const KernelBench& k : p.kernels) {
    t += fmt::format("  {:<{}} {:>15} {:>11.1f} {:>11.1f} {:>11.1f} {:>9.1f} {:>9.1f}%  {}\n", k.name, name_width,
                     group_digits(k.bytes), k.predicted_us, k.measured_us_median, k.measured_us_min, k.effective_gbps,
                     percent(k.effective_gbps, r.ceiling_gbps),
                     k.measured_bytes ? group_digits(static_cast<int64_t>(*k.measured_bytes)) : "-");
  }
  t += fmt::format("  {:<{}} {:>15} {:>11.1f} {:>11.1f} {:>11.1f} {:>9.1f} {:>9.1f}%\n", "total", name_width,
                   group_digits(p.bytes), p.predicted_us, p.measured_us_median, p.measured_us_min, p.effective_gbps,
                   percent(p.effective_gbps, r.ceiling_gbps));
  return t;
}

nlohmann::json run_json(const PlanBench& p) {
  nlohmann::json kernels = nlohmann::json::array();
  for (const KernelBench& k : p.kernels) {
    kernels.push_back(
        {{"name", k.name},
         {"executed_by", k.executed_by},
         {"bytes", k.bytes},
         {"flops", k.flops},
         {"intensity", k.intensity},
         {"compute_roof_gflops", k.compute_roof_gflops},
         {"bandwidth_share", k.bandwidth_share},
         {"instructions", k.instructions > 0 ? nlohmann::json(k.instructions) : nlohmann::json()},
         {"predicted_us", k.predicted_us},
         {"measured_us_median", k.measured_us_median},
         {"measured_us_min", k.measured_us_min},
         {"effective_gbps", k.effective_gbps},
         {"achieved_gflops", k.achieved_gflops},
         {"measured_bytes", k.measured_bytes ? nlohmann::json(*k.measured_bytes) : nlohmann::json()},
         {"compile_ms", k.compile_ms},
         {"cache_hit", k.cache_hit},
         {"same_code_as", k.shares_code_with.empty() ? nlohmann::json() : nlohmann::json(k.shares_code_with)},
         {"launch_shape", k.launch_shape.empty() ? nlohmann::json() : nlohmann::json(k.launch_shape)},
         {"launch_tuning", k.tuning.empty() ? nlohmann::json() : nlohmann::json(k.tuning)},
         {"library_call", k.library_call.empty() ? nlohmann::json() : nlohmann::json(k.library_call)}});
  }
  return {{"bytes", p.bytes},
          {"measured_bytes", p.measured_bytes ? nlohmann::json(*p.measured_bytes) : nlohmann::json()},
          {"flops", p.flops},
          {"predicted_us", p.predicted_us},
          {"measured_us_median", p.measured_us_median},
          {"measured_us_min", p.measured_us_min},
          {"effective_gbps", p.effective_gbps},
          {"max_rel_error", std::isnan(p.max_rel_error) ? nlohmann::json() : nlohmann::json(p.max_rel_error)},
          {"correct", p.correct},
          {"mismatch", p.mismatch},
          {"beyond_float64_tolerance", p.beyond_float64_tolerance},
          {"outputs_beyond_float64_tolerance", p.beyond_tolerance},
          {"order_dependent_elements", p.order_dependent_elements},
          {"kernels", kernels}};
}

// What the CPU backend's copy (prepare_copy) runs: streaming_copy, memcpy without AVX.
const char* cpu_copy_kind() {
  return std::string_view(streaming_copy_method()) == "memcpy" ? "multi-threaded memcpy" : "multi-threaded streaming";
}

// "512 MiB", "1.5 MiB", "384 KiB", or "16 bytes": never rounded to 0 or
// to a unit that says more than there is.
std::string binary_size(int64_t bytes) {
  if (bytes < 1024) return fmt::format("{} bytes", bytes);  // a tiny graph moves 16, not "1 KiB"
  if (bytes < (int64_t{1} << 20)) {                         // 1,184 bytes are 1.2 KiB, not "2 KiB"
    if (bytes % 1024 == 0) return fmt::format("{} KiB", bytes >> 10);
    return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024);
  }
  if (bytes % (int64_t{1} << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));  // 1.5 MiB, not 1
}

// Median over min past which a plan's timings count as uneven.
constexpr double kTimingSpreadWarning = 1.25;

// A warning when repetitions of a plan took very different times: a busy
// machine (other jobs, a noisy virtual machine) makes medians, and the
// speedup between them, unreliable, and nothing else in the report says so.
std::string timing_spread_note(const BenchResult& r) {
  std::vector<std::string> spreads;
  for (const PlanBench* p : {&r.unfused, &r.fused}) {
    const double spread = p->measured_us_min > 0 ? p->measured_us_median / p->measured_us_min : 1;
    if (spread > kTimingSpreadWarning) spreads.push_back(fmt::format("{} {:.2f}x", p->label, spread));
  }
  if (spreads.empty()) return "";
  return fmt::format("note: repetitions took uneven times (median over min: {}): the machine may be busy, and the "
                     "speedup is unreliable; rerun, with more --reps\n",
                     fmt::join(spreads, ", "));
}

// One line per kernel whose launch shapes were timed against each other
// (runtime/cuda_row_tuning.h): which was kept, and why.
std::string launch_tuning_lines(const BenchResult& r) {
  std::string t;
  for (const PlanBench* p : {&r.unfused, &r.fused}) {
    for (const KernelBench& k : p->kernels) {
      if (k.tuning.empty() || !k.shares_code_with.empty()) continue;
      t += fmt::format("  {} {}: {}; {}\n", p->label, k.name, k.launch_shape, k.tuning);
    }
  }
  return t.empty() ? t
                   : "launch shapes (timed on each kernel's first run, FUSEJIT_AUTOTUNE=0 keeps the defaults):\n" + t;
}

// One line per kernel a library runs (a GPU's matmuls): the call, and why
// where it is not the first choice (cuBLASLt refusing an epilogue).
std::string library_call_lines(const BenchResult& r) {
  std::string t;
  for (const PlanBench* p : {&r.unfused, &r.fused}) {
    for (const KernelBench& k : p->kernels) {
      if (!k.library_call.empty()) t += fmt::format("  {} {}: {}\n", p->label, k.name, k.library_call);
    }
  }
  return t.empty() ? t : "library kernels:\n" + t;
}

}  // namespace

std::string format_bench(const BenchResult& r) {
  std::string t = fmt::format("backend {}: {}\n", r.backend, r.description);
  const double cache_ratio =
      r.device.cache_bytes > 0 ? static_cast<double>(r.working_set_bytes) / static_cast<double>(r.device.cache_bytes) : 0;
  // A small graph is a sliver of the cache: "0.0x" would say nothing.
  const std::string against_cache =
      r.device.cache_bytes <= 0 ? std::string("the last-level cache's size is unknown: the system does not report it")
      : cache_ratio >= 0.1
          ? fmt::format("{:.{}f}x the {} last-level cache", cache_ratio, cache_ratio < 1 ? 2 : 1,
                        binary_size(r.device.cache_bytes))
          : fmt::format("{:.2g}% of the {} last-level cache", 100 * cache_ratio, binary_size(r.device.cache_bytes));
  t += fmt::format(
      "memory ceiling: {:.1f} GB/s{}, the median of {} {} {} of {} timed between the plans (best {:.1f} GB/s); the "
      "unfused plan moves {} per run ({})\n",
      r.ceiling_gbps, r.device.measured ? " (the predictions' bandwidth)" : "", r.reps,
      r.backend != "cpu" ? "device-to-device" : cpu_copy_kind(), r.reps == 1 ? "copy" : "copies",
      binary_size(r.copy_bytes), r.ceiling_best_gbps, binary_size(r.working_set_bytes), against_cache);
  if (r.device.measured) {
    t += fmt::format(
        "launch: {:.1f} us per kernel (the predictions'), the thread pool's hand-off measured in this run (the "
        "cached figure, from the process that measured this CPU, is {:.1f})\n",
        r.device.launch_overhead_us, r.cached_launch_us);
  }
  t += fmt::format("inputs: {}\n", r.random_inputs
                                       ? fmt::format("random, normal(0, 1) rounded to their dtypes (seed {})", r.seed)
                                   : r.inputs_from.empty() ? std::string("given by the caller")
                                                           : "from " + r.inputs_from);
  t += fmt::format(
      "timing: {} after a warm-up, each the copy, the unfused plan and the fused plan (every other one in the "
      "reverse order), cache flushed before every kernel{}; median (and min) of each kernel, and of each whole run "
      "in the total row (not the sum of the kernels' medians)\n",
      counted(r.reps, "repetition"),
      r.backend == "cuda" ? " and the writes it left in L2 drained inside its time" : "");
  for (const PlanBench* p : {&r.unfused, &r.fused}) {
    std::string verdict = "ok";
    if (!p->correct) {
      verdict = "WRONG: " + p->mismatch;
    } else if (p->beyond_float64_tolerance) {
      // Named, with where each differs most: a NaN where the float64
      // reference has a number is float32 overflowing inside a kernel,
      // which a reader should see rather than a bare "ok".
      constexpr size_t kNamed = 3;
      std::vector<std::string> named(p->beyond_tolerance.begin(),
                                     p->beyond_tolerance.begin() + std::min(kNamed, p->beyond_tolerance.size()));
      if (p->beyond_tolerance.size() > kNamed)
        named.push_back(fmt::format("and {} more", p->beyond_tolerance.size() - kNamed));
      verdict = fmt::format(
          "ok, as float32 arithmetic gives (it overflows inside a kernel) or within the rounding noise of an "
          "ill-conditioned result, but outside the float64 reference's tolerance: {}",
          fmt::join(named, "; "));
    }
    if (p->correct && p->order_dependent_elements > 0) {
      verdict += fmt::format(
          "; {} not compared (float32 sums there overflow in some orders of adding the terms and not in others, "
          "or a multiply-add can keep a product that overflows: more than one answer is right)",
          counted(p->order_dependent_elements, "element"));
    }
    // NaN: every output has an infinity or NaN where the float64 reference
    // has another value, so no error is a number (the verdict says why).
    const std::string error = std::isnan(p->max_rel_error)
                                  ? "max relative error not a number (non-finite values differ from the float64 ones)"
                                  : fmt::format("max relative error {:.3g}", p->max_rel_error);
    t += fmt::format("check {}: {} against the reference: {}\n", p->label, error, verdict);
  }
  t += "\n" + plan_table(r, r.unfused) + "\n" + plan_table(r, r.fused) + "\n";
  t += fmt::format("speedup of fused over unfused: measured {:.2f}x ({:.1f} us -> {:.1f} us), predicted {:.2f}x "
                   "(measured/predicted {:.0f}%)\n",
                   r.speedup_measured, r.unfused.measured_us_median, r.fused.measured_us_median, r.speedup_predicted,
                   percent(r.speedup_measured, r.speedup_predicted));
  t += timing_spread_note(r);
  t += fmt::format("bytes saved by fusion: {} of {} ({:.1f}%)\n", group_digits(r.bytes_saved),
                   group_digits(r.unfused.bytes), percent(static_cast<double>(r.bytes_saved), r.unfused.bytes));
  std::string counters = "not available (" + r.counters_note + ")";
  if (r.counters_note.empty() && r.unfused.measured_bytes && r.fused.measured_bytes) {
    counters = fmt::format("read from hardware counters: unfused {:.2f}x, fused {:.2f}x the predicted bytes",
                           ratio(*r.unfused.measured_bytes, r.unfused.bytes),
                           ratio(*r.fused.measured_bytes, r.fused.bytes));
  }
  t += fmt::format("fused time vs predicted: {:.2f}x; measured bytes per kernel: {}\n",
                   r.fused.predicted_us > 0 ? r.fused.measured_us_median / r.fused.predicted_us : 0.0, counters);
  t += launch_tuning_lines(r);
  t += library_call_lines(r);
  return t;
}

std::string format_roofline(const BenchResult& r) {
  const bool instructions = r.device.models_instructions();
  std::string t = fmt::format(
      "roofline ({}: measured ceiling {:.1f} GB/s; compute roof per kernel from the cost model's {}, FP32 "
      "FMA peak {:.0f} GFLOP/s)\n",
      r.backend, r.ceiling_gbps, instructions ? "instructions at the issue rate" : "op classes",
      r.device.peak_f32_tflops * 1e3);
  if (r.device.overlap < 1) {
    t += fmt::format(
        "  (roof: the memory and compute times {}, as the cost model does on this device: a kernel that runs as "
        "predicted, launch aside, is at 100%)\n",
        r.device.overlap > 0 ? "partly added" : "added");
  }
  const size_t name_width = std::max(name_column_width(40, r.unfused.kernels), name_column_width(40, r.fused.kernels));
  t += fmt::format("  {:<8} {:<{}} {:>10} {:>12} {:>12} {:>8}  {}\n", "plan", "kernel", name_width, "FLOP/byte",
                   "GFLOP/s", "roof GFLOP/s", "% roof", "bound by");
  bool above_roof = false;
  for (const PlanBench* p : {&r.unfused, &r.fused}) {
    for (const KernelBench& k : p->kernels) {
      const double roof = attainable_gflops(r, k);
      const bool memory = memory_roof_gflops(r, k) < peak_gflops(r, k);
      above_roof = above_roof || percent(k.achieved_gflops, roof) > 105;
      t += fmt::format("  {:<8} {:<{}} {:>10.2f} {:>12.2f} {:>12.2f} {:>7.1f}%  {}\n", p->label, k.name, name_width,
                       k.intensity, k.achieved_gflops, roof, percent(k.achieved_gflops, roof),
                       memory               ? "memory"
                       : k.instructions > 0 ? "issue"
                                            : "compute");
    }
  }
  if (above_roof && r.backend == "cpu") {
    t += "  (above 100%: a kernel ran faster than the cached op throughputs allow; they were measured when this "
         "machine ran slower, or its op mix runs faster than the probes'; `fusejit devices --remeasure` measures "
         "them again)\n";
  }
  return t;
}

nlohmann::json bench_json(const BenchResult& r) {
  return {{"backend", r.backend},
          {"device", r.description},
          {"cost_model_device", r.device.name},
          {"cost_model_bandwidth_gbps", r.device.bandwidth_gbps},  // = ceiling_gbps for a measured device (a CPU)
          {"cost_model_launch_us", r.device.launch_overhead_us},   // measured in this run on the CPU
          {"ceiling_gbps", r.ceiling_gbps},                        // the median of the copies, one per repetition
          {"ceiling_best_gbps", r.ceiling_best_gbps},
          {"copy_bytes", r.copy_bytes},
          {"working_set_bytes", r.working_set_bytes},
          {"last_level_cache_bytes",  // null where the system does not report it
           r.device.cache_bytes > 0 ? nlohmann::json(r.device.cache_bytes) : nlohmann::json()},
          {"reps", r.reps},
          {"seed", r.random_inputs ? nlohmann::json(r.seed) : nlohmann::json()},  // null for given inputs
          {"inputs", r.random_inputs         ? std::string("random")
                     : r.inputs_from.empty() ? "given"
                                             : r.inputs_from},
          {"graph", r.graph_source},
          {"unfused", run_json(r.unfused)},
          {"fused", run_json(r.fused)},
          {"speedup_measured", r.speedup_measured},
          {"speedup_predicted", r.speedup_predicted},
          {"bytes_saved", r.bytes_saved},
          {"max_rel_error", std::isnan(r.max_rel_error) ? nlohmann::json() : nlohmann::json(r.max_rel_error)},
          {"correct", r.correct},
          {"measured_bytes_note", r.counters_note}};
}

}  // namespace fusejit
