#include "runtime/file_io.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "ir/link_target.h"

namespace fusejit {
namespace {

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

// The kind of failure an errno is, for callers that tell a full disk or a
// missing permission from the rest.
absl::StatusCode errno_code(int err) {
  if (err == ENOENT) return absl::StatusCode::kNotFound;
  if (err == ENOSPC || err == EDQUOT) return absl::StatusCode::kResourceExhausted;
  if (err == EACCES || err == EPERM || err == EROFS) return absl::StatusCode::kPermissionDenied;
  return absl::StatusCode::kUnavailable;
}

absl::Status errno_status(int err, std::string_view what, const std::string& path) {
  return absl::Status(errno_code(err), fmt::format("cannot {} {}: {}", what, path, errno_text(err)));
}

// How errors name a destination: the path the user gave and, where that is
// a link, the file it points to, which is the one being replaced.
std::string destination_name(const std::string& path, const std::string& target) {
  return target == path ? path : fmt::format("{} (a link to {})", path, target);
}

// Writes `data` to a new temporary file beside `target` and returns its
// name; on failure removes it and names the destination in the error.
absl::StatusOr<std::string> write_temporary(const std::string& target, const std::string& destination,
                                            std::string_view data, const FileWriter& writer) {
  const std::string temporary = temporary_path_beside(target);
  const absl::Status status = writer(temporary, data);
  if (status.ok()) return temporary;
  std::remove(temporary.c_str());
  std::string message(status.message());
  if (const size_t at = message.find(temporary); at != std::string::npos) {
    message.replace(at, temporary.size(), destination);
  }
  return absl::Status(status.code(), message);
}

// Closes the descriptor on every path out of a function.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  // close() can report a delayed write error (NFS, quota); callers that write check it.
  int close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

// Seeded from getrandom(2), falling back to the pid and the time: unlike
// std::random_device, it cannot throw where no entropy device is available.
uint64_t random_u64() {
  thread_local std::mt19937_64 engine([] {
    uint64_t seed = 0;
    if (::getrandom(&seed, sizeof seed, 0) != static_cast<ssize_t>(sizeof seed)) {
      seed = static_cast<uint64_t>(::getpid()) << 32 ^ static_cast<uint64_t>(::time(nullptr));
    }
    return seed;
  }());
  return engine();
}

absl::StatusOr<std::string> read_to_end(int fd, const std::string& name) {
  std::string data;
  char chunk[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_status(errno, "read", name);
    if (n == 0) return data;
    data.append(chunk, static_cast<size_t>(n));
  }
}

}  // namespace

absl::StatusOr<std::string> read_whole_file(const std::string& path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return errno_status(errno, "open", path);
  return read_to_end(fd.get(), path);
}

absl::StatusOr<std::string> read_regular_file(const std::string& path, uint64_t max_bytes) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return errno_status(errno, "open", path);
  struct stat st = {};
  if (::fstat(fd.get(), &st) != 0) return errno_status(errno, "stat", path);
  if (!S_ISREG(st.st_mode)) return absl::FailedPreconditionError(fmt::format("{} is not a regular file", path));
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return absl::FailedPreconditionError(
        fmt::format("{} holds {} bytes, more than the {} it may", path, st.st_size, max_bytes));
  }
  absl::StatusOr<std::string> data = read_to_end(fd.get(), path);
  // A file that grew while it was read is refused the same way.
  if (data.ok() && data->size() > max_bytes) {
    return absl::FailedPreconditionError(fmt::format("{} grew past {} bytes while read", path, max_bytes));
  }
  return data;
}

namespace {

// Opens path with `flags` (O_TRUNC, or O_EXCL: AlreadyExists when it
// exists) and writes all of data. A file it created exclusively is removed
// again when the write fails: it is nobody else's.
absl::Status open_and_write(const std::string& path, std::string_view data, int flags) {
  FileDescriptor fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644));
  if (fd.get() < 0 && errno == EEXIST) return absl::AlreadyExistsError(fmt::format("{} exists", path));
  if (fd.get() < 0) return errno_status(errno, "create", path);
  auto failed = [&](int err) {
    if ((flags & O_EXCL) != 0) std::remove(path.c_str());
    return errno_status(err, "write", path);
  };
  while (!data.empty()) {
    const ssize_t n = ::write(fd.get(), data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return failed(errno);
    data.remove_prefix(static_cast<size_t>(n));
  }
  if (fd.close() != 0) return failed(errno);
  return absl::OkStatus();
}

}  // namespace

