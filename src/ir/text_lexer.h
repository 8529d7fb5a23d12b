// Tokens of one line of the .fj text format (private to the text parser).
//
// The lexer works on demand over one line, so a line of any length costs
// time linear in its length and no memory per token. It never fails: a byte
// it does not know becomes a kInvalid token and the parser reports it at the
// point where it meets it, so errors come out in column order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fusejit::text {

enum class TokenKind {
  kWord,     // a name, keyword, op, dtype or enum value: [A-Za-z_] then [A-Za-z0-9_]; non-ASCII bytes kept for messages
  kNumber,   // starts like a number ("4096", "-0.1", ".5", "1e-05"); validated by the parser
  kPunct,    // one of ( ) [ ] , = :
  kInvalid,  // any other byte
  kEnd,      // end of the line or a '#' comment
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string_view text;
  int col = 1;  // 1-based column in characters (UTF-8 sequences; an invalid byte is one)

  bool is(char punct) const { return kind == TokenKind::kPunct && text.size() == 1 && text[0] == punct; }
  bool is_word(std::string_view word) const { return kind == TokenKind::kWord && text == word; }
};

class LineLexer {
 public:
  // `line` excludes the line break; columns count from its first byte.
  explicit LineLexer(std::string_view line);

  const Token& peek() const { return current_; }
  Token next();

 private:
  Token lex();
  // The column of byte `pos`, counted on from the last one asked for
  // (tokens come in order, so a line is walked once).
  int column_of(size_t pos);

  std::string_view line_;
  size_t pos_ = 0;
  size_t counted_pos_ = 0;
  int counted_col_ = 1;
  Token current_;
};

// The 1-based character column of byte `byte_offset` of `line`: each
// well-formed UTF-8 sequence is one character, each other byte one.
int column_at(std::string_view line, size_t byte_offset);

// What a line must not hold outside a comment: a character that shows as
// a space or as nothing (a no-break space pasted from a web page, a
// zero-width space, a byte-order mark mid-file), which would otherwise be
// taken for part of a name ("inputU+00A0x") and the message would blame
// the statement's shape; or a byte that is not UTF-8 (a file saved as
// Latin-1), which would be shown as a stray byte in a name.
struct UnreadableCharacter {
  int col = 1;  // as column_at()
  uint32_t code_point = 0;  // the byte, where not_utf8
  bool not_utf8 = false;
};
std::optional<UnreadableCharacter> find_unreadable(std::string_view line);
// "invisible character U+00A0, a no-break space; type a plain space
// instead", "byte \xF6 is not UTF-8 (...); save the file as UTF-8".
std::string describe_unreadable(const UnreadableCharacter& c);
// `line` as the user meant it: each invisible character that stands for a
// space a space (Latin-1's no-break space byte too), for a line break
// '\n', each other one removed.
std::string with_invisible_replaced(std::string_view line);

// The text of a kNumber token that is a decimal literal as print_graph()
// writes it and from_chars() reads it: -?(D+(.D*)?|.D+)([eE][+-]?D+)?.
// Rejects "1e5x", "0x10", "1.2.3", "+1" and friends (without_plus_sign()
// below reads "+1" first).
bool is_decimal(std::string_view text);
// `text` without a leading '+' before a digit or '.': a number written
// "+2", as Python and C accept it, is read as "2" (from_chars() takes no
// '+'). Anything else, "+-2" and "+inf" included, is returned unchanged.
std::string_view without_plus_sign(std::string_view text);
// "inf", "-Infinity", "nan", ...: what a user may try for a non-finite literal.
bool is_non_finite_word(std::string_view text);

// `text` fit for a one-line message: quoted, at most a few dozen bytes,
// control bytes and invalid UTF-8 escaped as \xNN (valid UTF-8 is kept).
std::string quoted(std::string_view text);
// "'foo'" or "end of line", for "expected X, found Y".
std::string describe(const Token& token);

}  // namespace fusejit::text
