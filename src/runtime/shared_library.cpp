#include "runtime/shared_library.h"

#include <dlfcn.h>
#include <link.h>

#include <absl/strings/str_join.h>

namespace fusejit {

absl::StatusOr<SharedLibrary> SharedLibrary::open(const std::vector<std::string>& names) {
  std::vector<std::string> failures;
  for (const std::string& name : names) {
    if (void* handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return SharedLibrary(handle, name);
    const char* why = ::dlerror();
    failures.push_back(why != nullptr ? why : name + ": unknown dlopen error");
  }
  return absl::NotFoundError(absl::StrJoin(failures, "; "));
}

std::string SharedLibrary::path() const {
  link_map* map = nullptr;
  if (::dlinfo(handle_, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr) return name_;
  return map->l_name;
}

void* SharedLibrary::lookup(const char* symbol) const { return ::dlsym(handle_, symbol); }

}  // namespace fusejit
