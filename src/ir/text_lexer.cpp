#include "ir/text_lexer.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include <fmt/format.h>

namespace fusejit::text {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_non_ascii(char c) { return static_cast<unsigned char>(c) >= 0x80; }
// Non-ASCII bytes join words so that a name like "größe" is one token the
// parser can reject as a whole instead of a run of stray bytes.
bool is_word_byte(char c) { return is_alpha(c) || is_digit(c) || is_non_ascii(c); }

// Length of the well-formed UTF-8 sequence at the start of `s`, or 0.
// Overlong forms, surrogates and values past U+10FFFF are not well formed
// (an editor shows them as replacement characters, not what they encode).
size_t utf8_length(std::string_view s) {
  const auto lead = static_cast<unsigned char>(s[0]);
  size_t n = 0;
  if (lead >= 0xC2 && lead <= 0xDF) n = 2;
  if (lead >= 0xE0 && lead <= 0xEF) n = 3;
  if (lead >= 0xF0 && lead <= 0xF4) n = 4;
  if (n == 0 || s.size() < n) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) return 0;
  }
  const auto second = static_cast<unsigned char>(s[1]);
  if ((lead == 0xE0 && second < 0xA0) || (lead == 0xED && second > 0x9F) || (lead == 0xF0 && second < 0x90) ||
      (lead == 0xF4 && second > 0x8F)) {
    return 0;
  }
  return n;
}

// The code point of a well-formed sequence of `n` bytes.
uint32_t utf8_code_point(std::string_view s, size_t n) {
  uint32_t cp = static_cast<unsigned char>(s[0]) & (0x7Fu >> n);
  for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<unsigned char>(s[i]) & 0x3Fu);
  return cp;
}

// Characters that look like a space or like nothing at all: shown by their
// code point, since a no-break space pasted from a web page reads as ' '.
bool is_invisible(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0xA0) || cp == 0xAD || (cp >= 0x2000 && cp <= 0x200F) ||
         (cp >= 0x2028 && cp <= 0x202F) || (cp >= 0x205F && cp <= 0x206F) || cp == 0x3000 || cp == 0xFEFF;
}

// The invisible characters that stand for a space, and those that stand
// for a line break, as opposed to nothing.
bool is_space_like(uint32_t cp) {
  return cp == 0xA0 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}
bool is_line_break_like(uint32_t cp) { return cp == 0x85 || cp == 0x2028 || cp == 0x2029; }

// Characters from byte `from` up to byte `to` of `line`.
int characters_between(std::string_view line, size_t from, size_t to) {
  int count = 0;
  while (from < to) {
    const size_t n = std::max<size_t>(utf8_length(line.substr(from)), 1);
    from += n;
    ++count;
  }
  return count;
}

}  // namespace

std::optional<UnreadableCharacter> find_unreadable(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && line[i] != '#') {
    if (!is_non_ascii(line[i])) {
      ++i;
      continue;
    }
    const size_t n = utf8_length(line.substr(i));
    if (n == 0) return UnreadableCharacter{column_at(line, i), static_cast<unsigned char>(line[i]), true};
    if (const uint32_t cp = utf8_code_point(line.substr(i), n); is_invisible(cp)) {
      return UnreadableCharacter{column_at(line, i), cp, false};
    }
    i += n;
  }
  return std::nullopt;
}

std::string describe_unreadable(const UnreadableCharacter& c) {
  const uint32_t cp = c.code_point;
  if (c.not_utf8) {
    return fmt::format(
        "byte \\x{:02x} is not UTF-8 (a file saved as Latin-1 or Windows-1252{}?); save the file as "
        "UTF-8",
        cp, cp == 0xA0 ? ", where it is a no-break space" : "");
  }
  const std::string code = fmt::format("invisible character U+{:04X}", cp);
  if (cp == 0xA0 || cp == 0x202F) return code + ", a no-break space; type a plain space instead";
  if (is_line_break_like(cp)) return code + ", a Unicode line break; use a plain line break (LF)";
  if (is_space_like(cp)) return code + ", a typographic space; type a plain space instead";
  if (cp == 0xFEFF) {
    return code + ", a byte-order mark after the start of the text (a second one, or a pasted file's); delete it";
  }
  if (cp >= 0x80 && cp <= 0x9F) return code + ", a control character; delete it";
  return code + ", a zero-width character; delete it";
}

std::string with_invisible_replaced(std::string_view line) {
  std::string out;
  size_t i = 0;
  while (i < line.size()) {
    const size_t n = is_non_ascii(line[i]) ? utf8_length(line.substr(i)) : 0;
    const uint32_t cp = n > 0 ? utf8_code_point(line.substr(i), n) : 0;
    if (n > 0 && is_invisible(cp)) {
      if (is_space_like(cp)) out += ' ';
      if (is_line_break_like(cp)) out += '\n';
    } else if (n == 0 && static_cast<unsigned char>(line[i]) == 0xA0) {
      out += ' ';  // Latin-1's no-break space
    } else {
      out.append(line.substr(i, std::max<size_t>(n, 1)));
    }
    i += std::max<size_t>(n, 1);
  }
  return out;
}

