// Warnings: problems the library recovers from by itself (a corrupt cache
// entry, an unwritable directory) but that a user should hear about.
#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace fusejit {

// Writes `text` to stderr in one call and ignores a failed write. fmt::print
// throws when a write fails, and stderr closed (`2>&-`, a daemon) or on a
// full disk would turn an error message, or a note on a run that worked,
// into std::terminate; what cannot be said is dropped, and the exit code
// still tells.
void write_stderr(std::string_view text);
// fmt::print(stderr, ...) through write_stderr.
template <typename... Args>
void eprint(fmt::format_string<Args...> format, Args&&... args) {
  write_stderr(fmt::format(format, std::forward<Args>(args)...));
}

// Prints "fusejit: warning: MESSAGE" to stderr, or hands it to the innermost
// live ScopedWarningSink.
void warn(std::string_view message);

// Captures the warnings of every thread while it lives, instead of printing
// them; sinks nest. For tests that assert a warning was (or was not) given.
class ScopedWarningSink {
 public:
  ScopedWarningSink();
  ~ScopedWarningSink();
  ScopedWarningSink(const ScopedWarningSink&) = delete;
  ScopedWarningSink& operator=(const ScopedWarningSink&) = delete;

  std::vector<std::string> messages() const;
  // The messages joined by newlines, for test failure output.
  std::string text() const;

 private:
  friend void warn(std::string_view message);

  ScopedWarningSink* previous_;
  mutable std::mutex mutex_;
  std::vector<std::string> messages_;
};

}  // namespace fusejit
