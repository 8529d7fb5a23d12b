// What a test needs from the machine (NVRTC, a GPU), and what happens where
// it is missing: a skip with the reason, unless the run says it must be
// there. Then it is a failure, so that a suite whose every test skipped
// cannot pass for one that ran:
// - NVRTC must load wherever the tests were built with the CUDA toolkit
//   (FUSEJIT_TESTS_WITH_CUDA, set by tests/CMakeLists.txt);
// - a GPU (or the CUDA emulator) must be usable where FUSEJIT_EXPECT_GPU=1,
//   which ctest's emulated_gpu entries and scripts/gpu-check.sh set.
#pragma once

#include <cstdlib>
#include <string_view>

#include <gtest/gtest.h>

#include "ir/error.h"
#include "runtime/nvrtc_compiler.h"

namespace fusejit::testing {

inline bool gpu_expected() {
  const char* v = std::getenv("FUSEJIT_EXPECT_GPU");
  return v != nullptr && std::string_view(v) == "1";
}

inline bool nvrtc_expected() {
#ifdef FUSEJIT_TESTS_WITH_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace fusejit::testing

// In a test body or SetUp(): returns from it, skipped or failed as above.
#define FUSEJIT_GPU_MISSING(why)                                                   \
  do {                                                                             \
    if (::fusejit::testing::gpu_expected()) {                                      \
      GTEST_FAIL() << "FUSEJIT_EXPECT_GPU=1, but there is no usable GPU: " << why; \
    } else {                                                                       \
      GTEST_SKIP() << why;                                                         \
    }                                                                              \
  } while (0)

#define FUSEJIT_REQUIRE_NVRTC()                                                                                   \
  do {                                                                                                            \
    if (const absl::Status nvrtc_ = ::fusejit::nvrtc_status(); !nvrtc_.ok()) {                                    \
      if (::fusejit::testing::nvrtc_expected()) {                                                                 \
        GTEST_FAIL() << "built with the CUDA toolkit, but NVRTC is unusable: " << ::fusejit::status_text(nvrtc_); \
      } else {                                                                                                    \
        GTEST_SKIP() << "NVRTC unavailable: " << ::fusejit::status_text(nvrtc_);                                  \
      }                                                                                                           \
    }                                                                                                             \
  } while (0)
