// The host compilers fusejit runs, and what becomes of them when fusejit
// is interrupted.
//
// A signal sent to fusejit alone (`kill PID`, a CI job cancelled, systemd
// stopping a service) ends fusejit but not the compiler it started: `c++`
// and its `cc1plus` run on, orphaned, to the end of their compile, or for
// ever when the compiler hangs; and Ctrl-C, which reaches both, leaves the
// private compile directory behind. A program that calls
// stop_children_on_interrupt() (the fusejit command does, first thing) has
// SIGINT, SIGTERM and SIGHUP end it cleanly instead:
//   - every host compiler runs as the leader of a process group of its own;
//   - the signal kills those groups (the compiler and everything it
//     started), the process then removes its compile directories
//     (runtime/compile_temp_dir.h), and ends by the same signal, so that its
//     exit status says so (130 after Ctrl-C, 143 after SIGTERM);
//   - with no compiler running, the signal ends the process at once, as it
//     would have without the handler.
// A library user who does not call it keeps the signals' default actions
// and the compilers in the process's own group.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace fusejit {

void stop_children_on_interrupt();
// Whether stop_children_on_interrupt() was called.
bool children_stop_on_interrupt();

// Registers the process group of a running compiler (its leader's pid) for
// the lifetime of this object, so that an interrupt kills it.
class RunningChildGroup {
 public:
  explicit RunningChildGroup(pid_t group);
  ~RunningChildGroup();
  RunningChildGroup(const RunningChildGroup&) = delete;
  RunningChildGroup& operator=(const RunningChildGroup&) = delete;

 private:
  int slot_ = -1;  // its place in the table the handler reads, or -1 when full
};

// Registers folders a command created for its output (`fusejit emit
// --out`, innermost first) for the lifetime of this object: an interrupt
// that ends the process removes each while it is empty, so that a stopped
// command leaves no empty folder behind; a folder with files in it stays.
// rmdir is async-signal-safe, so the handler removes them itself when no
// compiler is running (an in-process NVRTC compile).
class EmptyFoldersRemovedOnInterrupt {
 public:
  explicit EmptyFoldersRemovedOnInterrupt(std::vector<std::string> dirs);
  ~EmptyFoldersRemovedOnInterrupt();
  EmptyFoldersRemovedOnInterrupt(const EmptyFoldersRemovedOnInterrupt&) = delete;
  EmptyFoldersRemovedOnInterrupt& operator=(const EmptyFoldersRemovedOnInterrupt&) = delete;

  // Called by the handler: rmdir of each folder, in order, until one fails.
  void remove_while_empty() const;

 private:
  std::vector<std::string> dirs_;
  int slot_ = -1;
};

// Called after a compiler exited: when an interrupt killed it, removes the
// compile directories and ends the process by that signal (never returns).
void end_if_interrupted();

}  // namespace fusejit
