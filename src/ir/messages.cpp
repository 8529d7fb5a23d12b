#include "ir/messages.h"

#include <cstdio>

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

MessageHandler& current_handler() {
  static MessageHandler* handler = new MessageHandler;  // never destroyed: threads may warn during exit
  return *handler;
}

// With sink_mutex() held, so that messages of concurrent threads neither
// interleave nor race a handler being replaced.
void deliver(MessageKind kind, std::string_view message) {
  if (const MessageHandler& handler = current_handler()) {
    handler(kind, message);
    return;
  }
  write_stderr(fmt::format("fusejit: {}{}\n", kind == MessageKind::kWarning ? "warning: " : "", message));
}

}  // namespace

void write_stderr(std::string_view text) { (void)std::fwrite(text.data(), 1, text.size(), stderr); }

MessageHandler set_message_handler(MessageHandler handler) {
  std::lock_guard<std::mutex> lock(sink_mutex());
  return std::exchange(current_handler(), std::move(handler));
}

void warn(std::string_view message) {
  std::lock_guard<std::mutex> lock(sink_mutex());
  if (ScopedWarningSink* sink = current_sink()) {
    std::lock_guard<std::mutex> sink_lock(sink->mutex_);
    sink->messages_.emplace_back(message);
    return;
  }
  deliver(MessageKind::kWarning, message);
}

void note(std::string_view message) {
  std::lock_guard<std::mutex> lock(sink_mutex());
  deliver(MessageKind::kNote, message);
}

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
