#include "runtime/kernel_cache.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "cost/device.h"
#include "ir/error.h"
#include "ir/messages.h"

namespace fusejit {
namespace {

void check_key(const std::string& key) {
  if (!is_cache_key(key)) throw Error(fmt::format("invalid kernel cache key '{}': want 64 lowercase hex digits", key));
}

uint64_t entry_bytes(const CacheEntry& entry) {
  uint64_t n = 0;
  for (const auto& [name, blob] : entry.blobs) n += name.size() + blob.size();
  return n;
}

struct DiskEntry {
  std::filesystem::path path;
  uint64_t bytes = 0;
  std::filesystem::file_time_type used;
};

// The entry files in dir, and the temporary files of writes that have not
// been renamed into place for an hour (their writer died): those count
// against the limit and are removed like old entries. Newer temporary files
// are writes in progress.
std::vector<DiskEntry> list_entries(const std::string& dir) {
  std::vector<DiskEntry> out;
  const auto abandoned = std::filesystem::file_time_type::clock::now() - std::chrono::hours(1);
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const bool entry = it->path().extension() == ".fjkc";
    if (!entry && name.find(".fjkc.tmp-") == std::string::npos) continue;
    std::error_code type_error, size_error, time_error;
    if (!it->is_regular_file(type_error) || type_error) continue;
    DiskEntry e{it->path(), it->file_size(size_error), it->last_write_time(time_error)};
    if (size_error || time_error || (!entry && e.used > abandoned)) continue;
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

KernelCacheLimits KernelCacheLimits::from_environment() {
  KernelCacheLimits limits;
  const char* text = std::getenv("FUSEJIT_CACHE_MAX_MB");
  if (text == nullptr || *text == '\0') return limits;
  const std::string_view value(text);
  uint64_t mib = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), mib);
  if (ec != std::errc() || end != value.data() + value.size() || mib == 0 || mib > (uint64_t{1} << 40)) {
    warn(fmt::format("FUSEJIT_CACHE_MAX_MB='{}' is not a positive whole number of MiB; the kernel cache keeps up "
                     "to {} MiB on disk",
                     value, limits.disk_bytes >> 20));
    return limits;
  }
  limits.disk_bytes = mib << 20;
  return limits;
}

KernelCache& KernelCache::global() {
  static KernelCache cache(default_directory());
  return cache;
}

std::string KernelCache::default_directory() { return (std::filesystem::path(cache_directory()) / "kernels").string(); }

KernelCache::KernelCache(std::string dir, KernelCacheLimits limits)
    : dir_(std::move(dir)), limits_(limits), disk_writable_(!dir_.empty()) {}

std::optional<CacheEntry> KernelCache::lookup(const std::string& key) {
  check_key(key);
  std::lock_guard<std::mutex> lock(mutex_);
  std::optional<CacheEntry> entry;
  const bool on_disk = !dir_.empty() && directory_trusted();
  if (auto it = memory_.find(key); it != memory_.end()) {
    entry = it->second;
  } else if (on_disk) {
    entry = read_from_disk(key);
    if (entry) remember(key, *entry);
  }
  if (entry && on_disk) {
    // Recently used, from memory or disk: the last to be evicted from disk.
    // A read-only directory keeps its times.
    std::error_code ignored;
    std::filesystem::last_write_time(entry_path(key), std::filesystem::file_time_type::clock::now(), ignored);
  }
  return entry;
}

void KernelCache::store(const std::string& key, const CacheEntry& entry) {
  check_key(key);
  std::lock_guard<std::mutex> lock(mutex_);
  remember(key, entry);
  if (disk_writable_ && directory_trusted()) write_to_disk(key, entry);
}

bool KernelCache::directory_trusted() {
  if (!directory_trusted_) {
    // A folder that does not exist yet holds nothing to load: judged once
    // it exists (write_to_disk judges it again right after making it, in
    // case another user made it first).
    std::error_code ec;
    if (!std::filesystem::exists(dir_, ec)) return true;
    const std::string why = untrusted_folder_reason(dir_);
    directory_trusted_ = why.empty();
    if (!why.empty()) {
      disk_writable_ = false;
      warn(
          fmt::format("not using the kernel cache in {}: {}, and fusejit loads and runs the kernels it finds there; "
                      "keeping kernels in memory only (set FUSEJIT_CACHE_DIR to a folder of your own)",
                      dir_, why));
    }
  }
  return *directory_trusted_;
}

void KernelCache::remember(const std::string& key, const CacheEntry& entry) {
  auto [it, inserted] = memory_.try_emplace(key, entry);
  if (!inserted) {
    memory_bytes_ -= entry_bytes(it->second);
    it->second = entry;
    memory_order_.erase(std::find(memory_order_.begin(), memory_order_.end(), key));
  }
  memory_order_.push_back(key);
  memory_bytes_ += entry_bytes(entry);
  // Oldest stored first; the entry just stored stays, however large.
  while (memory_bytes_ > limits_.memory_bytes && memory_order_.size() > 1) {
    auto oldest = memory_.find(memory_order_.front());
    memory_bytes_ -= entry_bytes(oldest->second);
    memory_.erase(oldest);
    memory_order_.pop_front();
  }
}

bool KernelCache::disk_writable() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return disk_writable_ && directory_trusted_.value_or(untrusted_folder_reason(dir_).empty());
}

