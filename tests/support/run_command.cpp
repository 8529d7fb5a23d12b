#include "support/run_command.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace fusejit::testing {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary);
  out << contents;
}

void remove_temp_dir(const std::string& dir) {
  std::error_code ec;
  // Tests make read-only directories (a cache that cannot be written).
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ec);
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code ignored;
    if (it->is_directory(ignored)) {
      std::filesystem::permissions(it->path(), std::filesystem::perms::owner_all, std::filesystem::perm_options::add,
                                   ignored);
    }
  }
  std::filesystem::remove_all(dir, ec);
}

namespace {

// The directories make_temp_dir made, removed when the test process exits
// (each test runs in a process of its own under ctest), so that a test run
// leaves nothing in the temp directory. FUSEJIT_KEEP_TEST_DIRS=1 keeps them,
// to look at after a failure. Tests run commands from several threads at
// once (Cli.ConcurrentSavesIntoOneFolderNeitherReplaceNorMix), so adding
// is locked: unlocked, two push_backs raced (ASan: heap-use-after-free).
class TempDirRegistry {
 public:
  void add(const std::string& dir) {
    std::lock_guard<std::mutex> lock(mutex_);
    dirs_.push_back(dir);
  }
  ~TempDirRegistry() {
    if (std::getenv("FUSEJIT_KEEP_TEST_DIRS") != nullptr) return;
    for (const std::string& dir : dirs_) remove_temp_dir(dir);
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> dirs_;
};

TempDirRegistry& temp_dirs() {
  static TempDirRegistry registry;
  return registry;
}

}  // namespace

std::string make_temp_dir(const std::string& stem) {
  std::string pattern = (std::filesystem::temp_directory_path() / (stem + "-XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
  temp_dirs().add(pattern);
  return pattern;
}

CommandResult run_command(const std::string& command_line) {
  const std::string dir = make_temp_dir("fusejit-cmd");
  const std::string out_path = dir + "/out";
  const std::string err_path = dir + "/err";
  const int status = std::system((command_line + " >" + out_path + " 2>" + err_path + " </dev/null").c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(out_path);
  r.err = read_file(err_path);
  std::filesystem::remove_all(dir);
  return r;
}

CommandResult run_fusejit(const std::string& args) { return run_command(std::string(FUSEJIT_CLI_PATH) + " " + args); }

}  // namespace fusejit::testing
