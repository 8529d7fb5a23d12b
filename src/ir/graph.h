// The graph IR: one node type for every op (tinygrad-style), stored in
// topological order. A node names its op, its result type, its operands
// (earlier nodes or numeric literals) and its attributes. Names are the
// user's; every node has one, so any graph prints as text and reads back.
//
// Semantics in brief (the op table in ops.def has the details):
// - Tensors have rank 1..4 and positive extents; elementwise ops broadcast
//   NumPy-style; the result dtype follows PyTorch (f16 with bf16 gives f32);
//   literals do not take part in promotion.
// - Every value is computed in float arithmetic and rounded to its dtype when
//   stored. Where intermediates are stored is a property of the execution
//   (unfused kernels store every user op's result; fused kernels store only
//   what leaves the kernel), so both are valid executions of the same graph.
//   cast always rounds: it is the user's explicit request to round.
// - Reductions run over the last dimension and keep it with extent 1.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/container/inlined_vector.h>

#include "ir/attrs.h"
#include "ir/dtype.h"
#include "ir/op_table.h"
#include "ir/shape.h"

namespace fusejit {

// An operand: the result of an earlier node, or a numeric literal.
struct Operand {
  int32_t node = -1;  // -1: literal
  double literal = 0;  // as written (the text format prints it back)

  // What a literal means: its float32 value, the constant every kernel
  // computes with, and so the reference too. With the float64 value the
  // reference disagreed with the kernels wherever the rounding matters:
  // pow(x, 16777217) of -1 is -1, but 16777217 is 16777216 in float32 and
  // every kernel gave +1; pow(x, 3.0000001) of a negative x is NaN, but
  // 3.0000001 is 3 in float32.
  double literal_value() const { return static_cast<float>(literal); }

  static Operand value(int32_t id) { return {id, 0}; }
  static Operand scalar(double v) { return {-1, v}; }
  bool is_literal() const { return node < 0; }
  bool operator==(const Operand& o) const;  // literals compare by bits (NaN == NaN)
};

// Where a node came from in a text file (1-based); line 0 when built in C++.
struct SourceLoc {
  int line = 0;
  int col = 0;
};

struct Node {
  Op op = Op::kInput;
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  absl::InlinedVector<Operand, 3> operands;
  Attrs attrs;
  SourceLoc loc;
  bool auto_named = false;  // named by the C++ builder, may be renamed by output()

  const OpInfo& info() const { return op_info(op); }
  // Equal op, name, type, operands and attributes (source location ignored).
  bool same_as(const Node& other) const;
};

class Value;

class Graph {
 public:
  Graph() = default;
  // Copying, moving and assigning keep Values honest: a Value refers to the
  // Graph object that made it, and after that object is moved from, moved
  // or copied into, or destroyed, its earlier Values throw a clear Error
  // when used instead of reading freed or foreign memory (identity() below).
  Graph(const Graph& other);
  Graph(Graph&& other) noexcept;
  Graph& operator=(const Graph& other);
  Graph& operator=(Graph&& other) noexcept;
  ~Graph() = default;

  // Builder entry points; they throw fusejit::Error on misuse. A name the
  // builder gave a node (relu_3) never blocks a name given here: that node
  // is renamed.
  Value input(std::string_view name, DType dtype, const Shape& shape);
  // Marks `value` as a graph output named `name`. A value the builder named
  // itself takes that name; a value that already has a user-given name must
  // be output under it.
  void output(std::string_view name, Value value);
  // The value named `name` (an input, or a statement of a parsed graph), to
  // build on a graph read from a file: g.output("z", relu(g.value("y"))).
  // Throws fusejit::Error when the graph has no value of that name, naming
  // the closest one.
  Value value(std::string_view name);

  // Low-level access for the parser and passes. append() and add_output()
  // check nothing (a name already in use, an operand or output id that does
  // not exist, an invalid op or dtype); verify() reports all of that for a
  // graph made this way, and find() keeps to a name's first node.
  int32_t append(Node node);
  void add_output(int32_t id) { outputs_.push_back(id); }
  // Gives node `id` a new name; throws fusejit::Error when there is no such
  // node or another node has that name.
  void rename(int32_t id, std::string name);
  std::string fresh_name(std::string_view stem) const;

