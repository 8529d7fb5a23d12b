#include "runtime/shared_library.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <absl/strings/str_join.h>

namespace fusejit {

absl::StatusOr<SharedLibrary> SharedLibrary::open(const std::vector<std::string>& names) {
  std::vector<std::string> failures;
  // Paths that do not exist: one clause, not one dlerror each.
  std::vector<std::string> absent_paths, absent_dirs;
  for (const std::string& name : names) {
    if (void* handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return SharedLibrary(handle, name);
    const char* why = ::dlerror();
    const std::filesystem::path path(name);
    std::error_code ec;
    if (path.has_parent_path() && !std::filesystem::exists(path, ec)) {
      absent_paths.push_back(name);
      const std::string dir = path.parent_path().string();
      if (std::find(absent_dirs.begin(), absent_dirs.end(), dir) == absent_dirs.end()) absent_dirs.push_back(dir);
      continue;
    }
    failures.push_back(why != nullptr ? why : name + ": unknown dlopen error");
  }
  if (absent_paths.size() == 1) {
    failures.push_back(absent_paths[0] + ": no such file");
  } else if (!absent_paths.empty()) {
    failures.push_back("no such file in " + absl::StrJoin(absent_dirs, ", "));
  }
  return absl::NotFoundError(absl::StrJoin(failures, "; "));
}

std::vector<std::string> cuda_library_candidates(const std::vector<std::string>& sonames,
                                                 const std::vector<std::string>& built_with) {
  std::vector<std::string> names;
  auto add = [&names](std::string name) {
    if (!name.empty() && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(std::move(name));
  };
  for (const std::string& soname : sonames) add(soname);
  for (const std::string& path : built_with) add(path);
  std::vector<std::string> roots;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* root = std::getenv(var); root != nullptr && *root != '\0') roots.emplace_back(root);
  }
  roots.emplace_back("/usr/local/cuda");
  for (const std::string& root : roots) {
    for (const char* dir : {"lib64", "lib", "extras/CUPTI/lib64"}) {
      for (const std::string& soname : sonames) add(root + "/" + dir + "/" + soname);
    }
  }
  return names;
}

std::string SharedLibrary::path() const {
  link_map* map = nullptr;
  if (::dlinfo(handle_, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr) return name_;
  return map->l_name;
}

void SharedLibrary::load_companion(const std::string& file) const {
  const std::filesystem::path companion = std::filesystem::path(path()).parent_path() / file;
  std::error_code ec;
  if (!companion.has_parent_path() || !std::filesystem::exists(companion, ec)) return;
  // Never closed, as the library itself; a failure leaves the library's own
  // error at its first use.
  if (::dlopen(companion.c_str(), RTLD_NOW | RTLD_LOCAL) == nullptr) (void)::dlerror();
}

void* SharedLibrary::lookup(const char* symbol) const { return ::dlsym(handle_, symbol); }

}  // namespace fusejit
