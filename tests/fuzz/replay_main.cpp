// Replays inputs through the parser fuzzer's LLVMFuzzerTestOneInput without
// libFuzzer, so that the harness compiles and its properties are checked in
// the normal g++ build (and in CI, which has no clang).
//
//   fusejit_parser_replay FILE_OR_DIR...
//
// Directories are read one level deep, files in name order. A violated
// property aborts inside the harness, naming it; the name of the input is
// printed before it runs, so the last line names the culprit. Exit 0 when
// every input passed; 2 on usage or I/O errors, or when no
// input was found.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

bool replay(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad() || !in.is_open()) {
    std::fprintf(stderr, "fusejit_parser_replay: cannot read %s\n", path.c_str());
    return false;
  }
  std::fprintf(stderr, "replaying %s (%zu bytes)\n", path.c_str(), bytes.size());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    std::error_code ec;
    if (std::filesystem::is_directory(arg, ec)) {
      for (const auto& entry : std::filesystem::directory_iterator(arg, ec)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
    } else if (std::filesystem::is_regular_file(arg, ec)) {
      files.push_back(arg);
    }
    if (ec || !std::filesystem::exists(arg)) {
      std::fprintf(stderr, "fusejit_parser_replay: %s: no such file or directory\n", argv[i]);
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "fusejit_parser_replay: no input files found\n");  // nothing checked is no pass
    return 2;
  }
  size_t unreadable = 0;
  for (const auto& file : files) unreadable += replay(file) ? 0 : 1;
  if (unreadable > 0) {
    std::fprintf(stderr, "fusejit_parser_replay: %zu of %zu inputs could not be read\n", unreadable, files.size());
    return 2;
  }
  std::fprintf(stderr, "fusejit_parser_replay: %zu inputs replayed, every property held\n", files.size());
  return 0;
}
