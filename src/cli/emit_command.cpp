#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include <absl/strings/str_join.h>

#include <fmt/format.h>

#include "cli/commands.h"
#include "codegen/kernel_names.h"
#include "cost/report.h"
#include "fusejit.h"
#include "ir/counted.h"
#include "runtime/file_io.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/occupancy.h"
#include "runtime/sha256.h"
#include "runtime/warnings.h"

namespace fusejit::cli {
namespace {

struct EmitOptions {
  std::string file;
  std::string target = "cuda";
  std::string arch = "sm_90";
  std::string out = "fusejit-kernels";
  std::string access = "vector";
  bool unfused = false;
  bool json = false;
  bool overwrite = false;
};

// The kernel's theoretical occupancy on the architecture it was compiled
// for; none for a PTX-only compile (no ptxas, so no register count).
std::optional<Occupancy> occupancy_of(const CompiledKernel& c, const CudaKernelSource& k) {
  if (c.ptxas.registers <= 0) return std::nullopt;
  const int cc = cuda_arch_number(c.arch);  // sm_90 -> 90, sm_100 -> 100
  return theoretical_occupancy(sm_limits(cc / 10, cc % 10), k.block_threads * k.rows_per_block, c.ptxas.registers,
                               c.ptxas.shared_bytes);
}

// Every emit lists the files it wrote in this manifest, with each one's
// SHA-256, so that a later emit into the folder removes only files an emit
// wrote and nobody changed since, never a user's file that merely has a
// kernel-like name or an emitted kernel the user edited.
constexpr const char* kManifest = "emitted.txt";
constexpr const char* kManifestHeader =
    "# Files written by `fusejit emit` into this folder (SHA-256, name); a later `fusejit emit --overwrite` "
    "replaces them, or removes those its plan lacks unless they changed.";

std::string sha256_hex(std::string_view data) { return Sha256().update(data).hex_digest(); }

// The files the earlier emit into `dir` wrote (name -> SHA-256), from its
// manifest; empty when there is none (or the file of that name is not one).
std::map<std::string, std::string> earlier_emit(const std::filesystem::path& dir) {
  std::map<std::string, std::string> files;
  std::ifstream in(dir / kManifest);
  std::string line;
  if (!std::getline(in, line) || line != kManifestHeader) return files;
  while (std::getline(in, line)) {
    // "HEX  NAME", as sha256sum writes it.
    if (line.size() < 67 || line.compare(64, 2, "  ") != 0) continue;
    files.emplace(line.substr(66), line.substr(0, 64));
  }
  return files;
}

// What an emit into `dir` changes besides the files it writes.
struct OutDir {
  // An earlier emit's files that this plan lacks: removed after a successful
  // emit if their content is still what that emit wrote (name -> SHA-256).
  std::map<std::string, std::string> stale;
};

// Before anything is compiled or written: the files `writing` would replace
// in `dir`, and an earlier emit's files that would be left beside the new
// ones, are an error unless --overwrite.
absl::StatusOr<OutDir> prepare_out_dir(const std::filesystem::path& dir, const std::set<std::string>& writing,
                                       bool overwrite) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(fmt::format("--out {}: exists and is not a directory", dir.string()));
  }
  OutDir out;
  std::vector<std::string> replaced;
  bool all_emitted = true;
  if (std::filesystem::is_directory(dir, ec)) {
    const std::map<std::string, std::string> earlier = earlier_emit(dir);
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name == kManifest && !earlier.empty()) {
        continue;  // the earlier emit's manifest: bookkeeping, rewritten below
      } else if (writing.count(name) != 0) {
        replaced.push_back(name);
        all_emitted = all_emitted && earlier.count(name) != 0;
      } else if (auto it = earlier.find(name); it != earlier.end() && entry.is_regular_file(ec)) {
        out.stale.emplace(name, it->second);
      }
    }
  }
  std::sort(replaced.begin(), replaced.end());
  if (!overwrite && (!replaced.empty() || !out.stale.empty())) {
    std::vector<std::string> all = replaced;
    for (const auto& [name, hash] : out.stale) all.push_back(name);
    const size_t shown = std::min<size_t>(all.size(), 4);
    return absl::AlreadyExistsError(fmt::format(
        "--out {}: holds {}{}{}; pass --overwrite to replace {} (an earlier emit's other kernels are then "
        "removed) or choose another --out",
        dir.string(), absl::StrJoin(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
        all.size() > shown ? fmt::format(" and {} more", all.size() - shown) : "",
        all_emitted ? " from an earlier emit" : "", all.size() == 1 ? "it" : "them"));
  }
  return out;
}

