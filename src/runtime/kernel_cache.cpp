#include "runtime/kernel_cache.h"

#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "cost/device.h"
#include "ir/error.h"
#include "runtime/warnings.h"

namespace fusejit {
namespace {

void check_key(const std::string& key) {
  if (!is_cache_key(key)) throw Error(fmt::format("invalid kernel cache key '{}': want 64 lowercase hex digits", key));
}

}  // namespace

KernelCache& KernelCache::global() {
  static KernelCache cache(default_directory());
  return cache;
}

std::string KernelCache::default_directory() { return (std::filesystem::path(cache_directory()) / "kernels").string(); }

KernelCache::KernelCache(std::string dir) : dir_(std::move(dir)), disk_writable_(!dir_.empty()) {}

std::optional<CacheEntry> KernelCache::lookup(const std::string& key) {
  check_key(key);
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = memory_.find(key); it != memory_.end()) return it->second;
  if (dir_.empty()) return std::nullopt;
  std::optional<CacheEntry> entry = read_from_disk(key);
  if (entry) memory_[key] = *entry;
  return entry;
}

void KernelCache::store(const std::string& key, const CacheEntry& entry) {
  check_key(key);
  std::lock_guard<std::mutex> lock(mutex_);
  memory_[key] = entry;
  if (disk_writable_) write_to_disk(key, entry);
}

bool KernelCache::disk_writable() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return disk_writable_;
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
  absl::StatusOr<std::string> file = read_whole_file(path);
  if (absl::IsNotFound(file.status())) return std::nullopt;
  if (!file.ok()) {
    warn(fmt::format("cannot read kernel cache entry: {}; compiling again", status_text(file.status())));
    return std::nullopt;
  }
  absl::StatusOr<CacheEntry> entry = decode_cache_entry(*file, key);
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
  }
  if (absl::Status written = replace_file(entry_path(key), encode_cache_entry(key, entry), writer_); !written.ok()) {
    stop_writing(status_text(written));
  }
}

void KernelCache::stop_writing(std::string_view reason) {
  disk_writable_ = false;
  warn(fmt::format("cannot write the kernel cache in {} ({}); keeping newly compiled kernels in memory only", dir_,
                   reason));
}

}  // namespace fusejit
