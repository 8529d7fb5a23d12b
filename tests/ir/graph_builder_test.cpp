#include <optional>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "fusejit.h"
#include "support/error_of.h"

namespace fusejit {
namespace {

TEST(GraphBuilder, BuildsTheIssueExample) {
  Graph g;
  auto x = g.input("x", DType::kBF16, {8192, 4096});
  auto b = g.input("b", DType::kBF16, {4096});
  auto gamma = g.input("gamma", DType::kBF16, {4096});
  auto beta = g.input("beta", DType::kBF16, {4096});
  auto y = layer_norm(dropout(gelu(x + b), 0.1, 42), gamma, beta);
  g.output("y", y);
  EXPECT_TRUE(verify(g).ok()) << verify(g);
  EXPECT_EQ(y.shape(), (Shape{8192, 4096}));
  EXPECT_EQ(y.dtype(), DType::kBF16);
  EXPECT_EQ(y.name(), "y");
}

using testing::error_of;

// A value over the 256 TiB limit throws where it is made, as verify() would
// later report it, rather than failing at allocation.
TEST(GraphBuilder, AValueBeyondTheSizeLimitThrowsWhereItIsMade) {
  Graph g;
  EXPECT_EQ(error_of([&] { g.input("ok", DType::kF32, {int64_t{1} << 23, int64_t{1} << 23}); }), "no error");  // 2^48 bytes
  EXPECT_EQ(error_of([&] { g.input("big", DType::kF32, {int64_t{1} << 24, int64_t{1} << 23}); }),
            "input big: f32[16777216, 8388608]: takes more than the 256 TiB (2^48 bytes) a value may take");
  Value a = g.input("a", DType::kF32, {int64_t{1} << 20, 2});
  Value b = g.input("b", DType::kF32, {2, int64_t{1} << 27});
  EXPECT_EQ(error_of([&] { matmul(a, b); }),
            "matmul(a: f32[1048576, 2], b: f32[2, 134217728]): gives f32[1048576, 134217728], more than the 256 TiB "
            "(2^48 bytes) a value may take");
}

TEST(GraphBuilder, AnEmptyValueIsAnErrorNotTheNumberZero) {
  Graph g;
  auto x = g.input("x", DType::kF32, {4});
  EXPECT_EQ(error_of([&] { g.output("y", x + Value{}); }),
            "add: operand 2 is an empty Value (default-constructed), not a tensor of a graph");
  EXPECT_EQ(error_of([&] { maximum(Value{}, x); }),
            "maximum: operand 1 is an empty Value (default-constructed), not a tensor of a graph");
  EXPECT_EQ(g.nodes().size(), 1u);  // nothing was added
  g.output("y", x + 0.0);           // the number 0 itself is still fine
  EXPECT_TRUE(verify(g).ok()) << verify(g);
}

TEST(GraphBuilder, ValuesOfAGraphThatWasMovedFromAreErrorsNotCrashes) {
  Graph g;
  auto x = g.input("x", DType::kF32, {4});
  Graph h = std::move(g);
  const std::string error = error_of([&] { neg(x); });
  EXPECT_TRUE(error.starts_with("neg: operand 1 is a Value (node 0) whose Graph object no longer holds it")) << error;
  EXPECT_TRUE(error_of([&] { (void)x.shape(); }).starts_with("a Value (node 0) whose Graph object no longer holds"));
  EXPECT_TRUE(error_of([&] { g.output("y", x); }).starts_with("output y: a Value (node 0) whose Graph object"));
  // The graph it was moved into is whole; its own values work.
  EXPECT_EQ(h.nodes().size(), 1u);
  h.output("y", exp(Value(&h, 0)));
  EXPECT_TRUE(verify(h).ok()) << verify(h);
  // Moved back into g, the nodes g made are g's again (x works), and those
  // h made are no longer h's.
  auto y = h.input("y2", DType::kF32, {4});
  g = std::move(h);
  EXPECT_EQ(error_of([&] { neg(x); }), "no error");
  EXPECT_NE(error_of([&] { neg(y); }), "no error");
  neg(Value(&g, 1));
}

// Graphs in a std::vector move when it grows, and graphs go out of scope:
// the Values they made then throw instead of reading freed memory.
TEST(GraphBuilder, ValuesOfAGraphThatMovedOrDiedAreErrorsNotCrashes) {
  std::vector<Graph> graphs(1);
  auto x = graphs[0].input("x", DType::kF32, {4, 8});
  graphs.resize(100);
  EXPECT_TRUE(error_of([&] { exp(x); }).starts_with("exp: operand 1 is a Value (node 0) whose Graph object"));
  exp(Value(&graphs[0], 0));  // the moved Graph itself is whole

  Value dangling;
  {
    Graph local;
    dangling = local.input("x", DType::kF32, {4});
  }
  EXPECT_TRUE(error_of([&] { (void)dangling.dtype(); }).starts_with("a Value (node 0) whose Graph object"));

  // A copy has its own identity; the original's Values still work, and
  // neither graph's Values pass for the other's.
  Graph original;
  auto a = original.input("a", DType::kF32, {4});
  Graph copy = original;
  EXPECT_EQ(error_of([&] { original.output("b", neg(a)); }), "no error");
  EXPECT_EQ(error_of([&] { copy.output("b", neg(a)); }),
            "output b: the value (neg_2: f32[4]) belongs to another Graph object than this one");
  const Value of_copy = Value(&copy, 0);
  EXPECT_EQ(error_of([&] { (void)of_copy.shape(); }), "no error");
  copy = original;  // assigned to: Values made of copy's earlier contents are stale
  EXPECT_TRUE(error_of([&] { (void)of_copy.shape(); }).starts_with("a Value (node 0) whose Graph object"));
  EXPECT_EQ(error_of([&] { copy.output("c", exp(Value(&copy, 0))); }), "no error");
}

// A Value made by hand with an id its Graph never had is named as such,
// not blamed on a Graph that moved or died.
TEST(GraphBuilder, AValueOfANodeTheGraphLacksSaysSo) {
  Graph g;
  EXPECT_EQ(error_of([&] { neg(Value(&g, 0)); }), "neg: operand 1 is a Value of node 0, but its Graph has no nodes");
  auto x = g.input("x", DType::kF32, {4});
  EXPECT_EQ(error_of([&] { g.output("y", x + Value(&g, 7)); }),
            "add: operand 2 is a Value of node 7, but its Graph has nodes 0 to 0 only");
  EXPECT_EQ(error_of([&] { (void)Value(&g, -1).shape(); }), "a Value of node -1, but its Graph has nodes 0 to 0 only");
  EXPECT_EQ(g.nodes().size(), 1u);  // nothing was added
}

// The low-level calls (Graph::append, rename; for the parser and passes)
// check what would otherwise crash or silently break the graph, and
// verify() names what append() let through (a new-user trial crashed
// rename and verify).
TEST(GraphLowLevel, MistakesAreErrorsNotCrashes) {
  Graph g;
  auto x = g.input("x", DType::kF32, {4});
  auto y = relu(x);
  g.output("y", y);
  EXPECT_EQ(error_of([&] { g.rename(5, "z"); }), "rename: node 5 does not exist (the graph has 2 nodes)");
  EXPECT_EQ(error_of([&] { g.rename(x.id(), "y"); }), "rename: cannot name node 0 'y': node 1 has that name");
  EXPECT_EQ(error_of([&] { g.rename(y.id(), "y"); }), "no error") << "a node's own name is not in use by another";
  EXPECT_EQ(g.node(0).name, "x");
  EXPECT_EQ(error_of([&] { g.rename(x.id(), "x2"); }), "no error");
  EXPECT_EQ(g.find("x2"), std::optional<int32_t>(0));
  EXPECT_FALSE(g.find("x").has_value());

  Node bad_op = g.node(y.id());
  bad_op.name = "w";
  bad_op.op = static_cast<Op>(200);
  Graph with_bad_op = g;
  with_bad_op.append(bad_op);
  EXPECT_EQ(status_text(verify(with_bad_op)), "error: w: op 200 is not an op of the op table");
  EXPECT_EQ(error_of([&] { (void)op_info(static_cast<Op>(200)); }), "op 200 is not an op of the op table");

  for (int32_t missing : {3, 7}) {
    Node dangling = g.node(y.id());
    dangling.name = "w";
    dangling.operands[0].node = missing;
    Graph with_dangling = g;
    with_dangling.append(dangling);
    EXPECT_EQ(status_text(verify(with_dangling)),
              fmt::format("error: w uses node {}, which does not exist (the graph has 3 nodes)", missing));
  }

  // A graph verify() refuses still prints, naming the node it lacks.
  Graph with_bad_output = g;
  with_bad_output.add_output(999);
  EXPECT_EQ(print_graph(with_bad_output), "input x2: f32[4]\ny = relu(x2)\noutput y, <no node 999>\n");
  Node dangling_print = g.node(y.id());
  dangling_print.name = "w";
  dangling_print.operands[0].node = 7;
  Graph with_dangling_print = g;
  with_dangling_print.append(dangling_print);
  EXPECT_EQ(print_statement(with_dangling_print, with_dangling_print.node(2)), "w = relu(<no node 7>)");

  Node duplicate = g.node(y.id());  // append() keeps no names unique; find() keeps to the first
  Graph with_duplicate = g;
  with_duplicate.append(duplicate);
  EXPECT_EQ(with_duplicate.find("y"), std::optional<int32_t>(1));
  EXPECT_EQ(status_text(verify(with_duplicate)), "error: 'y' is defined more than once");
}

TEST(HostTensorStorage, MistakesAreErrorsNotCrashes) {
  EXPECT_EQ(error_of([] { (void)HostTensor::random_normal(DType::kF32, Shape{-3}, 1); }),
            "HostTensor::random_normal: shape [-3] has a negative extent");
  EXPECT_EQ(error_of([] { (void)decode_storage(DType::kF32, Shape{4}, nullptr); }),
            "decode_storage of f32[4]: the source is a null pointer");
  HostTensor t = HostTensor::random_normal(DType::kBF16, Shape{4, 10}, 1);
  std::vector<uint16_t> storage(40);
  EXPECT_EQ(error_of([&] { encode_storage(t, nullptr); }), "encode_storage: the destination is a null pointer");
  t.values.resize(10);
  EXPECT_EQ(error_of([&] { encode_storage(t, storage.data()); }),
            "encode_storage: the tensor holds 10 values, but its shape [4, 10] has 40");
  EXPECT_EQ(storage, std::vector<uint16_t>(40)) << "nothing written";
}

// Shape(2, 3) is not a shape: it would have been read as a range of
// iterators (std::vector's count-and-value constructor) and built [3, 3].
static_assert(!std::is_constructible_v<Shape, int, int>);
static_assert(!std::is_constructible_v<Shape, int64_t, int64_t>);
static_assert(std::is_constructible_v<Shape, const int64_t*, const int64_t*>);

// The builder's own names (relu_1) never keep a user from a name: the
// node that had it is renamed, and its Values still work. A name the user
// gave stays taken.
TEST(GraphBuilder, NamesTheBuilderChoseGiveWayToTheUsers) {
  Graph g;
  auto x = g.input("x", DType::kF32, {4, 8});
  auto r = relu(x);
  const std::string auto_name = r.name();
  EXPECT_EQ(auto_name, "relu_1");
  // A refused input takes no name: the node keeps its own.
  EXPECT_THROW(g.input(auto_name, DType::kF32, {0}), Error);
  EXPECT_EQ(r.name(), auto_name);
  auto shadow = g.input(auto_name, DType::kF32, {4, 8});  // an input named like it
  EXPECT_NE(r.name(), auto_name);
  EXPECT_TRUE(r.name().starts_with("relu_")) << r.name();
  g.output("relu_1_out", exp(r));
  const std::string other = neg(shadow).name();
  g.output(other, r + shadow);  // an output takes a name the builder gave another node
  EXPECT_NE(g.find(other), std::nullopt);
  EXPECT_TRUE(verify(g).ok()) << verify(g);
  EXPECT_EQ(g.node(*g.find(auto_name)).op, Op::kInput);
  EXPECT_EQ(error_of([&] { g.input("x", DType::kF32, {4}); }),
            "input x: f32[4]: the name is already used in this graph");
  EXPECT_EQ(error_of([&] { g.output("relu_1_out", exp(x)); }),
            "output relu_1_out: the name is already used in this graph");
  // The graph prints and parses back with every name unique.
  absl::StatusOr<Graph> parsed = parse_graph(print_graph(g));
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << print_graph(g);
}

// The name passed may be a view of the very node name it takes over
// (v.name()), which the rename changes: the new input or output still gets
// the name asked for, and the old node a fresh one. Many inputs after it
// move the nodes in memory, which must not matter either.
TEST(GraphBuilder, ANodesOwnNameCanBePassedForItsNewOwner) {
  Graph g;
  auto x = g.input("x", DType::kF32, {4, 8});
  auto e = exp(x);
  auto t = tanh(e);
  const std::string taken = e.name();
  g.output(e.name(), t);
  EXPECT_EQ(t.name(), taken);
  EXPECT_NE(e.name(), taken);
  auto s = sigmoid(x);
  const std::string also_taken = s.name();
  auto in = g.input(s.name(), DType::kF32, {4, 8});
  EXPECT_EQ(in.name(), also_taken);
  EXPECT_NE(s.name(), also_taken);
  for (int i = 0; i < 100; ++i) g.input(fmt::format("pad{}", i), DType::kF32, {1});
  g.output("y", add(s, in));
  EXPECT_TRUE(verify(g).ok()) << verify(g) << "\n" << print_graph(g);
}

// A graph read from a file is extended through the API by name.
TEST(GraphBuilder, AParsedGraphIsExtendedByItsValuesNames) {
  absl::StatusOr<Graph> parsed = parse_graph("input x: f32[4, 8]\nh = exp(x)\ny = softmax(h)\noutput y\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  Graph g = *std::move(parsed);
  const Value h = g.value("h");
  EXPECT_EQ(h.name(), "h");
  EXPECT_EQ(h.shape(), Shape({4, 8}));
  g.output("z", relu(h) + g.value("x"));
  ASSERT_TRUE(verify(g).ok()) << verify(g);
  EXPECT_EQ(print_graph(g),
            "input x: f32[4, 8]\nh = exp(x)\ny = softmax(h)\nrelu_3 = relu(h)\nz = add(relu_3, x)\n"
            "output y, z\n");
  EXPECT_EQ(error_of([&] { g.value("hh"); }), "value 'hh': the graph has no value of that name (did you mean 'h'?)");
  EXPECT_EQ(error_of([&] { g.value("weights"); }), "value 'weights': the graph has no value of that name");
  EXPECT_EQ(error_of([&] { g.value(""); }), "value '': the graph has no value of that name");
  Graph moved_to = std::move(g);
  EXPECT_EQ(moved_to.value("h").name(), "h");
  EXPECT_EQ(error_of([&] { g.value("h"); }),  // NOLINT(bugprone-use-after-move): what a moved-from Graph says
            "value 'h': the graph is empty (moved from, or nothing built yet)");
}

// Builder errors name the op's operands with their types, like shape errors.
TEST(GraphBuilder, AttributeAndGraphErrorsNameTheOperands) {
  Graph g;
  Graph other;
  auto x = g.input("x", DType::kF32, {4, 8});
  auto w = other.input("w", DType::kBF16, {8});
  EXPECT_EQ(error_of([&] { add(x, w); }),
            "add: operand 2 (w: bf16[8]) belongs to another Graph than the operands before it; an op's operands "
            "must come from one Graph");
  EXPECT_EQ(error_of([&] { dropout(x, 1.5); }), "dropout(x: f32[4, 8]): p must be in [0, 1), got 1.5");
  EXPECT_EQ(error_of([&] { gelu(x, "fast"); }).substr(0, 35), "gelu(x: f32[4, 8]): approximate mus");
  EXPECT_EQ(error_of([&] { layer_norm(x, std::nullopt, std::nullopt, -1.0); }),
            "layer_norm(x: f32[4, 8]): eps must be a finite number > 0, got -1");
  EXPECT_EQ(error_of([&] { rms_norm(x, std::nullopt, 1e-50); }).substr(0, 68),
            "rms_norm(x: f32[4, 8]): eps: 1e-50 is below float32's smallest norma");
  // A number given by position where an attribute was meant: named as one
  // only where that attribute is a number (dropout's p, not cast's dtype).
  EXPECT_EQ(error_of([&] { apply(Op::kDropout, {x, 0.5}); }),
            "dropout(x: f32[4, 8], 0.5): dropout takes 1 operand, got 2 (attributes go by name: p=0.5)");
  EXPECT_EQ(error_of([&] { apply(Op::kCast, {x, 16.0}); }), "cast(x: f32[4, 8], 16): cast takes 1 operand, got 2");
  // 0 is suggested where it is allowed: for a literal, not for eps (> 0).
  EXPECT_EQ(error_of([&] { rms_norm(x, std::nullopt, 1e-50); }).find("write 0"), std::string::npos);
  EXPECT_NE(error_of([&] { x * 1e-50; }).find("(write 0 for zero)"), std::string::npos);
  EXPECT_EQ(error_of([&] { x * 1e39; }).substr(0, 55), "mul(x: f32[4, 8], 1e+39): literal operand 2: 1e+39 is p");
  // What float32 holds passes, up to the largest finite value, rounding included.
  EXPECT_EQ(error_of([&] { (void)(x * 3.4028235e38); }), "no error");
  EXPECT_EQ(error_of([&] { (void)(x * 1.2e-38); }), "no error");
  EXPECT_EQ(error_of([&] { (void)(x * -1.1754943e-38); }), "no error");  // rounds to the smallest normal value
  // dropout's p is used in double only (its threshold and scale).
  EXPECT_EQ(error_of([&] { (void)dropout(x, 1e-40, 3); }), "no error");
  EXPECT_EQ(error_of([&] { (void)(x * 0.0); }), "no error");
  // A DType cast from an integer outside the enum.
  EXPECT_EQ(error_of([&] { g.input("bad", static_cast<DType>(9), {4}); }),
            "input bad: ?[4]: dtype 9 is none of f32, f16, bf16");
  EXPECT_EQ(error_of([&] { cast(x, static_cast<DType>(7)); }).substr(0, 45),
            "cast(x: f32[4, 8]): dtype must be a dtype (f3");
  EXPECT_EQ(g.nodes().size(), 6u);  // only the five that passed were added
}

}  // namespace
}  // namespace fusejit
