// CUDA C++ to CUBIN and PTX with NVRTC, through the kernel cache.
//
// compile_cuda() is the one entry point: it derives the cache key from
// everything the result depends on (source, NVRTC options, architecture,
// NVRTC version, fusejit version), returns a cached result when there is one,
// and otherwise runs NVRTC and stores the result. The ptxas report
// (registers, spills, shared memory) travels with every compiled kernel.
//
// A compile error is an InvalidArgument status whose message holds NVRTC's
// log, the options and the source with line numbers; the same text is
// written to a report file (under cache_directory()/errors/, else the
// system temp directory), whose path the message ends with.
//
// FUSEJIT_DUMP=DIR: every kernel compiled or fetched from the cache is also
// written as DIR/NAME.cu, DIR/NAME.ptx and DIR/NAME.ptxas.txt (NVRTC's log);
// a failure to dump is a warning.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include "runtime/kernel_cache.h"
#include "runtime/ptxas_report.h"

namespace fusejit {

struct CudaCompileOptions {
  // sm_XX: CUBIN (and its PTX). compute_XX: PTX only, which the driver
  // compiles for the GPU at load time (for GPUs newer than NVRTC knows).
  std::string arch = "sm_90";
  bool fast_math = false;
  bool line_info = false;
};

struct CompiledKernel {
  std::string name;
  std::string source;
  std::string ptx;
  std::string cubin;  // empty for a compute_XX architecture
  std::string arch;
  std::vector<std::string> options;  // as passed to NVRTC
  PtxasReport ptxas;
  std::string log;        // all NVRTC said: warnings and the ptxas report
  double compile_ms = 0;  // NVRTC and caching; on a cache hit, the lookup
  bool cache_hit = false;
  std::string cache_key;
};

// name: the kernel's name, used for the program's file name in diagnostics
// (NAME.cu), for the report and for dumps. cache: nullptr compiles every time.
absl::StatusOr<CompiledKernel> compile_cuda(const std::string& name, const std::string& source,
                                            const CudaCompileOptions& options, KernelCache* cache);

// One kernel for compile_cuda_all().
struct CudaSource {
  std::string name;
  std::string source;
};

// compile_cuda() for each of `kernels`, several at a time (NVRTC compiles
// independent programs concurrently; up to `threads`, 0 meaning one per
// CPU the process may use), so that a plan of many kernels loads in about
// the time of its slowest. The results are in `kernels` order; when any fails, the
// error of the first that failed (in that order).
absl::StatusOr<std::vector<CompiledKernel>> compile_cuda_all(const std::vector<CudaSource>& kernels,
                                                             const CudaCompileOptions& options, KernelCache* cache,
                                                             int threads = 0);

// OK when `arch` is well formed (sm_XX, compute_XX) and NVRTC can compile
// for it; otherwise InvalidArgument naming the architectures it knows.
absl::Status check_cuda_arch(const std::string& arch);
// The number of a well-formed architecture: sm_90 -> 90, compute_100 -> 100.
int cuda_arch_number(const std::string& arch);
// compute_XX: compiled to PTX only, without ptxas (so no ptxas report).
bool is_virtual_arch(const std::string& arch);

// The NVRTC options compile_cuda() uses with NVRTC `nvrtc_version` ({12, 4}
// and later take --minimal); InvalidArgument for a malformed arch.
absl::StatusOr<std::vector<std::string>> nvrtc_options(const CudaCompileOptions& options,
                                                       std::pair<int, int> nvrtc_version = {0, 0});

// The architecture to compile for a GPU of compute capability major.minor:
// sm_XY when NVRTC knows it; compute_ZW, the newest NVRTC knows, when the GPU
// is newer; an error when the GPU is older than NVRTC supports.
absl::StatusOr<std::string> cuda_arch_for(int cc_major, int cc_minor);

// OK when NVRTC can be used, otherwise why not ("fusejit was built without
// the CUDA toolkit (NVRTC)", "NVRTC not found: ...").
absl::Status nvrtc_status();
bool nvrtc_available();
std::string nvrtc_version();  // "13.0"; "" when NVRTC is not available

}  // namespace fusejit
