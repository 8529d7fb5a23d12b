#include "cost/streaming_copy.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace fusejit {
namespace {

// Every length around the 32- and 64-byte stores and the loop over lines, from and to
// every offset within a line: the copied bytes equal the source's and the
// bytes around the destination are untouched.
TEST(StreamingCopy, CopiesEveryByteAtAnyAlignmentAndNothingElse) {
  std::vector<uint8_t> src(1024), dst(1024);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
  for (size_t dst_offset = 0; dst_offset < 64; dst_offset += 3) {
    for (size_t src_offset : {size_t{0}, size_t{1}, size_t{17}}) {
      for (size_t bytes : {0, 1, 31, 32, 33, 127, 128, 129, 255, 300, 513, 900}) {
        std::fill(dst.begin(), dst.end(), 0xEE);
        streaming_copy(dst.data() + dst_offset, src.data() + src_offset, bytes);
        for (size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= dst_offset && i < dst_offset + bytes;
          const uint8_t want = inside ? src[src_offset + i - dst_offset] : 0xEE;
          ASSERT_EQ(dst[i], want) << "byte " << i << " of a copy of " << bytes << " from offset " << src_offset
                                  << " to offset " << dst_offset;
        }
      }
    }
  }
}

// The copy takes the widest stores the CPU has: a whole line per store with
// AVX-512.
TEST(StreamingCopy, MethodFollowsTheCpu) {
  const std::string method = streaming_copy_method();
  if (__builtin_cpu_supports("avx512f")) {
    EXPECT_EQ(method, "64-byte streaming stores");
  } else if (__builtin_cpu_supports("avx")) {
    EXPECT_EQ(method, "32-byte streaming stores");
  } else {
    EXPECT_EQ(method, "memcpy");
  }
}

}  // namespace
}  // namespace fusejit