int column_at(std::string_view line, size_t byte_offset) { return 1 + characters_between(line, 0, byte_offset); }

LineLexer::LineLexer(std::string_view line) : line_(line) { current_ = lex(); }

int LineLexer::column_of(size_t pos) {
  if (pos < counted_pos_) return column_at(line_, pos);  // not met: tokens come in order
  counted_col_ += characters_between(line_, counted_pos_, pos);
  counted_pos_ = pos;
  return counted_col_;
}

Token LineLexer::next() {
  Token t = current_;
  current_ = lex();
  return t;
}

Token LineLexer::lex() {
  // Spaces and tabs, and the form feeds and vertical tabs that C and Python
  // also take as blanks (some editors put a form feed between sections).
  while (pos_ < line_.size() &&
         (line_[pos_] == ' ' || line_[pos_] == '\t' || line_[pos_] == '\f' || line_[pos_] == '\v')) {
    ++pos_;
  }
  Token t;
  t.col = column_of(pos_);
  if (pos_ == line_.size() || line_[pos_] == '#') {
    t.kind = TokenKind::kEnd;
    return t;
  }
  const size_t start = pos_;
  const char c = line_[pos_];
  auto at = [&](size_t i) { return i < line_.size() ? line_[i] : '\0'; };
  const bool signed_start =
      (c == '-' || c == '+') && (is_digit(at(pos_ + 1)) || at(pos_ + 1) == '.' || is_alpha(at(pos_ + 1)));
  if (is_digit(c) || (c == '.' && is_digit(at(pos_ + 1))) || signed_start) {
    t.kind = TokenKind::kNumber;
    ++pos_;
    while (pos_ < line_.size()) {
      const char d = line_[pos_];
      const char prev = line_[pos_ - 1];
      // 'p': a hexadecimal float's exponent (0x1p-3), so that it is one token
      // and refused as a number, not split at its sign.
      const bool exponent_sign = (d == '+' || d == '-') && (prev == 'e' || prev == 'E' || prev == 'p' || prev == 'P');
      if (!(is_word_byte(d) || d == '.' || exponent_sign)) break;
      ++pos_;
    }
  } else if (is_alpha(c) || is_non_ascii(c)) {
    t.kind = TokenKind::kWord;
    while (pos_ < line_.size() && is_word_byte(line_[pos_])) ++pos_;
  } else {
    t.kind = std::string_view("()[],=:").find(c) != std::string_view::npos ? TokenKind::kPunct : TokenKind::kInvalid;
    ++pos_;
  }
  t.text = line_.substr(start, pos_ - start);
  return t;
}

bool is_decimal(std::string_view s) {
  size_t i = 0;
  auto digits = [&] {
    const size_t start = i;
    while (i < s.size() && is_digit(s[i])) ++i;
    return i - start;
  };
  if (i < s.size() && s[i] == '-') ++i;
  size_t mantissa = digits();
  if (i < s.size() && s[i] == '.') {
    ++i;
    mantissa += digits();
  }
  if (mantissa == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == s.size();
}

std::string_view without_plus_sign(std::string_view text) {
  if (text.size() >= 2 && text[0] == '+' && (is_digit(text[1]) || text[1] == '.')) text.remove_prefix(1);
  return text;
}

bool is_non_finite_word(std::string_view s) {
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  for (std::string_view word : {"inf", "infinity", "nan"}) {
    if (s.size() == word.size() && std::equal(s.begin(), s.end(), word.begin(), [](char a, char b) {
          return (a >= 'A' && a <= 'Z' ? a - 'A' + 'a' : a) == b;
        })) {
      return true;
    }
  }
  return false;
}

std::string quoted(std::string_view text) {
  constexpr size_t kMaxShown = 40;
  std::string out = "'";
  size_t i = 0;
  while (i < text.size() && i < kMaxShown) {
    const char c = text[i];
    if (c >= 0x20 && c < 0x7F) {
      out += c;
      ++i;
    } else if (size_t n = is_non_ascii(c) ? utf8_length(text.substr(i)) : 0; n > 0) {
      const uint32_t cp = utf8_code_point(text.substr(i), n);
      if (is_invisible(cp)) {
        out += fmt::format("U+{:04X}", cp);
      } else {
        out.append(text.substr(i, n));
      }
      i += n;
    } else {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
      ++i;
    }
  }
  if (i < text.size()) out += "...";
  return out + "'";
}

std::string describe(const Token& token) {
  return token.kind == TokenKind::kEnd ? std::string("end of line") : quoted(token.text);
}

}  // namespace fusejit::text
