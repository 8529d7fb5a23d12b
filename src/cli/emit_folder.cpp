#include "cli/emit_folder.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include <absl/strings/str_join.h>

#include <fmt/format.h>

#include "ir/counted.h"
#include "ir/error.h"
#include "ir/messages.h"
#include "runtime/child_processes.h"
#include "runtime/file_io.h"
#include "runtime/sha256.h"

namespace fusejit::cli {
namespace {

constexpr const char* kManifestHeader =
    "# Files written by `fusejit emit` into this folder (SHA-256, name); a later `fusejit emit --overwrite` "
    "replaces them, or removes those its plan lacks unless they changed.";

std::string sha256_hex(std::string_view data) { return Sha256().update(data).hex_digest(); }

// The files the earlier emit into `dir` wrote (name -> SHA-256), from its
// manifest; empty when there is none (or the file of that name is not one).
// Read only as a regular file of a manifest's size: a FIFO by that name
// made emit wait for ever, a link to /dev/zero grow without end.
std::map<std::string, std::string> earlier_emit(const std::filesystem::path& dir) {
  constexpr uint64_t kMaxManifestBytes = uint64_t{64} << 20;  // 100 bytes a file: 600,000 files
  std::map<std::string, std::string> files;
  const absl::StatusOr<std::string> text = read_regular_file((dir / kEmitManifest).string(), kMaxManifestBytes);
  if (!text.ok()) return files;
  std::istringstream in(*text);
  std::string line;
  if (!std::getline(in, line) || line != kManifestHeader) return files;
  while (std::getline(in, line)) {
    // "HEX  NAME", as sha256sum writes it.
    if (line.size() < 67 || line.compare(64, 2, "  ") != 0) continue;
    files.emplace(line.substr(66), line.substr(0, 64));
  }
  return files;
}

// The files `writing` would replace in `dir`, and an earlier emit's files
// that would be left beside the new ones, are an error unless `overwrite`.
absl::StatusOr<EmitFolder> check_out_dir(const std::filesystem::path& dir, std::set<std::string> writing,
                                         bool overwrite) {
  writing.insert(kEmitManifest);  // a file of the user's by that name is in the way too
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(fmt::format("--out {}: exists and is not a directory", dir.string()));
  }
  EmitFolder out;
  out.dir = dir.string();
  std::vector<std::string> replaced;
  bool all_emitted = true;
  if (std::filesystem::is_directory(dir, ec)) {
    const std::map<std::string, std::string> earlier = earlier_emit(dir);
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name == kEmitManifest && !earlier.empty()) {
        continue;  // the earlier emit's manifest: bookkeeping, rewritten below
      } else if (writing.count(name) != 0) {
        // --overwrite replaces files, not folders: say so now, rather than
        // advise --overwrite and fail after compiling.
        if (std::error_code kind; entry.is_directory(kind)) {
          return absl::FailedPreconditionError(fmt::format(
              "--out {}: {} is a directory, where emit writes a file of that name; move it away or choose another "
              "--out",
              dir.string(), name));
        }
        // Nor devices, FIFOs or sockets, or links to them (file_io.h's
        // replace_files refuses them too, but only after compiling).
        if (std::error_code kind; entry.exists(kind) && !entry.is_regular_file(kind)) {
          return absl::FailedPreconditionError(fmt::format(
              "--out {}: {} is not a regular file (a device, a FIFO or a socket, or a link to one), where emit "
              "writes a file of that name; move it away or choose another --out",
              dir.string(), name));
        }
        replaced.push_back(name);
        all_emitted = all_emitted && earlier.count(name) != 0;
      } else if (auto it = earlier.find(name); it != earlier.end()) {
        // Whatever is there now: remove_stale removes it only if it is
        // still the file that emit wrote, and names it if it keeps it.
        out.stale.emplace(name, it->second);
      }
    }
  }
  std::sort(replaced.begin(), replaced.end());
  if (!overwrite && (!replaced.empty() || !out.stale.empty())) {
    std::vector<std::string> all = replaced;
    for (const auto& [name, hash] : out.stale) all.push_back(name);
    const size_t shown = std::min<size_t>(all.size(), 4);
    return absl::AlreadyExistsError(
        fmt::format("--out {}: holds {}{}{}; pass --overwrite to replace {} (an earlier emit's other kernels are then "
                    "removed) or choose another --out",
                    dir.string(), absl::StrJoin(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
                    all.size() > shown ? fmt::format(" and {} more", all.size() - shown) : "",
                    all_emitted ? " from an earlier emit" : "", all.size() == 1 ? "it" : "them"));
  }
  return out;
}

