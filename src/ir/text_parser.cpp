// The .fj parser: one statement per line, each checked as it is read.
//
// Error recovery is per statement: the first problem in a statement is
// reported (each undefined operand or output name counts on its own) and
// the statement defines nothing. The name it would have defined
// is "poisoned", so later uses of it fail quietly instead of repeating the
// error as "undefined name". Every op goes through make_node(), so the parser
// reports the same type, shape, arity and attribute errors as the C++ builder;
// the parser only adds where in the line the problem is.
//
// Problems of the whole graph (no `output` statement, anything verify_graph()
// finds without a location) are reported at the end of the text, where the
// missing statement would go. After 100 errors the parser stops.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>
#include <fmt/format.h>

#include "ir/closest_name.h"
#include "ir/infer.h"
#include "ir/text_format.h"
#include "ir/text_lexer.h"
#include "ir/verifier.h"

namespace fusejit {
namespace {

using text::describe;
using text::is_decimal;
using text::is_non_finite_word;
using text::LineLexer;
using text::quoted;
using text::Token;
using text::TokenKind;

// Past this many errors the rest is noise; without a limit a file of binary
// garbage would produce one error per line.
constexpr size_t kMaxErrors = 100;
// Lines and columns are ints in SourceLoc, which any size below 2 GiB
// keeps; 256 MiB is over a thousand times a 200-layer model's text, and
// what a wrong file (`check /dev/zero`) is read into memory before it is
// refused.
constexpr size_t kMaxTextBytes = size_t{256} << 20;
// No op takes more than three operands and two attributes; the limit keeps a
// pathological line from building a huge call and a huge error message.
constexpr size_t kMaxCallArgs = 64;

bool is_keyword(std::string_view word) { return word == "input" || word == "output"; }

// This absl build's string_view is its own type; hash-map lookups and
// absl::Status messages need the conversion spelled out.
absl::string_view absl_view(std::string_view s) { return {s.data(), s.size()}; }
std::string_view std_view(absl::string_view s) { return {s.data(), s.size()}; }

std::string unknown_op_message(std::string_view name) {
  std::string message = fmt::format("unknown op {}", quoted(name));
  std::vector<std::string> names;
  for (const OpInfo& info : callable_ops()) names.emplace_back(info.name);
  if (std::optional<std::string> best = closest_name(name, names)) {
    message += fmt::format(" (did you mean '{}'?)", *best);
  }
  return message;
}

// A call as written, before any name or op is looked up.
struct CallSyntax {
  Token op;
  Token open;
  std::vector<Token> operands;
  std::vector<std::pair<Token, Token>> attrs;  // key, value
};

class Parser {
 public:
  explicit Parser(std::string_view file_name) { graph_.set_source_file(std::string(file_name)); }

  absl::StatusOr<Graph> parse(std::string_view text);

 private:
  void statement(LineLexer& lex);
  void input_statement(LineLexer& lex);
  bool declare_input(const Token& name, LineLexer& lex);
  std::optional<int64_t> extent(const Token& token);
  void assignment(const Token& name, LineLexer& lex);
  bool define(const Token& name, LineLexer& lex);
  bool parse_call(LineLexer& lex, CallSyntax& call);
  int error_column(const NodeCheck& check, const CallSyntax& call, const OpInfo& info) const;
  void output_statement(LineLexer& lex);
  void output_name(const Token& token);

  bool check_new_name(const Token& name);
  void poison(const Token& name);
  // Poisons the names that the statements of a line that failed as a whole
  // declare or assign: one statement, or several where the line holds line
  // breaks an editor shows (a CR alone, U+2028) and the parser does not.
  void poison_defined_names(std::string_view failed_line);
  // A name whose line failed (poisoned) or lacked its '=': uses stay quiet.
  bool failed_name(std::string_view name) const {
    return poisoned_.contains(absl_view(name)) || unassigned_.contains(absl_view(name));
  }
  std::optional<int32_t> resolve(const Token& token);
  // The line of the statement that defines `name` after the current one, if any.
  std::optional<int> defined_later(std::string_view name);
  std::optional<double> literal(const Token& token);