absl::Status write_whole_file(const std::string& path, std::string_view data) {
  return open_and_write(path, data, O_TRUNC);
}

absl::StatusOr<std::string> temporary_directory() {
  // An empty $TMPDIR counts as unset, as for mktemp and glibc
  // (std::filesystem::temp_directory_path took it for a folder named "").
  const char* tmpdir = std::getenv("TMPDIR");
  const bool from_env = tmpdir != nullptr && *tmpdir != '\0';
  const std::string dir = from_env ? tmpdir : "/tmp";
  std::error_code ec;
  if (std::filesystem::is_directory(dir, ec)) return dir;
  const std::string why = ec                                 ? ec.message()
                          : std::filesystem::exists(dir, ec) ? std::strerror(ENOTDIR)
                                                             : std::strerror(ENOENT);
  if (from_env) {
    return absl::FailedPreconditionError(
        fmt::format("the temporary directory {} (from $TMPDIR) cannot be used: {}", dir, why));
  }
  return absl::FailedPreconditionError(fmt::format("no temporary directory: {}: {}", dir, why));
}

std::string temporary_path_beside(const std::string& path, std::string_view extension) {
  // The file name cut to 200 bytes, so that the temporary of a file whose
  // name just fits NAME_MAX (255 bytes) is not refused for a longer one.
  const size_t slash = path.rfind('/');
  const size_t name = slash == std::string::npos ? 0 : slash + 1;
  const std::string_view kept = std::string_view(path).substr(0, name + std::min<size_t>(path.size() - name, 200));
  return fmt::format("{}.tmp-{}-{:016x}{}", kept, ::getpid(), random_u64(), extension);
}

absl::Status replace_file(const std::string& path, std::string_view data, const FileWriter& writer) {
  return replace_files({{path, data}}, writer);
}

absl::Status create_file(const std::string& path, std::string_view data) { return create_files({{path, data}}); }

absl::Status create_files(const std::map<std::string, std::string_view>& files) {
  std::vector<std::pair<std::string, std::string>> temporaries;  // (temporary, path)
  auto remove_temporaries = [&] {
    for (const auto& [temporary, path] : temporaries) std::remove(temporary.c_str());
  };
  for (const auto& [path, data] : files) {
    absl::StatusOr<std::string> temporary = write_temporary(path, path, data, write_whole_file);
    if (!temporary.ok()) {
      remove_temporaries();
      return temporary.status();
    }
    temporaries.emplace_back(*std::move(temporary), path);
  }
  std::vector<std::string> created;
  for (const auto& [temporary, path] : temporaries) {
    absl::Status s = absl::OkStatus();
    if (::link(temporary.c_str(), path.c_str()) != 0) {  // fails with EEXIST instead of replacing
      const int err = errno;
      if (err == EEXIST) {
        s = absl::AlreadyExistsError(fmt::format("{} exists", path));
      } else if (err != EPERM && err != ENOTSUP && err != EOPNOTSUPP && err != EXDEV) {
        s = errno_status(err, "create", path);
      } else {
        // A file system without hard links (FAT, some network and FUSE
        // mounts): created exclusively and written in place, so a
        // concurrent reader may see it partly written, but nothing is
        // ever replaced.
        s = open_and_write(path, files.at(path), O_EXCL);
      }
    }
    if (!s.ok()) {
      for (const std::string& made : created) std::remove(made.c_str());
      remove_temporaries();
      return s;
    }
    created.push_back(path);
  }
  remove_temporaries();
  return absl::OkStatus();
}

absl::Status check_can_create_files(const std::string& dir) {
  const std::string probe = temporary_path_beside((std::filesystem::path(dir) / ".fusejit-probe").string());
  FileDescriptor fd(::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) {
    const int err = errno;
    return absl::Status(errno_code(err), fmt::format("cannot create files in {}: {}", dir, errno_text(err)));
  }
  fd.close();
  std::remove(probe.c_str());
  return absl::OkStatus();
}

