#include "codegen/cpu/cpu_emitter.h"

#include "codegen/cpu/cpu_emit_common.h"
#include "codegen/expr.h"
#include "codegen/translation_unit.h"
#include "fusion/plan_verify.h"
#include "ir/error.h"

namespace fusejit {

std::string_view cpu_variant_name(CpuVariant v) {
  switch (v) {
    case CpuVariant::kPointwise: return "pointwise";
    case CpuVariant::kRow: return "row";
    case CpuVariant::kMatmul: return "matmul";
  }
  return "?";
}

CpuKernelSource emit_cpu_kernel(const FusionPlan& plan, int index) {
  const Kernel& kernel = checked_kernel(plan, index, "emit_cpu_kernel");
  switch (kernel.kind) {
    case KernelKind::kPointwise: return cpu_emit::emit_pointwise(plan, kernel);
    case KernelKind::kRow: return cpu_emit::emit_row(plan, kernel);
    case KernelKind::kMatmul: return cpu_emit::emit_matmul(plan, kernel);
  }
  throw Error("unknown kernel kind");
}

std::vector<CpuKernelSource> emit_cpu(const FusionPlan& plan) {
  std::vector<CpuKernelSource> out;
  for (size_t i = 0; i < plan.kernels.size(); ++i) out.push_back(emit_cpu_kernel(plan, static_cast<int>(i)));
  return out;
}

std::string cpu_module_source(const std::vector<const CpuKernelSource*>& kernels) {
  if (kernels.size() == 1) return kernels[0]->source;
  std::vector<std::pair<std::string_view, std::string_view>> parts;
  for (const CpuKernelSource* k : kernels) parts.emplace_back(k->name, k->source);
  return one_translation_unit(kCpuHelpersBegin, cpu_helpers_source(), kCpuHelpersEnd, parts);
}

namespace cpu_emit {

bool streams(const Graph& graph, int32_t id) { return cpu_streams_output(graph.node(id)); }

static_assert(kCpuStreamBlockElements == kCpuReduceLanes, "the cost model's streamed block is the generator's");

void write_helpers(SourceWriter& w) {
  w.line("{}", kCpuHelpersBegin);
  // A kernel calls a few of the helpers; clang would name every other one
  // when an emitted file is compiled by hand with -Wall.
  w.line("#pragma GCC diagnostic ignored \"-Wunused-function\"");
  w.raw(cpu_helpers_source());
  w.line("{}", kCpuHelpersEnd);
}

void open_entry(SourceWriter& w, const Graph& graph, const Kernel& kernel, const std::vector<KernelParam>& params) {
  // [[maybe_unused]]: pointwise kernels have no scratch, and an emitted file
  // compiled by hand with -Wall -Wextra (fusejit emit --target cpu) should
  // not warn about it.
  w.open(
      "extern \"C\" int {}(void* const* args, long long begin, long long end, [[maybe_unused]] float* __restrict "
      "fj_scratch)",
      kernel.name);
  for (size_t i = 0; i < params.size(); ++i) {
    const KernelParam& p = params[i];
    if (p.kind == ParamKind::kDropoutSeeds) {
      w.line("const unsigned long long* __restrict {} = static_cast<const unsigned long long*>(args[{}]);", p.name, i);
      continue;
    }
    const std::string type = fmt::format("{}{}", p.written ? "" : "const ", storage_type(p.dtype));
    w.line("{0}* __restrict p_{1} = static_cast<{0}*>(args[{2}]);", type, p.name, i);
  }
  emit::write_seed_locals(w, graph, kernel);
}

}  // namespace cpu_emit
}  // namespace fusejit
