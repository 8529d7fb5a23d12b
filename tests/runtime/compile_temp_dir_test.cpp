// A host compile's temporary directory is removed when done; those of a
// process that died mid-compile (Ctrl-C, kill) are removed by the next
// process's first compile, and nobody else's.
#include "runtime/compile_temp_dir.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

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

TEST(CompileTempDir, OnlyTheDirectoriesOfDeadProcessesAreSwept) {
  const std::string parent = testing::make_temp_dir("fusejit-sweep");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);  // reaped: its pid names no process now
  const std::string dead = parent + "/fusejit-cxx-" + std::to_string(child) + "-aaaaaa";
  const std::vector<std::string> kept = {
      parent + "/fusejit-cxx-" + std::to_string(getpid()) + "-bbbbbb",  // this process's
      parent + "/fusejit-cxx-1-cccccc",                                 // a live process's
      parent + "/fusejit-cxx-dddddd",                                   // an older fusejit's name
      parent + "/unrelated",
  };
  for (const std::string& dir : kept) std::filesystem::create_directory(dir);
  std::filesystem::create_directory(dead);
  testing::write_file(dead + "/output.txt", "left behind");
  EXPECT_EQ(remove_abandoned_compile_dirs(parent), 1);
  EXPECT_FALSE(std::filesystem::exists(dead));
  for (const std::string& dir : kept) EXPECT_TRUE(std::filesystem::is_directory(dir)) << dir;
}

}  // namespace
}  // namespace fusejit
