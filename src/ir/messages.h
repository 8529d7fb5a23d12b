// What the library says without being asked: warnings about problems it
// recovers from by itself (a corrupt cache entry, an unwritable directory,
// an unusable setting) and notes on slow one-time work (measuring this CPU
// for the cost model). By default each goes to stderr as one line,
// "fusejit: warning: MESSAGE" or "fusejit: MESSAGE"; a program that embeds
// fusejit can take them instead (set_message_handler).
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace fusejit {

enum class MessageKind {
  kWarning,  // something went wrong and fusejit carried on
  kNote,     // what fusejit is doing that takes a while
};

// Receives each message: one line, without the "fusejit: " prefix or a
// newline. Called on whichever thread has something to say, outside
// fusejit's locks, and so possibly on several threads at once. An
// exception it throws is caught, and the message goes to stderr, as do
// messages it causes itself.
using MessageHandler = std::function<void(MessageKind kind, std::string_view message)>;

// Sends every later message of every thread to `handler` (an empty one:
// back to stderr); returns the handler it replaces. A call already under
// way may still finish in the old handler, and fusejit may warn until the
// process exits (its thread pool and GPU handles clean up at exit), so
// what a handler uses must outlive it: put back an empty handler before
// destroying that.
MessageHandler set_message_handler(MessageHandler handler);

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

// A warning: to the innermost live ScopedWarningSink, else the handler,
// else stderr as "fusejit: warning: MESSAGE".
void warn(std::string_view message);
// A note: to the handler, else stderr as "fusejit: MESSAGE".
void note(std::string_view message);

// Captures the warnings of every thread while it lives, instead of passing
// them on; sinks nest. For tests that assert a warning was (or was not) given.
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
