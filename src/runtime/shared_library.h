// A shared library opened with dlopen at run time, for the parts of CUDA
// fusejit uses only when they are there (libcuda, NVRTC): the library and the
// fusejit program then start, and say what is missing, on any machine.
#pragma once

#include <string>
#include <vector>

#include <absl/status/statusor.h>

namespace fusejit {

class SharedLibrary {
 public:
  // dlopen()s the first of names that loads (RTLD_NOW | RTLD_LOCAL). The
  // error quotes dlerror() for each name tried, and lists the folders of
  // paths that do not exist in one clause. The library is never closed:
  // handles obtained from it (contexts, modules) live as long as the process.
  static absl::StatusOr<SharedLibrary> open(const std::vector<std::string>& names);

  // The name that loaded, and the file it resolved to.
  const std::string& name() const { return name_; }
  std::string path() const;

  // Loads `file` from this library's folder, if it is there. NVRTC and
  // CUPTI dlopen companions of theirs (libnvrtc-builtins, libnvperf_host)
  // by bare name, which the loader looks up on its search path, not in the
  // folder they came from: loaded from a toolkit folder the loader does not
  // search, they would load and then fail at the first compile. Loaded
  // first, the companion is found under its soname.
  void load_companion(const std::string& file) const;

  // Looks up a function; false if the library lacks it.
  template <typename Fn>
  bool bind(Fn*& fn, const char* symbol) const {
    fn = reinterpret_cast<Fn*>(lookup(symbol));
    return fn != nullptr;
  }

 private:
  SharedLibrary(void* handle, std::string name) : handle_(handle), name_(std::move(name)) {}
  void* lookup(const char* symbol) const;

  void* handle_;
  std::string name_;
};

// Where to look for a library of the CUDA toolkit (NVRTC, cuBLAS, CUPTI):
// each soname first, so that LD_LIBRARY_PATH and the loader's cache decide;
// then `built_with` (the files this build found); then each soname in the
// toolkit folders the loader may not search: lib64, lib (CUDA 13's own
// layout) and extras/CUPTI/lib64 of $CUDA_HOME, $CUDA_PATH and
// /usr/local/cuda. A machine whose toolkit is
// not registered with the loader (no ldconfig entry, no LD_LIBRARY_PATH)
// still finds it there.
std::vector<std::string> cuda_library_candidates(const std::vector<std::string>& sonames,
                                                 const std::vector<std::string>& built_with = {});

}  // namespace fusejit
