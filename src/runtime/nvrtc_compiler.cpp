#include "runtime/nvrtc_compiler.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <regex>

#include <absl/strings/str_join.h>
#include <fmt/format.h>

#include "fusejit_version.h"
#include "ir/error.h"
#include "runtime/compile_report.h"
#include "runtime/nvrtc_library.h"
#include "runtime/sha256.h"
#include "runtime/work_queue.h"

namespace fusejit {
namespace {

// The cache entry's blob names.
constexpr const char* kPtxBlob = "ptx";
constexpr const char* kCubinBlob = "cubin";
constexpr const char* kLogBlob = "nvrtc_log";

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

std::string version_text(std::pair<int, int> version) { return fmt::format("{}.{}", version.first, version.second); }

// Everything the compiled result depends on. Each field is length-prefixed,
// so that no two different inputs hash the same text. The architecture is
// part of the options.
std::string cache_key(const std::string& source, const std::vector<std::string>& options, std::pair<int, int> nvrtc) {
  Sha256 hash;
  auto field = [&hash](std::string_view label, std::string_view value) {
    hash.update(fmt::format("{} {}\n", label, value.size())).update(value).update("\n");
  };
  field("target", "cuda");
  field("fusejit", FUSEJIT_VERSION);
  field("nvrtc", version_text(nvrtc));
  for (const std::string& option : options) field("option", option);
  field("source", source);
  return hash.hex_digest();
}

// Fills the compiled results from a cache entry; false if it lacks any of them.
bool restore(const CacheEntry& entry, CompiledKernel& kernel) {
  const auto& blobs = entry.blobs;
  if (!blobs.contains(kPtxBlob) || !blobs.contains(kCubinBlob) || !blobs.contains(kLogBlob)) return false;
  kernel.ptx = blobs.at(kPtxBlob);
  kernel.cubin = blobs.at(kCubinBlob);
  kernel.log = blobs.at(kLogBlob);
  return true;
}

absl::Status compile_failure(const CompiledKernel& kernel, const NvrtcOutput& out) {
  // One file per kernel and key: compiling the same bad source again
  // replaces its report instead of adding another.
  const std::string file_name = fmt::format("{}-{}.txt", kernel_file_stem(kernel.name), kernel.cache_key.substr(0, 12));
  return compile_failure_status(file_name, format_compile_failure({.name = kernel.name,
                                                                   .arch = kernel.arch,
                                                                   .error = out.error,
                                                                   .options = kernel.options,
                                                                   .log = out.log,
                                                                   .source = kernel.source}));
}

}  // namespace

bool is_virtual_arch(const std::string& arch) { return arch.starts_with("compute_"); }

int cuda_arch_number(const std::string& arch) { return std::atoi(arch.c_str() + arch.find('_') + 1); }

absl::Status check_cuda_arch(const std::string& arch) {
  if (absl::StatusOr<std::vector<std::string>> options = nvrtc_options({.arch = arch}); !options.ok()) {
    return options.status();
  }
  absl::StatusOr<std::vector<int>> archs = nvrtc_library_archs();
  if (!archs.ok()) return archs.status();
  const int cc = cuda_arch_number(arch);
  if (std::find(archs->begin(), archs->end(), cc) != archs->end()) return absl::OkStatus();
  std::vector<std::string> known;
  for (int a : *archs) known.push_back(fmt::format("{}_{}", is_virtual_arch(arch) ? "compute" : "sm", a));
  return absl::InvalidArgumentError(fmt::format("NVRTC {} cannot compile for {}; it knows {}", nvrtc_version(), arch,
                                                absl::StrJoin(known, ", ")));
}

absl::StatusOr<std::vector<std::string>> nvrtc_options(const CudaCompileOptions& options,
                                                       std::pair<int, int> nvrtc_version) {
  // No leading zero (sm_0090 read as 90 here, and NVRTC refused it as an
  // invalid option); an 'a' (architecture-specific) variant exists from
  // sm_90, an 'f' (family) one from sm_100.
  static const std::regex kArch("(sm|compute)_[1-9][0-9]*[af]?");
  if (!std::regex_match(options.arch, kArch)) {
    return absl::InvalidArgumentError(fmt::format(
        "invalid CUDA architecture '{}': want sm_XX (CUBIN) or compute_XX (PTX), e.g. sm_90", options.arch));
  }
  if (const char suffix = options.arch.back(); suffix == 'a' || suffix == 'f') {
    const int cc = cuda_arch_number(options.arch);
    if (const int from = suffix == 'a' ? 90 : 100; cc < from) {
      return absl::InvalidArgumentError(
          fmt::format("invalid CUDA architecture '{}': the '{}' variants begin at {}_{}{}; use {}", options.arch,
                      suffix, options.arch.substr(0, options.arch.find('_')), from, suffix,
                      options.arch.substr(0, options.arch.size() - 1)));
    }
  }
  std::vector<std::string> out = {"--std=c++17", "-default-device", "--gpu-architecture=" + options.arch};
  // ptxas runs only for a real architecture; its report is how spills show.
  if (!is_virtual_arch(options.arch)) out.push_back("--ptxas-options=-v");
  if (options.fast_math) out.push_back("--use_fast_math");
  if (options.line_info) out.push_back("-lineinfo");
  // NVRTC 12.4+ can leave out what fusejit's kernels never use (textures,
  // device-side launches, the runtime's types): 5-8% off a cold compile
  // (bench/results/2026-11-30-nvrtc-compile.md).
  if (nvrtc_version >= std::pair{12, 4}) out.push_back("--minimal");
  return out;
}

absl::StatusOr<CompiledKernel> compile_cuda(const std::string& name, const std::string& source,
                                            const CudaCompileOptions& options, KernelCache* cache) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::pair<int, int>> version = nvrtc_library_version();
  if (!version.ok()) return version.status();
  absl::StatusOr<std::vector<std::string>> nvrtc_opts = nvrtc_options(options, *version);
  if (!nvrtc_opts.ok()) return nvrtc_opts.status();

