// The one exception type of the library. The C++ graph API throws it at the
// call that caused the problem; everything that reads user files returns
// absl::Status instead, so that a malformed file is an error, not a crash.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <absl/status/status.h>

namespace fusejit {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// The message of a status as a std::string_view (Debian's abseil has its own
// string_view type, which fmt does not format).
inline std::string_view status_text(const absl::Status& status) {
  return {status.message().data(), status.message().size()};
}

}  // namespace fusejit