// After this emit wrote its files: removes the earlier emit's files it
// lacks, except those changed since that emit wrote them (kept, and named).
void remove_stale(const EmitFolder& folder) {
  const std::filesystem::path dir(folder.dir);
  std::vector<std::string> removed, kept;
  for (const auto& [name, hash] : folder.stale) {
    // Only a regular file can still be what emit wrote (a FIFO put there
    // since would make the read wait for ever).
    constexpr uint64_t kMaxEmittedFileBytes = uint64_t{1} << 30;
    const absl::StatusOr<std::string> content = read_regular_file((dir / name).string(), kMaxEmittedFileBytes);
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
    eprint("fusejit: removed {} of an earlier emit from {}: {}\n", counted(std::ssize(removed), "file"), folder.dir,
           absl::StrJoin(removed, ", "));
  }
  if (!kept.empty()) {
    warn(
        fmt::format("--out {}: kept {} of an earlier emit that this plan lacks, since {} changed after that emit "
                    "wrote {} (or could not be removed): {}",
                    folder.dir, counted(std::ssize(kept), "file"), kept.size() == 1 ? "it" : "they",
                    kept.size() == 1 ? "it" : "them", absl::StrJoin(kept, ", ")));
  }
}

// The folders open_emit_folder created, while they are empty (anything
// put there meanwhile stays).
void remove_created_folders(const EmitFolder& folder) {
  if (folder.created) folder.created->remove_while_empty();
}

}  // namespace

absl::StatusOr<EmitFolder> open_emit_folder(const std::string& dir, const std::set<std::string>& writing,
                                            bool overwrite) {
  absl::StatusOr<EmitFolder> folder = check_out_dir(dir, writing, overwrite);
  if (!folder.ok()) return folder.status();
  if (dir.empty()) return absl::InvalidArgumentError("--out: the folder's name is empty");
  // What does not exist yet, DIR first, to remove again should the emit fail.
  std::error_code ec;
  std::vector<std::string> created;
  for (std::filesystem::path p = std::filesystem::absolute(dir, ec); !ec && p.has_relative_path();
       p = p.parent_path()) {
    // "k/", "k/." and "a/../k" name no folder of their own at the end.
    if (const std::filesystem::path name = p.filename(); name.empty() || name == "." || name == "..") continue;
    std::error_code missing;  // set for a path that does not exist: not an error here
    if (std::filesystem::exists(std::filesystem::symlink_status(p, missing))) break;
    created.push_back(p.string());
  }
  folder->created = std::make_shared<const EmptyFoldersRemovedOnInterrupt>(std::move(created));
  ec.clear();
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(fmt::format("--out {}: cannot create the directory: {}", dir, ec.message()));
  }
  // Found before minutes of compiling rather than after.
  if (absl::Status s = check_can_create_files(dir); !s.ok()) {
    remove_created_folders(*folder);
    return absl::Status(s.code(), fmt::format("--out: {}", status_text(s)));
  }
  return folder;
}

int finish_emit(const EmitFolder& folder, const std::map<std::string, std::string>& files, const std::string& report) {
  const std::filesystem::path dir(folder.dir);
  std::string manifest = std::string(kManifestHeader) + "\n";
  std::map<std::string, std::string_view> paths;  // path -> content
  for (const auto& [name, text] : files) {
    manifest += fmt::format("{}  {}\n", sha256_hex(text), name);
    paths[(dir / name).string()] = text;
  }
  paths[(dir / kEmitManifest).string()] = manifest;
  if (absl::Status s = replace_files(paths); !s.ok()) {
    return fail_emit(folder, absl::Status(s.code(), fmt::format("--out {}: {}", folder.dir, status_text(s))));
  }
  remove_stale(folder);
  fmt::print("{}", report);
  return 0;
}

int fail_emit(const EmitFolder& folder, const absl::Status& why) {
  eprint("fusejit: error: {}\n", status_text(why));
  remove_created_folders(folder);
  return 1;
}

std::string folder_with_slash(const std::string& dir) { return dir.ends_with('/') ? dir : dir + "/"; }

}  // namespace fusejit::cli
