// Malformed .fj input: every case must be rejected with exactly one error at
// the exact line and column, and no input may crash the parser.
#include <random>
#include <regex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "fusejit.h"

namespace fusejit {
namespace {

// Lines 1-2 of most cases; the statement under test is on line 3.
#define PRELUDE "input x: bf16[8, 16]\ninput b: bf16[16]\n"
// Ends a case whose error is in an input declaration with a valid output, so
// that the error under test is the only one.
#define OUTPUT "\ninput z: f32[4]\nw = exp(z)\noutput w\n"

struct Case {
  const char* name;
  std::string text;
  const char* location;  // "LINE:COL"
  const char* message;   // a distinctive part of the message
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

const Case kCases[] = {
    // Ops, operands and names.
    {"UnknownOp", PRELUDE "y = gelo(x)\noutput y\n", "3:5", "unknown op 'gelo' (did you mean 'gelu'?)"},
    {"OpInCapitals", PRELUDE "y = EXP(x)\noutput y\n", "3:5", "unknown op 'EXP' (did you mean 'exp'?)"},
    {"InputIsNotCallable", PRELUDE "y = input(x)\noutput y\n", "3:5", "unknown op 'input'"},
    {"OpNameMissing", PRELUDE "y = 3(x)\noutput y\n", "3:5", "expected an op name after '=', found '3'"},
    {"TooFewOperands", PRELUDE "y = add(x)\noutput y\n", "3:5", "add takes 2 operands, got 1"},
    {"NoOperands", PRELUDE "y = exp()\noutput y\n", "3:5", "exp takes 1 operand, got 0"},
    {"TooManyOperands", PRELUDE "y = exp(x, b)\noutput y\n", "3:12", "exp takes 1 operand, got 2"},
    {"Utf16", std::string("\xFF\xFEi\0n\0p\0u\0t\0", 12), "1:1", "the file is UTF-16"},
    {"CarriageReturnsAlone", "input x: f32[4]\ry = exp(x)\routput y\r", "1:1",
     "the lines end in a carriage return alone"},
    {"PlainAssignment", PRELUDE "y = x\noutput y\n", "3:5",
     "'x' is a value, not an op: '=' takes an op call such as exp(x) (the format has no plain assignment)"},
    {"AttributeByPosition", PRELUDE "y = dropout(x, 0.1)\noutput y\n", "3:16",
     "dropout takes 1 operand, got 2 (attributes go by name: p=0.1)"},
    {"TooManyNormOperands", PRELUDE "y = layer_norm(x, b, b, b)\noutput y\n", "3:25",
     "layer_norm takes 1 to 3 operands, got 4"},
    {"UndefinedName", PRELUDE "y = add(x, c)\noutput y\n", "3:12", "undefined name 'c'"},
    {"NameUsedBeforeDefinition", PRELUDE "y = add(x, z)\nz = exp(x)\noutput y\n", "3:12",
     "undefined name 'z': it is defined later, on line 4"},
    {"RedefinedValue", PRELUDE "x = exp(b)\ny = exp(b)\noutput y\n", "3:1", "'x' is already defined (on line 1)"},
    {"RedefinedInput", "input x: f32[4]\ninput x: f32[4]\ny = exp(x)\noutput y\n", "2:7",
     "'x' is already defined (on line 1)"},
    {"KeywordAsValueName", PRELUDE "input = exp(x)\ny = exp(x)\noutput y\n", "3:1", "'input' is a keyword"},
    {"KeywordAsInputName", "input output: f32[4]" OUTPUT, "1:7", "'output' is a keyword and cannot name a value"},
    {"KeywordAsOperand", PRELUDE "y = add(x, output)\noutput y\n", "3:12", "'output' is a keyword, not the name"},
    {"NonAsciiName", "input größe: f32[4]" OUTPUT, "1:7", "'größe' is not a valid name"},
    {"NameStartsWithDigit", "input 2x: f32[4]" OUTPUT, "1:7", "expected a name, found '2x'"},
    {"LiteralWhereTensorNeeded", PRELUDE "y = exp(1.0)\noutput y\n", "3:9", "must be a tensor, not the literal 1"},
    {"BothOperandsLiteral", PRELUDE "y = add(1, 2)\noutput y\n", "3:9", "at least one operand must be a tensor"},
    {"InvalidNumber", PRELUDE "y = mul(x, 1e5x)\noutput y\n", "3:12", "invalid number '1e5x'"},
    {"HexNumber", PRELUDE "y = mul(x, 0x10)\noutput y\n", "3:12", "invalid number '0x10'"},
    {"HexFloat", PRELUDE "y = mul(x, 0x1p-3)\noutput y\n", "3:12",
     "invalid number '0x1p-3': literals are decimal, like 0.125"},
    {"HexFloatAttribute", PRELUDE "y = layer_norm(x, eps=0x1p-3)\noutput y\n", "3:23",
     "invalid value '0x1p-3' for attribute 'eps'"},
    // Not also "x is a graph input": the name meant was not x.
    {"DottedOutputName", "input x: f32[4]\nw = exp(x)\noutput x.y\n", "3:9",
     "expected ',' or end of line after an output name, found '.'"},
    {"PlusThenMinus", PRELUDE "y = mul(x, +-1)\noutput y\n", "3:12", "expected an operand or an attribute, found '+'"},
    {"PlusInfinity", PRELUDE "y = mul(x, +inf)\noutput y\n", "3:12", "'+inf' is not supported"},
    {"InfiniteLiteral", PRELUDE "y = mul(x, inf)\noutput y\n", "3:12",
     "'inf' is not supported: literals must be finite"},
    {"NegativeInfiniteLiteral", PRELUDE "y = mul(x, -inf)\noutput y\n", "3:12", "'-inf' is not supported"},
    {"NanLiteral", PRELUDE "y = mul(x, NaN)\noutput y\n", "3:12", "'NaN' is not supported"},
    {"LiteralOutOfRange", PRELUDE "y = mul(x, 1e999)\noutput y\n", "3:12", "out of the range of a 64-bit float"},

    // Types and shapes.
    {"ShapeMismatch", "input x: bf16[8, 16]\ninput c: bf16[8]\ny = add(x, c)\noutput y\n", "3:12",
     "cannot broadcast [8, 16] with [8]"},
    {"GammaOfWrongShape", "input x: bf16[8, 16]\ninput g: bf16[8]\ny = layer_norm(x, g)\noutput y\n", "3:19",
     "g must have shape [16] (the last dimension of x), got [8]"},
    {"MatmulInnerDimensionsDiffer", "input a: bf16[8, 16]\ninput w: bf16[32, 4]\ny = matmul(a, w)\noutput y\n", "3:15",
     "inner dimensions differ: K = 16 in a but 32 in w"},
    {"MatmulRank1Weight", PRELUDE "y = matmul(x, b)\noutput y\n", "3:15", "b must have rank 2 ([K, N])"},
    {"UnknownDtype", "input x: f64[4]" OUTPUT, "1:10", "expected a dtype (f32, f16 or bf16), found 'f64'"},
    {"MissingDtype", "input x: [4]" OUTPUT, "1:10", "expected a dtype (f32, f16 or bf16), found '['"},
    {"NegativeExtent", "input x: f32[8, -4]" OUTPUT, "1:17", "extents must be positive, got '-4'"},
    {"ZeroExtent", "input x: f32[0]" OUTPUT, "1:14", "extents must be positive, got '0'"},
    {"FractionalExtent", "input x: f32[2.5]" OUTPUT, "1:14", "an extent must be a positive integer, got '2.5'"},
    {"SymbolicExtent", "input x: f32[N]" OUTPUT, "1:14", "expected an extent (a positive integer), found 'N'"},
    {"Rank0", "input x: f32[]" OUTPUT, "1:13", "rank must be 1 to 4, got 0"},
    {"Rank5", "input x: f32[1, 2, 3, 4, 5]" OUTPUT, "1:26", "rank must be 1 to 4"},
    {"ExtentOverflowsInt64", "input x: f32[99999999999999999999]" OUTPUT, "1:14",
     "extent '99999999999999999999' does not fit in a 64-bit integer"},
    {"ElementCountOverflows", "input x: f32[4294967296, 4294967296]" OUTPUT, "1:26", "overflows a 64-bit integer"},
    // Found by the parser fuzzer (tests/fuzz): sizes in bytes overflowed in the cost model.
    {"InputOver256TiB", "input x: f32[70368744177665]" OUTPUT, "1:7",
     "input x: f32[70368744177665] takes more than the 256 TiB (2^48 bytes) a value may take"},
    {"ResultOver256TiB", "input a: f32[16777216, 1]\ninput b: f32[1, 16777216]\ny = add(a, b)\noutput y\n", "3:1",
     "y: add gives f32[16777216, 16777216], more than the 256 TiB (2^48 bytes) a value may take"},

    // Attributes.
    {"UnknownAttribute", PRELUDE "y = gelu(x, approx=tanh)\noutput y\n", "3:13",
     "gelu has no attribute 'approx' (its attributes: approximate; operands go by position)"},
    {"OperandGivenAsAttribute", PRELUDE "y = layer_norm(x, beta=x)\noutput y\n", "3:19",
     "layer_norm has no attribute 'beta' (its attributes: eps; operands go by position)"},
    {"AttributeOnOpWithoutAttributes", PRELUDE "y = exp(x, p=1)\noutput y\n", "3:12",
     "exp takes no attributes, got 'p'"},
    {"OperandWrittenAsAttribute", PRELUDE "y = relu(x=x)\noutput y\n", "3:10",
     "relu takes no attributes, got 'x' (operands go by position)"},
    {"ReductionAxis", PRELUDE "y = sum(x, dim=0)\noutput y\n", "3:12",
     "sum takes no attributes, got 'dim'; sum always works over the last axis and keeps it with extent 1"},
    {"NormAxis", PRELUDE "y = layer_norm(x, dim=-1)\noutput y\n", "3:19",
     "layer_norm has no attribute 'dim' (its attributes: eps; operands go by position); layer_norm always works "
     "over the last axis"},
    {"ApproximateFast", PRELUDE "y = gelu(x, approximate=fast)\noutput y\n", "3:25",
     "invalid value 'fast' for attribute 'approximate': expected one of none, tanh"},
    {"CastToF64", PRELUDE "y = cast(x, dtype=f64)\noutput y\n", "3:19",
     "invalid value 'f64' for attribute 'dtype': expected a dtype"},
    {"CastWithoutDtype", PRELUDE "y = cast(x)\noutput y\n", "3:5", "cast(x: bf16[8, 16]): needs the attribute 'dtype'"},
    {"DropoutWithoutP", PRELUDE "y = dropout(x)\noutput y\n", "3:5",
     "dropout(x: bf16[8, 16]): needs the attribute 'p'"},
    {"DropoutPOne", PRELUDE "y = dropout(x, p=1)\noutput y\n", "3:18", "p must be in [0, 1), got 1"},
    {"DropoutPNegative", PRELUDE "y = dropout(x, p=-0.1)\noutput y\n", "3:18", "p must be in [0, 1), got -0.1"},
    {"DropoutPNotANumber", PRELUDE "y = dropout(x, p=half)\noutput y\n", "3:18",
     "invalid value 'half' for attribute 'p': expected a number"},
    {"DropoutPUnderflows", PRELUDE "y = dropout(x, p=1e-400)\noutput y\n", "3:18",
     "value '1e-400' for attribute 'p' is out of the range of a 64-bit float"},
    {"EpsOverflows", PRELUDE "y = layer_norm(x, eps=1e999)\noutput y\n", "3:23",
     "value '1e999' for attribute 'eps' is out of the range of a 64-bit float"},
    {"SeedNegative", PRELUDE "y = dropout(x, p=0.1, seed=-1)\noutput y\n", "3:28",
     "seed must be a non-negative integer, got -1"},
    {"SeedFractional", PRELUDE "y = dropout(x, p=0.1, seed=1.5)\noutput y\n", "3:28",
     "invalid value '1.5' for attribute 'seed': expected an integer"},
    {"SeedBeyondInt64", PRELUDE "y = dropout(x, p=0.1, seed=18446744073709551615)\noutput y\n", "3:28",
     "value '18446744073709551615' for attribute 'seed' is out of range: at most 9223372036854775807"},
    {"EpsZero", PRELUDE "y = layer_norm(x, eps=0)\noutput y\n", "3:23", "eps must be a finite number > 0, got 0"},
    {"EpsInfinite", PRELUDE "y = layer_norm(x, eps=inf)\noutput y\n", "3:23",
     "eps must be a finite number > 0, got inf"},
    {"EpsNegative", PRELUDE "y = rms_norm(x, eps=-1)\noutput y\n", "3:21", "eps must be a finite number > 0, got -1"},
    // Kernels compute in float32: a number it cannot hold would become
    // infinity or 0 there, and disagree with the float64 reference.
    {"EpsBelowFloat32", PRELUDE "y = rms_norm(x, eps=1e-50)\noutput y\n", "3:21",
     "eps: 1e-50 is below float32's smallest normal value, 1.1754944e-38"},
    {"EpsPastFloat32", PRELUDE "y = layer_norm(x, eps=1e39)\noutput y\n", "3:23",
     "eps: 1e+39 is past float32's largest finite value, 3.4028235e+38; kernels compute in float32"},
    {"LiteralPastFloat32", PRELUDE "y = sub(x, 1e39)\noutput y\n", "3:12",
     "literal operand 2: 1e+39 is past float32's largest finite value"},
    {"NegativeLiteralPastFloat32", PRELUDE "y = mul(-3.5e38, x)\noutput y\n", "3:9",
     "literal operand 1: -3.5e+38 is past float32's largest finite value"},
    {"LiteralBelowFloat32", PRELUDE "y = div(x, 1e-50)\noutput y\n", "3:12",
     "literal operand 2: 1e-50 is below float32's smallest normal value"},
    {"SubnormalLiteral", PRELUDE "y = mul(x, 1e-40)\noutput y\n", "3:12", "1e-40 is below float32's smallest normal"},
    {"DuplicateAttribute", PRELUDE "y = dropout(x, p=0.1, p=0.2)\noutput y\n", "3:23",
     "attribute 'p' is given more than once"},
    {"AttributeBeforeOperand", PRELUDE "y = gelu(approximate=tanh, x)\noutput y\n", "3:28",
     "operand 'x' follows an attribute"},
    {"AttributeWithoutValue", PRELUDE "y = dropout(x, p=)\noutput y\n", "3:18",
     "expected a value for attribute 'p', found ')'"},

    // Outputs.
    {"NoOutput", PRELUDE "y = exp(x)\n", "3:11", "the graph has no output"},
    {"EmptyFile", "", "1:1", "the graph has no output"},
    {"OnlyAComment", "# nothing here\n", "1:15", "the graph has no output"},
    {"OutputOfUndefinedName", PRELUDE "y = exp(x)\noutput z\n", "4:8", "undefined name 'z'"},
    {"OutputOfAnInput", PRELUDE "y = exp(x)\noutput y, x\n", "4:11",
     "output x: x: bf16[8, 16] is a graph input; outputs must be computed"},
    {"DuplicateOutput", PRELUDE "y = exp(x)\noutput y\noutput y\n", "5:8",
     "output y: y: bf16[8, 16] is already an output"},
    {"OutputWithoutName", PRELUDE "y = exp(x)\noutput\n", "4:7", "expected a name after 'output'"},
    {"OutputListTrailingComma", PRELUDE "y = exp(x)\noutput y,\n", "4:10",
     "expected a name to output, found end of line"},

    // Syntax.
    {"MissingEquals", PRELUDE "y exp(x)\noutput y\n", "3:3", "expected '=' after 'y', found 'exp'"},
    {"MissingOpenParen", PRELUDE "y = exp x\noutput y\n", "3:9", "expected '(' after 'exp', found 'x'"},
    {"MissingCloseParen", PRELUDE "y = exp(x\noutput y\n", "3:10", "missing ')' to close the '(' at column 8"},
    {"MissingCloseParenAfterComma", PRELUDE "y = add(x,   # comment\noutput y\n", "3:14", "missing ')'"},
    {"NestedCall", PRELUDE "y = layer_norm(gelu(x))\noutput y\n", "3:16",
     "'gelu' is called here, but operands must be names or numbers"},
    {"TrailingGarbage", PRELUDE "y = exp(x) z\noutput y\n", "3:12", "unexpected 'z' after ')'"},
    {"TrailingComma", PRELUDE "y = add(x, )\noutput y\n", "3:12", "expected an operand or an attribute, found ')'"},
    {"StrayCharacter", PRELUDE "y = exp(x$)\noutput y\n", "3:10", "expected ',' or ')', found '$'"},
    {"NulByte", std::string(PRELUDE "y = exp(x\0)\noutput y\n", sizeof(PRELUDE "y = exp(x\0)\noutput y\n") - 1), "3:10",
     "a NUL byte: this is not a text file"},
    {"NotAStatement", "(x)" OUTPUT, "1:1", "expected a statement"},
    {"InputMissingColon", "input x f32[4]" OUTPUT, "1:9", "expected ':' after 'x', found 'f32'"},
    {"InputMissingBracket", "input x: f32(4)" OUTPUT, "1:13", "expected '[' after the dtype, found '('"},
    {"InputMissingCloseBracket", "input x: f32[4" OUTPUT, "1:15",
     "expected ',' or ']' in the shape, found end of line"},
    {"InputTrailingGarbage", "input x: f32[4] extra" OUTPUT, "1:17", "unexpected 'extra' after the input declaration"},
    {"OutputSeparator", PRELUDE "y = exp(x)\noutput y; x\n", "4:9", "expected ',' or end of line"},
    {"StrayCarriageReturn", PRELUDE "y = exp(x)\noutput y\r\r\n", "4:9", "a carriage return inside a line"},
    // Lines ending in CR alone among LF lines: in a comment, the CR would
    // hide the next statement.
    {"MixedLineEndings", PRELUDE "y = exp(x) # exp\routput y\n", "3:17", "the file mixes line endings"},
    // What the statements after a CR define stays quiet where it is used,
    // as what the line's first statement defines does.
    {"DefinitionAfterACarriageReturn", "input x: f32[4]\ny = exp(x) # c\rz = exp(y)\nw = exp(z)\noutput w\n", "2:15",
     "the file mixes line endings"},
    {"DefinitionAfterALeadingCarriageReturn", "input x: f32[4]\n\rz = exp(x)\nw = exp(z)\noutput w\n", "2:1",
     "the file mixes line endings"},
    {"DefinitionAfterALineSeparator", "input x: f32[4]\ny = exp(x)\xE2\x80\xA8z = exp(y)\noutput z\n", "2:11",
     "U+2028, a Unicode line break; use a plain line break (LF)"},
    // A no-break space (pasted from a web page) looks like a space: named by code point.
    {"NoBreakSpace", PRELUDE "y = exp(x)\xC2\xA0\noutput y\n", "3:11",
     "invisible character U+00A0, a no-break space; type a plain space instead"},
    // Inside a word it would read as part of a name ("inputU+00A0x"). The
    // line fails, and the name it declares stays quiet where it is used.
    {"NoBreakSpaceInAWord", "input\xC2\xA0x: f32[4]\ny = exp(x)\noutput y\n", "1:6", "invisible character U+00A0"},
    {"ZeroWidthSpace", PRELUDE "\xE2\x80\x8By = exp(x)\noutput y\n", "3:1",
     "U+200B, a zero-width character; delete it"},
    // One byte-order mark at the start is skipped; a second one is not.
    {"SecondByteOrderMark", "\xEF\xBB\xBF\xEF\xBB\xBFinput x: f32[4]" OUTPUT, "1:1", "U+FEFF, a byte-order mark"},
    // A byte that is not UTF-8: a Latin-1 file, not a stray byte in a name.
    {"Latin1Name",
     "input gr\xF6\xDF"
     "e: f32[4]" OUTPUT,
     "1:9", "byte \\xf6 is not UTF-8 (a file saved as Latin-1 or Windows-1252?); save the file as UTF-8"},
    {"Latin1NoBreakSpace", "input\xA0x: f32[4]\ny = exp(x)\noutput y\n", "1:6", "where it is a no-break space"},
    // An overlong encoding of U+00A0 is not UTF-8, not a no-break space.
    {"OverlongNoBreakSpace", "input\xE0\x82\xA0x: f32[4]" OUTPUT, "1:6", "byte \\xe0 is not UTF-8"},
    // A comment may hold anything.
    {"InvisibleCharacterOnlyInAComment",
     "input x: f32[4] # a\xC2\xA0"
     "b gr\xF6\xDF"
     "e\ny = exp(x\n" OUTPUT,
     "2:10", "missing ')'"},
};

class MalformedInputTable : public testing::TestWithParam<Case> {};

TEST_P(MalformedInputTable, ReportsExactlyOneErrorAtTheRightPlace) {
  const Case& c = GetParam();
  absl::StatusOr<Graph> g = parse_graph(c.text);
  ASSERT_FALSE(g.ok()) << "accepted:\n" << c.text;
  const std::string message(g.status().message());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(message.find('\n'), std::string::npos) << "more than one error:\n" << message;
  const std::string prefix = std::string("<input>:") + c.location + ": error: ";
  EXPECT_TRUE(message.starts_with(prefix)) << message << "\nexpected prefix: " << prefix;
  EXPECT_NE(message.find(c.message), std::string::npos) << message << "\nexpected to contain: " << c.message;
}

INSTANTIATE_TEST_SUITE_P(Malformed, MalformedInputTable, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

std::vector<std::string> lines_of(const absl::Status& status) {
  std::vector<std::string> lines;
  std::string message(status.message());
  size_t start = 0;
  while (start <= message.size()) {
    const size_t end = std::min(message.find('\n', start), message.size());
    lines.push_back(message.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

TEST(MalformedInputTest, ReportsEveryErrorButNotTheirConsequences) {
  // y and z fail; later uses of them are not reported again.
  absl::StatusOr<Graph> g = parse_graph(
      "input x: bf16[8, 16]\n"
      "input x: f32[4]\n"
      "y = gelo(x)\n"
      "z = exp(y)\n"
      "w = add(x, q)\n"
      "v = neg(x)\n"
      "output z, w, x, v\n",
      "bad.fj");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(lines_of(g.status()), (std::vector<std::string>{
                                      "bad.fj:2:7: error: 'x' is already defined (on line 1)",
                                      "bad.fj:3:5: error: unknown op 'gelo' (did you mean 'gelu'?)",
                                      "bad.fj:5:12: error: undefined name 'q'",
                                      "bad.fj:7:14: error: output x: x: bf16[8, 16] is a graph input; outputs must be "
                                      "computed",
                                  }));
}

// A line without the '=' of an assignment defines nothing: a second line
// starting with the same misspelled keyword gets its own error, not
// "already defined"; a value whose '=' was forgotten, or whose declaration
// has a misspelled keyword, stays quiet where it is used, like any value
// whose line failed.
TEST(MalformedInputTest, ALineWithoutAnEqualsSignDefinesNothing) {
  absl::StatusOr<Graph> g = parse_graph(
      "inptu x: f32[4]\n"
      "inptu b: f32[4]\n"
      "input a: f32[4]\n"
      "y exp(a)\n"
      "inputs exp(a)\n"
      "z = neg(y)\n"
      "w = add(x, b)\n"
      "ouput z\n",
      "bad.fj");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(lines_of(g.status()),
            (std::vector<std::string>{
                "bad.fj:1:7: error: expected '=' after 'inptu', found 'x' (did you mean 'input'?)",
                "bad.fj:2:7: error: expected '=' after 'inptu', found 'b' (did you mean 'input'?)",
                "bad.fj:4:3: error: expected '=' after 'y', found 'exp'",
                "bad.fj:5:8: error: expected '=' after 'inputs', found 'exp'",
                "bad.fj:8:7: error: expected '=' after 'ouput', found 'z' (did you mean 'output'?)",
            }));
}

// A line whose operand failed on its own line still has its attributes
// checked (they do not depend on the operand), and every bad name of a
// line is reported, not only the first.
TEST(MalformedInputTest, ALineUsingAFailedValueStillHasItsAttributesChecked) {
  absl::StatusOr<Graph> g = parse_graph(
      "input x: f32[4, 8]\n"
      "input b: f32[9]\n"
      "h = add(x, b)\n"
      "g = gelu(h, approximate=fast)\n"
      "d = dropout(h, p=1.5)\n"
      "s = softmax(h, axis=0)\n"
      "e = exp(h)\n"
      "y = add(q, r)\n"
      "output g, d, s, e, y\n",
      "bad.fj");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(
      lines_of(g.status()),
      (std::vector<std::string>{
          "bad.fj:3:12: error: add(x: f32[4, 8], b: f32[9]): cannot broadcast [4, 8] with [9]",
          "bad.fj:4:25: error: gelu: invalid value 'fast' for attribute 'approximate': expected one of none, tanh",
          "bad.fj:5:18: error: dropout: p must be in [0, 1), got 1.5",
          "bad.fj:6:16: error: softmax takes no attributes, got 'axis'; softmax always works over the last axis",
          "bad.fj:8:9: error: undefined name 'q'",
          "bad.fj:8:12: error: undefined name 'r'",
      }));
}

TEST(MalformedInputTest, StopsAfterAHundredErrors) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += "?\n";
  absl::StatusOr<Graph> g = parse_graph(text);
  ASSERT_FALSE(g.ok());
  const std::vector<std::string> lines = lines_of(g.status());
  ASSERT_EQ(lines.size(), 101u);
  EXPECT_EQ(lines[0],
            "<input>:1:1: error: expected a statement ('input NAME: DTYPE[...]', 'NAME = OP(...)' or "
            "'output NAME'), found '?'");
  EXPECT_EQ(lines[100], "<input>:100:1: error: too many errors (100); stopping here");
}

// tests/fuzz/regressions/huge_extent_bytes_overflow.fj: f32[2^63 - 1] has a
// number of elements that fits in int64 but not its size in bytes; it used to
// verify, and the cost model's numel x 4 overflowed.
TEST(MalformedInputTest, ValuesOver256TiBAreRejectedWhereTheyAreDefined) {
  absl::StatusOr<Graph> g = parse_graph("input x: f32[9223372036854775807]\ny = exp(x)\noutput y\n", "huge.fj");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(lines_of(g.status()),
            (std::vector<std::string>{
                "huge.fj:1:7: error: input x: f32[9223372036854775807] takes more than the 256 TiB (2^48 bytes) a "
                "value may take",
                "huge.fj:2:1: error: y: exp gives f32[9223372036854775807], more than the 256 TiB (2^48 bytes) a "
                "value may take",
            }));
}

TEST(MalformedInputTest, ValuesOfExactly256TiBAreAcceptedAndCostedWithoutOverflow) {
  absl::StatusOr<Graph> g = parse_graph(
      "input x: bf16[2, 70368744177664]\ninput w: bf16[70368744177664]\ny = layer_norm(x)\nz = add(x, w)\n"
      "output y, z\n");
  ASSERT_TRUE(g.ok()) << g.status();
  const DeviceSpec device = gpu_device("h100");
  const FusionPlan unfused = make_unfused_plan(*g, fusion_options_for(device));
  const FusionPlan fused = make_fused_plan(*g, fusion_options_for(device));
  const PlanComparison c = compare_plans(unfused, fused, device);
  EXPECT_GT(c.unfused.bytes, int64_t{1} << 50);
  EXPECT_GT(c.fused.bytes, int64_t{1} << 49);
  EXPECT_GE(c.bytes_saved, 0);
}

// A 256 TiB value read by many reductions: the byte counts of a plan, added
// up in int64 by the cost model, could overflow. Graphs whose traffic bound
// passes 2^62 are refused; those under it are costed exactly.
std::string means_of_a_256_tib_value(int means) {
  std::string text = "input x: f32[8388608, 8388608]\n";
  std::string outputs;
  for (int i = 0; i < means; ++i) {
    text += fmt::format("m{} = mean(x)\n", i);
    outputs += fmt::format("{}m{}", i == 0 ? "" : ", ", i);
  }
  return text + "output " + outputs + "\n";
}

TEST(MalformedInputTest, GraphsWhosePlansCouldOverflowTheByteCountsAreRejected) {
  absl::StatusOr<Graph> g = parse_graph(means_of_a_256_tib_value(200), "means.fj");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(lines_of(g.status()).size(), 1u);
  EXPECT_NE(status_text(g.status()).find("error: the graph is too large to plan"), std::string::npos)
      << status_text(g.status());

  absl::StatusOr<Graph> fits = parse_graph(means_of_a_256_tib_value(60), "means.fj");
  ASSERT_TRUE(fits.ok()) << fits.status();
  const DeviceSpec device = gpu_device("h100");
  const PlanComparison c = compare_plans(make_unfused_plan(*fits, fusion_options_for(device)),
                                         make_fused_plan(*fits, fusion_options_for(device)), device);
  EXPECT_GT(c.unfused.bytes, int64_t{60} << 48);  // each mean reads x at least once
  EXPECT_GT(c.fused.bytes, int64_t{1} << 48);
}

TEST(MalformedInputTest, HugeLinesAreRejectedWithShortMessages) {
  const std::string long_name(1 << 20, 'a');
  absl::StatusOr<Graph> g = parse_graph("input x: f32[4]\ny = exp(" + long_name + ")\noutput y\n");
  ASSERT_FALSE(g.ok());
  EXPECT_LT(g.status().message().size(), 200u) << g.status();
  EXPECT_NE(std::string(g.status().message()).find("undefined name 'aaaa"), std::string::npos) << g.status();

  std::string many_operands = "input x: f32[4]\ny = add(x";
  for (int i = 0; i < 100000; ++i) many_operands += ", x";
  g = parse_graph(many_operands + ")\noutput y\n");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(std::string(g.status().message()), "<input>:2:201: error: too many operands and attributes (at most 64)");
}

// Every line of a rejection is a located diagnostic; an accepted text round-trips.
void expect_well_behaved(const std::string& text) {
  absl::StatusOr<Graph> g = parse_graph(text);
  if (g.ok()) {
    absl::StatusOr<Graph> again = parse_graph(print_graph(*g));
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_TRUE(*again == *g);
    return;
  }
  static const std::regex kDiagnostic(R"(<input>:[0-9]+:[0-9]+: error: [^\n]+)");
  for (const std::string& line : lines_of(g.status())) {
    EXPECT_TRUE(std::regex_match(line, kDiagnostic)) << line;
  }
}

TEST(MalformedInputTest, RandomBytesNeverCrash) {
  std::mt19937 rng(20240611);
  for (int i = 0; i < 200; ++i) {
    std::string text(std::uniform_int_distribution<size_t>(0, 4096)(rng), '\0');
    for (char& c : text) c = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
    expect_well_behaved(text);
  }
}

TEST(MalformedInputTest, RandomTokenSoupNeverCrashes) {
  // Random sequences of the format's own tokens reach deeper than random bytes.
  const std::vector<std::string> vocabulary = {"input",
                                               "output",
                                               "x",
                                               "y",
                                               "b",
                                               "=",
                                               "(",
                                               ")",
                                               "[",
                                               "]",
                                               ",",
                                               ":",
                                               " ",
                                               "\n",
                                               "#",
                                               "bf16",
                                               "f32",
                                               "f16",
                                               "add",
                                               "gelu",
                                               "layer_norm",
                                               "matmul",
                                               "dropout",
                                               "cast",
                                               "p=",
                                               "seed=",
                                               "eps=",
                                               "dtype=",
                                               "approximate=",
                                               "tanh",
                                               "0",
                                               "1",
                                               "-1",
                                               "0.5",
                                               "1e-5",
                                               "4096",
                                               "99999999999999999999",
                                               "\r",
                                               "\t",
                                               "\xc3\xa9",
                                               "\xff",
                                               "$"};
  const std::string prelude = "input x: f32[4, 8]\ninput b: f32[8]\n";
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string text = prelude;
    const size_t n = std::uniform_int_distribution<size_t>(0, 400)(rng);
    for (size_t k = 0; k < n; ++k) text += vocabulary[rng() % vocabulary.size()];
    expect_well_behaved(text);
  }
}

}  // namespace
}  // namespace fusejit
