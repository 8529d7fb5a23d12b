// Placeholder until the CUDA executor lands (issue 4).
#include "runtime/backend.h"

namespace fusejit {

absl::StatusOr<std::unique_ptr<Backend>> make_cuda_backend() {
  return absl::UnimplementedError("the CUDA backend is not built yet");
}

}  // namespace fusejit
