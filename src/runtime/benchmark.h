// The fused-vs-unfused benchmark: both plans of one graph run on the same
// fresh random inputs, each checked against the reference interpreter, then
// timed kernel by kernel (compile and load are not timed; the last-level
// cache is flushed before every kernel, so each reads its inputs from
// memory), next to what the cost model predicted for them and to the
// memory ceiling measured in the same run: a copy timed in every
// repetition, between the plans. Both plans stay loaded until the end.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <absl/status/statusor.h>

#include "cost/cost_model.h"
#include "runtime/backend.h"

namespace fusejit {

struct BenchOptions {
  int reps = 10;      // timed repetitions of each plan
  uint64_t seed = 1;  // of the random inputs
  // The inputs to run both plans on instead of random ones (checked against
  // the graph first); must outlive the call. `inputs_from` says where they
  // came from in the report ("" for "given by the caller").
  const TensorMap* inputs = nullptr;
  std::string inputs_from;
  // Whether to read memory traffic counters (LoadedPlan::measure_kernel_bytes).
  bool read_counters = true;
  // Called with a line of progress ("compiling 4 kernels of the fused plan").
  std::function<void(std::string_view)> progress;
  // Test hook: called on the fused plan's outputs before they are checked,
  // to show that a wrong result is caught.
  std::function<void(TensorMap&)> tamper_fused_outputs;
};

struct KernelBench {
  std::string name;
  std::string executed_by;  // "jit", "cublas"
  int64_t bytes = 0;        // predicted (cost model)
  double flops = 0;
  double intensity = 0;     // flops / bytes
  bool compute_bound = false;  // as predicted
  // The compute roof the cost model puts this kernel under: its FLOPs over
  // its predicted compute time (on a CPU each op class has its own
  // throughput, so a chain of erf and Philox has a lower roof than FMAs; on
  // a GPU a generated kernel's time is its instructions at the issue rate).
  double compute_roof_gflops = 0;
  // The share of the device's bandwidth the cost model gives this kernel:
  // below 1 for a CPU kernel whose work splits over fewer threads than the
  // machine has (each draws at most one thread's copy rate), so that its
  // memory roof is the one its prediction assumed.
  double bandwidth_share = 1;
  double instructions = 0;  // KernelCost::instructions: 0 where not estimated
  double predicted_us = 0;
  double measured_us_median = 0;
  double measured_us_min = 0;
  double effective_gbps = 0;   // predicted bytes / median time
  double achieved_gflops = 0;  // flops / median time
  std::optional<double> measured_bytes;  // from hardware counters, where read
  double compile_ms = 0;
  bool cache_hit = false;
  std::string shares_code_with;  // LoadedKernelInfo::shares_code_with
  std::string launch_shape;      // LoadedKernelInfo::launch_shape ("" on the CPU and for library kernels)
  std::string tuning;            // LoadedKernelInfo::tuning: the launch shapes timed, where they were
  std::string library_call;      // LoadedKernelInfo::library_call ("" for generated kernels)
};

struct PlanBench {
  std::string label;  // "unfused" or "fused"
  int64_t bytes = 0;
  double flops = 0;
  double predicted_us = 0;
  double measured_us_median = 0;  // of the per-repetition sums over kernels
  double measured_us_min = 0;
  double effective_gbps = 0;
  std::vector<KernelBench> kernels;
  // Sum of the kernels' measured_bytes, when the counters were read for all.
  std::optional<double> measured_bytes;
  std::string counters_note;  // why measured_bytes is missing, when it is
  // Over the outputs whose error is a number (NaN only where none is), so
  // that an output that is NaN or infinite where the reference is not
  // hides no other output's error; it is named in beyond_tolerance where
  // the plan is correct, in mismatch where it is not.
  double max_rel_error = 0;
  bool correct = false;      // every output passes first_wrong_output (plan_reference.h)
  // Some output is outside its dtype's tolerance of the float64 reference
  // yet correct: within the rounding noise of an ill-conditioned result, or
  // what float32 arithmetic gives where it overflows inside a kernel.
  bool beyond_float64_tolerance = false;
  // Those outputs, each "NAME: where it differs most" (compare_tensors).
  std::vector<std::string> beyond_tolerance;
  // Elements not compared, as float32 gives several answers there: a sum
  // whose partial sums overflow in some orders only (first_wrong_output).
  int64_t order_dependent_elements = 0;
  std::string mismatch;  // what was wrong, when not correct
};

struct BenchResult {
  std::string backend;        // "cpu", "cuda"
  std::string description;    // the device, in words
  // The cost model's device. A measured device (the CPU) gets this run's
  // copy ceiling as its bandwidth: this machine's bandwidth drifts (up to 2x
  // from minute to minute on the development VM), so a figure cached from
  // an earlier moment would call the same kernel memory-bound in the
  // predictions and compute-bound against the ceiling.
  DeviceSpec device;
  // The copy bandwidth measured in this run: one copy is timed beside each
  // repetition of the plans (run_benchmark says how), and the ceiling is
  // the median of those copies, as each kernel's figure is the median of
  // its repetitions; the best copy is beside it.
  double ceiling_gbps = 0;
  double ceiling_best_gbps = 0;
  // The launch overhead the predictions use: on the CPU measured in this
  // run (Backend::measure_launch_us), as the ceiling is, since the thread
  // pool's hand-off differs from one process to the next; `cached_launch_us`
  // is the device's figure it replaced.
  double cached_launch_us = 0;
  int64_t copy_bytes = 0;     // size of that copy
  int64_t working_set_bytes = 0;  // the unfused plan's traffic per run
  int reps = 0;
  uint64_t seed = 0;          // of the random inputs
  bool random_inputs = true;  // false: BenchOptions::inputs, from inputs_from
  std::string inputs_from;
  std::string graph_source;   // the graph's file, as given ("" for a graph built in C++)
  PlanBench unfused, fused;
  double speedup_measured = 0;   // unfused median / fused median
  double speedup_predicted = 0;
  int64_t bytes_saved = 0;
  double max_rel_error = 0;
  bool correct = false;        // both plans
  std::string counters_note;   // why measured_bytes is missing, when it is
};

// Both plans of `graph`, made for the backend's device, benchmarked as above
// (what `fusejit bench` prints: runtime/bench_report.h). InvalidArgument
// for a graph that does not verify or reps below 1; a backend's failure
// (a compile error, memory that does not fit) as its status. A wrong
// result is not an error: the plan's `correct` and `mismatch` say so.
absl::StatusOr<BenchResult> run_benchmark(Backend& backend, const Graph& graph, const BenchOptions& options = {});

}  // namespace fusejit
