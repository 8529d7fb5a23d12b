// Opening one of the CUDA toolkit's math libraries (cuBLAS, cuBLASLt) with
// dlopen, the same way for each: the CUDA emulator's library when the
// emulator is the driver (it implements their few calls, and the real ones
// would look for a real driver); otherwise the sonames given, beside the
// NVRTC this build found and where cuda_library_candidates looks.
// Internal to src/runtime/.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <absl/status/statusor.h>

#include "runtime/shared_library.h"

namespace fusejit {

// NotFound "cuBLAS not found (tried ...): why" when none opens; `what` names the library.
absl::StatusOr<SharedLibrary> open_toolkit_library(std::string_view what, const std::vector<std::string>& sonames);

}  // namespace fusejit
