#include "runtime/compile_report.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <absl/strings/str_join.h>
#include <fmt/format.h>

#include "cost/device.h"
#include "ir/error.h"
#include "runtime/file_io.h"
#include "runtime/warnings.h"

namespace fusejit {

std::string number_lines(std::string_view source) {
  std::string out;
  int number = 1;
  size_t start = 0;
  while (start < source.size()) {
    const size_t end = std::min(source.find('\n', start), source.size());
    out += fmt::format("{:>4} | {}\n", number++, source.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string format_compile_failure(const CompileFailure& f) {
  return fmt::format(
      "NVRTC failed to compile kernel '{}' for {}: {}\n"
      "options: {}\n"
      "NVRTC log:\n{}\n"
      "source {}.cu:\n{}",
      f.name, f.arch, f.error, absl::StrJoin(f.options, " "), f.log, kernel_file_stem(f.name), number_lines(f.source));
}

absl::StatusOr<std::string> write_compile_report(const std::string& file_name, std::string_view text) {
  const std::filesystem::path dirs[] = {std::filesystem::path(cache_directory()) / "errors",
                                        std::filesystem::temp_directory_path() / "fusejit-errors"};
  std::vector<std::string> failures;
  for (const std::filesystem::path& dir : dirs) {
    const std::string path = (dir / file_name).string();
    absl::Status s = ensure_directory(dir.string());
    if (s.ok()) s = replace_file(path, text);
    if (s.ok()) return path;
    failures.emplace_back(status_text(s));
  }
  return absl::UnavailableError(absl::StrJoin(failures, "; "));
}

void dump_kernel_if_requested(const CompiledKernel& kernel) {
  const char* dir = std::getenv("FUSEJIT_DUMP");
  if (dir == nullptr || *dir == '\0') return;
  const std::filesystem::path base = std::filesystem::path(dir) / kernel_file_stem(kernel.name);
  absl::Status s = ensure_directory(dir);
  for (const auto& [suffix, contents] :
       {std::pair{".cu", &kernel.source}, std::pair{".ptx", &kernel.ptx}, std::pair{".ptxas.txt", &kernel.log}}) {
    // Replaced, not rewritten in place: two threads may dump the same kernel.
    if (s.ok()) s = replace_file(base.string() + suffix, *contents);
  }
  if (!s.ok()) warn(fmt::format("FUSEJIT_DUMP: cannot dump kernel '{}': {}", kernel.name, status_text(s)));
}

std::string kernel_file_stem(std::string_view name) {
  if (name.empty()) return "kernel";
  std::string stem(name);
  for (char& c : stem) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    if (!ok) c = '_';
  }
  return stem;
}

}  // namespace fusejit