  int32_t num_nodes() const { return static_cast<int32_t>(nodes_.size()); }
  const Node& node(int32_t id) const { return nodes_[id]; }
  bool has_node(int32_t id) const { return id >= 0 && id < static_cast<int32_t>(nodes_.size()); }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& outputs() const { return outputs_; }
  std::vector<int32_t> inputs() const;
  // For each node, whether an output depends on it: the outputs and, through
  // operands, everything they read. Plans compute only these nodes.
  std::vector<bool> reaches_outputs() const;
  // The computed (non-input) nodes no output depends on, in node order.
  std::vector<int32_t> unused_nodes() const;
  std::optional<int32_t> find(std::string_view name) const;
  bool is_output(int32_t id) const;

  // Whether node `id` is f32 or an f32 value is computed from it.
  bool feeds_f32(int32_t id) const { return feeds_f32_[id]; }
  // A GeLU of the erf form whose value reaches only f16 and bf16 values:
  // itself and everything computed from it are 16-bit, so every output it
  // affects is judged at a 16-bit tolerance (4e-3 for f16, ir/compare.h).
  // Code generators give it a cheaper helper, within 2^-16 relative
  // (codegen/cuda/fj_math.cuh: fj_gelu_none_16bit), which an f32 value
  // computed from it, cast or promoted, would show.
  bool is_16bit_gelu(int32_t id) const;
  // Node `id`'s cost class: its op's, or kGelu16Bit for such a GeLU, or
  // kMatmulBf16 for a matmul of two bf16 operands, which the cost models
  // price apart.
  CostClass cost_class(int32_t id) const;

  // Name of the file the graph was read from ("" when built in C++), used
  // to prefix diagnostics with FILE:LINE:COL.
  const std::string& source_file() const { return source_file_; }
  void set_source_file(std::string file) { source_file_ = std::move(file); }

  // Structural equality: same nodes in the same order, same outputs.
  bool operator==(const Graph& other) const;

  // Who holds this Graph's current nodes: a shared cell holding this
  // object's address. Values keep a weak reference to it; the cell goes
  // with the nodes when the Graph is moved (and then holds the new
  // address), is replaced when the Graph is copied or assigned into, and
  // dies with the Graph. A Value is usable while its cell lives and holds
  // the address of the Graph the Value names.
  std::weak_ptr<Graph* const> identity();

 private:
  // Frees `name` for a name the user gives: true when it was unused or held
  // by a node the builder named (which is renamed); false when taken.
  bool claim_name(std::string_view name);

  std::vector<Node> nodes_;
  // feeds_f32() of each node, kept by append(): an f32 node marks itself
  // and every node it is computed from, each at most once.
  std::vector<bool> feeds_f32_;
  std::vector<int32_t> outputs_;
  absl::flat_hash_map<std::string, int32_t> by_name_;
  std::string source_file_;
  std::shared_ptr<Graph*> identity_;  // made on first use; see identity()
};

// The most bytes one value may take: 256 TiB, far beyond the memory of any
// machine fusejit runs on. Without a limit, f32[2^62] verified and numel x
// dtype size overflowed in the cost model (found by tests/fuzz;
// tests/fuzz/regressions/huge_*.fj).
inline constexpr int64_t kMaxValueBytes = int64_t{1} << 48;
// Whether a value of this type takes more than kMaxValueBytes (or its size
// overflows 64 bits). The builder throws, and the verifier reports, for such a value.
bool exceeds_value_limit(DType dtype, const Shape& shape);

bool is_identifier(std::string_view name);
// "x: bf16[8192, 4096]"
std::string describe(const Node& node);
// "x: bf16[8192, 4096]" or "0.5" for a literal operand.
std::string describe(const Graph& graph, const Operand& operand);

}  // namespace fusejit
