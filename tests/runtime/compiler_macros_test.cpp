// Reading what $FUSEJIT_CXXFLAGS changes from the host compiler's macros.
#include "runtime/compiler_macros.h"

#include <gtest/gtest.h>

namespace fusejit {
namespace {

TEST(CompilerMacros, ADumpIsReadByName) {
  const auto macros = parse_macro_dump(
      "#define __AVX2__ 1\n#define __GNUC__ 12\n#define __EMPTY__\n#define f(x) ((x)*2)\n"
      "c++: warning: something\n#define __VERSION__ \"12.2.0 (Debian)\"");
  EXPECT_EQ(macros.size(), 4u);
  EXPECT_EQ(macros.at("__AVX2__"), "1");
  EXPECT_EQ(macros.at("__EMPTY__"), "");
  EXPECT_EQ(macros.at("__VERSION__"), "\"12.2.0 (Debian)\"");
  EXPECT_FALSE(macros.contains("f(x)")) << "function-like macros are no flag's";
}

// What -march=native did not define but the flags do, among instruction
// sets only: -funsigned-char's and -ffast-math's macros are not CPU features.
TEST(CompilerMacros, OnlyInstructionSetsBeyondNativeCount) {
  const auto native = parse_macro_dump("#define __AVX2__ 1\n#define __FMA__ 1\n#define __SSE4_2__ 1\n");
  const auto flagged = parse_macro_dump(
      "#define __AVX2__ 1\n#define __FMA__ 1\n#define __SSE4_2__ 1\n#define __AVX512FP16__ 1\n#define __XOP__ 1\n"
      "#define __AMX_TILE__ 1\n#define __CHAR_UNSIGNED__ 1\n#define __FAST_MATH__ 1\n#define __OPTIMIZE_SIZE__ 1\n");
  EXPECT_EQ(instruction_sets_beyond(native, flagged),
            (std::vector<std::string>{"__AMX_TILE__", "__AVX512FP16__", "__XOP__"}));
  EXPECT_TRUE(instruction_sets_beyond(flagged, native).empty()) << "flags that take sets away are fine";
}

TEST(CompilerMacros, RelaxedFloatingPointSemanticsAreNamed) {
  EXPECT_TRUE(
      relaxed_float_semantics(parse_macro_dump("#define __FINITE_MATH_ONLY__ 0\n#define __AVX2__ 1\n")).empty());
  EXPECT_EQ(relaxed_float_semantics(parse_macro_dump(
                "#define __FINITE_MATH_ONLY__ 1\n#define __FAST_MATH__ 1\n#define __NO_SIGNED_ZEROS__ 1\n")),
            (std::vector<std::string>{"__FAST_MATH__", "__FINITE_MATH_ONLY__", "__NO_SIGNED_ZEROS__"}));
}

}  // namespace
}  // namespace fusejit
