// The private temporary directory a host-compiler run works in (source,
// log, shared object), removed with everything in it when done.
//
// Its name carries the process id, fusejit-cxx-PID-XXXXXX, and the process
// holds an flock on its .lock file while it lives, so that the directories
// of a process that died without cleaning up (killed, or interrupted with
// Ctrl-C mid-compile) can be told from those of compiles still running,
// here or on another machine sharing $TMPDIR: the first make() of each
// process removes a directory only when its process is gone from this
// machine, nobody holds its lock, and it has not changed for 10 minutes.
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
  CompileTempDir(std::string path, int lock_fd) : path_(std::move(path)), lock_fd_(lock_fd) {}
  std::string path_;
  int lock_fd_ = -1;  // the flock held on path_/.lock while this lives
};

// Removes every compile directory of this process that still exists, now:
// for a process about to end by a signal (runtime/child_processes.h),
// whose destructors will not run.
void remove_live_compile_dirs();

// Removes, from `parent`, this user's fusejit-cxx-PID-* directories that
// are abandoned (see above); returns how many it removed.
int remove_abandoned_compile_dirs(const std::string& parent);

}  // namespace fusejit
