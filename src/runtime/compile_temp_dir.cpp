#include "runtime/compile_temp_dir.h"

#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string_view>

#include <fmt/format.h>

namespace fusejit {
namespace {

constexpr std::string_view kPrefix = "fusejit-cxx-";

// The process id in a name kPrefix + "PID-XXXXXX"; 0 for any other name
// (an older fusejit's fusejit-cxx-XXXXXX among them, which is left alone).
pid_t owner_pid(std::string_view name) {
  if (!name.starts_with(kPrefix)) return 0;
  name.remove_prefix(kPrefix.size());
  const size_t dash = name.find('-');
  if (dash == std::string_view::npos || dash == 0) return 0;
  pid_t pid = 0;
  const auto [ptr, ec] = std::from_chars(name.data(), name.data() + dash, pid);
  return ec == std::errc() && ptr == name.data() + dash && pid > 0 ? pid : 0;
}

}  // namespace

int remove_abandoned_compile_dirs(const std::string& parent) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(parent, ec)) {
    const pid_t pid = owner_pid(entry.path().filename().string());
    if (pid == 0 || pid == ::getpid()) continue;
    struct stat info;
    if (::lstat(entry.path().c_str(), &info) != 0 || !S_ISDIR(info.st_mode) || info.st_uid != ::geteuid()) continue;
    // Alive (or another user's, which this user may not signal): kept.
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::error_code remove_ec;
    if (std::filesystem::remove_all(entry.path(), remove_ec) > 0 && !remove_ec) ++removed;
  }
  return removed;
}

absl::StatusOr<CompileTempDir> CompileTempDir::make() {
  const std::string parent = std::filesystem::temp_directory_path().string();
  static std::once_flag swept;
  std::call_once(swept, [&] { remove_abandoned_compile_dirs(parent); });
  std::string pattern = fmt::format("{}/{}{}-XXXXXX", parent, kPrefix, ::getpid());
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::UnavailableError(fmt::format("cannot create a temporary directory: {}", std::strerror(errno)));
  }
  return CompileTempDir(pattern);
}

CompileTempDir::CompileTempDir(CompileTempDir&& other) noexcept : path_(std::move(other.path_)) {
  other.path_.clear();
}

CompileTempDir::~CompileTempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

}  // namespace fusejit
