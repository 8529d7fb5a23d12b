#include "ir/builder.h"

#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/error.h"
#include "ir/infer.h"

namespace fusejit {

std::string Value::why_unusable() const {
  if (graph_ == nullptr) return "an empty Value (default-constructed), not a tensor of a graph";
  const std::shared_ptr<Graph* const> holder = identity_.lock();
  if (holder != nullptr && *holder == graph_ && !graph_->has_node(id_)) {
    // Made by hand as Value(&graph, id) with an id the graph never had.
    const size_t count = graph_->nodes().size();
    if (count == 0) return fmt::format("a Value of node {}, but its Graph has no nodes", id_);
    return fmt::format("a Value of node {}, but its Graph has nodes 0 to {} only", id_, count - 1);
  }
  if (holder == nullptr || *holder != graph_) {
    return fmt::format("a Value (node {}) whose Graph object no longer holds it: the Graph was destroyed, moved "
                       "from (as a std::vector<Graph> that grows does) or assigned to after the Value was made. "
                       "Values refer to the Graph object that made them",
                       id_);
  }
  return "";
}

const Node& Value::node() const {
  if (const std::string why = why_unusable(); !why.empty()) throw Error(why);
  return graph_->node(id_);
}

Value apply(Op op, std::initializer_list<Arg> args, const Attrs& attrs) {
  return apply(op, std::span<const Arg>(args.begin(), args.size()), attrs);
}

Value apply(Op op, std::span<const Arg> args, const Attrs& attrs) {
  const OpInfo& info = op_info(op);
  Graph* graph = nullptr;
  for (size_t i = 0; i < args.size(); ++i) {
    const Arg& a = args[i];
    if (a.is_literal()) continue;
    if (const std::string why = a.value().why_unusable(); !why.empty()) {
      throw Error(fmt::format("{}: operand {} is {}", info.name, i + 1, why));
    }
    if (graph != nullptr && a.value().graph() != graph) {
      throw Error(fmt::format("{}: operand {} ({}) belongs to another Graph than the operands before it; "
                              "an op's operands must come from one Graph",
                              info.name, i + 1, describe(*a.value().graph(), Operand::value(a.value().id()))));
    }
    graph = a.value().graph();
  }
  if (graph == nullptr) throw Error(fmt::format("{}: at least one operand must be a tensor", info.name));
  std::vector<Operand> operands;
  for (const Arg& a : args) {
    operands.push_back(a.is_literal() ? Operand::scalar(a.literal()) : Operand::value(a.value().id()));
  }
  NodeCheck check = make_node(*graph, info, operands, attrs);
  if (!check.ok()) throw Error(check.error);
  if (exceeds_value_limit(check.node.dtype, check.node.shape)) {
    std::vector<std::string> described;
    for (const Operand& o : operands) described.push_back(describe(*graph, o));
    throw Error(fmt::format("{}({}): gives {}{}, more than the 256 TiB (2^48 bytes) a value may take", info.name,
                            fmt::join(described, ", "), check.node.dtype, check.node.shape));
  }
  check.node.name = graph->fresh_name(info.name);
  check.node.auto_named = true;
  return Value(graph, graph->append(std::move(check.node)));
}

#define FUSEJIT_UNARY_FN(fn, Enum) \
  Value fn(Value x) { return apply(Op::Enum, {x}); }
FUSEJIT_UNARY_FN(neg, kNeg)
FUSEJIT_UNARY_FN(abs, kAbs)
FUSEJIT_UNARY_FN(exp, kExp)
FUSEJIT_UNARY_FN(log, kLog)
FUSEJIT_UNARY_FN(sqrt, kSqrt)
FUSEJIT_UNARY_FN(rsqrt, kRsqrt)
FUSEJIT_UNARY_FN(reciprocal, kReciprocal)
FUSEJIT_UNARY_FN(square, kSquare)
FUSEJIT_UNARY_FN(tanh, kTanh)
FUSEJIT_UNARY_FN(sigmoid, kSigmoid)
FUSEJIT_UNARY_FN(relu, kRelu)
FUSEJIT_UNARY_FN(silu, kSilu)
FUSEJIT_UNARY_FN(erf, kErf)
FUSEJIT_UNARY_FN(sum, kSum)
FUSEJIT_UNARY_FN(mean, kMean)
FUSEJIT_UNARY_FN(max, kMax)
FUSEJIT_UNARY_FN(softmax, kSoftmax)
FUSEJIT_UNARY_FN(log_softmax, kLogSoftmax)
#undef FUSEJIT_UNARY_FN

#define FUSEJIT_BINARY_FN(fn, Enum) \
  Value fn(Arg a, Arg b) { return apply(Op::Enum, {a, b}); }
FUSEJIT_BINARY_FN(add, kAdd)
FUSEJIT_BINARY_FN(sub, kSub)
FUSEJIT_BINARY_FN(mul, kMul)
FUSEJIT_BINARY_FN(div, kDiv)
FUSEJIT_BINARY_FN(maximum, kMaximum)
FUSEJIT_BINARY_FN(minimum, kMinimum)
FUSEJIT_BINARY_FN(pow, kPow)
#undef FUSEJIT_BINARY_FN

Value gelu(Value x, std::string_view approximate) {
  Attrs attrs;
  attrs.set("approximate", std::string(approximate));
  return apply(Op::kGelu, {x}, attrs);
}

Value cast(Value x, DType dtype) {
  Attrs attrs;
  attrs.set("dtype", dtype);
  return apply(Op::kCast, {x}, attrs);
}

Value dropout(Value x, double p, int64_t seed) {
  Attrs attrs;
  attrs.set("p", p);
  attrs.set("seed", seed);
  return apply(Op::kDropout, {x}, attrs);
}

Value layer_norm(Value x, std::optional<Value> gamma, std::optional<Value> beta, std::optional<double> eps) {
  if (beta && !gamma) throw Error("layer_norm: beta given without gamma; pass gamma too");
  std::vector<Arg> args{x};
  if (gamma) args.emplace_back(*gamma);
  if (beta) args.emplace_back(*beta);
  Attrs attrs;
  if (eps) attrs.set("eps", *eps);
  return apply(Op::kLayerNorm, args, attrs);
}

Value rms_norm(Value x, std::optional<Value> gamma, std::optional<double> eps) {
  std::vector<Arg> args{x};
  if (gamma) args.emplace_back(*gamma);
  Attrs attrs;
  if (eps) attrs.set("eps", *eps);
  return apply(Op::kRmsNorm, args, attrs);
}

Value matmul(Value a, Value b) { return apply(Op::kMatmul, {a, b}); }

Value operator+(Value a, Arg b) { return add(a, b); }
Value operator-(Value a, Arg b) { return sub(a, b); }
Value operator*(Value a, Arg b) { return mul(a, b); }
Value operator/(Value a, Arg b) { return div(a, b); }
Value operator+(double a, Value b) { return add(a, b); }
Value operator-(double a, Value b) { return sub(a, b); }
Value operator*(double a, Value b) { return mul(a, b); }
Value operator/(double a, Value b) { return div(a, b); }
Value operator-(Value x) { return neg(x); }

}  // namespace fusejit
