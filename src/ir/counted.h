// "1 kernel", "3 kernels": a count with its noun, for messages and reports.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace fusejit {

// The plural is the noun with "s" unless given ("mismatch", "mismatches").
inline std::string counted(int64_t n, std::string_view noun, std::string_view plural = "") {
  if (n == 1) return fmt::format("1 {}", noun);
  return plural.empty() ? fmt::format("{} {}s", n, noun) : fmt::format("{} {}", n, plural);
}

}  // namespace fusejit
