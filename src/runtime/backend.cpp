#include "runtime/backend.h"

#include <algorithm>
#include <map>
#include <optional>

#include <absl/strings/str_join.h>

#include <fmt/format.h>

#include "ir/available_memory.h"
#include "ir/closest_name.h"
#include "ir/counted.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "runtime/tensor_storage.h"

namespace fusejit {

namespace {

// For each kernel of `plan`, the (kernel, tensor) pairs of the tensors it
// reads that another kernel writes.
std::vector<std::vector<std::pair<size_t, int32_t>>> kernel_producers(const FusionPlan& plan) {
  std::map<int32_t, size_t> writer;
  for (size_t j = 0; j < plan.kernels.size(); ++j) {
    for (int32_t id : plan.kernels[j].writes) writer.emplace(id, j);
  }
  std::vector<std::vector<std::pair<size_t, int32_t>>> producers(plan.kernels.size());
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    for (int32_t id : plan.kernels[k].reads) {
      const auto it = writer.find(id);
      if (it != writer.end() && it->second != k) producers[k].emplace_back(it->second, id);
    }
  }
  return producers;
}

}  // namespace

absl::Status LoadedPlan::check_runnable(size_t k, std::string_view what) {
  const FusionPlan& p = plan();
  const size_t n = p.kernels.size();
  if (k >= n) return absl::OutOfRangeError(fmt::format("{}({}): the plan has {}", what, k, counted(n, "kernel")));
  if (!inputs_set_) {
    return absl::FailedPreconditionError(fmt::format(
        "{}({}) {}", what, k, inputs_missing(fmt::format(": kernel {} has no inputs to read", p.kernels[k].name))));
  }
  for (const auto& [j, id] : producers_[k]) {
    if (!holds_results_[j]) {
      return absl::FailedPreconditionError(
          fmt::format("{}({}) before kernel {} ({}), which writes {} for kernel {} ({}), ran after the last {}: "
                      "run the plan's kernels in order",
                      what, k, j, p.kernels[j].name, p.graph->node(id).name, k, p.kernels[k].name, buffers_reset_by_));
    }
  }
  return absl::OkStatus();
}

std::string LoadedPlan::inputs_missing(std::string_view none_given) const {
  const Graph& g = *plan().graph;
  const std::vector<int32_t> inputs = g.inputs();
  std::vector<std::string> missing;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i >= input_given_.size() || !input_given_[i]) missing.push_back(g.node(inputs[i]).name);
  }
  // Some given by set_input(): name the rest, which is what the caller lacks.
  if (missing.size() < inputs.size()) {
    return fmt::format(
        "before {} {} {} given (by set_input() or set_inputs()); every input the graph declares must be given, even "
        "one no output reads",
        missing.size() == 1 ? "input" : "inputs", absl::StrJoin(missing, ", "), missing.size() == 1 ? "was" : "were");
  }
  return fmt::format("before set_inputs(){}", none_given);
}

absl::Status LoadedPlan::set_inputs(const TensorMap& inputs) {
  // Inputs that do not fit the graph (a name, dtype or shape) are refused
  // before anything changes: the last inputs and results stay usable.
  if (absl::Status s = check_inputs(*plan().graph, inputs); !s.ok()) return s;
  // Forgotten first: a copy that fails halfway leaves buffers of neither
  // input set, which must not pass for results.
  inputs_set_ = false;
  input_given_.assign(plan().graph->inputs().size(), false);
  forget_results("set_inputs()");
  if (absl::Status s = do_set_inputs(inputs); !s.ok()) return s;
  input_given_.assign(input_given_.size(), true);
  inputs_set_ = true;
  return absl::OkStatus();
}

absl::StatusOr<int32_t> LoadedPlan::raw_tensor(std::string_view what, std::string_view name, bool input,
                                               size_t bytes) const {
  const Graph& g = *plan().graph;
  const std::vector<int32_t>& ids = input ? g.inputs() : g.outputs();
  std::vector<std::string> names;
  for (int32_t id : ids) {
    const Node& n = g.node(id);
    if (n.name != name) {
      names.push_back(n.name);
      continue;
    }
    const int64_t expected = storage_bytes(n.dtype, n.shape);
    if (bytes != static_cast<uint64_t>(expected)) {
      return absl::InvalidArgumentError(fmt::format("{}(\"{}\", {} bytes): {} holds {} bytes ({} of {} bytes)", what,
                                                    name, bytes, describe(n), expected, n.shape.numel(),
                                                    dtype_size(n.dtype)));
    }
    return id;
  }
  const std::optional<std::string> near = closest_name(name, names);
  return absl::InvalidArgumentError(fmt::format(
      "{}(\"{}\"): the graph has no {} of that name{}; its {}s: {}", what, name, input ? "input" : "output",
      near ? fmt::format(" (did you mean '{}'?)", *near) : "", input ? "input" : "output", absl::StrJoin(names, ", ")));
}

