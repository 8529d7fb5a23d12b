#include "runtime/compile_temp_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "runtime/file_io.h"

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

constexpr std::string_view kLockFile = "/.lock";
// A compile never leaves its directory unchanged this long.
constexpr time_t kAbandonedAfterSeconds = 10 * 60;

// Whether nobody holds the lock of directory `dir` (one without a lock file
// is an older fusejit's, or not fusejit's: treated as held).
bool lock_is_free(const std::string& dir) {
  const int fd = ::open((dir + std::string(kLockFile)).c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);  // releases the lock taken just now
  return free;
}

// The compile directories of this process that exist now.
std::mutex& live_mutex() {
  static std::mutex m;
  return m;
}
std::set<std::string>& live_dirs() {
  static auto* dirs = new std::set<std::string>();  // never destroyed: used until exit
  return *dirs;
}

}  // namespace

void remove_live_compile_dirs() {
  std::lock_guard lock(live_mutex());
  std::error_code ec;
  for (const std::string& dir : live_dirs()) std::filesystem::remove_all(dir, ec);
  live_dirs().clear();
}

int remove_abandoned_compile_dirs(const std::string& parent) {
  int removed = 0;
  std::error_code ec;
  const time_t now = std::time(nullptr);
  for (const auto& entry : std::filesystem::directory_iterator(parent, ec)) {
    const pid_t pid = owner_pid(entry.path().filename().string());
    if (pid == 0 || pid == ::getpid()) continue;
    struct stat info;
    if (::lstat(entry.path().c_str(), &info) != 0 || !S_ISDIR(info.st_mode) || info.st_uid != ::geteuid()) continue;
    if (now - info.st_mtime < kAbandonedAfterSeconds) continue;
    // Its process alive on this machine (or another user's, which this user may not signal): kept.
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    // A process of that id on another machine sharing the directory holds its lock.
    if (!lock_is_free(entry.path().string())) continue;
    std::error_code remove_ec;
    if (std::filesystem::remove_all(entry.path(), remove_ec) > 0 && !remove_ec) ++removed;
  }
  return removed;
}

absl::StatusOr<CompileTempDir> CompileTempDir::make() {
  absl::StatusOr<std::string> temp = temporary_directory();
  if (!temp.ok()) return temp.status();
  const std::string parent = *std::move(temp);
  static std::once_flag swept;
  std::call_once(swept, [&] { remove_abandoned_compile_dirs(parent); });
  std::string pattern = fmt::format("{}/{}{}-XXXXXX", parent, kPrefix, ::getpid());
  if (mkdtemp(pattern.data()) == nullptr) {
    const int err = errno;
    const char* tmpdir = std::getenv("TMPDIR");
    return absl::UnavailableError(fmt::format("cannot create a temporary directory in {}{}: {}", parent,
                                              tmpdir != nullptr && *tmpdir != '\0' ? " (from $TMPDIR)" : "",
                                              std::strerror(err)));
  }
  // Held until the directory is removed; a failure to lock only makes the
  // directory look like an older fusejit's, which no sweep removes.
  const int lock_fd = ::open((pattern + std::string(kLockFile)).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd >= 0) ::flock(lock_fd, LOCK_EX | LOCK_NB);
  {
    std::lock_guard lock(live_mutex());
    live_dirs().insert(pattern);
  }
  return CompileTempDir(pattern, lock_fd);
}

CompileTempDir::CompileTempDir(CompileTempDir&& other) noexcept
    : path_(std::move(other.path_)), lock_fd_(other.lock_fd_) {
  other.path_.clear();
  other.lock_fd_ = -1;
}

CompileTempDir::~CompileTempDir() {
  std::error_code ec;
  if (!path_.empty()) {
    std::filesystem::remove_all(path_, ec);
    std::lock_guard lock(live_mutex());
    live_dirs().erase(path_);
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

}  // namespace fusejit