  bool error_at(SourceLoc loc, std::string_view message);
  bool error(int col, std::string_view message) { return error_at({line_, col}, message); }

  Graph graph_;
  int line_ = 0;
  std::vector<std::string> errors_;
  bool stopped_ = false;  // the error limit was reached
  bool saw_output_ = false;
  std::string_view text_;  // the whole text, for defined_later()
  // Each name's first defining line, filled when an undefined name is first met.
  std::optional<absl::flat_hash_map<std::string, int>> definitions_;
  // Names whose defining statement failed, and its line.
  absl::flat_hash_map<std::string, int> poisoned_;
  // First words of lines that lack the '=' of an assignment ("inptu x: ..."):
  // their uses stay quiet, as a poisoned name's do, but the line defined
  // nothing, so another line may start with the same word.
  absl::flat_hash_set<std::string> unassigned_;
  absl::flat_hash_set<int32_t> output_ids_;
};

absl::StatusOr<Graph> Parser::parse(std::string_view text) {
  // A UTF-8 byte-order mark, as some editors write, is not part of the text.
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  text_ = text;
  // Encodings and line endings an editor may have chosen, named as such
  // rather than reported as the stray bytes they look like to the lexer.
  const bool utf16 = text.starts_with("\xFF\xFE") || text.starts_with("\xFE\xFF");
  // A NUL means a binary file given by mistake, not a text whose lines end
  // in CR or that was saved as Latin-1.
  const bool binary = text.find('\0') != std::string_view::npos;
  const bool cr_only =
      !binary && text.find('\r') != std::string_view::npos && text.find('\n') == std::string_view::npos;
  if (text.size() > kMaxTextBytes) {
    error_at({1, 1}, "the text is larger than 256 MiB, which no graph needs (a 200-layer model is well under 1 MiB)");
  } else if (utf16) {
    error_at({1, 1}, "the file is UTF-16 (it starts with a UTF-16 byte-order mark); save it as UTF-8");
  } else if (binary) {
    // One error, where the first NUL is: the rest of a binary file would
    // be a screenful of stray bytes, each reported as such.
    const size_t nul = text.find('\0');
    const size_t line_start = text.rfind('\n', nul) + 1;  // npos + 1 is 0: on the first line
    const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<ptrdiff_t>(nul), '\n'));
    error_at({line, text::column_at(text.substr(line_start, nul - line_start + 1), nul - line_start)},
             "a NUL byte: this is not a text file (a binary file, or a .npy array?); a graph file is UTF-8 text");
  } else if (cr_only) {
    error_at({1, 1}, "the lines end in a carriage return alone (old Mac line endings); save the file with LF or "
                     "CRLF line endings");
  } else {
    std::string_view line;
    size_t start = 0;
    while (!stopped_) {
      const size_t end = std::min(text.find('\n', start), text.size());
      line = text.substr(start, end - start);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      ++line_;
      if (const size_t cr = line.find('\r'); cr != std::string_view::npos) {
        // Checked in comments too: there a CR would hide the statements
        // after it, which an editor shows on lines of their own.
        error_at({line_, text::column_at(line, cr)},
                 "a carriage return inside a line (the file mixes line endings: some lines end in CR alone, and "
                 "line numbers here count LF only); save the file with LF or CRLF line endings");
        poison_defined_names(line);
      } else if (const std::optional<text::UnreadableCharacter> c = text::find_unreadable(line)) {
        error_at({line_, c->col}, text::describe_unreadable(*c));
        poison_defined_names(text::with_invisible_replaced(line));
      } else if (LineLexer lex(line); lex.peek().kind != TokenKind::kEnd) {
        statement(lex);
      }
      start = end + 1;
      if (start >= text.size()) break;  // a final line break does not start another line
    }
    // Whole-graph problems point at the end of the text: that is where a
    // missing `output` statement belongs.
    const SourceLoc end_of_text{line_, fusejit::text::column_at(line, line.size())};
    // Once the lines read (a line in error may be the output statement).
    if (!saw_output_ && errors_.empty()) error_at(end_of_text, "the graph has no output; add a line 'output NAME'");
    if (errors_.empty()) {
      // Statements were checked as they were read; this catches whatever a
      // whole-graph rule adds later. Located lines keep their location.
      for (std::string& message : verify_graph(graph_)) {
        constexpr std::string_view kUnlocated = "error: ";
        if (message.starts_with(kUnlocated)) {
          message = diagnostic_prefix(graph_, end_of_text) + message.substr(kUnlocated.size());
        }
        errors_.push_back(std::move(message));
      }
    }
  }
  if (!errors_.empty()) return absl::InvalidArgumentError(absl::StrJoin(errors_, "\n"));
  return std::move(graph_);
}

