// C++ to a shared object with the host compiler, through the kernel cache,
// and the shared object loaded with dlopen: the CPU backend's JIT.
//
// The compiler is $CXX (which may hold a command with arguments, such as
// "ccache g++"), else `c++`. Kernels are compiled with
//   -std=c++17 -O3 -march=native -fno-math-errno -ffp-contract=off -fopenmp-simd -fPIC -shared
// plus -mprefer-vector-width=512 where the CPU has AVX-512, then the words of
// $FUSEJIT_CXXFLAGS (say "-mno-avx512f").
// -march=native because the code runs only where it is compiled; no
// -ffast-math, because NaN and infinity must behave as in the reference
// (-fno-math-errno only lets sqrt vectorize: nothing reads errno). No
// contraction of a * b + c into an FMA behind the program's back: it turns
// d - mean(d) over a row of one element into the rounding error of d
// instead of 0. The math helpers ask for FMAs where they want them.
//
// The cache key holds everything the object depends on: source, flags, the
// compiler's command and `--version`, this CPU's model and feature flags
// (the cache directory may be shared between machines) and the fusejit
// version. The object is stored as a blob of the cache entry and loaded from
// an in-memory file (memfd), so no stale .so files pile up anywhere.
//
// A failed compile is an InvalidArgument status with the compiler's command,
// its output and the numbered source, also written to a report file whose
// path ends the message; a missing compiler is Unavailable, naming what was
// tried. FUSEJIT_DUMP=DIR also writes DIR/NAME.cpp for every module compiled
// (a kernel, or "FIRST..LAST" for several kernels compiled together).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include "runtime/kernel_cache.h"

namespace fusejit {

struct HostCompiler {
  std::vector<std::string> command;  // {"g++"} or {"ccache", "g++"}
  std::string identity;              // first line of `--version`
};

// The compiler fusejit would use, checked by running `--version`.
absl::StatusOr<HostCompiler> find_host_compiler();
std::vector<std::string> host_compile_flags();

// A shared object of one or more kernels, compiled and loaded into the
// process; unloaded on destruction (entry points die with it).
class HostModule {
 public:
  using Entry = int (*)(void* const* args, long long begin, long long end, float* scratch);

  ~HostModule();
  HostModule(const HostModule&) = delete;
  HostModule& operator=(const HostModule&) = delete;

  const std::string& name() const { return name_; }
  // The entry point `kernel` (one of those named at compile time).
  Entry entry(const std::string& kernel) const;
  double compile_ms() const { return compile_ms_; }  // compile (or cache lookup) and load
  bool cache_hit() const { return cache_hit_; }
  const std::string& cache_key() const { return cache_key_; }

 private:
  friend absl::StatusOr<std::unique_ptr<HostModule>> compile_host_module(const std::string&, const std::string&,
                                                                         const std::vector<std::string>&,
                                                                         KernelCache*);
  HostModule() = default;
  std::string name_;
  void* handle_ = nullptr;
  int fd_ = -1;  // the in-memory file the object was loaded from
  std::vector<std::pair<std::string, Entry>> entries_;
  double compile_ms_ = 0;
  bool cache_hit_ = false;
  std::string cache_key_;
};

// name: names the module in reports and file names (a kernel's name when it
// holds one kernel). entries: the extern "C" entry points it must define.
// cache: nullptr compiles every time.
absl::StatusOr<std::unique_ptr<HostModule>> compile_host_module(const std::string& name, const std::string& source,
                                                                const std::vector<std::string>& entries,
                                                                KernelCache* cache);

}  // namespace fusejit
