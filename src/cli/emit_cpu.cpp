// `fusejit emit --target cpu`: the C++ the CPU backend compiles, one
// self-contained translation unit per kernel (helpers included), each
// compiled by the host compiler with the backend's flags, through the
// kernel cache. Most machines that run fusejit have no GPU: this is where
// their users read what fusion made of their graph.
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <absl/strings/str_join.h>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/emit_folder.h"
#include "cli/emit_targets.h"
#include "codegen/cpu/cpu_emitter.h"
#include "codegen/kernel_names.h"
#include "cost/report.h"
#include "fusejit.h"
#include "ir/counted.h"
#include "ir/messages.h"
#include "runtime/host_compiler.h"
#include "runtime/work_queue.h"

namespace fusejit::cli {
namespace {

struct CpuCompile {
  double compile_ms = 0;
  bool cache_hit = false;
};

// Each kernel compiled on its own (as one module), as many at a time as
// there are usable cores: the host compiler is a process per module. The
// first failure is the result (its report names the kernel and holds the
// compiler's output).
absl::StatusOr<std::vector<CpuCompile>> compile_each(const std::vector<CpuKernelSource>& sources) {
  std::vector<CpuCompile> compiled(sources.size());
  std::vector<absl::Status> status(sources.size());
  run_jobs(sources.size(), 0, [&](size_t i) {
    absl::StatusOr<std::unique_ptr<HostModule>> m =
        compile_host_module(sources[i].name, sources[i].source, {sources[i].name}, &KernelCache::global());
    if (m.ok()) {
      compiled[i] = {(*m)->compile_ms(), (*m)->cache_hit()};
    } else {
      status[i] = m.status();
    }
  });
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  return compiled;
}

// "4096 rows of 1024", "33554432 elements": what one run of the kernel
// divides among the threads.
std::string work_items(const CpuKernelSource& k, const Kernel& kernel) {
  switch (k.variant) {
    case CpuVariant::kPointwise: return counted(k.count, "element");
    case CpuVariant::kRow: return fmt::format("{} of {}", counted(k.count, "row"), kernel.iteration.last());
    case CpuVariant::kMatmul: return fmt::format("{} of the result", counted(k.count, "row"));
  }
  return "?";
}

}  // namespace

int emit_cpu_target(const EmitOptions& opt) {
  const std::optional<Graph> graph = load_graph(opt.file);
  if (!graph) return 1;
  const absl::StatusOr<HostCompiler> compiler = find_host_compiler();
  if (!compiler.ok()) {
    eprint("fusejit: error: {}\n", status_text(compiler.status()));
    return 1;
  }
  // Row-kernel choices follow this CPU's caches, as the CPU backend's do.
  const FusionOptions options = fusion_options_for(cpu_identity());
  const FusionPlan plan = opt.unfused ? make_unfused_plan(*graph, options) : make_fused_plan(*graph, options);
  std::set<std::string> writing = {"plan.txt"};
  for (const Kernel& kernel : plan.kernels) writing.insert(kernel.name + ".cpp");
  const absl::StatusOr<EmitFolder> folder = open_emit_folder(opt.out, writing, opt.overwrite);
  if (!folder.ok()) {
    eprint("fusejit: error: {}\n", status_text(folder.status()));
    return 1;
  }
  // Every kernel is generated C++ on the CPU, matmuls included.
  const std::vector<CpuKernelSource> sources = emit_cpu(plan);
  const std::string compiler_name = absl::StrJoin(compiler->command, " ");
  absl::StatusOr<std::vector<CpuCompile>> compiled;
  with_progress_line(fmt::format("compiling {} with {}...", counted(std::ssize(sources), "kernel"), compiler_name),
                     [&] { compiled = compile_each(sources); });
  if (!compiled.ok()) return fail_emit(*folder, compiled.status());
  const std::vector<std::string> flags = host_compile_flags();
  std::map<std::string, std::string> files = {{"plan.txt", describe(plan)}};
  nlohmann::json kernels = nlohmann::json::array();
  // Printed once every file is written: a listing means the files are there.
  // The command, so that a kernel file can be compiled again by hand.
  std::string listing =
      fmt::format("{} plan of {}: {} -> {}\n  host compiler: {}, run as `{} {}`\n", plan.label, graph->source_file(),
                  counted(std::ssize(plan.kernels), "kernel"), folder_with_slash(opt.out), compiler->identity,
                  compiler_name, absl::StrJoin(flags, " "));
  const size_t name_width = name_column_width(36, plan.kernels);
  for (size_t i = 0; i < sources.size(); ++i) {
    const CpuKernelSource& source = sources[i];
    const Kernel& kernel = plan.kernels[i];
    const CpuCompile& c = (*compiled)[i];
    const std::string file = kernel.name + ".cpp";
    files[file] = source.source;
    const int64_t scratch_bytes = source.scratch_floats * static_cast<int64_t>(sizeof(float));
    if (opt.json) {
      kernels.push_back({{"name", kernel.name},
                         {"library", nullptr},
                         {"source", file},
                         {"variant", cpu_variant_name(source.variant)},
                         {"entry", source.name},
                         {"dropout_seeds", emit::dropout_seeds(*plan.graph, kernel)},
                         {"compile_ms", c.compile_ms},
                         {"cache_hit", c.cache_hit},
                         {"work_items", source.count},
                         {"grain", source.grain},
                         {"scratch_bytes_per_thread", scratch_bytes}});
    } else {
      const std::string scratch = scratch_bytes == 0 ? ""
                                  : scratch_bytes < 1 << 20
                                      ? fmt::format(", {:.1f} KiB of arrays per thread", scratch_bytes / 1024.0)
                                      : fmt::format(", {:.1f} MiB of arrays per thread", scratch_bytes / 1048576.0);
      listing += fmt::format("  {:<{}} {:>8.1f} ms  {:<5} ({}, {}{})\n", kernel.name, name_width, c.compile_ms,
                             c.cache_hit ? "hit" : "miss", cpu_variant_name(source.variant), work_items(source, kernel),
                             scratch);
    }
  }
  const std::string report =
      opt.json ? nlohmann::json{{"target", "cpu"},
                                {"plan", plan.label},
                                {"out", opt.out},
                                {"compiler",
                                 {{"command", compiler->command}, {"identity", compiler->identity}, {"flags", flags}}},
                                {"kernels", kernels}}
                         .dump(2) +
                     "\n"
               : listing;
  return finish_emit(*folder, files, report);
}

}  // namespace fusejit::cli
