// The decisions of launch-shape tuning (runtime/cuda_row_tuning.h), which
// need no GPU: when a kernel is timed, which shape is kept, what is said.
#include "runtime/cuda_row_tuning.h"

#include <gtest/gtest.h>

#include "ir/messages.h"
#include "runtime/runtime_test_util.h"

namespace fusejit {
namespace {

TEST(RowTuning, LargeKernelsWithAChoiceAreTimedUnlessTurnedOff) {
  testing::ScopedEnv unset("FUSEJIT_AUTOTUNE", std::nullopt);
  EXPECT_TRUE(should_autotune(Autotune::kAuto, kAutotuneMinElements, 5));
  EXPECT_FALSE(should_autotune(Autotune::kAuto, kAutotuneMinElements - 1, 5));
  EXPECT_FALSE(should_autotune(Autotune::kAuto, kAutotuneMinElements, 1));  // nothing to choose
  EXPECT_FALSE(should_autotune(Autotune::kAlways, 1, 1));
  EXPECT_TRUE(should_autotune(Autotune::kAlways, 1, 2));
  EXPECT_FALSE(should_autotune(Autotune::kOff, kAutotuneMinElements, 5));
  {
    testing::ScopedEnv off("FUSEJIT_AUTOTUNE", "0");
    EXPECT_FALSE(should_autotune(Autotune::kAuto, kAutotuneMinElements, 5));
    EXPECT_TRUE(should_autotune(Autotune::kAlways, 1, 2));  // what the caller asks for explicitly wins
  }
  {
    testing::ScopedEnv on("FUSEJIT_AUTOTUNE", "1");
    EXPECT_TRUE(should_autotune(Autotune::kAuto, 1, 2));
    EXPECT_FALSE(should_autotune(Autotune::kOff, kAutotuneMinElements, 5));
  }
  {
    // The warning comes once per value in a process: a new value each time
    // this test runs (--gtest_repeat).
    static int runs = 0;
    const std::string value = "yes" + std::to_string(++runs);
    testing::ScopedEnv bad("FUSEJIT_AUTOTUNE", value);
    ScopedWarningSink sink;
    EXPECT_TRUE(should_autotune(Autotune::kAuto, kAutotuneMinElements, 5));  // ignored: the size decides
    EXPECT_FALSE(should_autotune(Autotune::kAuto, 1, 5));
    EXPECT_NE(sink.text().find("ignoring FUSEJIT_AUTOTUNE=" + value), std::string::npos) << sink.text();
  }
}

TEST(RowTuning, TheDefaultStaysUnlessAnotherShapeIsClearlyFaster) {
  EXPECT_EQ(pick_launch_shape({40.0, 30.0, 35.0}), 1u);
  EXPECT_EQ(pick_launch_shape({40.0, 39.5, 45.0}), 0u);          // 1.25% faster: within the margin
  EXPECT_EQ(pick_launch_shape({40.0, 38.5, 38.0}), 2u);          // 5% and 2 us faster
  EXPECT_EQ(pick_launch_shape({20.0, 19.2}), 0u);                // 4% but 0.8 us: within event resolution
  EXPECT_EQ(pick_launch_shape({200.0, 195.5}), 1u);              // 2.25% and 4.5 us
  EXPECT_EQ(pick_launch_shape({40.0, std::nullopt, 30.0}), 2u);  // an untimed shape is never picked
  EXPECT_EQ(pick_launch_shape({40.0, std::nullopt}), 0u);
  EXPECT_EQ(pick_launch_shape({40.0}), 0u);
}

TEST(RowTuning, TheNoteSaysWhatWasTimedAndKept) {
  const std::vector<std::string> shapes = {"512 threads per row", "256 threads per row", "1024 threads per row"};
  EXPECT_EQ(describe_tuning(shapes, {36.0, 31.04, 38.0}, 1),
            "fastest of 3 launch shapes timed on its first run (31.0 us, default 512 threads per row: 36.0 us)");
  EXPECT_EQ(describe_tuning(shapes, {36.0, 35.9, 37.0}, 0),
            "default kept: none of the other 2 launch shapes timed on its first run was 2% and 1 us faster (36.0 us)");
}

}  // namespace
}  // namespace fusejit
