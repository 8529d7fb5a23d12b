// The C++ graph-building API.
//
//   fusejit::Graph g;
//   auto x = g.input("x", DType::kBF16, {8192, 4096});
//   auto b = g.input("b", DType::kBF16, {4096});
//   ...
//   auto y = layer_norm(dropout(gelu(x + b), 0.1, 42), gamma, beta);
//   g.output("y", y);
//
// Every function checks its operands at once and throws fusejit::Error
// naming the op, the operands, their dtypes and shapes.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string_view>

#include "ir/graph.h"

namespace fusejit {

// A handle to a node of a graph. Cheap to copy; usable while the Graph
// object that made it lives and holds its node (why_unusable()). Making a
// Value may create the Graph's identity cell, so threads that make Values
// of one Graph at once need a lock, as for any other change to it.
class Value {
 public:
  Value() = default;
  Value(Graph* graph, int32_t id) : graph_(graph), id_(id) {
    if (graph_ != nullptr) identity_ = graph_->identity();
  }

  Graph* graph() const { return graph_; }
  int32_t id() const { return id_; }
  // Empty when the Value can be used; otherwise why not: it is empty
  // (default-constructed), or the Graph object that made it has been
  // destroyed, moved from (a std::vector<Graph> that grows moves its
  // Graphs) or assigned to since (Graph::identity()).
  std::string why_unusable() const;
  // Throws fusejit::Error with why_unusable() for a Value that cannot be used.
  const Node& node() const;
  const Shape& shape() const { return node().shape; }
  DType dtype() const { return node().dtype; }
  const std::string& name() const { return node().name; }

 private:
  Graph* graph_ = nullptr;
  int32_t id_ = -1;
  std::weak_ptr<Graph* const> identity_;
};

// An operand as written in C++: a Value or a numeric literal.
class Arg {
 public:
  Arg(Value v) : value_(v) {}  // NOLINT(google-explicit-constructor): reads like math
  Arg(double literal) : literal_(literal), is_literal_(true) {}  // NOLINT(google-explicit-constructor)
  // A number written in C++; an empty Value is not one (apply() rejects it).
  bool is_literal() const { return is_literal_; }
  Value value() const { return value_; }
  double literal() const { return literal_; }

 private:
  Value value_;
  double literal_ = 0;
  bool is_literal_ = false;
};

// Generic application of any callable op; the named functions below use it.
Value apply(Op op, std::initializer_list<Arg> args, const Attrs& attrs = {});
Value apply(Op op, std::span<const Arg> args, const Attrs& attrs = {});

Value neg(Value x);
Value abs(Value x);
Value exp(Value x);
Value log(Value x);
Value sqrt(Value x);
Value rsqrt(Value x);
Value reciprocal(Value x);
Value square(Value x);
Value tanh(Value x);
Value sigmoid(Value x);
Value relu(Value x);
Value silu(Value x);
Value erf(Value x);
// approximate: "none" (erf form) or "tanh", as in torch.nn.functional.gelu.
Value gelu(Value x, std::string_view approximate = "none");

Value add(Arg a, Arg b);
Value sub(Arg a, Arg b);
Value mul(Arg a, Arg b);
Value div(Arg a, Arg b);
Value maximum(Arg a, Arg b);
Value minimum(Arg a, Arg b);
Value pow(Arg a, Arg b);

Value cast(Value x, DType dtype);
Value dropout(Value x, double p, int64_t seed = 0);

Value sum(Value x);   // over the last dimension, kept as extent 1
Value mean(Value x);
Value max(Value x);

// Defaults (eps) come from the op table when not given.
Value layer_norm(Value x, std::optional<Value> gamma = std::nullopt, std::optional<Value> beta = std::nullopt,
                 std::optional<double> eps = std::nullopt);
Value rms_norm(Value x, std::optional<Value> gamma = std::nullopt, std::optional<double> eps = std::nullopt);
Value softmax(Value x);
Value log_softmax(Value x);
Value matmul(Value a, Value b);

Value operator+(Value a, Arg b);
Value operator-(Value a, Arg b);
Value operator*(Value a, Arg b);
Value operator/(Value a, Arg b);
Value operator+(double a, Value b);
Value operator-(double a, Value b);
Value operator*(double a, Value b);
Value operator/(double a, Value b);
Value operator-(Value x);

}  // namespace fusejit