// After this emit wrote its files: removes the earlier emit's files it
// lacks, except those changed since that emit wrote them (kept, and named).
void remove_stale(const std::filesystem::path& dir, const OutDir& out) {
  std::vector<std::string> removed, kept;
  for (const auto& [name, hash] : out.stale) {
    const absl::StatusOr<std::string> content = read_whole_file((dir / name).string());
    if (!content.ok() || sha256_hex(*content) != hash) {
      kept.push_back(name);
      continue;
    }
    std::error_code ec;
    if (std::filesystem::remove(dir / name, ec) && !ec) {
      removed.push_back(name);
    } else {
      kept.push_back(name);
    }
  }
  if (!removed.empty()) {
    eprint("fusejit: removed {} of an earlier emit from {}: {}\n", counted(std::ssize(removed), "file"), dir.string(),
           absl::StrJoin(removed, ", "));
  }
  if (!kept.empty()) {
    warn(fmt::format("--out {}: kept {} of an earlier emit that this plan lacks, since {} changed after that emit "
                     "wrote {} (or could not be removed): {}",
                     dir.string(), counted(std::ssize(kept), "file"), kept.size() == 1 ? "it" : "they",
                     kept.size() == 1 ? "it" : "them", absl::StrJoin(kept, ", ")));
  }
}

// The --json fields of a generated kernel beside "name" and "library".
constexpr const char* kGeneratedKernelKeys[] = {
    "source",   "ptx",         "ptxas_report", "variant",      "access",        "entry",
    "arch",     "dropout_seeds", "compile_ms", "cache_hit",    "registers",     "spill_bytes",
    "shared_bytes", "block_threads", "blocks_per_sm", "occupancy", "occupancy_limited_by"};

int emit(const EmitOptions& opt) {
  const std::optional<Graph> graph = load_graph(opt.file);
  if (!graph) return 1;
  if (absl::Status s = nvrtc_status(); !s.ok()) {
    eprint("fusejit: error: {}\n", status_text(s));
    return 1;
  }
  // A bad --arch is a typo, found before anything is written.
  if (absl::Status s = check_cuda_arch(opt.arch); !s.ok()) {
    eprint("fusejit: error: --arch: {}\n", status_text(s));
    return 1;
  }
  if (absl::Status s = check_dtypes_for_arch(*graph, opt.arch); !s.ok()) {
    eprint("fusejit: error: {}\n", status_text(s));
    return 1;
  }
  // Row-kernel variants follow the persistent limit of the datasheet GPUs.
  const FusionOptions options = fusion_options_for(gpu_device("h100"));
  const FusionPlan plan = opt.unfused ? make_unfused_plan(*graph, options) : make_fused_plan(*graph, options);
  const std::filesystem::path dir(opt.out);
  const bool ptxas_runs = !is_virtual_arch(opt.arch);  // else no ptxas report
  std::set<std::string> writing = {"plan.txt", kManifest};
  for (const Kernel& kernel : plan.kernels) {
    if (kernel.kind == KernelKind::kMatmul) continue;
    writing.insert({kernel.name + ".cu", kernel.name + ".ptx"});
    if (ptxas_runs) writing.insert(kernel.name + ".ptxas.txt");
  }
  const absl::StatusOr<OutDir> out_dir = prepare_out_dir(dir, writing, opt.overwrite);
  if (!out_dir.ok()) {
    eprint("fusejit: error: {}\n", status_text(out_dir.status()));
    return 1;
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    eprint("fusejit: error: --out {}: cannot create the directory: {}\n", opt.out, ec.message());
    return 1;
  }
  // Found before minutes of compiling rather than after.
  if (absl::Status s = check_can_create_files(opt.out); !s.ok()) {
    eprint("fusejit: error: --out: {}\n", status_text(s));
    return 1;
  }
  CudaCompileOptions compile_options;
  compile_options.arch = opt.arch;
  nlohmann::json kernels = nlohmann::json::array();
  // Printed once every file is written: a listing means the files are there.
  std::string listing = fmt::format("{} plan of {}: {} -> {}/\n", plan.label, graph->source_file(),
                                    counted(std::ssize(plan.kernels), "kernel"), opt.out);
  // Every generated kernel first, compiled together (several at a time),
  // then one line per kernel in plan order.
  const CudaAccess access = opt.access == "scalar" ? CudaAccess::kScalar : CudaAccess::kVector;
  std::vector<CudaKernelSource> sources;
  std::vector<CudaSource> programs;
  for (int i = 0; i < static_cast<int>(plan.kernels.size()); ++i) {
    if (plan.kernels[i].kind == KernelKind::kMatmul) continue;
    sources.push_back(emit_cuda_kernel(plan, i, access));
    programs.push_back({sources.back().name, sources.back().source});
  }
  // A big plan compiles for seconds: on a terminal, say so meanwhile (the
  // listing comes only once the files are written). Warnings given meanwhile
  // (an unwritable cache) are held until the line is cleared, or they would
  // be printed onto it.
  const bool tty = isatty(STDERR_FILENO) != 0;
  std::vector<std::string> held_warnings;
  absl::StatusOr<std::vector<CompiledKernel>> compiled;
  {
    std::optional<ScopedWarningSink> hold;
    if (tty) {
      hold.emplace();
      eprint("compiling {} with NVRTC for {}...", counted(std::ssize(programs), "kernel"), opt.arch);
    }
    compiled = compile_cuda_all(programs, compile_options, &KernelCache::global());
    if (tty) {
      eprint("\r\033[K");
      held_warnings = hold->messages();
    }
  }
  for (const std::string& w : held_warnings) warn(w);
  if (!compiled.ok()) {
    eprint("fusejit: error: {}\n", status_text(compiled.status()));
    return 1;
  }
  // Every file this emit writes, by name: written, then listed in the manifest.
  std::map<std::string, std::string> files = {{"plan.txt", describe(plan)}};
  size_t next = 0;
  const size_t name_width = name_column_width(36, plan.kernels);
  for (const Kernel& kernel : plan.kernels) {
    if (kernel.kind == KernelKind::kMatmul) {
      listing += fmt::format("  {:<{}} library matmul (cuBLAS), no generated source\n", kernel.name, name_width);
      // Listed too, so that "kernels" lines up with plan.txt; the fields of
      // generated code are null.
      if (opt.json) {
        nlohmann::json entry = {{"name", kernel.name}, {"library", "cuBLAS"}};
        for (const char* key : kGeneratedKernelKeys) entry[key] = nullptr;
        kernels.push_back(std::move(entry));
      }
      continue;
    }
    const CudaKernelSource& source = sources[next];
    const CompiledKernel& c = (*compiled)[next++];
    const std::string cu = kernel.name + ".cu", ptx = kernel.name + ".ptx", report = kernel.name + ".ptxas.txt";
    files[cu] = source.source;
    files[ptx] = c.ptx;
    if (ptxas_runs) files[report] = c.ptxas.log;
    // Without ptxas (a compute_XX target) registers, spills and shared memory are unknown, not 0.
    const bool reported = c.ptxas.registers > 0;
    const int64_t spills = c.ptxas.spill_store_bytes + c.ptxas.spill_load_bytes;
    const std::optional<Occupancy> occupancy = occupancy_of(c, source);
    if (opt.json) {
      kernels.push_back(
          {{"name", kernel.name},
           {"library", nullptr},
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
           {"occupancy_limited_by", occupancy ? nlohmann::json(occupancy->limited_by) : nlohmann::json()}});
    } else {
      const std::string resident =
          occupancy ? fmt::format("{:>3.0f}% occupancy ({} blocks/SM, by {})", 100 * occupancy->fraction,
                                  occupancy->blocks_per_sm, occupancy->limited_by)
                    : std::string("occupancy unknown (no ptxas report)");
      listing +=
          fmt::format("  {:<{}} {:>8.1f} ms  {:<5} {:>4} registers  {:>4} spill bytes  {}  ({}, {})\n", kernel.name,
                      name_width, c.compile_ms, c.cache_hit ? "hit" : "miss",
                      reported ? std::to_string(c.ptxas.registers) : "-", reported ? std::to_string(spills) : "-",
                      resident, cuda_variant_name(source.variant), cuda_access_name(source.access));
    }
  }
  // The kernels and the manifest as one group (replace_files): should a
  // write fail (a full disk), the folder stays as it was, earlier manifest
  // included, and no listing is printed. Then what the earlier emit wrote
  // that this plan lacks is removed.
  std::string manifest = std::string(kManifestHeader) + "\n";
  std::map<std::string, std::string_view> paths;  // path -> content
  for (const auto& [name, text] : files) {
    manifest += fmt::format("{}  {}\n", sha256_hex(text), name);
    paths[(dir / name).string()] = text;
  }
  paths[(dir / kManifest).string()] = manifest;
  if (absl::Status s = replace_files(paths); !s.ok()) {
    eprint("fusejit: error: --out {}: {}\n", opt.out, status_text(s));
    return 1;
  }
  remove_stale(dir, *out_dir);
  if (opt.json) {
    fmt::print("{}\n", nlohmann::json{{"kernels", kernels}}.dump(2));
  } else {
    fmt::print("{}", listing);
  }
  return 0;
}

}  // namespace

