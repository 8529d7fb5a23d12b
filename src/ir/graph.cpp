#include "ir/graph.h"

#include <bit>
#include <cctype>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "ir/builder.h"
#include "ir/closest_name.h"
#include "ir/error.h"

namespace fusejit {

bool Operand::operator==(const Operand& o) const {
  return node == o.node && std::bit_cast<uint64_t>(literal) == std::bit_cast<uint64_t>(o.literal);
}

bool Node::same_as(const Node& o) const {
  return op == o.op && name == o.name && dtype == o.dtype && shape == o.shape && operands == o.operands &&
         attrs == o.attrs;
}

bool is_identifier(std::string_view name) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return name != "input" && name != "output";
}

std::string describe(const Node& node) { return fmt::format("{}: {}{}", node.name, node.dtype, node.shape); }

std::string describe(const Graph& graph, const Operand& operand) {
  if (operand.is_literal()) return fmt::format("{}", operand.literal);
  return describe(graph.node(operand.node));
}

bool exceeds_value_limit(DType dtype, const Shape& shape) {
  int64_t bytes = 0;
  return shape.numel_overflows() || __builtin_mul_overflow(shape.numel(), dtype_size(dtype), &bytes) ||
         bytes > kMaxValueBytes;
}

Graph::Graph(const Graph& other)
    : nodes_(other.nodes_),
      feeds_f32_(other.feeds_f32_),
      outputs_(other.outputs_),
      by_name_(other.by_name_),
      source_file_(other.source_file_) {}

Graph::Graph(Graph&& other) noexcept
    : nodes_(std::move(other.nodes_)),
      feeds_f32_(std::move(other.feeds_f32_)),
      outputs_(std::move(other.outputs_)),
      by_name_(std::move(other.by_name_)),
      source_file_(std::move(other.source_file_)),
      identity_(std::move(other.identity_)) {
  if (identity_) *identity_ = this;  // Values of `other` now see another address: stale
  other.nodes_.clear();
  other.feeds_f32_.clear();
  other.outputs_.clear();
  other.by_name_.clear();
  other.source_file_.clear();
}

Graph& Graph::operator=(const Graph& other) {
  if (this == &other) return *this;
  nodes_ = other.nodes_;
  feeds_f32_ = other.feeds_f32_;
  outputs_ = other.outputs_;
  by_name_ = other.by_name_;
  source_file_ = other.source_file_;
  identity_.reset();  // the Values made of the old contents are stale
  return *this;
}

Graph& Graph::operator=(Graph&& other) noexcept {
  if (this == &other) return *this;
  nodes_ = std::move(other.nodes_);
  feeds_f32_ = std::move(other.feeds_f32_);
  outputs_ = std::move(other.outputs_);
  by_name_ = std::move(other.by_name_);
  source_file_ = std::move(other.source_file_);
  identity_ = std::move(other.identity_);
  if (identity_) *identity_ = this;
  other.nodes_.clear();
  other.feeds_f32_.clear();
  other.outputs_.clear();
  other.by_name_.clear();
  other.source_file_.clear();
  return *this;
}

std::weak_ptr<Graph* const> Graph::identity() {
  if (!identity_) identity_ = std::make_shared<Graph*>(this);
  return std::const_pointer_cast<Graph* const>(identity_);
}

Value Graph::value(std::string_view name) {
  if (std::optional<int32_t> id = find(name)) return Value(this, *id);
  std::vector<std::string> names;
  for (const Node& n : nodes_) names.push_back(n.name);
  const std::optional<std::string> near = closest_name(name, names);
  throw Error(fmt::format("value '{}': {}", name,
                          nodes_.empty() ? std::string("the graph is empty (moved from, or nothing built yet)")
                                         : fmt::format("the graph has no value of that name{}",
                                                       near ? fmt::format(" (did you mean '{}'?)", *near) : "")));
}

Value Graph::input(std::string_view requested_name, DType dtype, const Shape& shape) {
  // A copy: the view may be a node's name (g.input(v.name(), ...)), which
  // claim_name renames and a new node can move.
  const std::string name(requested_name);
  auto fail = [&](std::string_view why) {
    throw Error(fmt::format("input {}: {}{}: {}", name, dtype, shape, why));
  };
  if (!is_valid_dtype(dtype)) fail(fmt::format("dtype {} is none of f32, f16, bf16", static_cast<int>(dtype)));
  if (!is_identifier(name)) fail("the name is not an identifier (letters, digits, '_'; not 'input' or 'output')");
  if (shape.rank() < 1 || shape.rank() > kMaxRank) fail("rank must be 1 to 4");
  for (int64_t d : shape) {
    if (d <= 0) fail("extents must be positive");
  }
  if (shape.numel_overflows()) fail("the number of elements overflows a 64-bit integer");
  if (exceeds_value_limit(dtype, shape)) fail("takes more than the 256 TiB (2^48 bytes) a value may take");
  // Last: claiming the name renames an automatic name it collides with,
  // which a refused input must leave as it was.
  if (!claim_name(name)) fail("the name is already used in this graph");
  Node n;
  n.op = Op::kInput;
  n.name = std::string(name);
  n.dtype = dtype;
  n.shape = shape;
  return Value(this, append(std::move(n)));
}

