// Pieces shared by the CPU kernel emitters.
#pragma once

#include <string>
#include <vector>

#include "codegen/cpu/cpu_emitter.h"
#include "codegen/kernel_names.h"
#include "codegen/source_writer.h"
#include "fusion/cpu_work_split.h"

namespace fusejit::cpu_emit {

using emit::in_kernel;
using emit::kernel_params;
using emit::param_name;
using emit::read_name;
using emit::value_name;
using emit::write_header;

// Whether written tensor `id` is large enough for streaming stores.
bool streams(const Graph& graph, int32_t id);

// Whether a read that varies along the loop is used where it lies instead
// of being converted into an f32 array first: an f32 span already is that
// array, and copying it cost a pointwise f32 add half its bandwidth (the
// copy into a stack array and the loads of the next span alias in the
// store buffer).
inline bool read_in_place(const Graph& graph, int32_t id) { return graph.node(id).dtype == DType::kF32; }

// The helpers between their marker lines.
void write_helpers(SourceWriter& w);
// Opens the kernel's entry point, declares one typed pointer per parameter
// ("const fj_bf16* __restrict p_x = static_cast<const fj_bf16*>(args[0]);")
// and loads the dropout seeds into their locals.
void open_entry(SourceWriter& w, const Graph& graph, const Kernel& kernel, const std::vector<KernelParam>& params);

CpuKernelSource emit_pointwise(const FusionPlan& plan, const Kernel& kernel);
CpuKernelSource emit_row(const FusionPlan& plan, const Kernel& kernel);
CpuKernelSource emit_matmul(const FusionPlan& plan, const Kernel& kernel);

}  // namespace fusejit::cpu_emit
