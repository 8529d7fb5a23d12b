// What $FUSEJIT_CXXFLAGS changes in the code the host compiler generates,
// read from its predefined macros (`-dM -E`) with and without those flags:
// instruction sets this CPU lacks (-march=native enables every one it has,
// so any other is one it lacks: a kernel using it dies of SIGILL), and
// floating-point semantics that break the reference's (-ffast-math's NaN,
// infinity and signed-zero shortcuts). Internal to src/runtime/.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace fusejit {

// "#define NAME VALUE" lines of a macro dump, by name; other lines are ignored.
std::map<std::string, std::string> parse_macro_dump(std::string_view dump);

// The instruction-set macros (__AVX512FP16__, __AMX_TILE__, ...) defined in
// `flagged` but not in `native`, by name, sorted. Only macros known to name
// an x86 instruction set count: a flag may define others (-funsigned-char's
// __CHAR_UNSIGNED__) that no CPU lacks.
std::vector<std::string> instruction_sets_beyond(const std::map<std::string, std::string>& native,
                                                 const std::map<std::string, std::string>& flagged);

// The macros by which `macros` says IEEE semantics are relaxed
// (__FAST_MATH__, __FINITE_MATH_ONLY__ 1, __NO_SIGNED_ZEROS__, ...), sorted;
// empty where they hold.
std::vector<std::string> relaxed_float_semantics(const std::map<std::string, std::string>& macros);

}  // namespace fusejit
