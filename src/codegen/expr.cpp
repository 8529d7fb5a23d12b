#include "codegen/expr.h"

#include <cmath>

#include <fmt/format.h>

#include "codegen/kernel_names.h"
#include "ir/philox.h"

namespace fusejit {

std::string float_literal(double value) {
  const float f = static_cast<float>(value);
  std::string text = fmt::format("{}", f);  // shortest text that reads back as this float
  if (text.find_first_of(".eE") == std::string::npos) text += ".0";
  return text + "f";
}

std::string_view storage_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "float";
    case DType::kF16: return "fj_f16";
    case DType::kBF16: return "fj_bf16";
  }
  return "float";
}

namespace {

// The value a {name} placeholder stands for: the attribute itself, or a
// value derived from it that a kernel wants precomputed (dropout's integer
// threshold and float scale). Dropout's 32-bit key halves (philox.h:
// dropout_key) come from the seed the kernel takes as an argument
// (kernel_names.h: seed_name). GeLU's helper is its approximate form's, or
// for the exact form the cheaper one where only 16-bit values are computed
// from it (`is_16bit_gelu`: Graph::is_16bit_gelu, which needs the graph).
std::string placeholder_value(const Node& node, std::string_view name, bool is_16bit_gelu = false) {
  if (node.op == Op::kGelu && name == "gelu_variant") {
    return is_16bit_gelu ? std::string("none_16bit") : node.attrs.get_enum("approximate");
  }
  if (node.op == Op::kDropout) {
    const double p = node.attrs.get_float("p");
    if (name == "threshold") return fmt::format("{}", dropout_threshold(p));
    if (name == "scale") return float_literal(dropout_scale(p));
    if (name == "seed_lo") return fmt::format("(unsigned)({})", emit::seed_name(node));
    if (name == "seed_hi") return fmt::format("(unsigned)({} >> 32)", emit::seed_name(node));
  }
  const AttrValue* value = node.attrs.find(name);
  return value != nullptr ? format_attr_value(*value) : fmt::format("<{}?>", name);
}

std::string substitute(std::string_view code, const Node& node, std::span<const std::string> operands,
                       std::string_view index, std::string_view acc, bool is_16bit_gelu = false) {
  std::string out;
  for (size_t i = 0; i < code.size(); ++i) {
    const char c = code[i];
    if (c == '$' && i + 1 < code.size() && code[i + 1] >= '0' && code[i + 1] <= '9') {
      out += "(" + operands[code[i + 1] - '0'] + ")";
      ++i;
    } else if (code.substr(i, 6) == "$index") {
      out += index;
      i += 5;
    } else if (code.substr(i, 4) == "$acc") {
      out += acc;
      i += 3;
    } else if (c == '{') {
      const size_t close = code.find('}', i);
      out += placeholder_value(node, code.substr(i + 1, close - i - 1), is_16bit_gelu);
      i = close;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string node_expression(const Graph& graph, int32_t id, std::span<const std::string> operands,
                            std::string_view index) {
  const Node& node = graph.node(id);
  std::vector<std::string> printed(operands.begin(), operands.end());
  for (size_t i = 0; i < node.operands.size() && i < printed.size(); ++i) {
    if (node.operands[i].is_literal()) printed[i] = float_literal(node.operands[i].literal_value());
  }
  return substitute(node.info().code, node, printed, index, "", graph.is_16bit_gelu(id));
}

std::string dropout_vector_call(const Node& node, int width, std::string_view in, std::string_view out,
                                std::string_view index) {
  return fmt::format("fj_dropout{}({}, {}, {}, {}u, {}, {}, {})", width, in, out, index,
                     placeholder_value(node, "threshold"), placeholder_value(node, "scale"),
                     placeholder_value(node, "seed_lo"), placeholder_value(node, "seed_hi"));
}

int dropout_vector_width(int vec) {
  if (vec % kDropoutGroup == 0) return kDropoutGroup;
  if (vec % 4 == 0) return 4;
  return 0;
}

std::string dropout_span_call(const Node& node, std::string_view in, std::string_view out, std::string_view count,
                              std::string_view first_index) {
  return fmt::format("fj_dropout_span({}, {}, {}, {}, {}u, {}, {}, {})", in, out, count, first_index,
                     placeholder_value(node, "threshold"), placeholder_value(node, "scale"),
                     placeholder_value(node, "seed_lo"), placeholder_value(node, "seed_hi"));
}

std::string reduce_identity(const Node& node) { return std::string(node.info().reduce_identity_code); }

std::string reduce_combine(const Node& node, std::string_view acc, std::string_view x) {
  const std::string operand(x);
  return substitute(node.info().code, node, std::span<const std::string>(&operand, 1), "", acc);
}

}  // namespace fusejit
