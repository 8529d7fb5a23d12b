#include "runtime/backend.h"

#include <map>

#include <fmt/format.h>

#include "ir/available_memory.h"

#include "ir/counted.h"
#include "ir/error.h"
#include "ir/interpreter.h"

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
    return absl::FailedPreconditionError(
        fmt::format("{}({}) before set_inputs(): kernel {} has no inputs to read", what, k, p.kernels[k].name));
  }
  for (const auto& [j, id] : producers_[k]) {
    if (!holds_results_[j]) {
      return absl::FailedPreconditionError(
          fmt::format("{}({}) before kernel {} ({}), which writes {} for kernel {} ({}), ran on the inputs of "
                      "the last set_inputs() (or since poison_outputs()): run the plan's kernels in order",
                      what, k, j, p.kernels[j].name, p.graph->node(id).name, k, p.kernels[k].name));
    }
  }
  return absl::OkStatus();
}

absl::Status LoadedPlan::set_inputs(const TensorMap& inputs) {
  // Inputs that do not fit the graph (a name, dtype or shape) are refused
  // before anything changes: the last inputs and results stay usable.
  if (absl::Status s = check_inputs(*plan().graph, inputs); !s.ok()) return s;
  // Forgotten first: a copy that fails halfway leaves buffers of neither
  // input set, which must not pass for results.
  inputs_set_ = false;
  ran_.assign(plan().kernels.size(), false);
  holds_results_.assign(plan().kernels.size(), false);
  if (producers_.empty()) producers_ = kernel_producers(plan());
  if (absl::Status s = do_set_inputs(inputs); !s.ok()) return s;
  inputs_set_ = true;
  return absl::OkStatus();
}

absl::Status LoadedPlan::poison_outputs() {
  // Every buffer a kernel writes now holds NaN: a kernel reading one must
  // wait for its producer to run again. outputs() still shows the poison.
  holds_results_.assign(holds_results_.size(), false);
  return do_poison_outputs();
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
  if (!inputs_set_) return absl::FailedPreconditionError("run() before set_inputs(): the plan has no inputs to read");
  for (size_t k = 0; k < plan().kernels.size(); ++k) {
    if (absl::Status s = run_kernel(k); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorMap> LoadedPlan::outputs() {
  if (!inputs_set_) return absl::FailedPreconditionError("outputs() before set_inputs() and a run");
  for (size_t k = 0; k < ran_.size(); ++k) {
    if (!ran_[k]) {
      return absl::FailedPreconditionError(
          fmt::format("outputs() before kernel {} ({}) ran on the inputs: run() the plan after set_inputs()",
                      k, plan().kernels[k].name));
    }
  }
  // The outputs come back as float64 host tensors.
  uint64_t bytes = 0;
  for (int32_t id : plan().graph->outputs()) bytes += static_cast<uint64_t>(plan().graph->node(id).shape.numel()) * 8;
  if (std::string refused = host_allocation_refusal(bytes, "reading back the outputs"); !refused.empty()) {
    return absl::ResourceExhaustedError(refused);
  }
  return do_outputs();
}

std::vector<std::string> backend_names() { return {"auto", "cpu", "cuda"}; }

absl::StatusOr<std::unique_ptr<Backend>> make_backend(std::string_view name) {
  if (name == "cpu") return make_cpu_backend();
  if (name == "cuda") return make_cuda_backend();
  if (name == "auto") {
    absl::StatusOr<std::unique_ptr<Backend>> cuda = make_cuda_backend();
    if (cuda.ok()) return cuda;
    return make_cpu_backend();
  }
  return absl::InvalidArgumentError(fmt::format("unknown backend '{}' (expected auto, cpu or cuda)", name));
}

absl::StatusOr<TensorMap> run_plan(Backend& backend, const FusionPlan& plan, const TensorMap& inputs) {
  absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = backend.load(plan);
  if (!loaded.ok()) return loaded.status();
  if (absl::Status s = (*loaded)->set_inputs(inputs); !s.ok()) return s;
  if (absl::Status s = (*loaded)->run(); !s.ok()) return s;
  return (*loaded)->outputs();
}

}  // namespace fusejit
