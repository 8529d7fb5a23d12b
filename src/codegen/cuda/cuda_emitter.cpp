#include "codegen/cuda/cuda_emitter.h"

#include "codegen/cuda/emit_kernels.h"

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

CudaKernelSource emit_cuda_kernel(const FusionPlan& plan, int index) {
  const Kernel& kernel = plan.kernels.at(index);
  return kernel.kind == KernelKind::kRow ? cuda_emit::emit_row(plan, kernel)
                                         : cuda_emit::emit_pointwise(plan, kernel);
}

std::string without_helpers(const std::string& source) {
  const size_t begin = source.find(kCudaHelpersBegin);
  const size_t end = source.find(kCudaHelpersEnd);
  if (begin == std::string::npos || end == std::string::npos) return source;
  size_t after = source.find('\n', end);
  after = after == std::string::npos ? source.size() : after + 1;
  return source.substr(0, begin) + source.substr(after);
}

std::string cuda_plan_program(const FusionPlan& plan) {
  std::string program = fmt::format("{}\n{}\n{}\n", kCudaHelpersBegin, cuda_helpers_source(), kCudaHelpersEnd);
  for (const CudaKernelSource& k : emit_cuda(plan)) {
    program += fmt::format("namespace fj_kernel_{} {{\n{}\n}}  // namespace fj_kernel_{}\n", k.name,
                           without_helpers(k.source), k.name);
  }
  return program;
}

std::vector<CudaKernelSource> emit_cuda(const FusionPlan& plan) {
  std::vector<CudaKernelSource> out;
  for (int i = 0; i < static_cast<int>(plan.kernels.size()); ++i) {
    if (plan.kernels[i].kind != KernelKind::kMatmul) out.push_back(emit_cuda_kernel(plan, i));
  }
  return out;
}

}  // namespace fusejit
