// The .fj text format: parsing, canonical printing and round trips.
#include <algorithm>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fusejit.h"
#include "support/example_graphs.h"

namespace fusejit {
namespace {

const std::filesystem::path kExampleDir = testing::example_graph_dir();

constexpr std::string_view kIssueExample = R"(input x: bf16[8192, 4096]
input b: bf16[4096]
input gamma: bf16[4096]
input beta: bf16[4096]
h = add(x, b)
g = gelu(h)                    # gelu(h, approximate=tanh) for the tanh form
d = dropout(g, p=0.1, seed=42)
y = layer_norm(d, gamma, beta, eps=1e-5)
output y
)";

Graph parse_ok(std::string_view text) {
  absl::StatusOr<Graph> g = parse_graph(text);
  EXPECT_TRUE(g.ok()) << g.status().message() << "\nin:\n" << text;
  return g.ok() ? *std::move(g) : Graph();
}

// parse(print(g)) == g and print(parse(print(g))) == print(g).
void expect_round_trip(const Graph& g) {
  const std::string text = print_graph(g);
  absl::StatusOr<Graph> again = parse_graph(text);
  ASSERT_TRUE(again.ok()) << again.status().message() << "\nin:\n" << text;
  EXPECT_TRUE(*again == g) << "printed:\n" << text << "reparsed and printed:\n" << print_graph(*again);
  EXPECT_EQ(print_graph(*again), text);
}

TEST(TextFormatTest, EveryExampleGraphParsesVerifiesAndRoundTrips) {
  const std::vector<std::filesystem::path> files = testing::example_graph_files();
  EXPECT_GE(files.size(), 5u) << "examples in " << kExampleDir;
  for (const auto& path : files) {
    SCOPED_TRACE(path.string());
    absl::StatusOr<Graph> g = parse_graph_file(path.string());
    ASSERT_TRUE(g.ok()) << g.status().message();
    EXPECT_EQ(g->source_file(), path.string());
    EXPECT_TRUE(verify(*g).ok()) << verify(*g);
    expect_round_trip(*g);
  }
}

TEST(TextFormatTest, ParsesTheIssueExample) {
  const Graph g = parse_ok(kIssueExample);
  ASSERT_EQ(g.num_nodes(), 8);
  EXPECT_EQ(g.inputs(), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(g.node(0).shape, (Shape{8192, 4096}));
  EXPECT_EQ(g.node(0).dtype, DType::kBF16);

  const Node& gelu_node = g.node(5);
  EXPECT_EQ(gelu_node.op, Op::kGelu);
  EXPECT_EQ(gelu_node.attrs.get_enum("approximate"), "none");
  const Node& drop = g.node(6);
  EXPECT_EQ(drop.op, Op::kDropout);
  EXPECT_EQ(drop.attrs.get_float("p"), 0.1);
  EXPECT_EQ(drop.attrs.get_int("seed"), 42);
  const Node& y = g.node(7);
  EXPECT_EQ(y.op, Op::kLayerNorm);
  EXPECT_EQ(y.operands.size(), 3u);
  EXPECT_EQ(y.attrs.get_float("eps"), 1e-5);
  EXPECT_EQ(y.shape, (Shape{8192, 4096}));
  EXPECT_EQ(g.outputs(), (std::vector<int32_t>{7}));
  // Each node remembers the line of its statement and the column of its name.
  EXPECT_EQ(g.node(1).loc.line, 2);
  EXPECT_EQ(g.node(1).loc.col, 7);
  EXPECT_EQ(y.loc.line, 8);
  EXPECT_EQ(y.loc.col, 1);
}

TEST(TextFormatTest, TheIssueExampleEqualsTheSameGraphBuiltInCpp) {
  Graph built;
  auto x = built.input("x", DType::kBF16, {8192, 4096});
  auto b = built.input("b", DType::kBF16, {4096});
  auto gamma = built.input("gamma", DType::kBF16, {4096});
  auto beta = built.input("beta", DType::kBF16, {4096});
  auto h = x + b;
  built.rename(h.id(), "h");
  auto g = gelu(h);
  built.rename(g.id(), "g");
  auto d = dropout(g, 0.1, 42);
  built.rename(d.id(), "d");
  built.output("y", layer_norm(d, gamma, beta));
  EXPECT_TRUE(parse_ok(kIssueExample) == built) << print_graph(built);
}

TEST(TextFormatTest, PrintsTheCanonicalForm) {
  // Default attributes (eps=1e-5, approximate=none, seed=0) are left out,
  // comments and spacing are not kept, and all outputs go on one line.
  const Graph g = parse_ok(
      "input x:f32[2,3]  # a comment\n"
      "\n"
      "   a = gelu( x , approximate = none )\n"
      "b = layer_norm(a, eps=0.00001)\n"
      "c = dropout(b, p=0.5, seed=0)\n"
      "d = gelu(c, approximate=tanh)\n"
      "output d\n"
      "output b\n");
  EXPECT_EQ(print_graph(g),
            "input x: f32[2, 3]\n"
            "a = gelu(x)\n"
            "b = layer_norm(a)\n"
            "c = dropout(b, p=0.5)\n"
            "d = gelu(c, approximate=tanh)\n"
            "output d, b\n");
}

TEST(TextFormatTest, GraphsBuiltInCppRoundTrip) {
  Graph g;
  auto x = g.input("x", DType::kBF16, {4, 8, 16});
  auto w = g.input("w", DType::kF16, {16});
  auto m = g.input("m", DType::kF32, {16, 32});
  auto scaled = x * 0.1;
  auto shifted = 1e-05 + scaled;
  auto mixed = shifted - w;  // bf16 with f16 gives f32
  auto powered = pow(mixed, -2.5);
  auto clipped = maximum(minimum(powered, 3.4028234663852886e+38), 1.1754943508222875e-38);  // float32's extremes
  auto neg_zero = clipped * -0.0;
  auto normed = layer_norm(neg_zero, w, std::nullopt, 1e-3);
  auto rms = rms_norm(cast(normed, DType::kBF16), std::nullopt, 2e-6);
  auto dropped = dropout(gelu(rms, "tanh"), 0.25, 1234567890123);
  auto projected = matmul(dropped, m);
  g.output("probs", softmax(projected));
  g.output("lsm", log_softmax(projected));
  g.output("stats", sum(mean(max(abs(sqrt(exp(neg(dropped))))))));
  g.output("pointwise", sigmoid(tanh(relu(silu(erf(square(reciprocal(rsqrt(log(x))))))))));
  ASSERT_TRUE(verify(g).ok()) << verify(g);
  expect_round_trip(g);

  const std::string text = print_graph(g);
  EXPECT_NE(text.find("mul(x, 0.1)"), std::string::npos) << text;
  EXPECT_NE(text.find("add(1e-05, "), std::string::npos) << text;
  EXPECT_NE(text.find(", -2.5)"), std::string::npos) << text;
  EXPECT_NE(text.find(", -0)"), std::string::npos) << text;
  EXPECT_NE(text.find("eps=0.001)"), std::string::npos) << text;
  EXPECT_NE(text.find("dtype=bf16"), std::string::npos) << text;
  EXPECT_NE(text.find("p=0.25, seed=1234567890123)"), std::string::npos) << text;
  EXPECT_NE(text.find("output probs, lsm, stats, pointwise\n"), std::string::npos) << text;
}

TEST(TextFormatTest, EveryCallableOpRoundTrips) {
  for (const OpInfo& info : callable_ops()) {
    SCOPED_TRACE(std::string(info.name));
    Graph g;
    auto x = g.input("x", DType::kF32, {3, 5});
    auto w = g.input("w", DType::kF32, {5, 2});
    std::vector<Arg> args{x};
    Attrs attrs;
    if (info.kind == OpKind::kBinary) args.emplace_back(1.5);
    if (info.kind == OpKind::kMatmul) args.emplace_back(w);
    if (info.kind == OpKind::kCast) attrs.set("dtype", DType::kF16);
    if (info.kind == OpKind::kDropout) attrs.set("p", 0.3);
    g.output("y", apply(info.op, args, attrs));
    expect_round_trip(g);
  }
}

TEST(TextFormatTest, AcceptsCommentsWhitespaceAndCrlf) {
  const Graph canonical = parse_ok(kIssueExample);
  const std::string messy =
      "# leading comment\r\n"
      "\r\n"
      "input\tx :bf16 [ 8192 ,4096 ]\r\n"
      "input b: bf16[4096]   # trailing comment\r\n"
      "  input gamma: bf16[4096]\r\n"
      "input beta: bf16[4096]\r\n"
      "\t\r\n"
      "\f\r\n"  // a form feed between sections, as some editors write
      "h=add(x,\vb)\r\n"
      "g = gelu ( h )\r\n"
      "d = dropout(g,p=0.1,seed=42)#no space before the comment\r\n"
      "y = layer_norm(d, gamma, beta, eps=1e-5)\r\n"
      "output y";  // no final line break
  EXPECT_TRUE(parse_ok(messy) == canonical) << print_graph(parse_ok(messy));
}

// A binary file given by mistake is one error at its first NUL byte, not
// a screenful of stray bytes, nor a text whose lines end in a carriage
// return alone (it has no line feed) or one saved as Latin-1.
TEST(TextFormatTest, ABinaryFileIsOneErrorAtItsFirstNul) {
  const std::string binary(
      "\x7f"
      "ELF\x02\x01\x01\x00\x00\r\x00\x03\n\xe9\x00",
      15);
  absl::StatusOr<Graph> g = parse_graph(binary, "bin.fj");
  ASSERT_FALSE(g.ok());
  const std::string message(g.status().message());
  EXPECT_EQ(message,
            "bin.fj:1:8: error: a NUL byte: this is not a text file (a binary file, or a .npy array?); a graph file "
            "is UTF-8 text");
  // On a later line, the line and column of the NUL.
  absl::StatusOr<Graph> later = parse_graph(std::string("input x: f32[4]\ny = neg(\0x)\n", 27), "later.fj");
  ASSERT_FALSE(later.ok());
  EXPECT_TRUE(std::string(later.status().message()).starts_with("later.fj:2:9: error: a NUL byte")) << later.status();
  // Text with CR line ends and no NUL is still named for what it is.
  absl::StatusOr<Graph> mac = parse_graph("input x: f32[4]\ry = neg(x)\routput y\r", "mac.fj");
  ASSERT_FALSE(mac.ok());
  EXPECT_NE(std::string(mac.status().message()).find("carriage return alone"), std::string::npos) << mac.status();
}

// Editors on Windows may start a UTF-8 file with a byte-order mark; columns
// on the first line count from after it, as the editor shows them.
TEST(TextFormatTest, AcceptsAUtf8ByteOrderMark) {
  EXPECT_TRUE(parse_ok("\xEF\xBB\xBF" + std::string(kIssueExample)) == parse_ok(kIssueExample));
  absl::StatusOr<Graph> bad = parse_graph("\xEF\xBB\xBFinput x: f32[4]x\noutput x\n", "bom.fj");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("bom.fj:1:16:"), std::string::npos) << bad.status();
}

TEST(TextFormatTest, AcceptsEveryDecimalLiteralForm) {
  const Graph g = parse_ok(
      "input x: f32[4]\n"
      "a = mul(x, 2)\nb = mul(a, 2.)\nc = mul(b, .5)\nd = mul(c, -2.5)\n"
      "e = mul(d, 1E3)\nf = mul(e, 1e+3)\nh = mul(f, -1.5e-3)\n"
      "output h\n");
  const double expected[] = {2, 2, 0.5, -2.5, 1000, 1000, -1.5e-3};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(g.node(i + 1).operands[1].literal, expected[i]) << i;
}

// Columns count characters, as an editor shows them: two snowmen (3 bytes
// each) before 'q' put it at column 13, not at byte 17.
TEST(TextFormatTest, ColumnsCountCharactersNotBytes) {
  absl::StatusOr<Graph> g = parse_graph("input x: f32[4]\nz = add(\u2603\u2603, q)\noutput z\n", "u.fj");
  ASSERT_FALSE(g.ok());
  const std::string message(g.status().message());
  EXPECT_NE(message.find("u.fj:2:9: error: '\u2603\u2603' is not a valid name"), std::string::npos) << message;
  EXPECT_NE(message.find("u.fj:2:13: error: undefined name 'q'"), std::string::npos) << message;
}

// A leading '+' is read as Python reads it, in literals, attributes and
// extents; the canonical form drops it.
TEST(TextFormatTest, AcceptsAPlusSignOnNumbers) {
  const Graph g = parse_ok(
      "input x: f32[+4, 8]\n"
      "a = mul(x, +2)\nb = mul(a, +.5e+1)\nc = dropout(b, p=+0.25, seed=+3)\n"
      "d = layer_norm(c, eps=+1e-5)\noutput d\n");
  EXPECT_TRUE(g == parse_ok("input x: f32[4, 8]\na = mul(x, 2)\nb = mul(a, 5)\nc = dropout(b, p=0.25, seed=3)\n"
                            "d = layer_norm(c, eps=1e-5)\noutput d\n"));
}

TEST(TextFormatTest, OutputStatementsAccumulateInOrder) {
  const Graph g = parse_ok("input x: f32[4]\na = exp(x)\nb = neg(x)\nc = abs(x)\noutput c\noutput a, b\n");
  EXPECT_EQ(g.outputs(), (std::vector<int32_t>{3, 1, 2}));
}

TEST(TextFormatTest, NamesMayBeOpAndDtypeWords) {
  // Only `input` and `output` are reserved; an op or dtype name is a fine value name.
  expect_round_trip(parse_ok("input exp: f32[4]\nbf16 = exp(exp)\nadd = add(bf16, exp)\noutput add\n"));
}

TEST(TextFormatTest, TheCppBuilderRejectsNonFiniteLiterals) {
  // The text format has decimal literals only, so a graph that printed
  // "inf" could not be read back; the builder refuses such graphs instead.
  Graph g;
  auto x = g.input("x", DType::kF32, {4});
  EXPECT_THROW(maximum(x, -std::numeric_limits<double>::infinity()), Error);
  EXPECT_THROW(x * std::numeric_limits<double>::quiet_NaN(), Error);
}

TEST(TextFormatTest, FileErrorsNameThePathAndTheReason) {
  const std::string path = (kExampleDir / "no_such_graph.fj").string();
  absl::StatusOr<Graph> g = parse_graph_file(path);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(g.status().message()), path + ": error: cannot open the file: No such file or directory");

  absl::StatusOr<Graph> empty = parse_graph_file("");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(std::string(empty.status().message()),
            "fusejit: error: the graph file's name is empty; name a .fj file, or '-' for standard input");

  absl::StatusOr<Graph> dir = parse_graph_file(kExampleDir.string());
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(std::string(dir.status().message()).find("Is a directory"), std::string::npos) << dir.status();
}

TEST(TextFormatTest, ParseErrorsNameTheFileGiven) {
  absl::StatusOr<Graph> g = parse_graph("input x: f32[4]\ny = gelu(q)\noutput y\n", "model.fj");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(std::string(g.status().message()), "model.fj:2:10: error: undefined name 'q'");
}

}  // namespace
}  // namespace fusejit