std::string KernelCache::entry_path(const std::string& key) const {
  return (std::filesystem::path(dir_) / (key + ".fjkc")).string();
}

void KernelCache::set_file_writer_for_testing(FileWriter writer) {
  std::lock_guard<std::mutex> lock(mutex_);
  writer_ = std::move(writer);
}

std::optional<CacheEntry> KernelCache::read_from_disk(const std::string& key) {
  const std::string path = entry_path(key);
  absl::StatusOr<std::string> file = read_regular_file(path, kMaxCacheEntryBytes);
  if (absl::IsNotFound(file.status())) return std::nullopt;
  // Not a regular file, or too large to be an entry: damaged, like a bad digest.
  const bool unusable_entry = absl::IsFailedPrecondition(file.status());
  if (!file.ok() && !unusable_entry) {
    // Once: an unusable directory fails every lookup alike.
    if (!read_failed_) {
      read_failed_ = true;
      // A folder that cannot be (a file in the path): one warning, the
      // writer's, says the cache is memory only; a read warning would repeat it.
      if (disk_writable_ && !directory_ready_) {
        if (absl::Status made = ensure_directory(dir_); !made.ok()) {
          stop_writing(status_text(made));
          return std::nullopt;
        }
        directory_ready_ = true;
      }
      warn(fmt::format("cannot read kernel cache entry: {}; compiling again (later entries that cannot be read are "
                       "not reported)",
                       status_text(file.status())));
    }
    return std::nullopt;
  }
  absl::StatusOr<CacheEntry> entry = file.ok() ? decode_cache_entry(*file, key) : file.status();
  if (entry.ok()) return *std::move(entry);
  // Removing the file lets the caller's store replace it. Should another
  // process have just renamed a good entry into place, we only lose that one hit.
  warn(fmt::format("kernel cache entry {} is damaged ({}); removed it, compiling again", path,
                   status_text(entry.status())));
  std::remove(path.c_str());
  return std::nullopt;
}

void KernelCache::write_to_disk(const std::string& key, const CacheEntry& entry) {
  if (!directory_ready_) {
    if (absl::Status made = ensure_directory(dir_); !made.ok()) return stop_writing(status_text(made));
    directory_ready_ = true;
    if (!directory_trusted()) return;  // made by another user meanwhile
  }
  const std::string file = encode_cache_entry(key, entry);
  if (file.size() > kMaxCacheEntryBytes) return;  // read_from_disk would refuse it
  if (absl::Status written = replace_cache_file(entry_path(key), file, writer_); !written.ok()) {
    return stop_writing(status_text(written));
  }
  if (!disk_bytes_) {
    uint64_t total = 0;
    for (const DiskEntry& e : list_entries(dir_)) total += e.bytes;
    disk_bytes_ = total;
  } else {
    *disk_bytes_ += file.size();
  }
  if (*disk_bytes_ > limits_.disk_bytes && !eviction_failed_) evict_from_disk(entry_path(key));
}

void KernelCache::evict_from_disk(const std::string& keep) {
  std::vector<DiskEntry> entries = list_entries(dir_);
  std::sort(entries.begin(), entries.end(), [](const DiskEntry& a, const DiskEntry& b) { return a.used < b.used; });
  uint64_t total = 0;
  for (const DiskEntry& e : entries) total += e.bytes;
  // The running count overestimates after another process evicted, or
  // when a key was stored again: the directory itself decides.
  const uint64_t target = total <= limits_.disk_bytes ? total : limits_.disk_bytes / 4 * 3;
  for (const DiskEntry& e : entries) {
    if (total <= target) break;
    if (e.path == keep) continue;
    std::error_code ec;
    // Another process may have removed it first, or be reading it: an open
    // file stays readable, and a vanished one is a miss that compiles again.
    if (std::filesystem::remove(e.path, ec) || !ec) total -= e.bytes;
  }
  disk_bytes_ = total;
  if (total > limits_.disk_bytes && !eviction_failed_) {
    // Files we may not remove (another user's, say): stop listing the
    // directory on every store, and say why the limit is not kept.
    eviction_failed_ = true;
    warn(fmt::format("the kernel cache in {} holds {} MiB, over its limit of {} MiB, and its oldest entries could not "
                     "be removed; it is no longer trimmed in this process",
                     dir_, total >> 20, limits_.disk_bytes >> 20));
  }
}

void KernelCache::stop_writing(std::string_view reason) {
  disk_writable_ = false;
  warn(fmt::format("cannot write the kernel cache in {} ({}); keeping newly compiled kernels in memory only", dir_,
                   reason));
}

}  // namespace fusejit
