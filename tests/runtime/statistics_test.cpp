#include "runtime/statistics.h"

#include <gtest/gtest.h>

namespace fusejit {
namespace {

TEST(Statistics, MedianOfOddAndEvenCountsInAnyOrder) {
  EXPECT_EQ(median({5.0, 1.0, 3.0}), 3.0);
  EXPECT_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);  // the middle two, averaged
  EXPECT_EQ(median({7.5}), 7.5);
  EXPECT_EQ(median({}), 0.0);
}

}  // namespace
}  // namespace fusejit
