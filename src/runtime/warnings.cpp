#include "runtime/warnings.h"

#include <cstdio>

#include <absl/strings/str_join.h>

namespace fusejit {
namespace {

// Guards the sink stack (installing, removing, choosing a sink).
std::mutex& sink_mutex() {
  static std::mutex mutex;
  return mutex;
}

ScopedWarningSink*& current_sink() {
  static ScopedWarningSink* sink = nullptr;
  return sink;
}

}  // namespace

void write_stderr(std::string_view text) { (void)std::fwrite(text.data(), 1, text.size(), stderr); }

void warn(std::string_view message) {
  std::lock_guard<std::mutex> lock(sink_mutex());
  if (ScopedWarningSink* sink = current_sink()) {
    std::lock_guard<std::mutex> sink_lock(sink->mutex_);
    sink->messages_.emplace_back(message);
    return;
  }
  // One fprintf call, so that warnings of concurrent threads do not interleave.
  std::fprintf(stderr, "fusejit: warning: %.*s\n", static_cast<int>(message.size()), message.data());
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
