// Placeholder until the CPU backend lands (issue 5).
#include "runtime/backend.h"

namespace fusejit {

absl::StatusOr<std::unique_ptr<Backend>> make_cpu_backend() {
  return absl::UnimplementedError("the CPU backend is not built yet");
}

}  // namespace fusejit
