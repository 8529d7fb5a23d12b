// Pieces shared by the pointwise and row kernel emitters.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "codegen/kernel_names.h"
#include "codegen/kernel_source.h"
#include "codegen/source_writer.h"

namespace fusejit::cuda_emit {

using emit::as_computed;
using emit::in_kernel;
using emit::kernel_params;
using emit::param_name;
using emit::read_name;
using emit::rounds_in_kernel;
using emit::statement_comment;
using emit::value_name;
using emit::write_header;

// The parameter that holds a CUDA kernel's dropout keys (ParamKind::kDropoutSeeds).
inline constexpr std::string_view kDropoutKeysParam = "fj_keys";

// "const fj_bf16* __restrict__ p_x, ..., fj_bf16* __restrict__ p_y", then
// "const fj_dropout_keys<N> fj_keys" for a kernel with N dropout ops
std::string pointer_params(const std::vector<KernelParam>& params);
// "p_x, ..., p_y" (", fj_keys")
std::string pointer_args(const std::vector<KernelParam>& params);
// One `const fj_philox_keys& s_NAME = fj_keys.key[i];` per dropout node, at
// the top of the function that computes the kernel's values.
void write_dropout_key_locals(SourceWriter& w, const Graph& graph, const Kernel& kernel);

// Sets out.access (kScalar where out.has_vector_path is false, else
// `requested`) and out.name (the kernel's name, "_scalar" added for the
// scalar variant of a kernel that has both).
void choose_access(CudaKernelSource& out, const Kernel& kernel, CudaAccess requested);
// For the kernel's header comment: "8 elements to a thread per step, in
// 16-byte accesses (the variant for 16-byte aligned buffers)" (an f32
// thread with 8 takes two accesses per tensor), or what the scalar variant
// is for.
std::string access_description(const CudaKernelSource& out);

// The device helpers, between marker lines (kHelpersBegin, kHelpersEnd)
// so that golden-file tests can leave them out.
void write_helpers(SourceWriter& w);

}  // namespace fusejit::cuda_emit
