// What every code-generation target names the same way: the parameters,
// registers and values of a kernel, its parameter list, and the comment
// that opens it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/kernel_source.h"
#include "codegen/source_writer.h"

namespace fusejit::emit {

// Names in generated code: p_NAME is a tensor parameter, r_NAME the values
// a read is loaded into, v_NAME a value computed in the kernel, u_NAME the
// 16-bit storage bits of a value (CPU kernels). Graph names are
// identifiers, and the prefixes keep them clear of C++ keywords and of each
// other.
std::string param_name(const Graph& graph, int32_t id);
std::string read_name(const Graph& graph, int32_t id);
std::string value_name(const Graph& graph, int32_t id);
std::string bits_name(const Graph& graph, int32_t id);

bool in_kernel(const Kernel& kernel, int32_t id);
// The kernel's pointer parameters: its reads, then its writes, then (when
// it has dropout ops) the array of their seeds, named kSeedsParam.
std::vector<KernelParam> kernel_params(const FusionPlan& plan, const Kernel& kernel);

// The seeds parameter; tensor parameters all start with "p_".
inline constexpr std::string_view kSeedsParam = "fj_seeds";
// s_NAME: the local that holds a dropout node's seed: on a CPU loaded from
// kSeedsParam, on a GPU its round keys (cuda_emit::write_dropout_key_locals).
std::string seed_name(const Node& dropout);
// The kernel's dropout nodes, in node order: the order of kSeedsParam.
std::vector<int32_t> dropout_nodes(const Graph& graph, const Kernel& kernel);
// The values a launch passes in kSeedsParam: each dropout node's seed attribute.
std::vector<uint64_t> dropout_seeds(const Graph& graph, const Kernel& kernel);
// One `const unsigned long long s_NAME = fj_seeds[i];` per dropout node, at
// the top of the function that computes the kernel's values.
void write_seed_locals(SourceWriter& w, const Graph& graph, const Kernel& kernel);

// rounds_in_kernel (fusion/plan.h): whether the code rounds a node where it
// is computed.
using fusejit::rounds_in_kernel;
// `expression` rounded to the node's dtype when rounds_in_kernel() says so.
std::string as_computed(const Graph& graph, const Kernel& kernel, int32_t id, const std::string& expression);

// A node's statement for a comment in generated code: print_statement(),
// but a dropout's seed, which the code takes as an argument, is named, not
// printed, so that the code does not change with the seed.
std::string statement_comment(const Graph& graph, const Node& node);
// The comment that opens a kernel: what it is and which graph ops it computes.
void write_header(SourceWriter& w, const FusionPlan& plan, const Kernel& kernel, const std::string& summary);

}  // namespace fusejit::emit
