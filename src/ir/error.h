// The one exception type of the library. The C++ graph API throws it at the
// call that caused the problem; everything that reads user files returns
// absl::Status instead, so that a malformed file is an error, not a crash.
#pragma once

#include <stdexcept>
#include <string>

namespace fusejit {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace fusejit
