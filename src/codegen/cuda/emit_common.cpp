#include "codegen/cuda/emit_common.h"

#include <algorithm>

#include <fmt/ranges.h>

#include "codegen/cuda/cuda_emitter.h"
#include "codegen/expr.h"

namespace fusejit::cuda_emit {

std::string pointer_params(const std::vector<KernelParam>& params) {
  std::vector<std::string> parts;
  for (const KernelParam& p : params) {
    parts.push_back(fmt::format("{}{}* __restrict__ p_{}", p.written ? "" : "const ", storage_type(p.dtype), p.name));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string pointer_args(const std::vector<KernelParam>& params) {
  std::vector<std::string> parts;
  for (const KernelParam& p : params) parts.push_back("p_" + p.name);
  return fmt::format("{}", fmt::join(parts, ", "));
}

int vector_width(const Graph& graph, const Kernel& kernel) {
  int64_t narrowest = 4;
  auto consider = [&](int32_t id) { narrowest = std::min(narrowest, dtype_size(graph.node(id).dtype)); };
  for (int32_t id : kernel.reads) consider(id);
  for (int32_t id : kernel.writes) consider(id);
  return static_cast<int>(16 / narrowest);
}

void write_helpers(SourceWriter& w) {
  w.line("{}", kCudaHelpersBegin);
  w.raw(cuda_helpers_source());
  w.line("{}", kCudaHelpersEnd);
}

}  // namespace fusejit::cuda_emit