absl::Status LoadedPlan::set_input(std::string_view name, const void* data, size_t bytes) {
  absl::StatusOr<int32_t> id = raw_tensor("set_input", name, /*input=*/true, bytes);
  if (!id.ok()) return id.status();
  if (data == nullptr) return absl::InvalidArgumentError(fmt::format("set_input(\"{}\"): data is null", name));
  const std::vector<int32_t>& inputs = plan().graph->inputs();
  if (input_given_.size() != inputs.size()) input_given_.assign(inputs.size(), false);
  // Every result was computed from the old value (kernels that do not read
  // this input too: a plan's outputs are read as one set).
  const size_t index = static_cast<size_t>(std::find(inputs.begin(), inputs.end(), *id) - inputs.begin());
  inputs_set_ = false;
  input_given_[index] = false;
  forget_results(fmt::format("set_input(\"{}\")", name));
  if (absl::Status s = do_write_input(*id, data); !s.ok()) return s;
  input_given_[index] = true;
  inputs_set_ = std::all_of(input_given_.begin(), input_given_.end(), [](bool given) { return given; });
  return absl::OkStatus();
}

absl::Status LoadedPlan::set_dropout_seed(std::string_view name, int64_t seed) {
  const Graph& g = *plan().graph;
  const int32_t found = g.find(name).value_or(-1);
  // Not naming the node's op: the plan's graph has composites expanded, so
  // the result of the user's layer_norm is a mul there.
  if (found < 0 || g.node(found).op != Op::kDropout) {
    std::vector<std::string> dropouts;
    for (const Node& n : g.nodes()) {
      if (n.op == Op::kDropout) dropouts.push_back(n.name);
    }
    const std::optional<std::string> near = closest_name(name, dropouts);
    return absl::InvalidArgumentError(
        fmt::format("set_dropout_seed(\"{}\"): {}; {}", name,
                    found >= 0 ? fmt::format("{} is not a dropout", describe(g.node(found)))
                               : fmt::format("the graph has no node of that name{}",
                                             near ? fmt::format(" (did you mean '{}'?)", *near) : ""),
                    dropouts.empty() ? std::string("the graph has no dropout")
                                     : fmt::format("its dropouts: {}", absl::StrJoin(dropouts, ", "))));
  }
  if (seed < 0) {
    return absl::InvalidArgumentError(fmt::format(
        "set_dropout_seed(\"{}\", {}): a dropout seed is a non-negative integer, as in the graph", name, seed));
  }
  forget_results(fmt::format("set_dropout_seed(\"{}\", {})", name, seed));  // every result drawn with the old mask
  return do_set_dropout_seed(found, static_cast<uint64_t>(seed));
}

absl::Status LoadedPlan::poison_outputs() {
  // Every buffer a kernel writes now holds NaN: a kernel reading one must
  // wait for its producer to run again. outputs() still shows the poison.
  holds_results_.assign(holds_results_.size(), false);
  buffers_reset_by_ = "poison_outputs()";
  return do_poison_outputs();
}

void LoadedPlan::forget_results(std::string cause) {
  ran_.assign(plan().kernels.size(), false);
  holds_results_.assign(plan().kernels.size(), false);
  results_reset_by_ = cause;
  buffers_reset_by_ = std::move(cause);
  if (producers_.empty()) producers_ = kernel_producers(plan());
}

void LoadedPlan::mark_running(size_t k) {
  // A kernel that fails partway leaves its buffers half written.
  ran_[k] = false;
  holds_results_[k] = false;
}

void LoadedPlan::mark_ran(size_t k) {
  ran_[k] = true;
  holds_results_[k] = true;
}

absl::Status LoadedPlan::run_kernel(size_t k) {
  if (absl::Status s = check_runnable(k, "run_kernel"); !s.ok()) return s;
  mark_running(k);
  if (absl::Status s = do_run_kernel(k); !s.ok()) return s;
  mark_ran(k);
  return absl::OkStatus();
}

absl::StatusOr<double> LoadedPlan::time_kernel(size_t k) {
  if (absl::Status s = check_runnable(k, "time_kernel"); !s.ok()) return s;
  mark_running(k);
  absl::StatusOr<double> us = do_time_kernel(k);
  if (us.ok()) mark_ran(k);
  return us;
}