void Parser::statement(LineLexer& lex) {
  const Token first = lex.next();
  if (first.kind == TokenKind::kWord && !lex.peek().is('=')) {
    if (first.text == "input") return input_statement(lex);
    if (first.text == "output") return output_statement(lex);
  }
  if (first.kind == TokenKind::kWord) return assignment(first, lex);
  error(first.col, fmt::format("expected a statement ('input NAME: DTYPE[...]', 'NAME = OP(...)' or 'output NAME'), "
                               "found {}",
                               describe(first)));
}

void Parser::input_statement(LineLexer& lex) {
  const Token name = lex.next();
  if (!check_new_name(name)) return poison(name);
  if (!declare_input(name, lex)) poison(name);
}

bool Parser::declare_input(const Token& name, LineLexer& lex) {
  const Token colon = lex.next();
  if (!colon.is(':')) {
    return error(colon.col, fmt::format("expected ':' after {}, found {}", quoted(name.text), describe(colon)));
  }
  const Token dtype_token = lex.next();
  const std::optional<DType> dtype = parse_dtype(dtype_token.text);
  if (dtype_token.kind != TokenKind::kWord || !dtype) {
    return error(dtype_token.col, fmt::format("expected a dtype (f32, f16 or bf16), found {}", describe(dtype_token)));
  }
  const Token open = lex.next();
  if (!open.is('[')) return error(open.col, fmt::format("expected '[' after the dtype, found {}", describe(open)));
  if (lex.peek().is(']')) return error(open.col, "rank must be 1 to 4, got 0 (write a scalar as [1])");
  Shape shape;
  int64_t numel = 1;
  while (true) {
    const Token token = lex.next();
    if (shape.rank() == kMaxRank) return error(token.col, "rank must be 1 to 4; this is a 5th extent");
    const std::optional<int64_t> d = extent(token);
    if (!d) return false;
    if (__builtin_mul_overflow(numel, *d, &numel)) {
      return error(token.col, "the number of elements (the product of the extents) overflows a 64-bit integer");
    }
    shape.push_back(*d);
    const Token separator = lex.next();
    if (separator.is(']')) break;
    if (!separator.is(',')) {
      return error(separator.col, fmt::format("expected ',' or ']' in the shape, found {}", describe(separator)));
    }
  }
  if (const Token rest = lex.next(); rest.kind != TokenKind::kEnd) {
    return error(rest.col, fmt::format("unexpected {} after the input declaration", describe(rest)));
  }
  Node node;
  node.op = Op::kInput;
  node.name = std::string(name.text);
  node.dtype = *dtype;
  node.shape = shape;
  node.loc = {line_, name.col};
  graph_.append(std::move(node));
  return true;
}

std::optional<int64_t> Parser::extent(const Token& token) {
  if (token.kind != TokenKind::kNumber) {
    error(token.col, fmt::format("expected an extent (a positive integer), found {}", describe(token)));
    return std::nullopt;
  }
  const std::string_view text = fusejit::text::without_plus_sign(token.text);
  const std::string_view digits = text.starts_with('-') ? text.substr(1) : text;
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    error(token.col, fmt::format("an extent must be a positive integer, got {}", quoted(token.text)));
    return std::nullopt;
  }
  int64_t value = 0;
  if (std::from_chars(digits.data(), digits.data() + digits.size(), value).ec != std::errc()) {
    error(token.col, fmt::format("extent {} does not fit in a 64-bit integer", quoted(token.text)));
    return std::nullopt;
  }
  if (text.starts_with('-') || value == 0) {
    error(token.col, fmt::format("extents must be positive, got {}", quoted(token.text)));
    return std::nullopt;
  }
  return value;
}

