// Pieces shared by the pointwise and row kernel emitters.
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel_source.h"
#include "codegen/source_writer.h"

namespace fusejit::cuda_emit {

// Names in generated code: p_NAME is a tensor parameter, r_NAME the
// registers a read is loaded into, v_NAME a value computed in the kernel.
// Graph names are identifiers, and the prefixes keep them clear of C++
// keywords and of each other.
std::string param_name(const Graph& graph, int32_t id);
std::string read_name(const Graph& graph, int32_t id);
std::string value_name(const Graph& graph, int32_t id);

std::vector<KernelParam> kernel_params(const FusionPlan& plan, const Kernel& kernel);
// "const fj_bf16* __restrict__ p_x, ..., fj_bf16* __restrict__ p_y"
std::string pointer_params(const std::vector<KernelParam>& params);
// "p_x, ..., p_y"
std::string pointer_args(const std::vector<KernelParam>& params);
// Elements per 16-byte access of the narrowest tensor the kernel reads or writes.
int vector_width(const Graph& graph, const Kernel& kernel);
bool in_kernel(const Kernel& kernel, int32_t id);

// The device helpers, between marker lines (kHelpersBegin, kHelpersEnd)
// so that golden-file tests can leave them out.
void write_helpers(SourceWriter& w);

// The comment that opens a kernel: what it is and which graph ops it computes.
void write_header(SourceWriter& w, const FusionPlan& plan, const Kernel& kernel, const std::string& summary);

}  // namespace fusejit::cuda_emit
