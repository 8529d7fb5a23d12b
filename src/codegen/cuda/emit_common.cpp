#include "codegen/cuda/emit_common.h"

#include <fmt/ranges.h>

#include "codegen/cuda/cuda_emitter.h"
#include "codegen/expr.h"

namespace fusejit::cuda_emit {

std::string pointer_params(const std::vector<KernelParam>& params) {
  std::vector<std::string> parts;
  for (const KernelParam& p : params) {
    if (p.kind == ParamKind::kDropoutSeeds) {
      parts.push_back(fmt::format("const fj_dropout_keys<{}> {}", p.dropouts, kDropoutKeysParam));
    } else {
      parts.push_back(
          fmt::format("{}{}* __restrict__ p_{}", p.written ? "" : "const ", storage_type(p.dtype), p.name));
    }
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string pointer_args(const std::vector<KernelParam>& params) {
  std::vector<std::string> parts;
  for (const KernelParam& p : params) {
    parts.push_back(p.kind == ParamKind::kDropoutSeeds ? std::string(kDropoutKeysParam) : "p_" + p.name);
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

void write_dropout_key_locals(SourceWriter& w, const Graph& graph, const Kernel& kernel) {
  const std::vector<int32_t> dropouts = emit::dropout_nodes(graph, kernel);
  for (size_t i = 0; i < dropouts.size(); ++i) {
    w.line("const fj_philox_keys& {} = {}.key[{}];", emit::seed_name(graph.node(dropouts[i])), kDropoutKeysParam, i);
  }
}

void choose_access(CudaKernelSource& out, const Kernel& kernel, CudaAccess requested) {
  out.access = out.has_vector_path ? requested : CudaAccess::kScalar;
  out.name = out.has_vector_path && out.access == CudaAccess::kScalar ? kernel.name + "_scalar" : kernel.name;
}

std::string access_description(const CudaKernelSource& out) {
  if (out.access == CudaAccess::kVector) {
    return fmt::format("{} elements to a thread per step, in 16-byte accesses (the variant for 16-byte aligned "
                       "buffers)",
                       out.vector_width);
  }
  return out.has_vector_path ? "scalar accesses (the variant for buffers that are not 16-byte aligned)"
                             : "scalar accesses";
}

void write_helpers(SourceWriter& w) {
  w.line("{}", kCudaHelpersBegin);
  w.raw(cuda_helpers_source());
  w.line("{}", kCudaHelpersEnd);
}

}  // namespace fusejit::cuda_emit