void Parser::assignment(const Token& name, LineLexer& lex) {
  if (!lex.peek().is('=')) {
    const Token next = lex.next();
    std::string message = fmt::format("expected '=' after {}, found {}", quoted(name.text), describe(next));
    // A misspelled keyword, judged by what follows: "inptu x: f32[4]",
    // "ouput y" or "ouput y, z"; not "inputs exp(x)", a missing '='.
    bool declares_next = false;
    if (next.kind == TokenKind::kWord) {
      const Token after = lex.peek();
      const char* keyword = after.is(':') ? "input" : after.kind == TokenKind::kEnd || after.is(',') ? "output" : nullptr;
      if (keyword != nullptr && closest_name(name.text, {keyword})) {
        message += fmt::format(" (did you mean '{}'?)", keyword);
      }
      // "inptu x: f32[4]" was meant to declare x: its uses stay quiet.
      declares_next = after.is(':');
    }
    error(next.col, message);
    if (declares_next) poison(next);
    if (!graph_.find(name.text) && !poisoned_.contains(absl_view(name.text))) unassigned_.emplace(name.text);
    return;
  }
  if (!check_new_name(name)) return poison(name);
  if (!define(name, lex)) poison(name);
}

bool Parser::define(const Token& name, LineLexer& lex) {
  lex.next();  // the '=' assignment() saw
  CallSyntax call;
  if (!parse_call(lex, call)) return false;
  const OpInfo* info = find_op(call.op.text);
  if (info == nullptr) return error(call.op.col, unknown_op_message(call.op.text));

  // Every operand is looked at, so that a line with two bad names reports
  // both. An operand that names a value whose own line failed ("poisoned")
  // has no type to check against; the line's attributes are still checked
  // below, as they do not depend on it.
  std::vector<Operand> operands;
  bool operands_ok = true;
  bool uses_failed_value = false;
  for (const Token& token : call.operands) {
    if (token.kind == TokenKind::kNumber) {
      const std::optional<double> v = literal(token);
      if (!v) operands_ok = false;
      operands.push_back(Operand::scalar(v.value_or(0)));
    } else {
      const std::optional<int32_t> id = resolve(token);
      if (!id) {
        operands_ok = false;
        uses_failed_value = uses_failed_value || failed_name(token.text);
        continue;
      }
      operands.push_back(Operand::value(*id));
    }
  }
  if (!operands_ok && !uses_failed_value) return false;
  Attrs given;
  for (size_t i = 0; i < call.attrs.size(); ++i) {
    const auto& [key, value] = call.attrs[i];
    for (size_t j = 0; j < i; ++j) {
      if (call.attrs[j].first.text == key.text) {
        return error(key.col, fmt::format("attribute {} is given more than once", quoted(key.text)));
      }
    }
    const AttrSpec* spec = info->find_attr(key.text);
    if (spec == nullptr) {
      given.set(key.text, std::string(value.text));  // make_node reports the unknown attribute
      continue;
    }
    absl::StatusOr<AttrValue> parsed = parse_attr_value(*spec, value.text);
    if (!parsed.ok()) return error(value.col, fmt::format("{}: {}", info->name, std_view(parsed.status().message())));
    given.set(key.text, *std::move(parsed));
  }
  if (!operands_ok) {  // an operand's line failed: check what can be checked without it
    const NodeCheck check = check_given_attrs(*info, given);
    if (!check.ok()) return error(error_column(check, call, *info), check.error);
    return false;
  }

  NodeCheck check = make_node(graph_, *info, operands, given);
  if (!check.ok()) return error(error_column(check, call, *info), check.error);
  check.node.name = std::string(name.text);
  check.node.loc = {line_, name.col};
  graph_.append(std::move(check.node));
  return true;
}

