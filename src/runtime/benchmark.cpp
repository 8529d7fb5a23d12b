#include "runtime/benchmark.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <new>

#include <fmt/format.h>

#include "fusion/plan_reference.h"
#include "ir/compare.h"
#include "ir/counted.h"
#include "ir/error.h"
#include "ir/verifier.h"
#include "runtime/statistics.h"

namespace fusejit {
namespace {

void say(const BenchOptions& options, const std::string& line) {
  if (options.progress) options.progress(line);
}

// Runs `plan` once with poisoned outputs and judges them as the fuzzer does
// (first_wrong_output), so that bench never calls wrong a kernel the fuzzer
// accepts (an ill-conditioned output, float32 overflow inside a kernel) nor
// the reverse. The reported error is against the float64 reference.
absl::Status check(LoadedPlan& loaded, const TensorMap& inputs, const TensorMap& reference, const BenchOptions& options,
                   PlanBench& out) {
  if (absl::Status s = loaded.poison_outputs(); !s.ok()) return s;
  if (absl::Status s = loaded.run(); !s.ok()) return s;
  absl::StatusOr<TensorMap> outputs = loaded.outputs();
  if (!outputs.ok()) return outputs.status();
  if (out.label == "fused" && options.tamper_fused_outputs) options.tamper_fused_outputs(*outputs);
  const Graph& g = *loaded.plan().graph;
  OrderDependentElements left_out;
  absl::StatusOr<std::string> wrong =
      first_wrong_output(loaded.plan(), inputs, *outputs, &reference, &out.order_dependent_elements, &left_out);
  if (!wrong.ok()) return wrong.status();
  out.correct = wrong->empty();
  out.mismatch = *std::move(wrong);
  // The error against the float64 reference, without the elements the
  // verdict left out (more than one answer is right there): the check line
  // says how many, and the largest error or the element named must not be
  // one of them.
  bool any_number = false;
  out.max_rel_error = 0;
  for (int32_t id : g.outputs()) {
    const Node& n = g.node(id);
    const auto flags = left_out.find(n.name);
    const Comparison c =
        compare_tensors(outputs->at(n.name), reference.at(n.name), flags != left_out.end() ? &flags->second : nullptr);
    if (!std::isnan(c.relative_error)) {
      any_number = true;
      out.max_rel_error = std::max(out.max_rel_error, c.relative_error);
    }
    if (!c.within(n.dtype)) out.beyond_tolerance.push_back(fmt::format("{}: {}", n.name, c.mismatch));
  }
  if (!any_number && !g.outputs().empty()) out.max_rel_error = std::numeric_limits<double>::quiet_NaN();
  if (!out.correct) out.beyond_tolerance.clear();  // the mismatch says what is wrong
  out.beyond_float64_tolerance = !out.beyond_tolerance.empty();
  return absl::OkStatus();
}

// A plan loaded with the inputs, checked against the reference, and ready
// to be timed; its times, per kernel and per repetition, as they come.
struct PlanUnderTest {
  std::unique_ptr<LoadedPlan> loaded;
  PlanBench bench;
  std::vector<std::vector<double>> times;  // per kernel
  std::vector<double> totals;              // per repetition
};

absl::StatusOr<PlanUnderTest> prepare_plan(Backend& backend, const FusionPlan& plan, const TensorMap& inputs,
                                           const BenchOptions& options) {
  PlanUnderTest out;
  out.bench.label = plan.label;
  say(options, fmt::format("{} plan: compiling {}", plan.label, counted(std::ssize(plan.kernels), "kernel")));
  absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = backend.load(plan);
  if (!loaded.ok()) return loaded.status();
  out.loaded = *std::move(loaded);
  if (absl::Status s = out.loaded->set_inputs(inputs); !s.ok()) return s;
  int64_t generated = 0, distinct = 0, cached = 0;
  for (const LoadedKernelInfo& k : out.loaded->kernels()) {
    if (k.executed_by != "jit") continue;
    ++generated;
    if (!k.shares_code_with.empty()) continue;
    ++distinct;
    cached += k.cache_hit ? 1 : 0;
  }
  if (distinct < generated) {  // repeated layers: say why there were fewer compiles
    say(options, fmt::format("{} plan: {} generated kernels run {} ({} from the kernel cache)", plan.label,
                             generated, counted(distinct, "distinct compiled kernel"), cached));
  }

  say(options, fmt::format("{} plan: checking against the reference interpreter", plan.label));
  absl::StatusOr<TensorMap> reference = interpret_plan(plan, inputs);
  if (!reference.ok()) return reference.status();
  if (absl::Status s = check(*out.loaded, inputs, *reference, options, out.bench); !s.ok()) return s;
  out.times.resize(plan.kernels.size());
  return out;
}

// One repetition of the plan: each kernel timed after the cache is flushed.
absl::Status time_plan(Backend& backend, PlanUnderTest& p, bool keep) {
  double total = 0;
  for (size_t k = 0; k < p.times.size(); ++k) {
    if (absl::Status s = backend.flush_cache(); !s.ok()) return s;
    absl::StatusOr<double> us = p.loaded->time_kernel(k);
    if (!us.ok()) return us.status();
    if (keep) p.times[k].push_back(*us);
    total += *us;
  }
  if (keep) p.totals.push_back(total);
  return absl::OkStatus();
}

// The plan's figures from its times and the cost model's predictions, then
// its hardware counters (read after all timing, so that profiling, which
// replays kernels, cannot disturb the times).
PlanBench finish_plan(PlanUnderTest& p, const PlanCost& cost, const DeviceSpec& device, const BenchOptions& options) {
  PlanBench out = std::move(p.bench);
  out.bytes = cost.bytes;
  out.flops = cost.flops;
  out.predicted_us = cost.predicted_us;
  const size_t n = p.times.size();
  for (size_t k = 0; k < n; ++k) {
    const KernelCost& c = cost.kernels[k];
    const LoadedKernelInfo& info = p.loaded->kernels()[k];
    KernelBench kb;
    kb.name = c.name;
    kb.executed_by = info.executed_by;
    kb.bytes = c.bytes();
    kb.flops = c.flops;
    kb.intensity = c.intensity;
    kb.compute_bound = c.compute_bound;
    kb.compute_roof_gflops = c.compute_us > 0 ? c.flops / (c.compute_us * 1e3) : 0;
    if (c.memory_us > 0 && device.bandwidth_gbps > 0) {
      kb.bandwidth_share =
          std::clamp(static_cast<double>(c.bytes()) / (c.memory_us * 1e3) / device.bandwidth_gbps, 0.0, 1.0);
    }
    kb.instructions = c.instructions;
    kb.predicted_us = c.predicted_us;
    kb.measured_us_median = median(p.times[k]);
    kb.measured_us_min = p.times[k].empty() ? 0 : *std::min_element(p.times[k].begin(), p.times[k].end());
    kb.effective_gbps = kb.measured_us_median > 0 ? static_cast<double>(kb.bytes) / (kb.measured_us_median * 1e3) : 0;
    kb.achieved_gflops = kb.measured_us_median > 0 ? kb.flops / (kb.measured_us_median * 1e3) : 0;
    kb.compile_ms = info.compile_ms;
    kb.cache_hit = info.cache_hit;
    kb.shares_code_with = info.shares_code_with;
    kb.launch_shape = info.launch_shape;
    kb.tuning = info.tuning;
    kb.library_call = info.library_call;
    out.kernels.push_back(std::move(kb));
  }
  // A failure is the reason for every kernel.
  if (!options.read_counters)
    out.counters_note = "not read: counters turned off (--no-counters; BenchOptions::read_counters)";
  for (size_t k = 0; k < n && out.counters_note.empty(); ++k) {
    absl::StatusOr<double> bytes = p.loaded->measure_kernel_bytes(k);
    if (bytes.ok()) {
      out.kernels[k].measured_bytes = *bytes;
    } else {
      out.counters_note = std::string(status_text(bytes.status()));
    }
  }
  if (out.counters_note.empty()) {
    out.measured_bytes = 0;
    for (const KernelBench& kb : out.kernels) *out.measured_bytes += *kb.measured_bytes;
  } else {
    for (KernelBench& kb : out.kernels) kb.measured_bytes.reset();
  }
  out.measured_us_median = median(p.totals);
  out.measured_us_min = p.totals.empty() ? 0 : *std::min_element(p.totals.begin(), p.totals.end());
  out.effective_gbps =
      out.measured_us_median > 0 ? static_cast<double>(out.bytes) / (out.measured_us_median * 1e3) : 0;
  return out;
}

}  // namespace

absl::StatusOr<BenchResult> run_benchmark(Backend& backend, const Graph& graph, const BenchOptions& options) {
  // A library call: mistakes are a status, as for any run, rather than an
  // exception from the planners or a median of no repetitions.
  if (options.reps < 1) {
    return absl::InvalidArgumentError(
        fmt::format("run_benchmark: BenchOptions::reps must be at least 1, got {}", options.reps));
  }
  if (absl::Status s = verify(graph); !s.ok()) {
    return absl::InvalidArgumentError(fmt::format("run_benchmark: the graph does not verify:\n{}", status_text(s)));
  }
  // Inputs that do not fit the graph, or random ones that do not fit in
  // memory, are found before minutes of calibrating, compiling and timing.
  // Their messages are about the user's data, not the call: no function
  // name before them (the command line prints them as they are).
  if (options.inputs != nullptr) {
    if (absl::Status s = check_inputs(graph, *options.inputs); !s.ok()) {
      return absl::InvalidArgumentError(std::string(status_text(s)));
    }
  }
  TensorMap generated;
  if (options.inputs == nullptr) {
    // random_inputs throws, like the graph builder, where the inputs do not
    // fit in memory; run_benchmark returns statuses.
    try {
      generated = random_inputs(graph, options.seed);
    } catch (const Error& e) {
      return absl::ResourceExhaustedError(e.what());
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError("out of host memory for the random inputs");
    }
  }
  const TensorMap& inputs = options.inputs != nullptr ? *options.inputs : generated;
  BenchResult r;
  r.backend = std::string(backend.name());
  r.description = backend.description();
  r.device = backend.device();
  r.reps = options.reps;
  r.seed = options.seed;
  r.random_inputs = options.inputs == nullptr;
  r.inputs_from = options.inputs_from;
  r.graph_source = graph.source_file();
  const FusionOptions fusion = fusion_options_for(r.device);
  const FusionPlan unfused = make_unfused_plan(graph, fusion);
  const FusionPlan fused = make_fused_plan(graph, fusion);
  r.working_set_bytes = estimate_plan(unfused, r.device).bytes;

  // The copy moves as many bytes as the larger of the unfused plan's
  // traffic and four times the last-level cache, so that it measures memory.
  r.copy_bytes = std::max<int64_t>({r.working_set_bytes / 2, 4 * r.device.cache_bytes, int64_t{64} << 20});
  r.copy_bytes = std::min<int64_t>(r.copy_bytes, int64_t{1} << 30);
  say(options, fmt::format("preparing a copy of {} MiB, to be timed beside each repetition", r.copy_bytes >> 20));
  absl::StatusOr<std::unique_ptr<CopyTimer>> copy = backend.prepare_copy(r.copy_bytes);
  if (!copy.ok()) return copy.status();

  // The predictions come after the timing: a measured device's bandwidth
  // is the ceiling measured with it.
  absl::StatusOr<PlanUnderTest> u = prepare_plan(backend, unfused, inputs, options);
  if (!u.ok()) return u.status();
  absl::StatusOr<PlanUnderTest> f = prepare_plan(backend, fused, inputs, options);
  if (!f.ok()) return f.status();

  // Each repetition times the copy and both plans, one after the other, in
  // the order copy, unfused, fused and then the reverse: on a machine whose
  // bandwidth drifts (neighbours on a shared VM, a GPU's clocks), every
  // repetition's three figures come from the same few milliseconds, and a
  // drift within a repetition favours no plan. Timing each plan's
  // repetitions in a block, and the copy before or after them, had on the
  // development VM the ceiling read 29 GB/s in a run whose kernels moved 37.
  std::vector<double> copies_us;
  for (int rep = -1; rep < options.reps; ++rep) {  // repetition -1 warms up
    const bool keep = rep >= 0;
    if (keep) say(options, fmt::format("repetition {} of {}: the copy and both plans", rep + 1, options.reps));
    const auto time_copy = [&]() -> absl::Status {
      absl::StatusOr<double> us = (*copy)->time_us();
      if (!us.ok()) return us.status();
      if (keep) copies_us.push_back(*us);
      return absl::OkStatus();
    };
    const bool forward = rep % 2 == 0;
    if (forward) {
      if (absl::Status s = time_copy(); !s.ok()) return s;
    }
    for (PlanUnderTest* p : forward ? std::array{&*u, &*f} : std::array{&*f, &*u}) {
      if (absl::Status s = time_plan(backend, *p, keep); !s.ok()) return s;
    }
    if (!forward) {
      if (absl::Status s = time_copy(); !s.ok()) return s;
    }
  }
  copy->reset();  // its buffers are not needed for the counters
  // The median, as for the kernels: the ceiling of the moments they ran in.
  r.ceiling_gbps = copy_gbps(r.copy_bytes, median(copies_us));
  r.ceiling_best_gbps = copy_gbps(r.copy_bytes, *std::min_element(copies_us.begin(), copies_us.end()));
  if (r.device.measured && r.ceiling_gbps > 0) r.device.bandwidth_gbps = r.ceiling_gbps;
  // The same for the launch overhead: a 600-kernel plan was predicted 6x
  // slow with a cached 33 us per launch, where this process's kernels took
  // 5.6 us each, launch included.
  r.cached_launch_us = r.device.launch_overhead_us;
  if (r.device.measured) {
    if (std::optional<double> launch = backend.measure_launch_us()) r.device.launch_overhead_us = *launch;
  }
  const PlanComparison predicted = compare_plans(unfused, fused, r.device);
  r.speedup_predicted = predicted.predicted_speedup;
  r.bytes_saved = predicted.bytes_saved;
  r.unfused = finish_plan(*u, predicted.unfused, r.device, options);
  r.fused = finish_plan(*f, predicted.fused, r.device, options);

  r.speedup_measured = r.fused.measured_us_median > 0 ? r.unfused.measured_us_median / r.fused.measured_us_median : 0;
  // The worse plan's, of the outputs whose error is a number.
  r.max_rel_error = std::isnan(r.unfused.max_rel_error) ? r.fused.max_rel_error
                    : std::isnan(r.fused.max_rel_error) ? r.unfused.max_rel_error
                                                        : std::max(r.unfused.max_rel_error, r.fused.max_rel_error);
  r.correct = r.unfused.correct && r.fused.correct;
  r.counters_note = !r.unfused.counters_note.empty() ? r.unfused.counters_note : r.fused.counters_note;
  return r;
}

}  // namespace fusejit
