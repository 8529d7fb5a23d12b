#include "ir/attrs.h"

#include <charconv>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/error.h"
#include "ir/text_lexer.h"

namespace fusejit {

void Attrs::set(std::string_view name, AttrValue value) {
  for (auto& [n, v] : entries_) {
    if (n == name) {
      v = std::move(value);
      return;
    }
  }
  entries_.emplace_back(std::string(name), std::move(value));
}

const AttrValue* Attrs::find(std::string_view name) const {
  for (const auto& [n, v] : entries_) {
    if (n == name) return &v;
  }
  return nullptr;
}

namespace {
template <typename T>
const T& get_typed(const Attrs& attrs, std::string_view name) {
  const AttrValue* v = attrs.find(name);
  if (v == nullptr || !std::holds_alternative<T>(*v)) {
    throw Error(fmt::format("internal error: attribute '{}' missing or of the wrong type", name));
  }
  return std::get<T>(*v);
}
}  // namespace

double Attrs::get_float(std::string_view name) const { return get_typed<double>(*this, name); }
int64_t Attrs::get_int(std::string_view name) const { return get_typed<int64_t>(*this, name); }
DType Attrs::get_dtype(std::string_view name) const { return get_typed<DType>(*this, name); }
const std::string& Attrs::get_enum(std::string_view name) const { return get_typed<std::string>(*this, name); }

std::string_view attr_type_name(AttrType type) {
  switch (type) {
    case AttrType::kFloat: return "a number";
    case AttrType::kInt: return "an integer";
    case AttrType::kDType: return "a dtype (f32, f16, bf16)";
    case AttrType::kEnum: return "one of";
  }
  return "?";
}

namespace {
std::vector<std::string_view> split_choices(std::string_view choices) {
  std::vector<std::string_view> out;
  while (true) {
    const size_t bar = choices.find('|');
    out.push_back(choices.substr(0, bar));
    if (bar == std::string_view::npos) return out;
    choices.remove_prefix(bar + 1);
  }
}

std::string expected_text(const AttrSpec& spec) {
  if (spec.type == AttrType::kEnum) {
    return fmt::format("one of {}", fmt::join(split_choices(spec.choices), ", "));
  }
  return std::string(attr_type_name(spec.type));
}
// from_chars() on `text`, a '+' before the number allowed ("+2", as the
// text format's literals take it: text::without_plus_sign).
template <typename T>
std::from_chars_result read_number(std::string_view text, T& value) {
  const std::string_view digits = fusejit::text::without_plus_sign(text);
  return std::from_chars(digits.data(), digits.data() + digits.size(), value);
}

}  // namespace

absl::StatusOr<AttrValue> parse_attr_value(const AttrSpec& spec, std::string_view text) {
  auto bad = [&] {
    return absl::InvalidArgumentError(fmt::format("invalid value {} for attribute '{}': expected {}",
                                                  fusejit::text::quoted(text), spec.name, expected_text(spec)));
  };
  switch (spec.type) {
    case AttrType::kFloat: {
      double v = 0;
      const auto [ptr, ec] = read_number(text, v);
      // A number too small or too large for a double (1e-400, 1e999) is
      // one, not "expected a number"; said as a literal's range is.
      if (ec == std::errc::result_out_of_range && ptr == text.data() + text.size()) {
        return absl::InvalidArgumentError(
            fmt::format("value {} for attribute '{}' is out of the range of a 64-bit float",
                        fusejit::text::quoted(text), spec.name));
      }
      if (ec != std::errc() || ptr != text.data() + text.size() || text.empty()) return bad();
      return AttrValue(v);
    }
    case AttrType::kInt: {
      int64_t v = 0;
      const auto [ptr, ec] = read_number(text, v);
      const char* end = text.data() + text.size();
      if (ec == std::errc::result_out_of_range) {
        return absl::InvalidArgumentError(
            text.starts_with('-')
                ? fmt::format("value '{}' for attribute '{}' is out of range", text, spec.name)
                : fmt::format("value '{}' for attribute '{}' is out of range: at most {}", text, spec.name,
                              std::numeric_limits<int64_t>::max()));
      }
      if (ec != std::errc() || ptr != end || text.empty()) return bad();
      return AttrValue(v);
    }
    case AttrType::kDType: {
      if (auto t = parse_dtype(text)) return AttrValue(*t);
      return bad();
    }
    case AttrType::kEnum: {
      for (std::string_view choice : split_choices(spec.choices)) {
        if (choice == text) return AttrValue(std::string(text));
      }
      return bad();
    }
  }
  return bad();
}

std::string check_attr_value(const AttrSpec& spec, const AttrValue& value) {
  const bool type_ok = (spec.type == AttrType::kFloat && std::holds_alternative<double>(value)) ||
                       (spec.type == AttrType::kInt && std::holds_alternative<int64_t>(value)) ||
                       (spec.type == AttrType::kDType && std::holds_alternative<DType>(value)) ||
                       (spec.type == AttrType::kEnum && std::holds_alternative<std::string>(value));
  if (!type_ok) return fmt::format("{} must be {}", spec.name, expected_text(spec));
  if (spec.type == AttrType::kDType && !is_valid_dtype(std::get<DType>(value))) {
    return fmt::format("{} must be {}, got the value {}", spec.name, expected_text(spec),
                       static_cast<int>(std::get<DType>(value)));
  }
  if (spec.type == AttrType::kEnum) {
    for (std::string_view choice : split_choices(spec.choices)) {
      if (choice == std::get<std::string>(value)) return {};
    }
    return fmt::format("{} must be {}, got '{}'", spec.name, expected_text(spec), std::get<std::string>(value));
  }
  if (spec.type != AttrType::kFloat && spec.type != AttrType::kInt) return {};
  const double v = spec.type == AttrType::kFloat ? std::get<double>(value)
                                                 : static_cast<double>(std::get<int64_t>(value));
  const bool above_min = spec.min_inclusive ? v >= spec.min : v > spec.min;
  const bool below_max = spec.max_inclusive ? v <= spec.max : v < spec.max;
  if (std::isnan(v) || !above_min || !below_max) {
    return fmt::format("{} must be {}, got {}", spec.name, spec.requirement, format_attr_value(value));
  }
  if (spec.type == AttrType::kFloat && spec.float32_constant) {
    const bool zero_allowed = (spec.min_inclusive ? 0 >= spec.min : 0 > spec.min) &&
                              (spec.max_inclusive ? 0 <= spec.max : 0 < spec.max);
    if (std::string problem = float32_range_problem(v, zero_allowed); !problem.empty()) {
      return fmt::format("{}: {}", spec.name, problem);
    }
  }
  return {};
}

std::string format_attr_value(const AttrValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, double>) {
          return fmt::format("{}", v);  // shortest text that reads back exactly
        } else if constexpr (std::is_same_v<T, DType>) {
          return std::string(dtype_name(v));
        } else {
          return fmt::format("{}", v);
        }
      },
      value);
}

}  // namespace fusejit