bool Parser::parse_call(LineLexer& lex, CallSyntax& call) {
  call.op = lex.next();
  if (call.op.kind != TokenKind::kWord) {
    return error(call.op.col, fmt::format("expected an op name after '=', found {}", describe(call.op)));
  }
  call.open = lex.next();
  if (!call.open.is('(')) {
    // y = x: a value where an op call belongs (the format has no plain assignment).
    if (find_op(call.op.text) == nullptr && graph_.find(call.op.text)) {
      return error(call.op.col, fmt::format("{} is a value, not an op: '=' takes an op call such as exp({}) (the "
                                            "format has no plain assignment)",
                                            quoted(call.op.text), call.op.text));
    }
    return error(call.open.col,
                 fmt::format("expected '(' after {}, found {}", quoted(call.op.text), describe(call.open)));
  }
  auto missing_paren = [&](const Token& at) {
    return error(at.col, fmt::format("missing ')' to close the '(' at column {}", call.open.col));
  };
  if (lex.peek().is(')')) {
    lex.next();
  } else {
    while (true) {
      const Token arg = lex.next();
      if (call.operands.size() + call.attrs.size() == kMaxCallArgs) {
        return error(arg.col, fmt::format("too many operands and attributes (at most {})", kMaxCallArgs));
      }
      if (arg.kind == TokenKind::kWord && lex.peek().is('=')) {
        lex.next();
        const Token value = lex.next();
        if (value.kind != TokenKind::kWord && value.kind != TokenKind::kNumber) {
          return error(value.col,
                       fmt::format("expected a value for attribute {}, found {}", quoted(arg.text), describe(value)));
        }
        call.attrs.emplace_back(arg, value);
      } else if (arg.kind == TokenKind::kWord || arg.kind == TokenKind::kNumber) {
        if (!call.attrs.empty()) {
          return error(arg.col, fmt::format("operand {} follows an attribute; attributes come after all operands",
                                            quoted(arg.text)));
        }
        call.operands.push_back(arg);
      } else if (arg.kind == TokenKind::kEnd) {
        return missing_paren(arg);
      } else {
        return error(arg.col, fmt::format("expected an operand or an attribute, found {}", describe(arg)));
      }
      const Token separator = lex.next();
      if (separator.is(')')) break;
      if (separator.is('(') && arg.kind == TokenKind::kWord) {
        return error(arg.col, fmt::format("{} is called here, but operands must be names or numbers: compute it on "
                                          "a line of its own (NAME = OP(...)) and pass NAME",
                                          quoted(arg.text)));
      }
      if (separator.kind == TokenKind::kEnd) return missing_paren(separator);
      if (!separator.is(',')) {
        return error(separator.col, fmt::format("expected ',' or ')', found {}", describe(separator)));
      }
    }
  }
  if (const Token rest = lex.next(); rest.kind != TokenKind::kEnd) {
    return error(rest.col, fmt::format("unexpected {} after ')'", describe(rest)));
  }
  return true;
}

// make_node says which operand or attribute a problem is about; point there
// (at the value of a known attribute, at the key of an unknown one).
int Parser::error_column(const NodeCheck& check, const CallSyntax& call, const OpInfo& info) const {
  if (check.operand >= 0 && check.operand < static_cast<int>(call.operands.size())) {
    return call.operands[check.operand].col;
  }
  for (const auto& [key, value] : call.attrs) {
    if (key.text == check.attr) return info.find_attr(key.text) != nullptr ? value.col : key.col;
  }
  return call.op.col;
}

