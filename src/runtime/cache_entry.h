// A kernel cache entry and its file format.
//
// One file per key, self-describing so that a damaged, truncated or foreign
// file is recognised rather than misread:
//
//   FJKC 1\n                       magic and format version
//   key <64 hex digits>\n          the key the entry was stored under
//   blob <name> <length>\n         one line per blob, sorted by name
//   end\n
//   <the blobs' bytes, in the order of their lines>
//   sha256 <64 hex digits>\n       digest of every byte before this line
//
// The trailing digest covers the header too, so a flipped byte anywhere is
// caught, and a truncated file has no trailer.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include <absl/status/statusor.h>

namespace fusejit {

struct CacheEntry {
  // Named byte strings, e.g. "ptx", "cubin", "ptxas_log".
  std::map<std::string, std::string> blobs;

  bool operator==(const CacheEntry&) const = default;
};

// A key is a SHA-256 digest as 64 lowercase hex digits.
bool is_cache_key(std::string_view key);
// Blob names are non-empty and use [A-Za-z0-9_.-] only.
bool is_blob_name(std::string_view name);

// The file contents for an entry. Throws Error for an invalid key or blob name.
std::string encode_cache_entry(const std::string& key, const CacheEntry& entry);
// The entry a file holds, or DataLossError saying what is wrong with it
// ("truncated", "digest mismatch", "bad magic", another key, another format version).
absl::StatusOr<CacheEntry> decode_cache_entry(std::string_view file, std::string_view key);

}  // namespace fusejit
