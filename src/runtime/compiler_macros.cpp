#include "runtime/compiler_macros.h"

#include <algorithm>

namespace fusejit {
namespace {

// GCC's and clang's x86 instruction-set macros: the families by prefix,
// the rest by name.
constexpr std::string_view kInstructionSetPrefixes[] = {"__AVX", "__SSE", "__SSSE", "__AMX_", "__FMA",
                                                        "__BMI", "__SHA", "__SM3",  "__SM4",  "__APX"};
constexpr std::string_view kInstructionSets[] = {
    "__MMX__",        "__F16C__",      "__LZCNT__",     "__POPCNT__",   "__AES__",      "__VAES__",   "__PCLMUL__",
    "__VPCLMULQDQ__", "__GFNI__",      "__MOVBE__",     "__ADX__",      "__RDSEED__",   "__RDRND__",  "__PRFCHW__",
    "__CLFLUSHOPT__", "__CLWB__",      "__XSAVE__",     "__XSAVEOPT__", "__XSAVEC__",   "__XSAVES__", "__PKU__",
    "__RDPID__",      "__WAITPKG__",   "__SERIALIZE__", "__TSXLDTRK__", "__HRESET__",   "__UINTR__",  "__ENQCMD__",
    "__MOVDIRI__",    "__MOVDIR64B__", "__CLDEMOTE__",  "__PTWRITE__",  "__WBNOINVD__", "__SGX__",    "__KL__",
    "__WIDEKL__",     "__CMPCCXADD__", "__PREFETCHI__", "__RAOINT__",   "__XOP__",      "__TBM__",    "__LWP__",
    "__RTM__",        "__MWAITX__",    "__CLZERO__",    "__SHSTK__",    "__RDPRU__",    "__CRC32__",  "__USER_MSR__",
    "__FXSR__"};

bool names_an_instruction_set(std::string_view name) {
  if (name.size() < 4 || name.substr(name.size() - 2) != "__") return false;
  if (std::find(std::begin(kInstructionSets), std::end(kInstructionSets), name) != std::end(kInstructionSets)) {
    return true;
  }
  return std::any_of(std::begin(kInstructionSetPrefixes), std::end(kInstructionSetPrefixes),
                     [&](std::string_view prefix) { return name.substr(0, prefix.size()) == prefix; });
}

}  // namespace

std::map<std::string, std::string> parse_macro_dump(std::string_view dump) {
  std::map<std::string, std::string> macros;
  constexpr std::string_view kDefine = "#define ";
  while (!dump.empty()) {
    const size_t end = std::min(dump.find('\n'), dump.size());
    std::string_view line = dump.substr(0, end);
    dump.remove_prefix(std::min(end + 1, dump.size()));
    if (line.substr(0, kDefine.size()) != kDefine) continue;
    line.remove_prefix(kDefine.size());
    const size_t space = line.find(' ');
    const std::string_view name = line.substr(0, space);
    if (name.empty() || name.find('(') != std::string_view::npos) continue;  // function-like: not a flag's
    macros[std::string(name)] = space == std::string_view::npos ? "" : std::string(line.substr(space + 1));
  }
  return macros;
}

std::vector<std::string> instruction_sets_beyond(const std::map<std::string, std::string>& native,
                                                 const std::map<std::string, std::string>& flagged) {
  std::vector<std::string> beyond;
  for (const auto& [name, value] : flagged) {
    if (names_an_instruction_set(name) && !native.contains(name)) beyond.push_back(name);
  }
  return beyond;  // a std::map's order: sorted
}

std::vector<std::string> relaxed_float_semantics(const std::map<std::string, std::string>& macros) {
  std::vector<std::string> relaxed;
  for (std::string_view name : {"__ASSOCIATIVE_MATH__", "__FAST_MATH__", "__FINITE_MATH_ONLY__", "__NO_SIGNED_ZEROS__",
                                "__RECIPROCAL_MATH__"}) {
    const auto it = macros.find(std::string(name));
    if (it != macros.end() && it->second != "0") relaxed.emplace_back(name);
  }
  return relaxed;
}

}  // namespace fusejit
