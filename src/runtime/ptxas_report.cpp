#include "runtime/ptxas_report.h"

#include <algorithm>
#include <regex>
#include <string>

namespace fusejit {
namespace {

PtxasFunction& function_named(std::vector<PtxasFunction>& functions, const std::string& name) {
  auto it = std::find_if(functions.begin(), functions.end(), [&](const PtxasFunction& f) { return f.name == name; });
  if (it != functions.end()) return *it;
  functions.push_back(PtxasFunction{.name = name});
  return functions.back();
}

}  // namespace

PtxasReport parse_ptxas_log(std::string_view log) {
  // The lines of interest, as ptxas (CUDA 11 to 13) writes them:
  //   ptxas info    : Compiling entry function 'k' for 'sm_90'
  //   ptxas info    : Function properties for k
  //   ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
  //   ptxas info    : Used 14 registers, used 0 barriers, 32 bytes smem, 376 bytes cmem[0]
  static const std::regex kEntry(R"(Compiling entry function '([^']+)')");
  static const std::regex kProperties(R"(Function properties for (\S+))");
  static const std::regex kFrame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex kUsed(R"(Used (\d+) registers)");
  static const std::regex kShared(R"((\d+) bytes smem)");
  PtxasReport report;
  // "Used" lines belong to the entry being compiled; frame lines to the
  // function named by the "Function properties" line just before them.
  std::string entry;
  std::string described;
  size_t start = 0;
  while (start < log.size()) {
    const size_t end = std::min(log.find('\n', start), log.size());
    const std::string line(log.substr(start, end - start));
    start = end + 1;
    if (!line.starts_with("ptxas")) continue;
    report.log += line + "\n";
    std::smatch m;
    if (std::regex_search(line, m, kEntry)) {
      entry = m[1];
      function_named(report.functions, entry).entry = true;
    } else if (std::regex_search(line, m, kProperties)) {
      described = m[1];
    } else if (std::regex_search(line, m, kFrame) && !described.empty()) {
      PtxasFunction& f = function_named(report.functions, described);
      f.stack_bytes = std::stoll(m[1]);
      f.spill_store_bytes = std::stoll(m[2]);
      f.spill_load_bytes = std::stoll(m[3]);
    } else if (std::regex_search(line, m, kUsed) && !entry.empty()) {
      PtxasFunction& f = function_named(report.functions, entry);
      f.registers = std::stoi(m[1]);
      if (std::regex_search(line, m, kShared)) f.shared_bytes = std::stoll(m[1]);
    }
  }
  for (const PtxasFunction& f : report.functions) {
    report.registers = std::max(report.registers, f.registers);
    report.spill_store_bytes += f.spill_store_bytes;
    report.spill_load_bytes += f.spill_load_bytes;
    report.shared_bytes = std::max(report.shared_bytes, f.shared_bytes);
    report.stack_bytes = std::max(report.stack_bytes, f.stack_bytes);
  }
  return report;
}

}  // namespace fusejit
