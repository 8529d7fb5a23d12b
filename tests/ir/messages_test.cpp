// What the library says unasked: warnings and notes go to stderr, or to a
// handler a program installs, or (warnings) to a test's ScopedWarningSink.
#include "ir/messages.h"

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/kernel_cache.h"
#include "runtime/runtime_test_util.h"
#include "runtime/sha256.h"
#include "support/run_command.h"

namespace fusejit {
namespace {

// Installs a handler that records every message while it lives, and puts
// back the one it replaced.
class RecordedMessages {
 public:
  RecordedMessages()
      : previous_(set_message_handler([this](MessageKind kind, std::string_view message) {
          messages_.emplace_back(kind, std::string(message));
        })) {}
  ~RecordedMessages() { set_message_handler(std::move(previous_)); }
  const std::vector<std::pair<MessageKind, std::string>>& messages() const { return messages_; }

 private:
  std::vector<std::pair<MessageKind, std::string>> messages_;
  MessageHandler previous_;
};

TEST(Messages, AHandlerReceivesWarningsAndNotesAsTheyAreSaid) {
  std::vector<std::pair<MessageKind, std::string>> got;
  {
    RecordedMessages recorded;
    warn("the cache is full");
    note("measuring this CPU");
    got = recorded.messages();
  }
  EXPECT_EQ(got, (std::vector<std::pair<MessageKind, std::string>>{{MessageKind::kWarning, "the cache is full"},
                                                                   {MessageKind::kNote, "measuring this CPU"}}));
  // Put back: nothing reaches the old handler's vector any more.
  const MessageHandler none = set_message_handler({});
  EXPECT_FALSE(none) << "the recorder put back the default (stderr)";
}

// A warning from deep in the library (a damaged kernel-cache entry) reaches
// the program's handler, naming the file.
TEST(Messages, TheLibrarysOwnWarningsReachTheHandler) {
  const testing::TempDir tmp("fusejit-messages");
  const std::string key = sha256_hex("a kernel");
  KernelCache cache(tmp.path());
  testing::write_file(cache.entry_path(key), "not a cache entry");
  RecordedMessages recorded;
  EXPECT_FALSE(cache.lookup(key).has_value());
  ASSERT_EQ(recorded.messages().size(), 1u);
  EXPECT_EQ(recorded.messages()[0].first, MessageKind::kWarning);
  EXPECT_NE(recorded.messages()[0].second.find(cache.entry_path(key)), std::string::npos)
      << recorded.messages()[0].second;
}

// A handler that throws, or warns itself, ends nothing and hangs nothing:
// the message goes to stderr (a throw out of warn() in a destructor would
// end the process; a warning back into the handler would never end).
TEST(Messages, AHandlerThatThrowsOrWarnsItselfEndsNothing) {
  int calls = 0;
  MessageHandler previous = set_message_handler([&calls](MessageKind, std::string_view message) {
    ++calls;
    if (message == "throw") throw std::runtime_error("from the handler");
    warn("said inside the handler");
  });
  EXPECT_NO_THROW(warn("throw"));
  EXPECT_NO_THROW(warn("warn again"));
  EXPECT_EQ(calls, 2) << "the handler's own warning did not come back into it";
  set_message_handler(std::move(previous));
}

// A test's sink takes warnings before any handler; notes pass it by.
TEST(Messages, ASinkTakesWarningsBeforeTheHandler) {
  RecordedMessages recorded;
  ScopedWarningSink sink;
  warn("caught by the sink");
  note("a note");
  EXPECT_EQ(sink.messages(), std::vector<std::string>{"caught by the sink"});
  ASSERT_EQ(recorded.messages().size(), 1u);
  EXPECT_EQ(recorded.messages()[0], std::make_pair(MessageKind::kNote, std::string("a note")));
}

}  // namespace
}  // namespace fusejit
