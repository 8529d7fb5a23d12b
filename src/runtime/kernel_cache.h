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
//
// Both stores are bounded: a fuzzing run compiles a module per graph, and an
// unbounded cache would fill the disk and the process's memory. When a store
// takes the directory past its limit, entries are removed least recently
// used first (a hit refreshes an entry's time) until it is at 3/4 of the
// limit, so that the directory is not listed again on every store; memory
// drops its oldest entries.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "runtime/cache_entry.h"
#include "runtime/file_io.h"

namespace fusejit {

// The largest entry the disk cache writes or reads: a bigger file (or one
// that is not a regular file) found under an entry's name is damaged, and
// is removed rather than read into memory.
inline constexpr uint64_t kMaxCacheEntryBytes = uint64_t{256} << 20;

struct KernelCacheLimits {
  uint64_t disk_bytes = uint64_t{2} << 30;     // FUSEJIT_CACHE_MAX_MB, default 2048
  uint64_t memory_bytes = uint64_t{256} << 20;
  // The defaults, with disk_bytes from FUSEJIT_CACHE_MAX_MB (a positive
  // whole number of MiB; anything else is warned about and ignored).
  static KernelCacheLimits from_environment();
};

class KernelCache {
 public:
  // The process-wide cache, in default_directory().
  static KernelCache& global();
  // cache_directory() + "/kernels": FUSEJIT_CACHE_DIR, else $XDG_CACHE_HOME/fusejit, else ~/.cache/fusejit.
  static std::string default_directory();

  // Entries live in dir, one file per key; "" keeps the cache in memory only.
  // The directory is created on the first store.
  explicit KernelCache(std::string dir, KernelCacheLimits limits = KernelCacheLimits::from_environment());
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  // Memory first, then disk (a disk hit is kept in memory). Throws Error for
  // a key that is not 64 lowercase hex digits.
  std::optional<CacheEntry> lookup(const std::string& key);
  // Keeps the entry in memory and, while the directory is writable, on disk.
  void store(const std::string& key, const CacheEntry& entry);

  const std::string& directory() const { return dir_; }
  // False for a memory-only cache, once a write to the directory failed,
  // and for a directory another user can change (untrusted_folder_reason):
  // its kernels are neither loaded nor stored.
  bool disk_writable() const;
  // The file an entry is (or would be) stored in.
  std::string entry_path(const std::string& key) const;

  // Replaces how entry files are written, so that tests can simulate a full disk.
  void set_file_writer_for_testing(FileWriter writer);

 private:
  std::optional<CacheEntry> read_from_disk(const std::string& key);
  void write_to_disk(const std::string& key, const CacheEntry& entry);
  void stop_writing(std::string_view reason);
  // Whether the directory may hold kernels (untrusted_folder_reason),
  // judged once it exists; a missing one is trusted until then.
  bool directory_trusted();
  void remember(const std::string& key, const CacheEntry& entry);
  // Removes the least recently used entries but `keep` until the directory
  // holds at most 3/4 of the limit.
  void evict_from_disk(const std::string& keep);

  const std::string dir_;
  mutable std::mutex mutex_;  // guards everything below
  const KernelCacheLimits limits_;
  std::unordered_map<std::string, CacheEntry> memory_;
  std::deque<std::string> memory_order_;  // keys of memory_, oldest first
  uint64_t memory_bytes_ = 0;
  // The directory's entries as last listed plus what this process stored
  // since; processes storing at once each see only their own stores until
  // their next listing, so together they can pass the limit for a while.
  std::optional<uint64_t> disk_bytes_;
  bool eviction_failed_ = false;
  bool read_failed_ = false;  // an entry could not be read (warned once)
  bool disk_writable_;
  bool directory_ready_ = false;
  std::optional<bool> directory_trusted_;
  FileWriter writer_ = write_whole_file;
};

}  // namespace fusejit