void Parser::output_statement(LineLexer& lex) {
  saw_output_ = true;
  if (lex.peek().kind == TokenKind::kEnd) {
    error(lex.peek().col, "expected a name after 'output'");
    return;
  }
  while (!stopped_) {
    const Token name = lex.next();
    if (name.kind != TokenKind::kWord) {
      output_name(name);
      return;
    }
    // The separator first: in `output x.y` the name meant is not `x`, and
    // judging `x` (a graph input, say) would report a problem that is not.
    const Token separator = lex.next();
    if (separator.kind != TokenKind::kEnd && !separator.is(',')) {
      error(separator.col,
            fmt::format("expected ',' or end of line after an output name, found {}", describe(separator)));
      return;
    }
    output_name(name);
    if (separator.kind == TokenKind::kEnd) return;
  }
}

// Each name of an output list is checked on its own: one bad name does not
// hide problems with the others.
void Parser::output_name(const Token& token) {
  if (token.kind != TokenKind::kWord) {
    error(token.col, fmt::format("expected a name to output, found {}", describe(token)));
    return;
  }
  const std::optional<int32_t> id = resolve(token);
  if (!id) return;
  const Node& node = graph_.node(*id);
  if (node.op == Op::kInput) {
    error(token.col,
          fmt::format("output {}: {} is a graph input; outputs must be computed", node.name, fusejit::describe(node)));
  } else if (!output_ids_.insert(*id).second) {
    error(token.col, fmt::format("output {}: {} is already an output", node.name, fusejit::describe(node)));
  } else {
    graph_.add_output(*id);
  }
}

bool Parser::check_new_name(const Token& name) {
  if (name.kind != TokenKind::kWord) {
    return error(name.col, fmt::format("expected a name, found {}", describe(name)));
  }
  if (is_keyword(name.text)) {
    return error(name.col, fmt::format("{} is a keyword and cannot name a value", quoted(name.text)));
  }
  if (!is_identifier(name.text)) {
    return error(name.col,
                 fmt::format("{} is not a valid name (names use ASCII letters, digits and '_')", quoted(name.text)));
  }
  std::optional<int> first_line;
  if (std::optional<int32_t> id = graph_.find(name.text)) first_line = graph_.node(*id).loc.line;
  if (auto it = poisoned_.find(absl_view(name.text)); it != poisoned_.end()) first_line = it->second;
  if (first_line) {
    return error(name.col, fmt::format("{} is already defined (on line {})", quoted(name.text), *first_line));
  }
  return true;
}

void Parser::poison_defined_names(std::string_view failed_line) {
  for (absl::string_view statement : absl::StrSplit(absl_view(failed_line), absl::ByAnyChar("\r\n"))) {
    LineLexer lex(std::string_view(statement.data(), statement.size()));
    const Token first = lex.next();
    if (first.is_word("input") && !lex.peek().is('=')) {
      poison(lex.next());
    } else if (lex.peek().is('=')) {
      poison(first);
    }
  }
}

// Remembers a name whose statement failed, so that its uses stay quiet. A
// name that is a keyword or that is already defined keeps its meaning.
void Parser::poison(const Token& name) {
  if (name.kind != TokenKind::kWord || is_keyword(name.text)) return;
  if (!graph_.find(name.text)) poisoned_.try_emplace(absl_view(name.text), line_);
}

std::optional<int32_t> Parser::resolve(const Token& token) {
  if (std::optional<int32_t> id = graph_.find(token.text)) return id;
  if (failed_name(token.text)) return std::nullopt;  // its own statement has been reported
  if (is_keyword(token.text)) {
    error(token.col, fmt::format("{} is a keyword, not the name of a value", quoted(token.text)));
  } else if (is_non_finite_word(token.text)) {
    error(token.col, fmt::format("{} is not supported: literals must be finite decimal numbers", quoted(token.text)));
  } else if (!is_identifier(token.text)) {
    error(token.col,
          fmt::format("{} is not a valid name (names use ASCII letters, digits and '_')", quoted(token.text)));
  } else if (const std::optional<int> later = defined_later(token.text)) {
    error(token.col, fmt::format("undefined name {}: it is defined later, on line {}; a value must be defined "
                                 "before the line that uses it",
                                 quoted(token.text), *later));
  } else {
    error(token.col, fmt::format("undefined name {}", quoted(token.text)));
  }
  return std::nullopt;
}

