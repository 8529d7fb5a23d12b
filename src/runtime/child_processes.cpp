#include "runtime/child_processes.h"

#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <utility>

#include "runtime/compile_temp_dir.h"

namespace fusejit {
namespace {

// Read by the signal handler: lock-free atomics only (async-signal-safe).
constexpr int kSlots = 64;  // compilers running at once; more are not stopped
// A slot is free (0), held by a thread about to spawn or whose compiler
// exited (kHeld), or names a running compiler's process group.
constexpr pid_t kHeld = -1;
std::atomic<pid_t> g_groups[kSlots];
std::atomic<int> g_signal{0};
std::atomic<bool> g_installed{false};
constexpr int kFolderSlots = 8;  // output folders registered at once; more are left on an interrupt
std::atomic<const EmptyFoldersRemovedOnInterrupt*> g_folders[kFolderSlots];

void remove_registered_folders() {
  for (std::atomic<const EmptyFoldersRemovedOnInterrupt*>& slot : g_folders) {
    if (const EmptyFoldersRemovedOnInterrupt* f = slot.load()) f->remove_while_empty();
  }
}
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

void die_by(int signal_number) {
  struct sigaction action = {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  sigaction(signal_number, &action, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signal_number);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  raise(signal_number);
  _exit(128 + signal_number);  // had the signal been held off somehow
}

void on_interrupt(int signal_number) {
  g_signal.store(signal_number);
  bool any = false;
  for (std::atomic<pid_t>& group : g_groups) {
    const pid_t g = group.load();
    if (g > 0) kill(-g, SIGKILL);
    any = any || g != 0;
  }
  // A thread holding a slot cleans up and ends the process
  // (end_if_interrupted), once its compiler is killed or before it spawns
  // one; with no slot held, nothing is left to do.
  if (!any) {
    remove_registered_folders();
    die_by(signal_number);
  }
}

}  // namespace

void stop_children_on_interrupt() {
  if (g_installed.exchange(true)) return;
  for (int s : kSignals) {
    struct sigaction old = {};
    sigaction(s, nullptr, &old);
    if (old.sa_handler == SIG_IGN) continue;  // started ignoring it (nohup): keep that
    struct sigaction action = {};
    action.sa_handler = on_interrupt;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(s, &action, nullptr);
  }
}

bool children_stop_on_interrupt() { return g_installed.load(); }

RunningChildGroup::RunningChildGroup() {
  for (int i = 0; i < kSlots; ++i) {
    pid_t empty = 0;
    if (g_groups[i].compare_exchange_strong(empty, kHeld)) {
      slot_ = i;
      break;
    }
  }
}

void RunningChildGroup::started(pid_t group) {
  if (slot_ >= 0) g_groups[slot_].store(group);
  // An interrupt whose handler ran before the store found the slot held
  // and left the kill to this thread; one after it kills the group itself.
  if (g_signal.load() != 0) kill(-group, SIGKILL);
}

void RunningChildGroup::exited() {
  if (slot_ < 0) return;
  g_groups[slot_].store(kHeld);
  end_if_interrupted();
  g_groups[slot_].store(0);
  slot_ = -1;
}

RunningChildGroup::~RunningChildGroup() {
  if (slot_ >= 0) g_groups[slot_].store(0);
}

EmptyFoldersRemovedOnInterrupt::EmptyFoldersRemovedOnInterrupt(std::vector<std::string> dirs) : dirs_(std::move(dirs)) {
  for (int i = 0; i < kFolderSlots; ++i) {
    const EmptyFoldersRemovedOnInterrupt* empty = nullptr;
    if (g_folders[i].compare_exchange_strong(empty, this)) {
      slot_ = i;
      break;
    }
  }
}

EmptyFoldersRemovedOnInterrupt::~EmptyFoldersRemovedOnInterrupt() {
  if (slot_ >= 0) g_folders[slot_].store(nullptr);
}

void EmptyFoldersRemovedOnInterrupt::remove_while_empty() const {
  for (const std::string& dir : dirs_) {
    // Gone already: another compiler's thread, ending the process too,
    // removed it; its parents may still be empty.
    if (rmdir(dir.c_str()) != 0 && errno != ENOENT) return;
  }
}

void end_if_interrupted() {
  const int s = g_signal.load();
  if (s == 0) return;
  remove_live_compile_dirs();
  remove_registered_folders();
  die_by(s);
}

}  // namespace fusejit