absl::Status replace_cache_file(const std::string& path, std::string_view data, const FileWriter& writer) {
  return replace_files({{path, data}}, writer, Links::kReplace);
}

std::string untrusted_folder_reason(const std::string& dir) {
  const std::filesystem::path path(dir);
  for (const std::filesystem::path& folder : {path, path.parent_path()}) {
    if (folder.empty()) continue;
    struct stat info;
    if (::stat(folder.c_str(), &info) != 0) continue;
    if (info.st_uid != ::geteuid() && info.st_uid != 0) {
      return fmt::format("{} belongs to another user (uid {})", folder.string(), info.st_uid);
    }
    // In the folder itself another user must not create files (the keys
    // are predictable), so even the sticky bit does not help there; in the
    // folder it is in, the sticky bit (as on /tmp) keeps others from
    // replacing this one. A group other than this user's own may not write
    // either (a user-private group, as umask 002 makes, may).
    const bool own = folder == path;
    if ((info.st_mode & S_IWOTH) != 0 && (own || (info.st_mode & S_ISVTX) == 0)) {
      return fmt::format("every user may write to {}", folder.string());
    }
    if ((info.st_mode & S_IWGRP) != 0 && info.st_gid != ::getegid() && (own || (info.st_mode & S_ISVTX) == 0)) {
      return fmt::format("the users of group {} may write to {}", info.st_gid, folder.string());
    }
  }
  return "";
}

absl::Status replace_files(const std::map<std::string, std::string_view>& files, const FileWriter& writer,
                           Links links) {
  struct Written {
    std::string temporary;
    std::string target;       // the file replaced: the path, or the end of its link chain
    std::string destination;  // how errors name it
  };
  std::vector<Written> written;
  auto remove_temporaries = [&](size_t from) {
    for (size_t i = from; i < written.size(); ++i) std::remove(written[i].temporary.c_str());
  };
  for (const auto& [path, data] : files) {
    const std::string target = links == Links::kFollow ? link_target(path) : path;  // a link stays a link
    const std::string destination = destination_name(path, target);
    // A user's path that is a device, a FIFO or a socket (or links to
    // one) is left alone: renaming a file over it would replace it, and a
    // link to /dev/zero once made emit replace /dev/zero itself.
    if (links == Links::kFollow && is_special_file(target)) {
      remove_temporaries(0);
      return absl::FailedPreconditionError(
          fmt::format("{} is not a regular file (a device, a FIFO or a socket); fusejit writes a file by replacing "
                      "it whole, so it leaves that one as it is",
                      destination));
    }
    absl::StatusOr<std::string> temporary = write_temporary(target, destination, data, writer);
    if (!temporary.ok()) {
      remove_temporaries(0);
      return temporary.status();
    }
    written.push_back({*std::move(temporary), target, destination});
  }
  // A rename can still fail (a file of another user in a sticky folder):
  // the files this group created are removed again, and the message counts
  // those it replaced, which hold their new content.
  std::vector<bool> existed;
  for (const Written& w : written) existed.push_back(::access(w.target.c_str(), F_OK) == 0);
  for (size_t i = 0; i < written.size(); ++i) {
    if (std::rename(written[i].temporary.c_str(), written[i].target.c_str()) != 0) {
      const absl::Status s = errno_status(errno, "replace", written[i].destination);
      remove_temporaries(i);
      size_t replaced = 0;
      for (size_t j = 0; j < i; ++j) {
        if (existed[j]) {
          ++replaced;
        } else {
          std::remove(written[j].target.c_str());
        }
      }
      if (replaced == 0) return s;
      return absl::Status(s.code(), fmt::format("{} ({} files replaced before it hold their new content)",
                                                std::string(s.message()), replaced));
    }
  }
  return absl::OkStatus();
}

absl::Status ensure_directory(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return errno_status(ec.value(), "create directory", dir);
  return absl::OkStatus();
}

}  // namespace fusejit
