#include "cost/host_cpu.h"

#include <fstream>

namespace fusejit {
namespace {

// The first line of /proc/cpuinfo starting with key (empty if none).
std::string cpuinfo_line(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(key)) return line;
  }
  return "";
}

}  // namespace

std::string host_cpu_model() {
  const std::string line = cpuinfo_line("model name");
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return "unknown CPU";
  const size_t value = line.find_first_not_of(" \t", colon + 1);
  return value == std::string::npos ? "unknown CPU" : line.substr(value);
}

std::string host_cpu_identity() { return cpuinfo_line("model name") + "\n" + cpuinfo_line("flags"); }

// From the kernel's flags line rather than __builtin_cpu_supports, whose
// reading of the newer feature bits has differed between compilers' runtimes.
namespace {
bool has_cpu_flag(const std::string& flag) {
  return (cpuinfo_line("flags") + " ").find(" " + flag + " ") != std::string::npos;
}
}  // namespace

bool host_cpu_has_avx512_bf16() { return has_cpu_flag("avx512_bf16"); }

bool host_cpu_has_f16c() { return has_cpu_flag("f16c") && has_cpu_flag("avx"); }

}  // namespace fusejit
