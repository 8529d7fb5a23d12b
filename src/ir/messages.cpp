#include "ir/messages.h"

#include <cstdio>
#include <memory>

#include <absl/strings/str_join.h>

namespace fusejit {
namespace {

// Guards the sink stack and the handler (installing, removing, choosing).
std::mutex& sink_mutex() {
  static std::mutex mutex;
  return mutex;
}

ScopedWarningSink*& current_sink() {
  static ScopedWarningSink* sink = nullptr;
  return sink;
}

// The installed handler; empty for stderr. Held by shared_ptr so that a
// message is delivered outside the lock: a handler that waits for a lock of
// its own (a logger's, Python's GIL) must not hold up every other thread's
// messages, nor deadlock with one waiting here.
std::shared_ptr<const MessageHandler>& current_handler() {
  static auto* handler = new std::shared_ptr<const MessageHandler>;  // never destroyed: threads may warn during exit
  return *handler;
}

void deliver(MessageKind kind, std::string_view message) {
  std::shared_ptr<const MessageHandler> handler;
  {
    std::lock_guard<std::mutex> lock(sink_mutex());
    handler = current_handler();
  }
  // A handler that says something itself (through a fusejit call that
  // warns) has that go to stderr rather than back into it, for ever.
  thread_local bool in_handler = false;
  if (handler && !in_handler) {
    in_handler = true;
    // warn() runs in destructors too, where an exception would end the
    // process: a handler that throws loses the message to stderr instead.
    try {
      (*handler)(kind, message);
      in_handler = false;
      return;
    } catch (...) {
      in_handler = false;
    }
  }
  // One write, so that messages of concurrent threads do not interleave.
  write_stderr(fmt::format("fusejit: {}{}\n", kind == MessageKind::kWarning ? "warning: " : "", message));
}

}  // namespace

void write_stderr(std::string_view text) { (void)std::fwrite(text.data(), 1, text.size(), stderr); }

MessageHandler set_message_handler(MessageHandler handler) {
  std::shared_ptr<const MessageHandler> next;
  if (handler) next = std::make_shared<const MessageHandler>(std::move(handler));
  std::lock_guard<std::mutex> lock(sink_mutex());
  const std::shared_ptr<const MessageHandler> previous = std::exchange(current_handler(), std::move(next));
  return previous ? *previous : MessageHandler();
}

void warn(std::string_view message) {
  {
    std::lock_guard<std::mutex> lock(sink_mutex());
    if (ScopedWarningSink* sink = current_sink()) {
      std::lock_guard<std::mutex> sink_lock(sink->mutex_);
      sink->messages_.emplace_back(message);
      return;
    }
  }
  deliver(MessageKind::kWarning, message);
}

void note(std::string_view message) { deliver(MessageKind::kNote, message); }

ScopedWarningSink::ScopedWarningSink() {
  std::lock_guard<std::mutex> lock(sink_mutex());
  previous_ = current_sink();
  current_sink() = this;
}

ScopedWarningSink::~ScopedWarningSink() {
  std::lock_guard<std::mutex> lock(sink_mutex());
  current_sink() = previous_;
}

std::vector<std::string> ScopedWarningSink::messages() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return messages_;
}

std::string ScopedWarningSink::text() const { return absl::StrJoin(messages(), "\n"); }

}  // namespace fusejit
