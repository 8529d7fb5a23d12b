// Joining generated kernels of one target into one translation unit.
//
// Every generated kernel source is complete on its own: it embeds its
// target's helpers between two marker lines. Compiling several kernels in
// one compiler run (the CPU backend's modules, `fusejit fuzz
// --cuda-compile`'s one NVRTC program per plan) pays start-up and header
// parsing once; for that, the helpers go in once and each kernel's own code
// follows in a namespace named after it (extern "C" keeps its entry point's
// name, while its other file-scope names cannot collide with another
// kernel's).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fusejit {

// `source` without the lines from the one holding `begin` through the one
// holding `end` (a kernel's copy of the helpers); `source` unchanged when a
// marker is missing.
std::string without_section(std::string_view source, std::string_view begin, std::string_view end);

// `helpers` between the marker lines `begin` and `end`, then every kernel
// (name, complete source) without its own copy of them, each in namespace
// fj_kernel_NAME.
std::string one_translation_unit(std::string_view begin, std::string_view helpers, std::string_view end,
                                 const std::vector<std::pair<std::string_view, std::string_view>>& kernels);

}  // namespace fusejit