  CompiledKernel kernel;
  kernel.name = name;
  kernel.source = source;
  kernel.arch = options.arch;
  kernel.options = *std::move(nvrtc_opts);
  kernel.cache_key = cache_key(source, kernel.options, *version);

  if (cache != nullptr) {
    if (std::optional<CacheEntry> entry = cache->lookup(kernel.cache_key); entry && restore(*entry, kernel)) {
      kernel.ptxas = parse_ptxas_log(kernel.log);
      kernel.cache_hit = true;
      kernel.compile_ms = ms_since(start);
      dump_kernel_if_requested(kernel);
      return kernel;
    }
  }

  // Only on a miss: an entry exists only for an architecture NVRTC took.
  if (absl::Status s = check_cuda_arch(options.arch); !s.ok()) return s;
  absl::StatusOr<NvrtcOutput> out = run_nvrtc(source, kernel_file_stem(name) + ".cu", kernel.options);
  if (!out.ok()) return out.status();
  if (!out->error.empty()) return compile_failure(kernel, *out);
  kernel.ptx = std::move(out->ptx);
  kernel.cubin = std::move(out->cubin);
  kernel.log = std::move(out->log);
  kernel.ptxas = parse_ptxas_log(kernel.log);
  if (cache != nullptr) {
    cache->store(kernel.cache_key,
                 CacheEntry{.blobs = {{kPtxBlob, kernel.ptx}, {kCubinBlob, kernel.cubin}, {kLogBlob, kernel.log}}});
  }
  kernel.compile_ms = ms_since(start);
  dump_kernel_if_requested(kernel);
  return kernel;
}

absl::StatusOr<std::vector<CompiledKernel>> compile_cuda_all(const std::vector<CudaSource>& kernels,
                                                             const CudaCompileOptions& options, KernelCache* cache,
                                                             int threads) {
  std::vector<std::optional<absl::StatusOr<CompiledKernel>>> results(kernels.size());
  run_jobs(kernels.size(), threads,
           [&](size_t i) { results[i] = compile_cuda(kernels[i].name, kernels[i].source, options, cache); });
  std::vector<CompiledKernel> out;
  for (std::optional<absl::StatusOr<CompiledKernel>>& r : results) {
    if (!r->ok()) return r->status();
    out.push_back(*std::move(*r));
  }
  return out;
}

absl::StatusOr<std::string> cuda_arch_for(int cc_major, int cc_minor) {
  absl::StatusOr<std::vector<int>> archs = nvrtc_library_archs();
  if (!archs.ok()) return archs.status();
  if (archs->empty()) return absl::InternalError("NVRTC reports no supported architectures");
  std::sort(archs->begin(), archs->end());
  const int cc = cc_major * 10 + cc_minor;
  if (std::binary_search(archs->begin(), archs->end(), cc)) return fmt::format("sm_{}", cc);
  if (cc < archs->front()) {
    return absl::FailedPreconditionError(fmt::format(
        "the GPU (sm_{}) is older than NVRTC {} supports (sm_{} and newer)", cc, nvrtc_version(), archs->front()));
  }
  // PTX for the newest architecture below the GPU's; the driver compiles it
  // for the GPU when the module is loaded.
  return fmt::format("compute_{}", *std::prev(std::upper_bound(archs->begin(), archs->end(), cc)));
}

absl::Status nvrtc_status() { return nvrtc_library_status(); }

bool nvrtc_available() { return nvrtc_status().ok(); }

std::string nvrtc_version() {
  absl::StatusOr<std::pair<int, int>> version = nvrtc_library_version();
  return version.ok() ? version_text(*version) : "";
}

}  // namespace fusejit
