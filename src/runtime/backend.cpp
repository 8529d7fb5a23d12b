#include "runtime/backend.h"

#include <fmt/format.h>

#include "ir/error.h"

namespace fusejit {

absl::Status LoadedPlan::run() {
  for (size_t k = 0; k < plan().kernels.size(); ++k) {
    if (absl::Status s = run_kernel(k); !s.ok()) return s;
  }
  return absl::OkStatus();
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
