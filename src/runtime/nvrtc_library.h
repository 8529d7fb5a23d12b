// NVRTC, loaded with dlopen on first use: the library (and a program using
// it) then needs no NVRTC to link or to start, and a machine without one gets
// an error that says so. Internal to src/runtime/; see nvrtc_compiler.h.
#pragma once

#include <string>
#include <vector>

#include <absl/status/status.h>
#include <absl/status/statusor.h>

namespace fusejit {

// OK when NVRTC loaded; otherwise Unavailable with the reason.
absl::Status nvrtc_library_status();
// {13, 0}
absl::StatusOr<std::pair<int, int>> nvrtc_library_version();
// The real architectures NVRTC can compile for, e.g. {75, 80, ..., 120}.
absl::StatusOr<std::vector<int>> nvrtc_library_archs();

struct NvrtcOutput {
  std::string error;  // "" when the program compiled, else NVRTC's name for the failure
  std::string log;    // NVRTC's log: diagnostics and the ptxas report
  std::string ptx;
  std::string cubin;  // empty for a virtual architecture (compute_XX)
};

// Compiles one program. A source that does not compile is not an error
// status: it returns the log with `error` set. file_name appears in diagnostics.
absl::StatusOr<NvrtcOutput> run_nvrtc(const std::string& source, const std::string& file_name,
                                      const std::vector<std::string>& options);

}  // namespace fusejit
