// A FusionPlan loaded onto the GPU: every generated kernel compiled (through
// the kernel cache) and loaded as a module, every matmul prepared for cuBLAS,
// and one device buffer per tensor a kernel reads or writes (and per graph
// output). Internal to src/runtime/; see backend.h for the contract.
#pragma once

#include <memory>

#include <absl/status/statusor.h>

#include "runtime/backend.h"
#include "runtime/cuda_backend_resources.h"

namespace fusejit::cuda_backend {

absl::StatusOr<std::unique_ptr<LoadedPlan>> load_plan(std::shared_ptr<CudaGpu> gpu, const FusionPlan& plan,
                                                      const LoadOptions& options);

}  // namespace fusejit::cuda_backend
