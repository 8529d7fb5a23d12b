// Pointwise kernels: a grid-stride loop over the iteration space. The
// vector variant (every pointer 16-byte aligned, the innermost extent a
// multiple of the vector width V) handles V consecutive elements per step
// with 16-byte loads and stores (V elements of one row, so broadcast operands
// are one vector load or one scalar); the scalar variant one element per
// step. Broadcast operands are indexed at their own size, never materialized.
#include <string>
#include <vector>

#include "codegen/cuda/cuda_emitter.h"
#include "codegen/cuda/emit_common.h"
#include "codegen/cuda/emit_kernels.h"
#include "codegen/expr.h"
#include "codegen/tensor_access.h"
#include "fusion/gelu_dropout.h"
#include "fusion/gpu_row_shape.h"
#include "fusion/gpu_vector_width.h"

namespace fusejit::cuda_emit {
namespace {

// The body for one group of kV elements starting at flat index i.
void write_items_function(SourceWriter& w, const FusionPlan& plan, const Kernel& kernel,
                          const std::vector<KernelParam>& params, const std::string& index_type) {
  const Graph& g = *plan.graph;
  w.line("template <int kV, bool kAligned>");
  w.open("__device__ __forceinline__ void {}_items({}, {} i)", kernel.name, pointer_params(params), index_type);
  write_dropout_key_locals(w, g, kernel);
  for (int32_t id : kernel.reads) {
    const Node& n = g.node(id);
    const TensorAccess access = tensor_access(n.shape, kernel.iteration);
    const std::string r = read_name(g, id);
    const std::string offset = element_offset(access, kernel.iteration, "i");
    w.line("float {}[kV];", r);
    if (access.varies_along_row()) {
      // kV consecutive elements of one row are kV consecutive elements of the tensor.
      w.line("fj_load<{}, kV>({} + {}, {}, kAligned);", storage_type(n.dtype), param_name(g, id), offset, r);
    } else {
      w.open("");
      w.line("const float s = fj_to_float({}[{}]);", param_name(g, id), offset);
      w.line("#pragma unroll");
      w.line("for (int e = 0; e < kV; ++e) {}[e] = s;", r);
      w.close();
    }
  }
  auto array_of = [&](const Operand& o) {
    return in_kernel(kernel, o.node) ? value_name(g, o.node) : read_name(g, o.node);
  };
  // Node `id` element by element: "for (int e = 0; e < kV; ++e) v_y[e] = ...;".
  auto element_loop = [&](int32_t id) {
    std::vector<std::string> operands;
    for (const Operand& o : g.node(id).operands) {
      operands.push_back(o.is_literal() ? std::string() : array_of(o) + "[e]");  // node_expression prints literals
    }
    return fmt::format("for (int e = 0; e < kV; ++e) {}[e] = {};", value_name(g, id),
                       as_computed(g, kernel, id, node_expression(g, id, operands, "(unsigned long long)(i + e)")));
  };
  // GeLUs that fold into the dropout that drops them (fusion/gelu_dropout.h):
  // written with it.
  const absl::flat_hash_set<int32_t> folded = gelus_folded_into_dropouts(g, kernel);
  for (int32_t id : kernel.nodes) {
    const Node& n = g.node(id);
    if (folded.contains(id)) continue;
    w.line("float {}[kV];", value_name(g, id));
    if (n.op != Op::kDropout) {
      w.line("#pragma unroll");
      w.line("{}", element_loop(id));
      continue;
    }
    // Vector groups start at multiples of kV (4 or 8): one Philox call per
    // 8 elements where a thread holds 8 (16-bit data), else per 4. A GeLU
    // that folds into the dropout is computed with it from its own operand
    // in groups of 8, and on its own before the dropout otherwise.
    const std::string out = value_name(g, id) + " + e", index = "(unsigned long long)(i + e)";
    const int32_t gelu = gelu_folded_into_dropout(g, kernel, id);
    if (gelu >= 0) {
      w.open("if constexpr (kV % 8 == 0)");
      w.line("#pragma unroll");
      w.line("for (int e = 0; e < kV; e += 8) {};  // computes {} too",
             gelu_dropout_vector_call(n, array_of(g.node(gelu).operands[0]) + " + e", out, index),
             statement_comment(g, g.node(gelu)));
      w.close();
      w.open("else");
      w.line("float {}[kV];", value_name(g, gelu));
      w.line("#pragma unroll");
      w.line("{}", element_loop(gelu));
    }
    for (int width : {8, 4}) {
      if (gelu >= 0 && width == 8) continue;
      w.open("{}if constexpr (kV % {} == 0)", width == 8 || gelu >= 0 ? "" : "else ", width);
      w.line("#pragma unroll");
      w.line("for (int e = 0; e < kV; e += {}) {};", width,
             dropout_vector_call(n, width, array_of(n.operands[0]) + " + e", out, index));
      w.close();
    }
    w.open("else");
    w.line("#pragma unroll");
    w.line("{}", element_loop(id));
    w.close();
    if (gelu >= 0) w.close();
    if (rounds_in_kernel(g, kernel, id)) {
      w.line("#pragma unroll");
      w.line("for (int e = 0; e < kV; ++e) {0}[e] = fj_round_{1}({0}[e]);", value_name(g, id), dtype_name(n.dtype));
    }
  }
  for (int32_t id : kernel.writes) {
    w.line("fj_store<{}, kV>({} + i, {}, kAligned);", storage_type(g.node(id).dtype), param_name(g, id),
           value_name(g, id));
  }
  w.close();
}

}  // namespace

CudaKernelSource emit_pointwise(const FusionPlan& plan, const Kernel& kernel, CudaAccess access) {
  CudaKernelSource out;
  out.variant = CudaVariant::kPointwise;
  out.params = kernel_params(plan, kernel);
  out.count = cuda_launch_count(kernel);
  out.vector_width = gpu_vector_width(*plan.graph, kernel);
  out.has_vector_path = gpu_has_vector_path(*plan.graph, kernel);
  choose_access(out, kernel, access);
  out.block_threads = kGpuPointwiseBlockThreads;
  // 64-bit indices once a 32-bit index could pass 2^31 - 1, the grid stride included.
  out.index_64bit = out.count >= (int64_t{1} << 31) - (int64_t{1} << 26);
  const std::string index_type = out.index_64bit ? "long long" : "int";

  SourceWriter w;
  // Nothing in the source names the element count (an argument), so one
  // compiled kernel serves every batch size: a plan of the same graph with
  // more rows is a cache hit.
  write_header(w, plan, kernel,
               fmt::format("pointwise over rank-{} tensors with rows of {} (the element count is an argument), {}",
                           kernel.iteration.rank(), kernel.iteration.last(), access_description(out)));
  write_helpers(w);
  w.blank();
  write_items_function(w, plan, kernel, out.params, index_type);
  w.blank();
  w.line("extern \"C\" __global__ void __launch_bounds__({})", out.block_threads);
  w.open("{}({}, long long count)", out.name, pointer_params(out.params));
  w.line("const {0} n = ({0})count;", index_type);
  w.line("const {0} stride = ({0})gridDim.x * blockDim.x;", index_type);
  w.line("const {0} first = ({0})blockIdx.x * blockDim.x + threadIdx.x;", index_type);
  if (out.access == CudaAccess::kVector) {
    w.line("constexpr int kVec = {};", out.vector_width);
    w.line("for ({} g = first; g < n / kVec; g += stride) {}_items<kVec, true>({}, g * kVec);", index_type,
           kernel.name, pointer_args(out.params));
  } else {
    w.line("for ({} i = first; i < n; i += stride) {}_items<1, false>({}, i);", index_type, kernel.name,
           pointer_args(out.params));
  }
  w.close();
  out.source = w.text();
  return out;
}

}  // namespace fusejit::cuda_emit