void register_emit(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<EmitOptions>();
  CLI::App* cmd = app.add_subcommand("emit", "Generate and compile the kernels of a plan; write .cu, .ptx, ptxas reports");
  cmd->add_option("FILE", opt->file, kGraphFileHelp)->required();
  cmd->add_option("--target", opt->target, "code generation target")->check(CLI::IsMember({"cuda"}))->capture_default_str();
  cmd->add_option("--arch", opt->arch, "GPU architecture: sm_XX (CUBIN) or compute_XX (PTX only)")
      ->capture_default_str();
  cmd->add_option("--out", opt->out, "directory for the kernels, plan.txt and emitted.txt (the list of files written)")
      ->capture_default_str();
  cmd->add_option("--access", opt->access,
                  "which variant to write: vector (16-byte accesses, launched on aligned buffers) or scalar "
                  "(compiled when a buffer is not 16-byte aligned)")
      ->check(CLI::IsMember({"vector", "scalar"}))
      ->capture_default_str();
  cmd->add_flag("--unfused", opt->unfused, "emit the unfused plan (one kernel per op) instead of the fused one");
  cmd->add_flag("--json", opt->json, "print one JSON object instead of lines");
  cmd->add_flag("--overwrite", opt->overwrite,
                "let --out replace an earlier emit's files (its kernels that this plan lacks are removed)");
  cmd->callback([opt, &exit_code] { exit_code = emit(*opt); });
}

}  // namespace fusejit::cli
