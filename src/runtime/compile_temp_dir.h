// The private temporary directory a host-compiler run works in (source,
// log, shared object), removed with everything in it when done.
//
// Its name carries the process id, fusejit-cxx-PID-XXXXXX, so that the
// directories of a process that died without cleaning up (killed, or
// interrupted with Ctrl-C mid-compile) can be told from those of processes
// still compiling: the first make() of each process removes the former.
#pragma once

#include <string>

#include <absl/status/statusor.h>

namespace fusejit {

class CompileTempDir {
 public:
  static absl::StatusOr<CompileTempDir> make();
  CompileTempDir(CompileTempDir&& other) noexcept;
  CompileTempDir& operator=(CompileTempDir&&) = delete;
  ~CompileTempDir();
  const std::string& path() const { return path_; }

 private:
  explicit CompileTempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// Removes, from `parent`, the fusejit-cxx-PID-* directories of this user
// whose process no longer exists; returns how many it removed.
int remove_abandoned_compile_dirs(const std::string& parent);

}  // namespace fusejit
