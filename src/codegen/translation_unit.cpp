#include "codegen/translation_unit.h"

#include <fmt/format.h>

namespace fusejit {

std::string without_section(std::string_view source, std::string_view begin, std::string_view end) {
  const size_t first = source.find(begin);
  const size_t last = source.find(end);
  if (first == std::string_view::npos || last == std::string_view::npos) return std::string(source);
  size_t after = source.find('\n', last);
  after = after == std::string_view::npos ? source.size() : after + 1;
  return fmt::format("{}{}", source.substr(0, first), source.substr(after));
}

std::string one_translation_unit(std::string_view begin, std::string_view helpers, std::string_view end,
                                 const std::vector<std::pair<std::string_view, std::string_view>>& kernels) {
  std::string unit = fmt::format("{}\n{}{}{}\n", begin, helpers, helpers.ends_with('\n') ? "" : "\n", end);
  for (const auto& [name, source] : kernels) {
    unit += fmt::format("namespace fj_kernel_{} {{\n{}\n}}  // namespace fj_kernel_{}\n", name,
                        without_section(source, begin, end), name);
  }
  return unit;
}

}  // namespace fusejit
