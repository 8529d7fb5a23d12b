#include "codegen/expr.h"

#include <cmath>

#include <fmt/format.h>

#include "codegen/kernel_names.h"
#include "ir/philox.h"
#include "ir/value_bounds.h"

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

// What a placeholder may depend on beyond the node: facts about the graph.
struct GraphFacts {
  bool is_16bit_gelu = false;      // Graph::is_16bit_gelu
  bool operand_is_normal = false;  // is_at_least_min_normal of operand 0
};

GraphFacts facts_of(const Graph& graph, int32_t id) {
  const Node& node = graph.node(id);
  GraphFacts facts;
  facts.is_16bit_gelu = graph.is_16bit_gelu(id);
  if (node.op == Op::kRsqrt) facts.operand_is_normal = is_at_least_min_normal(graph, node.operands[0]);
  return facts;
}

// The value a {name} placeholder stands for: the attribute itself, or a
// value derived from it that a kernel wants precomputed (dropout's integer
// threshold and float scale). Dropout's key is the local that holds what
// the kernel takes for its seed (kernel_names.h: seed_name): the seed on a
// CPU, its Philox round keys on a GPU; the helpers of each target take it.
// GeLU's helper is its approximate form's, or for the exact form the
// cheaper one where only 16-bit values are computed from it. rsqrt's is
// fj_rsqrt_normal where its operand is known to be at least FLT_MIN
// (LayerNorm's and RMSNorm's variance plus epsilon): on a GPU, one
// rsqrt.approx.ftz rather than the four instructions that scale a
// subnormal input.
std::string placeholder_value(const Node& node, std::string_view name, const GraphFacts& facts = {}) {
  if (node.op == Op::kGelu && name == "gelu_variant") {
    return facts.is_16bit_gelu ? std::string("none_16bit") : node.attrs.get_enum("approximate");
  }
  if (node.op == Op::kRsqrt && name == "rsqrt_variant") return facts.operand_is_normal ? "_normal" : "";
  if (node.op == Op::kDropout) {
    const double p = node.attrs.get_float("p");
    if (name == "threshold") return fmt::format("{}", dropout_threshold(p));
    if (name == "scale") return float_literal(dropout_scale(p));
    if (name == "key") return emit::seed_name(node);
  }
  const AttrValue* value = node.attrs.find(name);
  return value != nullptr ? format_attr_value(*value) : fmt::format("<{}?>", name);
}

std::string substitute(std::string_view code, const Node& node, std::span<const std::string> operands,
                       std::string_view index, std::string_view acc, const GraphFacts& facts = {}) {
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
      out += placeholder_value(node, code.substr(i + 1, close - i - 1), facts);
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
  return substitute(node.info().code, node, printed, index, "", facts_of(graph, id));
}

std::string dropout_vector_call(const Node& node, int width, std::string_view in, std::string_view out,
                                std::string_view index) {
  return fmt::format("fj_dropout{}({}, {}, {}, {}u, {}, {})", width, in, out, index,
                     placeholder_value(node, "threshold"), placeholder_value(node, "scale"),
                     placeholder_value(node, "key"));
}

std::string gelu_dropout_vector_call(const Node& dropout, std::string_view in, std::string_view out,
                                     std::string_view index) {
  const double log2_scale = std::log2(static_cast<double>(dropout_scale(dropout.attrs.get_float("p"))));
  return fmt::format("fj_gelu_dropout8({}, {}, {}, {}u, {}, {}, {})", in, out, index,
                     placeholder_value(dropout, "threshold"), placeholder_value(dropout, "scale"),
                     float_literal(static_cast<float>(log2_scale - 1)), placeholder_value(dropout, "key"));
}

int dropout_vector_width(int vec) {
  if (vec % kDropoutGroup == 0) return kDropoutGroup;
  if (vec % 4 == 0) return 4;
  return 0;
}

std::string dropout_span_call(const Node& node, std::string_view in, std::string_view out, std::string_view count,
                              std::string_view first_index) {
  return fmt::format("fj_dropout_span({}, {}, {}, {}, {}u, {}, {})", in, out, count, first_index,
                     placeholder_value(node, "threshold"), placeholder_value(node, "scale"),
                     placeholder_value(node, "key"));
}

std::string reduce_identity(const Node& node) { return std::string(node.info().reduce_identity_code); }

std::string reduce_combine(const Node& node, std::string_view acc, std::string_view x) {
  const std::string operand(x);
  return substitute(node.info().code, node, std::span<const std::string>(&operand, 1), "", acc);
}

}  // namespace fusejit
