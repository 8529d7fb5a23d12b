#include "ir/infer.h"

#include <cmath>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/counted.h"

namespace fusejit {
namespace {

std::string call_text(const Graph& graph, const OpInfo& info, std::span<const Operand> operands) {
  std::vector<std::string> parts;
  for (const Operand& o : operands) parts.push_back(describe(graph, o));
  return fmt::format("{}({})", info.name, fmt::join(parts, ", "));
}

std::string arity_text(const OpInfo& info) {
  if (info.min_operands == info.max_operands) {
    return counted(info.min_operands, "operand");
  }
  return fmt::format("{} to {} operands", info.min_operands, info.max_operands);
}

// Fills `check.node.attrs` in spec order from `given` plus defaults.
// An attribute `info` does not have: "gelu has no attribute 'approx'".
bool reject_unknown_attrs(const OpInfo& info, const Attrs& given, NodeCheck& check) {
  for (const auto& [name, value] : given.entries()) {
    if (info.find_attr(name) == nullptr) {
      check.attr = name;
      // Operands have no names: layer_norm(x, beta=b) must say that beta
      // goes by position, not only that no attribute has its name.
      std::vector<std::string_view> names;
      for (const AttrSpec& a : info.attrs) names.push_back(a.name);
      check.error = info.attrs.empty()
                        ? fmt::format("{} takes no attributes, got '{}'", info.name, name)
                        : fmt::format("{} has no attribute '{}' (its attributes: {}; operands go by position)",
                                      info.name, name, fmt::join(names, ", "));
      // softmax(x, dim=-1), as PyTorch writes it: say why there is no axis
      // to choose. Reductions and the composites (norms, softmax) all work
      // over the last axis.
      const bool row_op = info.kind == OpKind::kReduce || info.kind == OpKind::kComposite;
      if (row_op && (name == "dim" || name == "axis" || name == "keepdim")) {
        check.error += fmt::format("; {} always works over the last axis{}", info.name,
                                   info.kind == OpKind::kReduce ? " and keeps it with extent 1" : "");
      }
      return true;
    }
  }
  return false;
}

bool complete_attrs(const Graph& graph, const OpInfo& info, std::span<const Operand> operands, const Attrs& given,
                    NodeCheck& check) {
  if (reject_unknown_attrs(info, given, check)) return false;
  for (const AttrSpec& spec : info.attrs) {
    const AttrValue* value = given.find(spec.name);
    AttrValue filled;
    if (value == nullptr) {
      if (spec.default_text.empty()) {
        check.attr = std::string(spec.name);
        check.error = fmt::format("{}: needs the attribute '{}'", call_text(graph, info, operands), spec.name);
        return false;
      }
      filled = *parse_attr_value(spec, spec.default_text);
      value = &filled;
    }
    if (std::string problem = check_attr_value(spec, *value); !problem.empty()) {
      check.attr = std::string(spec.name);
      // The call with its operands' types, as for shape errors: "dropout(h: bf16[8, 16]): p must be ...".
      check.error = fmt::format("{}: {}", call_text(graph, info, operands), problem);
      return false;
    }
    check.node.attrs.set(spec.name, *value);
  }
  return true;
}

bool infer_type(const Graph& graph, const OpInfo& info, std::span<const Operand> operands, NodeCheck& check) {
  Node& out = check.node;
  const std::string call = call_text(graph, info, operands);
  auto fail = [&](int operand, std::string problem) {
    check.operand = operand;
    check.error = fmt::format("{}: {}", call, problem);
    return false;
  };
  auto tensor = [&](int i) -> const Node& { return graph.node(operands[i].node); };

  // Only binary ops take literals; every other operand must be a tensor.
  for (int i = 0; i < static_cast<int>(operands.size()); ++i) {
    if (operands[i].is_literal() && info.kind != OpKind::kBinary) {
      return fail(i, fmt::format("operand {} must be a tensor, not the literal {}", i + 1, operands[i].literal));
    }
    // The text format writes literals as decimal numbers; a non-finite one could not round-trip.
    if (operands[i].is_literal() && !std::isfinite(operands[i].literal)) {
      return fail(i, fmt::format("literal operands must be finite, got {}", operands[i].literal));
    }
    if (operands[i].is_literal()) {
      if (std::string problem = float32_range_problem(operands[i].literal); !problem.empty()) {
        return fail(i, fmt::format("literal operand {}: {}", i + 1, problem));
      }
    }
  }

  switch (info.kind) {
    case OpKind::kInput:
      return fail(-1, "inputs are declared with 'input', not called");
    case OpKind::kUnary:
    case OpKind::kDropout:
      out.dtype = tensor(0).dtype;
      out.shape = tensor(0).shape;
      return true;
    case OpKind::kCast:
      out.dtype = out.attrs.get_dtype("dtype");
      out.shape = tensor(0).shape;
      return true;
    case OpKind::kBinary: {
      const Operand& a = operands[0];
      const Operand& b = operands[1];
      if (a.is_literal() && b.is_literal()) return fail(0, "at least one operand must be a tensor");
      if (a.is_literal() || b.is_literal()) {
        const Node& t = a.is_literal() ? tensor(1) : tensor(0);
        out.dtype = t.dtype;  // literals do not promote
        out.shape = t.shape;
        return true;
      }
      auto shape = broadcast_shapes(tensor(0).shape, tensor(1).shape);
      if (!shape) {
        return fail(1, fmt::format("cannot broadcast {} with {}", tensor(0).shape, tensor(1).shape));
      }
      if (shape->numel_overflows()) {
        return fail(1, fmt::format("the broadcast shape {} has too many elements", *shape));
      }
      out.dtype = promote(tensor(0).dtype, tensor(1).dtype);
      out.shape = *shape;
      return true;
    }
    case OpKind::kReduce:
      out.dtype = tensor(0).dtype;
      out.shape = tensor(0).shape;
      out.shape[out.shape.rank() - 1] = 1;
      return true;
    case OpKind::kComposite: {
      // Operands after x (gamma, beta) are per-feature vectors of the last dimension.
      const Node& x = tensor(0);
      out.dtype = x.dtype;
      for (int i = 1; i < static_cast<int>(operands.size()); ++i) {
        const Node& p = tensor(i);
        if (p.shape != Shape{x.shape.last()}) {
          return fail(i, fmt::format("{} must have shape [{}] (the last dimension of {}), got {}", p.name,
                                     x.shape.last(), x.name, p.shape));
        }
        out.dtype = promote(out.dtype, p.dtype);
      }
      out.shape = x.shape;
      return true;
    }
    case OpKind::kMatmul: {
      const Node& a = tensor(0);
      const Node& b = tensor(1);
      if (a.shape.rank() < 2) return fail(0, fmt::format("{} must have rank >= 2 ([..., M, K])", a.name));
      if (b.shape.rank() != 2) return fail(1, fmt::format("{} must have rank 2 ([K, N])", b.name));
      if (a.shape.last() != b.shape[0]) {
        return fail(1, fmt::format("inner dimensions differ: K = {} in {} but {} in {}", a.shape.last(), a.name,
                                   b.shape[0], b.name));
      }
      out.dtype = promote(a.dtype, b.dtype);
      out.shape = a.shape;
      out.shape[out.shape.rank() - 1] = b.shape[1];
      if (out.shape.numel_overflows()) return fail(1, fmt::format("the result shape {} is too large", out.shape));
      return true;
    }
  }
  return fail(-1, "unknown op kind");
}

}  // namespace

NodeCheck check_given_attrs(const OpInfo& info, const Attrs& given) {
  NodeCheck check;
  if (reject_unknown_attrs(info, given, check)) return check;
  for (const auto& [name, value] : given.entries()) {
    if (std::string problem = check_attr_value(*info.find_attr(name), value); !problem.empty()) {
      check.attr = name;
      check.error = fmt::format("{}: {}", info.name, problem);
      return check;
    }
  }
  return check;
}

NodeCheck make_node(const Graph& graph, const OpInfo& info, std::span<const Operand> operands, const Attrs& given) {
  NodeCheck check;
  check.node.op = info.op;
  check.node.operands.assign(operands.begin(), operands.end());
  const int n = static_cast<int>(operands.size());
  // relu(x=x): an operand written as an attribute, which is the mistake to
  // name, rather than the operand it leaves missing.
  if (n < info.min_operands && reject_unknown_attrs(info, given, check)) {
    if (info.attrs.empty()) check.error += " (operands go by position)";
    return check;
  }
  if (n < info.min_operands || n > info.max_operands) {
    check.error = fmt::format("{}: {} takes {}, got {}", call_text(graph, info, operands), info.name,
                              arity_text(info), n);
    // dropout(x, 0.1): a number where a numeric attribute was meant, written by position.
    if (n > info.max_operands && operands[info.max_operands].is_literal() && !info.attrs.empty() &&
        (info.attrs.front().type == AttrType::kFloat || info.attrs.front().type == AttrType::kInt)) {
      check.error += fmt::format(" (attributes go by name: {}={})", info.attrs.front().name,
                                 format_attr_value(AttrValue(operands[info.max_operands].literal)));
    }
    check.operand = n > info.max_operands ? info.max_operands : -1;
    return check;
  }
  if (!complete_attrs(graph, info, operands, given, check)) return check;
  infer_type(graph, info, operands, check);
  return check;
}

}  // namespace fusejit
