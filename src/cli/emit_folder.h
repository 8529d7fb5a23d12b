// The folder `fusejit emit --out DIR` writes, for every target: what it may
// replace, writing its files as one group, and the manifest (emitted.txt)
// that lets a later emit tell its own files from the user's.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <absl/status/status.h>
#include <absl/status/statusor.h>

namespace fusejit {
class EmptyFoldersRemovedOnInterrupt;
}

namespace fusejit::cli {

// Every emit lists the files it wrote in this manifest, with each one's
// SHA-256, so that a later emit into the folder removes only files an emit
// wrote and nobody changed since, never a user's file that merely has a
// kernel-like name or an emitted kernel the user edited.
inline constexpr const char* kEmitManifest = "emitted.txt";

struct EmitFolder {
  std::string dir;  // as the user gave it (--out)
  // An earlier emit's files that this plan lacks: removed after a successful
  // emit if their content is still what that emit wrote (name -> SHA-256).
  std::map<std::string, std::string> stale;
  // The folders open_emit_folder created (DIR first, then each new parent):
  // removed again, while empty, when the emit fails or an interrupt ends it.
  std::shared_ptr<const EmptyFoldersRemovedOnInterrupt> created;
};

// Before anything is compiled: the folder exists (created if need be) and
// takes new files, and the files named in `writing` would replace nothing
// but an earlier emit's (nor leave such files beside the new ones) unless
// `overwrite`. The error names --out and what is in the way.
absl::StatusOr<EmitFolder> open_emit_folder(const std::string& dir, const std::set<std::string>& writing,
                                            bool overwrite);

// The end of an emit: writes `files` (name -> content) and the manifest as
// one group, then prints `report` (the listing or the JSON) on stdout and
// returns 0. Should a write fail (a full disk), the folder stays as it was,
// an earlier manifest included, nothing is printed and the error is; 1.
// After writing, removes the earlier emit's files this one lacks, except
// those changed since (kept, and named in a warning).
int finish_emit(const EmitFolder& folder, const std::map<std::string, std::string>& files, const std::string& report);

// An emit that failed after open_emit_folder (a compile error): prints
// `why`, removes the folders open_emit_folder created while they are empty,
// so that a failed emit leaves nothing, and returns 1.
int fail_emit(const EmitFolder& folder, const absl::Status& why);

// DIR as the listing shows it: with one trailing slash ("out/", not "out//").
std::string folder_with_slash(const std::string& dir);

}  // namespace fusejit::cli
