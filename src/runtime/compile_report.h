// What a compile leaves for people to read: the report of a failed compile
// (also written to a file, since a message in a log scrolls away) and, with
// FUSEJIT_DUMP=DIR, the files of every compiled kernel.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <absl/status/statusor.h>

#include "runtime/nvrtc_compiler.h"

namespace fusejit {

// "   1 | first line\n   2 | second line\n"
std::string number_lines(std::string_view source);

struct CompileFailure {
  std::string compiler = "NVRTC";  // who failed: "NVRTC", or the host compiler's command
  std::string extension = ".cu";   // of the source file the report names
  std::string name;  // kernel name
  std::string arch;
  std::string error;  // NVRTC's name for the failure
  std::vector<std::string> options;
  std::string log;
  std::string source;
};

// What failed, the options, the compiler's log and the numbered source.
std::string format_compile_failure(const CompileFailure& failure);

// Writes a report as FILE_NAME under cache_directory()/errors/, or under the
// system temp directory's fusejit-errors/ when that cannot be written;
// returns the path.
absl::StatusOr<std::string> write_compile_report(const std::string& file_name, std::string_view text);

// With FUSEJIT_DUMP=DIR set, writes DIR/NAME.cu, DIR/NAME.ptx and
// DIR/NAME.ptxas.txt; a failure is a warning.
void dump_kernel_if_requested(const CompiledKernel& kernel);
// With FUSEJIT_DUMP=DIR set, writes DIR/NAME<suffix> for each (suffix, contents).
void dump_files_if_requested(const std::string& name,
                             const std::vector<std::pair<std::string, const std::string*>>& files);

// The kernel name as a file name: characters other than [A-Za-z0-9_.-] become '_'.
std::string kernel_file_stem(std::string_view name);

}  // namespace fusejit