void Graph::output(std::string_view requested_name, Value value) {
  const std::string name(requested_name);  // as in input(): it may be a node's name
  if (const std::string why = value.why_unusable(); !why.empty()) throw Error(fmt::format("output {}: {}", name, why));
  if (value.graph() != this) {
    throw Error(fmt::format("output {}: the value ({}) belongs to another Graph object than this one", name,
                            describe(value.node())));
  }
  Node& n = nodes_[value.id()];
  if (n.op == Op::kInput) {
    throw Error(fmt::format("output {}: {} is a graph input; outputs must be computed", name, describe(n)));
  }
  if (is_output(value.id())) throw Error(fmt::format("output {}: {} is already an output", name, describe(n)));
  if (n.name != name) {
    if (!n.auto_named) {
      throw Error(fmt::format("output {}: the value is already named '{}'; output it under that name", name, n.name));
    }
    if (!is_identifier(name)) throw Error(fmt::format("output {}: the name is not an identifier", name));
    if (!claim_name(name)) throw Error(fmt::format("output {}: the name is already used in this graph", name));
    by_name_.erase(n.name);
    n.name = name;
    by_name_[n.name] = value.id();
  }
  n.auto_named = false;
  outputs_.push_back(value.id());
}

int32_t Graph::append(Node node) {
  const auto id = static_cast<int32_t>(nodes_.size());
  by_name_.try_emplace(node.name, id);  // first definition wins; verify() reports the duplicate
  const bool f32 = node.dtype == DType::kF32;
  nodes_.push_back(std::move(node));
  feeds_f32_.push_back(false);
  // Operands come before their users (an id out of range is verify()'s to
  // report), so the walk ends; a node already marked has its operands marked.
  std::vector<int32_t> pending;
  if (f32) pending.push_back(id);
  while (!pending.empty()) {
    const int32_t at = pending.back();
    pending.pop_back();
    if (feeds_f32_[at]) continue;
    feeds_f32_[at] = true;
    for (const Operand& o : nodes_[at].operands) {
      if (!o.is_literal() && o.node < at) pending.push_back(o.node);
    }
  }
  return id;
}

bool Graph::is_16bit_gelu(int32_t id) const {
  const Node& n = nodes_[id];
  return n.op == Op::kGelu && !feeds_f32_[id] && n.attrs.get_enum("approximate") == "none";
}

CostClass Graph::cost_class(int32_t id) const {
  if (is_16bit_gelu(id)) return CostClass::kGelu16Bit;
  const Node& n = nodes_[id];
  if (n.op == Op::kMatmul && nodes_[n.operands[0].node].dtype == DType::kBF16 &&
      nodes_[n.operands[1].node].dtype == DType::kBF16) {
    return CostClass::kMatmulBf16;
  }
  return n.info().cost_class;
}

void Graph::rename(int32_t id, std::string name) {
  if (!has_node(id))
    throw Error(fmt::format("rename: node {} does not exist (the graph has {} nodes)", id, num_nodes()));
  if (const std::optional<int32_t> holder = find(name); holder && *holder != id) {
    throw Error(fmt::format("rename: cannot name node {} '{}': node {} has that name", id, name, *holder));
  }
  Node& n = nodes_[id];
  if (auto it = by_name_.find(n.name); it != by_name_.end() && it->second == id) by_name_.erase(it);
  n.name = std::move(name);
  by_name_.try_emplace(n.name, id);
}

bool Graph::claim_name(std::string_view name) {
  const std::optional<int32_t> holder = find(name);
  if (!holder) return true;
  const Node& n = nodes_[*holder];
  // A name the builder chose (relu_3) gives way to the user's: the node
  // is renamed (still an op's name and a number), and Values, which hold
  // ids, are unaffected. A name the user gave, or an output's, stays.
  if (!n.auto_named || is_output(*holder)) return false;
  rename(*holder, fresh_name(n.info().name));
  return true;
}

std::string Graph::fresh_name(std::string_view stem) const {
  for (int64_t i = num_nodes();; ++i) {
    std::string candidate = fmt::format("{}_{}", stem, i);
    if (!find(candidate)) return candidate;
  }
}

std::vector<int32_t> Graph::inputs() const {
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < num_nodes(); ++i) {
    if (nodes_[i].op == Op::kInput) ids.push_back(i);
  }
  return ids;
}

std::vector<bool> Graph::reaches_outputs() const {
  std::vector<bool> live(nodes_.size(), false);
  for (int32_t o : outputs_) live[o] = true;
  // Operands precede their users, so one backward sweep suffices.
  for (int32_t i = num_nodes(); i-- > 0;) {
    if (!live[i]) continue;
    for (const Operand& o : nodes_[i].operands) {
      if (!o.is_literal()) live[o.node] = true;
    }
  }
  return live;
}

std::vector<int32_t> Graph::unused_nodes() const {
  const std::vector<bool> live = reaches_outputs();
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < num_nodes(); ++i) {
    if (!live[i] && nodes_[i].op != Op::kInput) ids.push_back(i);
  }
  return ids;
}

std::optional<int32_t> Graph::find(std::string_view name) const {
  auto it = by_name_.find(absl::string_view(name.data(), name.size()));
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

bool Graph::is_output(int32_t id) const {
  for (int32_t o : outputs_) {
    if (o == id) return true;
  }
  return false;
}

bool Graph::operator==(const Graph& other) const {
  if (nodes_.size() != other.nodes_.size() || outputs_ != other.outputs_) return false;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i].same_as(other.nodes_[i])) return false;
  }
  return true;
}

}  // namespace fusejit
