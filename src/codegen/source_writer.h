// Builds generated source text: lines at the current indent level.
#pragma once

#include <string>
#include <string_view>

#include <fmt/format.h>

namespace fusejit {

class SourceWriter {
 public:
  template <typename... Args>
  void line(fmt::format_string<Args...> format, Args&&... args) {
    text_.append(static_cast<size_t>(indent_) * 2, ' ');
    text_ += fmt::format(format, std::forward<Args>(args)...);
    text_ += '\n';
  }
  void raw(std::string_view text) { text_ += text; }
  void blank() { text_ += '\n'; }
  // Writes `header` followed by " {", indents until close().
  template <typename... Args>
  void open(fmt::format_string<Args...> format, Args&&... args) {
    text_.append(static_cast<size_t>(indent_) * 2, ' ');
    const std::string header = fmt::format(format, std::forward<Args>(args)...);
    text_ += header.empty() ? "{\n" : header + " {\n";
    ++indent_;
  }
  void close(std::string_view suffix = "") {
    --indent_;
    text_.append(static_cast<size_t>(indent_) * 2, ' ');
    text_ += "}";
    text_ += suffix;
    text_ += '\n';
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  int indent_ = 0;
};

}  // namespace fusejit
