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

// The lines of `source` that a compiler's `log` cites, as NAME.cu(LINE)
// (NVRTC) or NAME.cpp:LINE: (GCC, Clang), with kCitedContext lines either
// side, numbered as number_lines() does; runs that touch are merged, and
// "     ..." marks a gap. "" when the log cites no line of the source.
inline constexpr int kCitedContext = 3;
std::string cited_source_lines(std::string_view log, std::string_view source);

// A failure in two lengths. Both say what failed, the options and the
// compiler's log; `full` then numbers the whole source (a generated kernel
// runs to a thousand lines and more, with its helpers), for the report
// file, and `brief` only the lines the log cites, for the message.
struct CompileFailureText {
  std::string brief;
  std::string full;
};
CompileFailureText format_compile_failure(const CompileFailure& failure);
// The error a failed compile returns: `brief` and the report's path, or
// `full` when no report could be written. Writes the report as
// FILE_NAME (write_compile_report).
absl::Status compile_failure_status(const std::string& file_name, const CompileFailureText& text);

// Writes a report as FILE_NAME under cache_directory()/errors/, or under the
// system temp directory's fusejit-errors/ when that cannot be written;
// returns the path.
absl::StatusOr<std::string> write_compile_report(const std::string& file_name, std::string_view text);

// With FUSEJIT_DUMP=DIR set, writes DIR/NAME.cu, DIR/NAME.ptx and
// DIR/NAME.ptxas.txt; a failure is a warning.
void dump_kernel_if_requested(const CompiledKernel& kernel);
// With FUSEJIT_DUMP=DIR set, writes DIR/NAME<suffix> for each (suffix,
// contents). Replaces nothing: where a file of that name holds other
// content, the kernel's files are named NAME-2<suffix>, NAME-3<suffix>, ...
// (the first number under which every suffix is free or already holds the
// same content), with a warning the first time in the process.
void dump_files_if_requested(const std::string& name,
                             const std::vector<std::pair<std::string, const std::string*>>& files);

// The kernel name as a file name: characters other than [A-Za-z0-9_.-] become '_'.
std::string kernel_file_stem(std::string_view name);

}  // namespace fusejit
