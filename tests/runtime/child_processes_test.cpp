// An interrupt at any moment of a compile ends the compiler with fusejit:
// the handler kills the compilers it knows of, and a thread about to spawn
// one, or whose compiler just exited, ends the process itself. Each case
// runs in a forked child, so that this test process keeps its own signal
// handlers; the "compiler" is `sleep`, which would otherwise live on.
#include "runtime/child_processes.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <functional>
#include <string>

#include <gtest/gtest.h>

extern char** environ;

namespace fusejit {
namespace {

// Spawns `sleep 1000` leading a process group of its own, as run_process
// does a compiler; returns its pid, or -1.
pid_t spawn_sleeper() {
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  char sleep_name[] = "sleep";
  char seconds[] = "1000";
  char* argv[] = {sleep_name, seconds, nullptr};
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, "sleep", nullptr, &attributes, argv, environ);
  posix_spawnattr_destroy(&attributes);
  return rc == 0 ? pid : -1;
}

// Gone or a zombie (killed, its parent ended before reaping it): not running.
bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z' && line[paren + 2] != 'X';
}

struct Outcome {
  int status = 0;      // of the forked child, from waitpid
  pid_t sleeper = -1;  // the pid of the sleep it spawned, or -1
  bool sleeper_gone = false;
};

// Runs `body` in a forked child that installed the handler; the body
// writes the sleeper's pid to `pid_out` and returns only if the process was
// not ended (then the child exits 3).
Outcome run_in_child(const std::function<void(int pid_out)>& body) {
  int fds[2];
  Outcome outcome;
  if (pipe(fds) != 0) return outcome;
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    stop_children_on_interrupt();
    body(fds[1]);
    _exit(3);
  }
  close(fds[1]);
  pid_t sleeper = -1;
  if (read(fds[0], &sleeper, sizeof sleeper) == static_cast<ssize_t>(sizeof sleeper)) outcome.sleeper = sleeper;
  close(fds[0]);
  waitpid(child, &outcome.status, 0);
  if (outcome.sleeper > 0) {
    // A SIGKILL takes effect at once, but give it up to 2 s.
    for (int i = 0; i < 200 && !outcome.sleeper_gone; ++i) {
      outcome.sleeper_gone = !running(outcome.sleeper);
      if (!outcome.sleeper_gone) usleep(10000);
    }
    if (!outcome.sleeper_gone) kill(outcome.sleeper, SIGKILL);
  }
  return outcome;
}

void write_pid(int fd, pid_t pid) {
  if (write(fd, &pid, sizeof pid) != static_cast<ssize_t>(sizeof pid)) _exit(4);
}

// Spawns the sleeper, registers it with `group` and reports its pid.
pid_t start_registered_sleeper(RunningChildGroup& group, int fd) {
  const pid_t pid = spawn_sleeper();
  group.started(pid);
  write_pid(fd, pid);
  return pid;
}

// Waits until `pid` exited, leaving it unreaped (its pid still names it).
void wait_for_exit(pid_t pid) {
  siginfo_t info;
  while (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
}

// Waits for the sleeper as run_process does its compiler.
void wait_like_run_process(RunningChildGroup& group, pid_t pid) {
  wait_for_exit(pid);
  group.exited();
  int status = 0;
  waitpid(pid, &status, 0);
}

bool ended_by(int status, int signal_number) { return WIFSIGNALED(status) && WTERMSIG(status) == signal_number; }

TEST(ChildProcesses, AnInterruptWhileTheCompilerRunsKillsItAndEndsTheProcess) {
  const Outcome o = run_in_child([](int fd) {
    RunningChildGroup group;
    const pid_t pid = start_registered_sleeper(group, fd);
    kill(getpid(), SIGTERM);
    wait_like_run_process(group, pid);
  });
  EXPECT_TRUE(ended_by(o.status, SIGTERM)) << "status " << o.status;
  ASSERT_GT(o.sleeper, 0);
  EXPECT_TRUE(o.sleeper_gone);
}

// The window CI once hit: the compiler spawned, its group not yet
// registered. The handler finds the slot held and leaves the kill to the
// thread, whose started() does it.
TEST(ChildProcesses, AnInterruptBetweenTheSpawnAndTheRegistrationStillKillsTheCompiler) {
  const Outcome o = run_in_child([](int fd) {
    RunningChildGroup group;
    const pid_t pid = spawn_sleeper();
    write_pid(fd, pid);
    kill(getpid(), SIGTERM);  // handled here and now: this thread is the only one
    group.started(pid);
    wait_like_run_process(group, pid);
  });
  EXPECT_TRUE(ended_by(o.status, SIGTERM)) << "status " << o.status;
  ASSERT_GT(o.sleeper, 0);
  EXPECT_TRUE(o.sleeper_gone) << "the compiler outlived the interrupted process";
}

// An interrupt before the spawn: end_if_interrupted() ends the process and
// nothing is spawned.
TEST(ChildProcesses, AnInterruptBeforeTheSpawnSpawnsNothing) {
  const Outcome o = run_in_child([](int fd) {
    RunningChildGroup group;
    kill(getpid(), SIGHUP);
    end_if_interrupted();
    write_pid(fd, spawn_sleeper());
  });
  EXPECT_TRUE(ended_by(o.status, SIGHUP)) << "status " << o.status;
  EXPECT_EQ(o.sleeper, -1) << "a compiler was spawned after the interrupt";
}

// After the compiler exited, the slot still held: exited() ends the process.
TEST(ChildProcesses, AnInterruptAfterTheCompilerExitedIsHandledByExited) {
  const Outcome o = run_in_child([](int fd) {
    RunningChildGroup group;
    const pid_t pid = start_registered_sleeper(group, fd);
    kill(pid, SIGKILL);
    wait_for_exit(pid);
    // Not reaped yet, so the handler's kill of the group reaches no other
    // process; it leaves the ending to exited().
    kill(getpid(), SIGINT);
    group.exited();
  });
  EXPECT_TRUE(ended_by(o.status, SIGINT)) << "status " << o.status;
}

// No slot held: the signal ends the process at once, as without the handler.
TEST(ChildProcesses, WithNoCompilerTheSignalEndsTheProcessAtOnce) {
  const Outcome o = run_in_child([](int fd) {
    {
      RunningChildGroup group;
      const pid_t pid = start_registered_sleeper(group, fd);
      kill(pid, SIGKILL);
      wait_like_run_process(group, pid);
    }
    kill(getpid(), SIGTERM);
  });
  EXPECT_TRUE(ended_by(o.status, SIGTERM)) << "status " << o.status;
  EXPECT_TRUE(o.sleeper_gone);
}

}  // namespace
}  // namespace fusejit
