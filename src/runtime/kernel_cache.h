// The cache of compiled kernels shared by every JIT target, in memory and on
// disk. Keys are SHA-256 digests of everything the compiled result depends on
// (computed by the caller, e.g. compile_cuda()); values are CacheEntry blobs.
//
// Disk entries are written temp-then-rename, so several processes compiling
// the same kernel at once never read a half-written file, and are verified by
// digest on read. The cache never fails its caller: a corrupt, truncated or
// foreign entry is removed with a warning and reads as a miss (the caller
// compiles again and stores a good one); a directory that cannot be created
// or written turns disk writes off with one warning per cache, and the cache
// keeps working from memory (and still reads what the directory holds).
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "runtime/cache_entry.h"
#include "runtime/file_io.h"

namespace fusejit {

class KernelCache {
 public:
  // The process-wide cache, in default_directory().
  static KernelCache& global();
  // cache_directory() + "/kernels": FUSEJIT_CACHE_DIR, else $XDG_CACHE_HOME/fusejit, else ~/.cache/fusejit.
  static std::string default_directory();

  // Entries live in dir, one file per key; "" keeps the cache in memory only.
  // The directory is created on the first store.
  explicit KernelCache(std::string dir);
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  // Memory first, then disk (a disk hit is kept in memory). Throws Error for
  // a key that is not 64 lowercase hex digits.
  std::optional<CacheEntry> lookup(const std::string& key);
  // Keeps the entry in memory and, while the directory is writable, on disk.
  void store(const std::string& key, const CacheEntry& entry);

  const std::string& directory() const { return dir_; }
  // False for a memory-only cache and once a write to the directory failed.
  bool disk_writable() const;
  // The file an entry is (or would be) stored in.
  std::string entry_path(const std::string& key) const;

  // Replaces how entry files are written, so that tests can simulate a full disk.
  void set_file_writer_for_testing(FileWriter writer);

 private:
  std::optional<CacheEntry> read_from_disk(const std::string& key);
  void write_to_disk(const std::string& key, const CacheEntry& entry);
  void stop_writing(std::string_view reason);

  const std::string dir_;
  mutable std::mutex mutex_;  // guards everything below
  std::unordered_map<std::string, CacheEntry> memory_;
  bool disk_writable_;
  bool directory_ready_ = false;
  FileWriter writer_ = write_whole_file;
};

}  // namespace fusejit
