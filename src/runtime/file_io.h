// Whole-file reads and writes with errno-based messages, and replacing a file
// so that no reader ever sees it half written.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include <absl/status/status.h>
#include <absl/status/statusor.h>

namespace fusejit {

// NotFound when the file does not exist; other failures name the path and errno.
absl::StatusOr<std::string> read_whole_file(const std::string& path);
// The same for a file that must be a regular file of at most max_bytes
// (a cache entry): FailedPrecondition, without reading it, when it is
// something else (a FIFO, a device, a directory) or larger; a FIFO is
// opened without waiting for a writer.
absl::StatusOr<std::string> read_regular_file(const std::string& path, uint64_t max_bytes);
// Creates or truncates the file and writes all of data.
absl::Status write_whole_file(const std::string& path, std::string_view data);

// Writes a file; replaceable so that tests can simulate a full disk.
using FileWriter = std::function<absl::Status(const std::string& path, std::string_view data)>;

// The directory for temporary files ($TMPDIR where it is set and not
// empty, else /tmp), or an error that names it, and $TMPDIR where that is
// where it came from (it does not exist, or is not a directory).
absl::StatusOr<std::string> temporary_directory();

// A unique name for a temporary file beside path: path.tmp-PID-RANDOM (the
// file name cut to 200 bytes first, so that it fits wherever path's does),
// then `extension` (".svg" for a file whose writer goes by its extension).
std::string temporary_path_beside(const std::string& path, std::string_view extension = "");

// Writes data to a uniquely named temporary file beside path (pid and a random
// number), then renames it over path: rename() is atomic within a directory,
// so concurrent readers and writers see the old file or the new one, never a
// mixture. On failure the temporary file is removed; the error names path.
absl::Status replace_file(const std::string& path, std::string_view data, const FileWriter& writer = write_whole_file);

// What replace_files does where a path is a symbolic link: a user's file
// keeps its link (the file it points to is replaced); a cache entry is
// replaced by a file, so that a link planted in the cache writes nowhere.
enum class Links { kFollow, kReplace };

// replace_file for several files (path -> content) as a group: each is
// written to its temporary name first, and only once all of them are
// written is each renamed over its path. A failed write (a full disk)
// removes the temporaries and leaves every path as it was; a failed rename
// also removes the files the group created before it (those it replaced
// keep their new content, and the error says how many). A path that is
// a symbolic link keeps it: the file it points to is replaced
// (ir/link_target.h), unless `links` is Links::kReplace. With kFollow, a
// path (or the end of its link) that is a device, a FIFO or a socket is
// refused (FailedPrecondition) before anything is written.
absl::Status replace_files(const std::map<std::string, std::string_view>& files,
                           const FileWriter& writer = write_whole_file, Links links = Links::kFollow);
// replace_file of a cache's file: a link there is replaced, not followed.
absl::Status replace_cache_file(const std::string& path, std::string_view data,
                                const FileWriter& writer = write_whole_file);

// Why a cache folder must not be used for code that is loaded and run
// (compiled kernels): `dir`, or the folder it is in, belongs to another
// user (root aside), or users other than this one may write to it (every
// user, or a group not this user's own; in the folder `dir` is in, the
// sticky bit makes that safe), so another user could put a kernel there.
// "" where none is true, or where they do not exist yet.
std::string untrusted_folder_reason(const std::string& dir);

// Creates path with data, complete or not at all (written to a temporary
// beside it, then hard-linked into place), and never replaces a file:
// AlreadyExists when path exists, even if another process creates it
// between the check and the link. Where the file system has no hard links
// the file is created exclusively (O_EXCL) and written in place.
absl::Status create_file(const std::string& path, std::string_view data);
// create_file for several files as a group, all or none: each is written
// to a temporary first, then linked into place; where one exists (made by
// another process meanwhile, say), those this group created are removed
// again and the error (AlreadyExists) names it.
absl::Status create_files(const std::map<std::string, std::string_view>& files);

// Whether files can be created in `dir`, found by creating and removing a
// temporary one there: checked before long work whose results go there.
// PermissionDenied (or the errno's kind) with "cannot create files in DIR: WHY".
absl::Status check_can_create_files(const std::string& dir);

// Creates dir and its parents if needed; the message names the directory.
absl::Status ensure_directory(const std::string& dir);

}  // namespace fusejit
