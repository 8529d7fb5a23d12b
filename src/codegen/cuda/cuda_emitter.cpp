#include "codegen/cuda/cuda_emitter.h"

#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "codegen/cuda/emit_kernels.h"
#include "codegen/translation_unit.h"
#include "fusion/matmul_epilogue.h"
#include "fusion/plan_verify.h"
#include "ir/builder.h"
#include "ir/error.h"

namespace fusejit {

std::string_view cuda_variant_name(CudaVariant v) {
  switch (v) {
    case CudaVariant::kPointwise: return "pointwise";
    case CudaVariant::kWarpPerRow: return "warp per row";
    case CudaVariant::kBlockPerRow: return "block per row";
    case CudaVariant::kReread: return "block per row, re-reading";
  }
  return "?";
}

std::string_view cuda_access_name(CudaAccess a) {
  return a == CudaAccess::kVector ? "16-byte accesses" : "scalar accesses";
}

CudaMatmulEpilogue emit_cuda_matmul_epilogue(const FusionPlan& plan, int index, CudaAccess access) {
  const Kernel& kernel = checked_kernel(plan, index, "emit_cuda_matmul_epilogue");
  const Graph& g = *plan.graph;
  const MatmulEpilogue epilogue = matmul_epilogue(g, kernel);
  if (epilogue.empty()) {
    throw Error(fmt::format("emit_cuda_matmul_epilogue: kernel {} has no matmul epilogue", kernel.name));
  }
  // A graph of its own: the product an f32 input, the epilogue's ops in
  // f32 under their own names, then the one rounding to the output's dtype.
  const Node& mm = g.node(kernel.nodes.front());
  const Node& last = g.node(kernel.nodes.back());
  auto e = std::make_shared<Graph>();
  std::map<std::string, int32_t> original = {{mm.name, kernel.nodes.front()}, {last.name, kernel.nodes.back()}};
  Value v = e->input(mm.name, DType::kF32, mm.shape);
  std::optional<Value> bias;
  if (epilogue.bias >= 0) {
    const Node& b = g.node(epilogue.bias);
    bias = e->input(b.name, b.dtype, b.shape);
    original[b.name] = epilogue.bias;
  }
  for (size_t i = 1; i < kernel.nodes.size(); ++i) {
    const Node& n = g.node(kernel.nodes[i]);
    std::vector<Arg> args;
    for (const Operand& o : n.operands) args.emplace_back(o.node == epilogue.bias ? *bias : v);
    v = apply(n.op, std::span<const Arg>(args), n.attrs);
    e->rename(v.id(), i + 1 < kernel.nodes.size() || last.dtype != DType::kF32 ? n.name + "_f32" : n.name);
  }
  if (last.dtype != DType::kF32) v = cast(v, last.dtype);
  e->output(last.name, v);
  FusionPlan alone = make_fused_plan(*e);
  if (alone.kernels.size() != 1) {
    throw Error(fmt::format("emit_cuda_matmul_epilogue: the epilogue of kernel {} made {} kernels", kernel.name,
                            alone.kernels.size()));
  }
  alone.label = plan.label;
  alone.kernels[0].name = kernel.name + "_epilogue";
  CudaMatmulEpilogue out;
  out.source = emit_cuda_kernel(alone, 0, access);
  for (const KernelParam& p : out.source.params) {
    if (p.kind == ParamKind::kTensor) out.tensors.push_back(original.at(alone.graph->node(p.node).name));
  }
  return out;
}

int64_t cuda_launch_count(const Kernel& kernel) {
  const int64_t elements = kernel.iteration.numel();
  if (kernel.kind != KernelKind::kRow) return elements;
  const int64_t n = kernel.iteration.last();
  return n == 0 ? 0 : elements / n;
}

CudaKernelSource emit_cuda_kernel(const FusionPlan& plan, int index, CudaAccess access, const CudaRowShape& shape) {
  const Kernel& kernel = checked_kernel(plan, index, "emit_cuda_kernel");
  if (kernel.kind == KernelKind::kMatmul) {
    throw Error(fmt::format("emit_cuda_kernel: kernel {} is a matmul, which runs through cuBLAS and has no source",
                            kernel.name));
  }
  return kernel.kind == KernelKind::kRow ? cuda_emit::emit_row(plan, kernel, access, shape)
                                         : cuda_emit::emit_pointwise(plan, kernel, access);
}

std::vector<CudaRowShape> cuda_row_shape_candidates(const FusionPlan& plan, int index, CudaAccess access) {
  const Kernel& kernel = checked_kernel(plan, index, "cuda_row_shape_candidates");
  if (kernel.kind != KernelKind::kRow) return {};
  return cuda_emit::row_shape_candidates(plan, kernel, access);
}

std::string cuda_launch_shape(const CudaKernelSource& kernel) {
  switch (kernel.variant) {
    case CudaVariant::kPointwise: return fmt::format("{} threads per block", kernel.block_threads);
    case CudaVariant::kWarpPerRow:
      if (kernel.block_threads < 32) {
        return fmt::format("{} threads per row, {} rows per warp, {} per block", kernel.block_threads,
                           32 / kernel.block_threads, kernel.rows_per_block);
      }
      return fmt::format("a warp per row, {} rows per block", kernel.rows_per_block);
    case CudaVariant::kBlockPerRow:
    case CudaVariant::kReread: break;
  }
  return fmt::format("{} threads per row{}", kernel.block_threads,
                     kernel.prefetch_rows == 1  ? ", next row prefetched"
                     : kernel.prefetch_rows > 1 ? fmt::format(", next {} rows prefetched", kernel.prefetch_rows)
                                                : "");
}

std::string without_helpers(const std::string& source) {
  return without_section(source, kCudaHelpersBegin, kCudaHelpersEnd);
}

std::string cuda_plan_program(const std::vector<CudaKernelSource>& kernels) {
  std::vector<std::pair<std::string_view, std::string_view>> parts;
  for (const CudaKernelSource& k : kernels) parts.emplace_back(k.name, k.source);
  return one_translation_unit(kCudaHelpersBegin, cuda_helpers_source(), kCudaHelpersEnd, parts);
}

std::vector<CudaKernelSource> emit_cuda(const FusionPlan& plan, CudaAccess access) {
  std::vector<CudaKernelSource> out;
  for (int i = 0; i < static_cast<int>(plan.kernels.size()); ++i) {
    if (plan.kernels[i].kind != KernelKind::kMatmul) out.push_back(emit_cuda_kernel(plan, i, access));
  }
  return out;
}

}  // namespace fusejit
