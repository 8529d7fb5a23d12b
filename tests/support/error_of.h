// The message of the fusejit::Error a call throws: what tests of the
// library's misuse compare against.
#pragma once

#include <string>

#include "ir/error.h"

namespace fusejit::testing {

// The message of the fusejit::Error `call` throws, or "no error". Any other
// exception escapes and fails the test.
template <class F>
std::string error_of(F call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace fusejit::testing
