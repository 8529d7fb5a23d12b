// Runs a command line in a shell and captures its exit code, stdout and
// stderr, for tests of the fusejit program.
#pragma once

#include <string>

namespace fusejit::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

CommandResult run_command(const std::string& command_line);
// run_command("<fusejit binary> " + args).
CommandResult run_fusejit(const std::string& args);
// A fresh, empty directory under the system temp directory, removed with its
// contents when the process exits (unless FUSEJIT_KEEP_TEST_DIRS is set).
std::string make_temp_dir(const std::string& stem);
// Removes `dir` and its contents, read-only subdirectories included.
void remove_temp_dir(const std::string& dir);
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& contents);

}  // namespace fusejit::testing