std::optional<int> Parser::defined_later(std::string_view name) {
  if (!definitions_) {
    definitions_.emplace();
    int line_number = 0;
    for (size_t start = 0; start < text_.size();) {
      const size_t end = std::min(text_.find('\n', start), text_.size());
      ++line_number;
      LineLexer lex(text_.substr(start, end - start));
      const Token first = lex.next();
      if (first.kind == TokenKind::kWord) {
        if (lex.peek().is('=')) {
          definitions_->try_emplace(std::string(first.text), line_number);
        } else if (first.text == "input" && lex.peek().kind == TokenKind::kWord) {
          definitions_->try_emplace(std::string(lex.peek().text), line_number);
        }
      }
      start = end + 1;
    }
  }
  auto it = definitions_->find(absl_view(name));
  if (it == definitions_->end() || it->second <= line_) return std::nullopt;
  return it->second;
}

std::optional<double> Parser::literal(const Token& token) {
  const std::string_view text = fusejit::text::without_plus_sign(token.text);
  if (is_non_finite_word(text)) {
    error(token.col, fmt::format("{} is not supported: literals must be finite decimal numbers", quoted(token.text)));
    return std::nullopt;
  }
  if (!is_decimal(text)) {
    error(token.col, fmt::format("invalid number {}: literals are decimal, like 0.125 or 1.25e-3", quoted(token.text)));
    return std::nullopt;
  }
  double value = 0;
  if (std::from_chars(text.data(), text.data() + text.size(), value).ec != std::errc()) {
    error(token.col, fmt::format("number {} is out of the range of a 64-bit float", quoted(token.text)));
    return std::nullopt;
  }
  return value;
}

bool Parser::error_at(SourceLoc loc, std::string_view message) {
  if (stopped_) return false;
  errors_.push_back(diagnostic_prefix(graph_, loc) + std::string(message));
  if (errors_.size() == kMaxErrors) {
    errors_.push_back(diagnostic_prefix(graph_, loc) + fmt::format("too many errors ({}); stopping here", kMaxErrors));
    stopped_ = true;
  }
  return false;
}

}  // namespace

absl::StatusOr<Graph> parse_graph(std::string_view text, std::string_view file_name) {
  return Parser(file_name).parse(text);
}

std::string graph_source_name(const std::string& path) { return path == "-" ? "<stdin>" : path; }

absl::StatusOr<std::string> read_graph_text(const std::string& path) {
  if (path.empty()) {
    return absl::InvalidArgumentError(
        "fusejit: error: the graph file's name is empty; name a .fj file, or '-' for standard input");
  }
  const bool is_stdin = path == "-";
  const std::string name = graph_source_name(path);
  auto close = [is_stdin](std::FILE* f) {
    if (!is_stdin) std::fclose(f);
  };
  std::unique_ptr<std::FILE, decltype(close)> file(is_stdin ? stdin : std::fopen(path.c_str(), "rb"), close);
  auto failure = [&](std::string_view what) {
    const int error_number = errno;  // before anything else can change it
    if (is_stdin && error_number == EBADF) {  // `fusejit check - <&-`
      return absl::Status(absl::StatusCode::kFailedPrecondition,
                          fmt::format("{}: error: cannot read standard input: it is closed", name));
    }
    return absl::Status(absl::ErrnoToStatusCode(error_number),
                        fmt::format("{}: error: cannot {} the file: {}", name, what, std::strerror(error_number)));
  };
  if (file == nullptr) return failure("open");
  std::string text;
  char buffer[1 << 16];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, file.get())) {
    text.append(buffer, n);
    if (text.size() > kMaxTextBytes) break;  // parse_graph reports the size
  }
  if (std::ferror(file.get())) return failure("read");
  return text;
}

absl::StatusOr<Graph> parse_graph_file(const std::string& path) {
  absl::StatusOr<std::string> text = read_graph_text(path);
  if (!text.ok()) return text.status();
  return parse_graph(*text, graph_source_name(path));
}

}  // namespace fusejit
