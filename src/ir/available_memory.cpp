#include "ir/available_memory.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace fusejit {
namespace {

constexpr uint64_t kCheckedFromBytes = uint64_t{64} << 20;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::optional<uint64_t> parse_u64(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

// The number after `key` at the start of a line ("MemAvailable:   12345678 kB",
// "inactive_file 673386496").
std::optional<uint64_t> field(std::string_view text, std::string_view key) {
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    if (!line.starts_with(key)) continue;
    line.remove_prefix(key.size());
    const size_t digits = line.find_first_of("0123456789");
    if (digits == std::string_view::npos ||
        line.substr(0, digits).find_first_not_of(" \t:") != std::string_view::npos) {
      continue;
    }
    line.remove_prefix(digits);
    return parse_u64(line.substr(0, line.find_first_not_of("0123456789")));
  }
  return std::nullopt;
}

// The memory cgroup directories of this process, itself first, then each
// parent up to the mount: v1's memory controller where a v1 hierarchy has
// it (a hybrid system also lists an empty v2 "0::/", with no controllers),
// else v2's "0::PATH".
std::vector<CgroupMemoryFiles> own_cgroup_levels() {
  std::istringstream lines(read_text("/proc/self/cgroup"));
  std::string mount, path;
  bool v2 = false;
  for (std::string line; std::getline(lines, line);) {
    const size_t first = line.find(':');
    const size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      mount = "/sys/fs/cgroup/" + controllers, path = line.substr(second + 1), v2 = false;
      break;
    }
    if (line.compare(0, first, "0") == 0 && controllers.empty()) {
      mount = "/sys/fs/cgroup", path = line.substr(second + 1), v2 = true;
    }
  }
  std::vector<CgroupMemoryFiles> levels;
  if (mount.empty()) return levels;
  while (true) {
    const std::string dir = mount + (path == "/" ? "" : path);
    levels.push_back({read_text(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes")),
                      read_text(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes")),
                      read_text(dir + "/memory.stat")});
    if (path.empty() || path == "/") break;
    const size_t slash = path.find_last_of('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
  return levels;
}

}  // namespace

std::optional<uint64_t> available_host_memory_from(std::string_view meminfo,
                                                   const std::vector<CgroupMemoryFiles>& levels) {
  std::optional<uint64_t> available;
  if (const std::optional<uint64_t> kib = field(meminfo, "MemAvailable")) available = *kib * 1024;
  for (const CgroupMemoryFiles& level : levels) {
    const std::optional<uint64_t> limit = parse_u64(level.limit);  // "max" (v2): none
    const std::optional<uint64_t> usage = parse_u64(level.usage);
    if (!limit || !usage) continue;
    // Page cache the kernel can drop counts as free: v1's "total_inactive_file"
    // (the hierarchy's, as its usage is), v2's "inactive_file".
    const uint64_t cache =
        field(level.stat, "total_inactive_file").value_or(field(level.stat, "inactive_file").value_or(0));
    const uint64_t used = *usage > cache ? *usage - cache : 0;
    const uint64_t left = *limit > used ? *limit - used : 0;
    available = available ? std::min(*available, left) : left;
  }
  return available;
}

std::optional<uint64_t> available_host_memory() {
  return available_host_memory_from(read_text("/proc/meminfo"), own_cgroup_levels());
}

bool host_allocation_fits(uint64_t bytes) {
  if (bytes < kCheckedFromBytes) return true;
  const std::optional<uint64_t> available = available_host_memory();
  return !available || bytes <= *available;
}

std::string host_allocation_refusal(uint64_t bytes, std::string_view what) {
  if (bytes < kCheckedFromBytes) return "";
  const std::optional<uint64_t> available = available_host_memory();
  if (!available || bytes <= *available) return "";
  return fmt::format("out of host memory: {} needs {} MiB, and {} MiB are available", what, bytes >> 20,
                     *available >> 20);
}

}  // namespace fusejit
