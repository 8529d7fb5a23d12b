// `fusejit emit --target cuda`: CUDA C++, PTX and ptxas reports.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/emit_folder.h"
#include "cli/emit_targets.h"
#include "codegen/kernel_names.h"
#include "cost/report.h"
#include "fusejit.h"
#include "fusion/matmul_epilogue.h"
#include "ir/counted.h"
#include "ir/messages.h"
#include "runtime/cuda_row_tuning.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/occupancy.h"

namespace fusejit::cli {
namespace {

// The kernel's theoretical occupancy on the architecture it was compiled
// for; none for a PTX-only compile (no ptxas, so no register count).
std::optional<Occupancy> occupancy_of(const CompiledKernel& c, const CudaKernelSource& k) {
  if (c.ptxas.registers <= 0) return std::nullopt;
  const int cc = cuda_arch_number(c.arch);  // sm_90 -> 90, sm_100 -> 100
  return theoretical_occupancy(sm_limits(cc / 10, cc % 10), k.block_threads * k.rows_per_block, c.ptxas.registers,
                               c.ptxas.shared_bytes);
}

// The --json fields of a generated kernel beside "name", "library" and "epilogue".
constexpr const char* kGeneratedKernelKeys[] = {"source",
                                                "ptx",
                                                "ptxas_report",
                                                "variant",
                                                "access",
                                                "entry",
                                                "arch",
                                                "dropout_seeds",
                                                "compile_ms",
                                                "cache_hit",
                                                "registers",
                                                "spill_bytes",
                                                "shared_bytes",
                                                "block_threads",
                                                "blocks_per_sm",
                                                "occupancy",
                                                "occupancy_limited_by",
                                                "launch_shapes",
                                                "launch_shapes_timed"};

// The launch shapes `run --backend cuda` may launch a row kernel in, as
// threads per row and how many rows ahead it loads, the default
// (this source's) first: the others are compiled and timed against it on
// the kernel's first run where launch_shapes_timed (at 2^24 elements or
// more, runtime/cuda_row_tuning.h). None for a pointwise kernel.
nlohmann::json launch_shapes(const FusionPlan& plan, int index, const CudaKernelSource& source) {
  nlohmann::json shapes = nlohmann::json::array();
  if (source.variant == CudaVariant::kPointwise) return shapes;
  shapes.push_back({{"threads_per_row", source.block_threads}, {"prefetch_rows", source.prefetch_rows}});
  const std::vector<CudaRowShape> candidates = cuda_row_shape_candidates(plan, index, source.access);
  for (size_t i = 1; i < candidates.size(); ++i) {
    const CudaRowShape& c = candidates[i];
    shapes.push_back({{"threads_per_row", c.block_threads > 0 ? c.block_threads : source.block_threads},
                      {"prefetch_rows", c.prefetch_rows}});
  }
  return shapes;
}

}  // namespace

int emit_cuda_target(const EmitOptions& opt) {
  if (absl::Status s = nvrtc_status(); !s.ok()) {
    eprint("fusejit: error: {}\n", status_text(s));
    return 1;
  }
  // A bad --arch is a usage mistake like any bad option value (exit 2, as
  // in `fusejit fuzz`), found before the graph is read or anything written.
  if (absl::Status s = check_cuda_arch(opt.arch); !s.ok()) {
    eprint("fusejit: error: --arch: {}\n", status_text(s));
    return 2;
  }
  const std::optional<Graph> graph = load_graph(opt.file);
  if (!graph) return 1;
  if (absl::Status s = check_dtypes_for_arch(*graph, opt.arch); !s.ok()) {
    eprint("fusejit: error: {}\n", status_text(s));
    return 1;
  }
  // Row-kernel variants follow the persistent limit of the datasheet GPUs.
  const FusionOptions options = fusion_options_for(gpu_device("h100"));
  const FusionPlan plan = opt.unfused ? make_unfused_plan(*graph, options) : make_fused_plan(*graph, options);
  const bool ptxas_runs = !is_virtual_arch(opt.arch);  // else no ptxas report
  std::set<std::string> writing = {"plan.txt"};
  for (const Kernel& kernel : plan.kernels) {
    if (kernel.kind == KernelKind::kMatmul) continue;
    writing.insert({kernel.name + ".cu", kernel.name + ".ptx"});
    if (ptxas_runs) writing.insert(kernel.name + ".ptxas.txt");
  }
  const absl::StatusOr<EmitFolder> folder = open_emit_folder(opt.out, writing, opt.overwrite);
  if (!folder.ok()) {
    eprint("fusejit: error: {}\n", status_text(folder.status()));
    return 1;
  }
  CudaCompileOptions compile_options;
  compile_options.arch = opt.arch;
  nlohmann::json kernels = nlohmann::json::array();
  // Printed once every file is written: a listing means the files are there.
  std::string listing = fmt::format("{} plan of {}: {} -> {}\n", plan.label, graph->source_file(),
                                    counted(std::ssize(plan.kernels), "kernel"), folder_with_slash(opt.out));
  // Every generated kernel first, compiled together (several at a time),
  // then one line per kernel in plan order.
  const CudaAccess access = opt.access == "scalar" ? CudaAccess::kScalar : CudaAccess::kVector;
  std::vector<CudaKernelSource> sources;
  std::vector<CudaSource> programs;
  std::vector<int> indexes;  // of each source's kernel in the plan
  for (int i = 0; i < static_cast<int>(plan.kernels.size()); ++i) {
    if (plan.kernels[i].kind == KernelKind::kMatmul) continue;
    indexes.push_back(i);
    sources.push_back(emit_cuda_kernel(plan, i, access));
    programs.push_back({sources.back().name, sources.back().source});
  }
  // A big plan compiles for seconds: on a terminal, say so meanwhile (the
  // listing comes only once the files are written).
  absl::StatusOr<std::vector<CompiledKernel>> compiled;
  with_progress_line(
      fmt::format("compiling {} with NVRTC for {}...", counted(std::ssize(programs), "kernel"), opt.arch),
      [&] { compiled = compile_cuda_all(programs, compile_options, &KernelCache::global()); });
  if (!compiled.ok()) return fail_emit(*folder, compiled.status());
  // Every file this emit writes, by name: written, then listed in the manifest.
  std::map<std::string, std::string> files = {{"plan.txt", describe(plan)}};
  size_t next = 0;
  const size_t name_width = name_column_width(36, plan.kernels);
  for (const Kernel& kernel : plan.kernels) {
    if (kernel.kind == KernelKind::kMatmul) {
      // cuBLASLt where the GEMM runs an epilogue (where it cannot, at run
      // time, cuBLAS and a generated epilogue kernel do: cuda_backend_matmul.h).
      const std::string epilogue = describe_epilogue(*plan.graph, matmul_epilogue(*plan.graph, kernel));
      const char* library = epilogue.empty() ? "cuBLAS" : "cuBLASLt";
      listing += fmt::format("  {:<{}} library matmul ({}{}), no generated source\n", kernel.name, name_width, library,
                             epilogue.empty() ? "" : ", epilogue " + epilogue);
      // Listed too, so that "kernels" lines up with plan.txt; the fields of
      // generated code are null.
      if (opt.json) {
        nlohmann::json entry = {{"name", kernel.name},
                                {"library", library},
                                {"epilogue", epilogue.empty() ? nlohmann::json() : nlohmann::json(epilogue)}};
        for (const char* key : kGeneratedKernelKeys) entry[key] = nullptr;
        kernels.push_back(std::move(entry));
      }
      continue;
    }
    const CudaKernelSource& source = sources[next];
    const int index = indexes[next];
    const CompiledKernel& c = (*compiled)[next++];
    const std::string cu = kernel.name + ".cu", ptx = kernel.name + ".ptx", report = kernel.name + ".ptxas.txt";
    files[cu] = source.source;
    files[ptx] = c.ptx;
    if (ptxas_runs) files[report] = c.ptxas.log;
    // Without ptxas (a compute_XX target) registers, spills and shared memory are unknown, not 0.
    const bool reported = c.ptxas.registers > 0;
    const int64_t spills = c.ptxas.spill_bytes();
    const std::optional<Occupancy> occupancy = occupancy_of(c, source);
    if (opt.json) {
      const nlohmann::json shapes = launch_shapes(plan, index, source);
      kernels.push_back(
          {{"name", kernel.name},
           {"library", nullptr},
           {"epilogue", nullptr},
           {"source", cu},
           {"ptx", ptx},
           {"ptxas_report", ptxas_runs ? nlohmann::json(report) : nlohmann::json()},
           {"variant", cuda_variant_name(source.variant)},
           {"access", source.access == CudaAccess::kVector ? "vector" : "scalar"},
           {"entry", source.name},
           {"arch", c.arch},
           {"dropout_seeds", emit::dropout_seeds(*plan.graph, kernel)},
           {"compile_ms", c.compile_ms},
           {"cache_hit", c.cache_hit},
           {"registers", reported ? nlohmann::json(c.ptxas.registers) : nlohmann::json()},
           {"spill_bytes", reported ? nlohmann::json(spills) : nlohmann::json()},
           {"shared_bytes", reported ? nlohmann::json(c.ptxas.shared_bytes) : nlohmann::json()},
           {"block_threads", source.block_threads * source.rows_per_block},
           {"blocks_per_sm", occupancy ? nlohmann::json(occupancy->blocks_per_sm) : nlohmann::json()},
           {"occupancy", occupancy ? nlohmann::json(occupancy->fraction) : nlohmann::json()},
           {"occupancy_limited_by", occupancy ? nlohmann::json(occupancy->limited_by) : nlohmann::json()},
           {"launch_shapes", shapes},
           {"launch_shapes_timed", should_autotune(Autotune::kAuto, kernel.iteration.numel(), shapes.size())}});
    } else {
      const std::string resident = occupancy
                                       ? fmt::format("{:>3.0f}% occupancy ({}/SM, by {})", 100 * occupancy->fraction,
                                                     counted(occupancy->blocks_per_sm, "block"), occupancy->limited_by)
                                       : std::string("occupancy unknown (no ptxas report)");
      listing +=
          fmt::format("  {:<{}} {:>8.1f} ms  {:<5} {:>4} registers  {:>4} spill bytes  {}  ({}, {})\n", kernel.name,
                      name_width, c.compile_ms, c.cache_hit ? "hit" : "miss",
                      reported ? std::to_string(c.ptxas.registers) : "-", reported ? std::to_string(spills) : "-",
                      resident, cuda_variant_name(source.variant), cuda_access_name(source.access));
    }
  }
  const std::string report =
      opt.json
          ? nlohmann::json{{"target", "cuda"}, {"plan", plan.label}, {"out", opt.out}, {"kernels", kernels}}.dump(2) +
                "\n"
          : listing;
  return finish_emit(*folder, files, report);
}

}  // namespace fusejit::cli
