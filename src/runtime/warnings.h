// Warnings: problems the library recovers from by itself (a corrupt cache
// entry, an unwritable directory) but that a user should hear about.
#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace fusejit {

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
