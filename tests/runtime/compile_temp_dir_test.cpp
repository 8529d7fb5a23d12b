// A host compile's temporary directory is removed when done; those of a
// process that died mid-compile (Ctrl-C, kill) are removed by the next
// process's first compile, and nobody else's.
#include "runtime/compile_temp_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/run_command.h"

namespace fusejit {
namespace {

TEST(CompileTempDir, IsRemovedWithEverythingInIt) {
  std::string path;
  {
    absl::StatusOr<CompileTempDir> dir = CompileTempDir::make();
    ASSERT_TRUE(dir.ok()) << dir.status();
    path = dir->path();
    EXPECT_NE(path.find("fusejit-cxx-" + std::to_string(getpid()) + "-"), std::string::npos) << path;
    testing::write_file(path + "/kernel.cpp", "int x;\n");
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

// Swept: a directory whose process is gone from this machine, whose lock
// nobody holds, unchanged for 10 minutes. Kept: this process's, a live
// process's, one locked by a process elsewhere (the same id on another
// machine sharing $TMPDIR: here this test holds the lock), a fresh one, one
// without a lock file (an older fusejit's), and anything else.
TEST(CompileTempDir, OnlyTheAbandonedDirectoriesOfDeadProcessesAreSwept) {
  const std::string parent = testing::make_temp_dir("fusejit-sweep");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);  // reaped: its pid names no process now
  const std::string dead = parent + "/fusejit-cxx-" + std::to_string(child);
  auto make = [](const std::string& dir, bool lock_file) {
    std::filesystem::create_directory(dir);
    testing::write_file(dir + "/output.txt", "left behind");
    if (lock_file) testing::write_file(dir + "/.lock", "");
  };
  make(dead + "-aaaaaa", true);
  make(dead + "-locked", true);
  make(dead + "-fresh1", true);
  make(dead + "-nolock", false);
  const std::vector<std::string> others = {
      parent + "/fusejit-cxx-" + std::to_string(getpid()) + "-bbbbbb",  // this process's
      parent + "/fusejit-cxx-1-cccccc",                                 // a live process's
      parent + "/fusejit-cxx-dddddd",                                   // an older fusejit's name
      parent + "/unrelated",
  };
  for (const std::string& dir : others) make(dir, true);
  const auto an_hour_ago = std::filesystem::file_time_type::clock::now() - std::chrono::hours(1);
  for (const auto& entry : std::filesystem::directory_iterator(parent)) {
    if (entry.path().filename().string().find("fresh") == std::string::npos) {
      std::filesystem::last_write_time(entry.path(), an_hour_ago);
    }
  }
  const int held = open((dead + "-locked/.lock").c_str(), O_RDWR);
  ASSERT_GE(held, 0);
  ASSERT_EQ(flock(held, LOCK_EX), 0);
  EXPECT_EQ(remove_abandoned_compile_dirs(parent), 1);
  close(held);
  EXPECT_FALSE(std::filesystem::exists(dead + "-aaaaaa"));
  for (const char* kept : {"-locked", "-fresh1", "-nolock"}) {
    EXPECT_TRUE(std::filesystem::is_directory(dead + kept)) << kept;
  }
  for (const std::string& dir : others) EXPECT_TRUE(std::filesystem::is_directory(dir)) << dir;
}

}  // namespace
}  // namespace fusejit
