#include "runtime/toolkit_library.h"

#include <filesystem>

#include <absl/strings/str_join.h>
#include <fmt/format.h>

#include "ir/error.h"
#include "runtime/cuda_driver.h"

namespace fusejit {

absl::StatusOr<SharedLibrary> open_toolkit_library(std::string_view what, const std::vector<std::string>& sonames) {
  std::vector<std::string> names;
  if (const std::string emulator = cuda_emulator_path(); !emulator.empty()) {
    names = {emulator};
  } else {
    std::vector<std::string> built_with;
#ifdef FUSEJIT_NVRTC_PATH
    const std::filesystem::path dir = std::filesystem::path(FUSEJIT_NVRTC_PATH).parent_path();
    for (const std::string& soname : sonames) built_with.push_back((dir / soname).string());
#endif
    names = cuda_library_candidates(sonames, built_with);
  }
  absl::StatusOr<SharedLibrary> library = SharedLibrary::open(names);
  if (!library.ok()) {
    return absl::NotFoundError(
        fmt::format("{} not found (tried {}): {}", what, absl::StrJoin(names, ", "), status_text(library.status())));
  }
  return library;
}

}  // namespace fusejit