absl::StatusOr<double> LoadedPlan::measure_kernel_bytes(size_t k) {
  if (absl::Status s = check_runnable(k, "measure_kernel_bytes"); !s.ok()) return s;
  // Not mark_running: where the counters cannot be read (every CPU, a
  // restricted GPU) it fails without running anything.
  absl::StatusOr<double> bytes = do_measure_kernel_bytes(k);
  if (bytes.ok()) mark_ran(k);
  return bytes;
}

absl::Status LoadedPlan::run() {
  // Named as run(), not as the run_kernel(0) it would fail in.
  if (!inputs_set_) {
    return absl::FailedPreconditionError(fmt::format("run() {}", inputs_missing(": the plan has no inputs to read")));
  }
  for (size_t k = 0; k < plan().kernels.size(); ++k) {
    if (absl::Status s = run_kernel(k); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status LoadedPlan::check_results(std::string_view what) const {
  if (!inputs_set_) return absl::FailedPreconditionError(fmt::format("{} {}", what, inputs_missing(" and a run")));
  for (size_t k = 0; k < ran_.size(); ++k) {
    if (!ran_[k]) {
      return absl::FailedPreconditionError(fmt::format("{} before kernel {} ({}) ran after the last {}: run() the plan",
                                                       what, k, plan().kernels[k].name, results_reset_by_));
    }
  }
  return absl::OkStatus();
}

absl::Status LoadedPlan::read_output(std::string_view name, void* data, size_t bytes) {
  absl::StatusOr<int32_t> id = raw_tensor("read_output", name, /*input=*/false, bytes);
  if (!id.ok()) return id.status();
  if (data == nullptr) return absl::InvalidArgumentError(fmt::format("read_output(\"{}\"): data is null", name));
  if (absl::Status s = check_results(fmt::format("read_output(\"{}\")", name)); !s.ok()) return s;
  return do_read_output(*id, data);
}

absl::StatusOr<TensorMap> LoadedPlan::outputs() {
  if (absl::Status s = check_results("outputs()"); !s.ok()) return s;
  // The outputs come back as float64 host tensors.
  uint64_t bytes = 0;
  for (int32_t id : plan().graph->outputs()) bytes += static_cast<uint64_t>(plan().graph->node(id).shape.numel()) * 8;
  if (std::string refused = host_allocation_refusal(bytes, "reading back the outputs"); !refused.empty()) {
    return absl::ResourceExhaustedError(refused);
  }
  return do_outputs();
}

std::vector<std::string> backend_names() { return {"auto", "cpu", "cuda"}; }

absl::StatusOr<double> Backend::measure_copy_gbps(int64_t bytes) {
  absl::StatusOr<std::unique_ptr<CopyTimer>> copy = prepare_copy(bytes);
  if (!copy.ok()) return copy.status();
  double best_us = 0;
  for (int rep = 0; rep < 6; ++rep) {
    absl::StatusOr<double> us = (*copy)->time_us();
    if (!us.ok()) return us.status();
    if (rep > 0 && (best_us == 0 || *us < best_us)) best_us = *us;  // the first warms up
  }
  if (best_us <= 0) {
    return absl::InternalError(fmt::format("a copy of {} bytes timed at {} us: too small to measure", bytes, best_us));
  }
  return copy_gbps(bytes, best_us);
}

absl::StatusOr<std::unique_ptr<Backend>> make_backend(std::string_view name) {
  if (name == "cpu") return make_cpu_backend();
  if (name == "cuda") return make_cuda_backend();
  if (std::optional<int> device = cuda_device_of(name)) return make_cuda_backend(*device);
  if (name == "auto") {
    absl::StatusOr<std::unique_ptr<Backend>> cuda = make_cuda_backend();
    if (cuda.ok()) return cuda;
    return make_cpu_backend();
  }
  return absl::InvalidArgumentError(
      fmt::format("unknown backend '{}' (expected auto, cpu, cuda, or cuda:N for GPU N, from 0)", name));
}

std::optional<int> cuda_device_of(std::string_view name) {
  constexpr std::string_view kPrefix = "cuda:";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  const std::string_view digits = name.substr(kPrefix.size());
  if (digits.empty() || digits.size() > 4) return std::nullopt;
  int device = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    device = device * 10 + (c - '0');
  }
  return device;
}

absl::StatusOr<TensorMap> run_loaded(LoadedPlan& loaded, const TensorMap& inputs) {
  if (absl::Status s = loaded.set_inputs(inputs); !s.ok()) return s;
  if (absl::Status s = loaded.run(); !s.ok()) return s;
  return loaded.outputs();
}

absl::StatusOr<TensorMap> run_plan(Backend& backend, const FusionPlan& plan, const TensorMap& inputs) {
  absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = backend.load(plan);
  if (!loaded.ok()) return loaded.status();
  return run_loaded(**loaded, inputs);
}

}  // namespace fusejit
