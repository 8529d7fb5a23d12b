#include "ir/link_target.h"

#include <sys/stat.h>

#include <filesystem>
#include <system_error>

namespace fusejit {

std::string link_target(const std::string& path) {
  std::filesystem::path p = path;
  std::error_code ec;
  for (int hops = 0; hops < 40 && std::filesystem::is_symlink(p, ec); ++hops) {
    const std::filesystem::path target = std::filesystem::read_symlink(p, ec);
    if (ec) break;
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  return p.string();
}

bool is_special_file(const std::string& target) {
  struct stat info;
  return ::lstat(target.c_str(), &info) == 0 && !S_ISREG(info.st_mode) && !S_ISDIR(info.st_mode) &&
         !S_ISLNK(info.st_mode);
}

}  // namespace fusejit
