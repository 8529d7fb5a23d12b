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

// The slot of one compiler's process group in the table the handler reads,
// held from before the spawn until the compiler exited, so that no
// moment of a compile is left to the handler's "no compiler running: end
// at once", which would orphan a compiler spawned but not yet registered:
//   RunningChildGroup group;   // an interrupt from here on is left to us
//   end_if_interrupted();      // one that came already: nothing is spawned
//   pid = spawn(...);          // a process group of its own
//   group.started(pid);        // kills it if an interrupt came meanwhile
//   waitid(..., WEXITED | WNOWAIT);  // exited, not reaped: pid still names it
//   group.exited();            // ends the process if an interrupt came
//   waitpid(pid, ...);         // reaps it
// With every slot taken (64 compilers at once) the compiler is not
// stopped by an interrupt.
class RunningChildGroup {
 public:
  RunningChildGroup();
  ~RunningChildGroup();
  RunningChildGroup(const RunningChildGroup&) = delete;
  RunningChildGroup& operator=(const RunningChildGroup&) = delete;

  // Registers the spawned group (its leader's pid) for the handler to kill.
  void started(pid_t group);
  // The leader exited (and is not yet reaped, so that its pid cannot name
  // another process while the handler may still signal it): ends the
  // process when an interrupt came, else gives up the slot. Also called
  // when the spawn failed.
  void exited();

 private:
  int slot_ = -1;  // its place in the table the handler reads, or -1 when full or given up
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

// When an interrupt came, removes the compile directories and ends the
// process by that signal (never returns); else returns at once.
void end_if_interrupted();

}  // namespace fusejit
