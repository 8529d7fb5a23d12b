// Op attributes: their declared specs (in the op table) and their values on a
// node. A node always carries every attribute of its op, in spec order, with
// defaults filled in, so that two equal graphs compare equal attribute by
// attribute and the printer can tell a default from a chosen value.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include <absl/container/inlined_vector.h>
#include <absl/status/statusor.h>

#include "ir/dtype.h"

namespace fusejit {

enum class AttrType : uint8_t { kFloat, kInt, kDType, kEnum };

struct AttrSpec {
  std::string_view name;
  AttrType type;
  std::string_view default_text;  // empty: the attribute is required
  std::string_view choices = {};  // kEnum only: "none|tanh"
  // Numeric range for kFloat/kInt, checked by check_attr_value().
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_inclusive = true;
  bool max_inclusive = true;
  std::string_view requirement = {};  // how the range reads to a user: "in [0, 1)"
  // kFloat only: kernels use the value as a float32 constant (eps), so it
  // must be one (float32_range_problem); false where it is used in double
  // only (dropout's p, from which the threshold and scale are computed).
  bool float32_constant = true;
};

using AttrValue = std::variant<double, int64_t, DType, std::string>;

class Attrs {
 public:
  void set(std::string_view name, AttrValue value);
  const AttrValue* find(std::string_view name) const;
  bool contains(std::string_view name) const { return find(name) != nullptr; }

  // Typed access; the attribute must exist with that type (the verifier
  // guarantees this for every node of a verified graph).
  double get_float(std::string_view name) const;
  int64_t get_int(std::string_view name) const;
  DType get_dtype(std::string_view name) const;
  const std::string& get_enum(std::string_view name) const;

  int size() const { return static_cast<int>(entries_.size()); }
  const auto& entries() const { return entries_; }
  bool operator==(const Attrs&) const = default;

 private:
  absl::InlinedVector<std::pair<std::string, AttrValue>, 2> entries_;
};

// Parses the text of an attribute value ("0.1", "42", "bf16", "tanh").
absl::StatusOr<AttrValue> parse_attr_value(const AttrSpec& spec, std::string_view text);
// Empty when `value` has the spec's type and lies in its range; otherwise a
// message such as "p must be in [0, 1), got 1.5".
std::string check_attr_value(const AttrSpec& spec, const AttrValue& value);
// Canonical text of a value; parse_attr_value(format_attr_value(v)) == v.
std::string format_attr_value(const AttrValue& value);
std::string_view attr_type_name(AttrType type);

}  // namespace fusejit
