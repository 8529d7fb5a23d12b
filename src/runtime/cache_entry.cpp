#include "runtime/cache_entry.h"

#include <charconv>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "ir/error.h"
#include "runtime/sha256.h"

namespace fusejit {
namespace {

constexpr std::string_view kMagic = "FJKC ";
constexpr int kFormatVersion = 1;
constexpr std::string_view kTrailerPrefix = "sha256 ";
constexpr size_t kTrailerSize = kTrailerPrefix.size() + 64 + 1;

absl::Status damaged(std::string_view problem) { return absl::DataLossError(std::string(problem)); }

// Splits off the next '\n'-terminated line of text; false if there is none.
bool next_line(std::string_view& text, std::string_view& line) {
  const size_t end = text.find('\n');
  if (end == std::string_view::npos) return false;
  line = text.substr(0, end);
  text.remove_prefix(end + 1);
  return true;
}

bool parse_size(std::string_view text, size_t& value) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

// Everything after the magic up to the digest trailer, checked.
absl::StatusOr<std::string_view> verified_body(std::string_view file) {
  if (!file.starts_with(kMagic)) {
    return damaged(kMagic.starts_with(file) ? "truncated" : "not a fusejit kernel cache entry (bad magic)");
  }
  std::string_view rest = file.substr(kMagic.size());
  std::string_view version_text;
  if (!next_line(rest, version_text)) return damaged("truncated");
  size_t version = 0;
  if (!parse_size(version_text, version)) return damaged("not a fusejit kernel cache entry (bad version line)");
  if (version != kFormatVersion) {
    return damaged(fmt::format("format version {}, this fusejit reads version {}", version, kFormatVersion));
  }
  if (file.size() < kTrailerSize) return damaged("truncated");
  const std::string_view body = file.substr(0, file.size() - kTrailerSize);
  const std::string_view trailer = file.substr(body.size());
  if (!trailer.starts_with(kTrailerPrefix) || !trailer.ends_with('\n')) return damaged("truncated (no digest trailer)");
  if (trailer.substr(kTrailerPrefix.size(), 64) != sha256_hex(body)) return damaged("digest mismatch");
  return body.substr(kMagic.size() + version_text.size() + 1);
}

}  // namespace

bool is_cache_key(std::string_view key) {
  return key.size() == 64 && key.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

bool is_blob_name(std::string_view name) {
  constexpr std::string_view kAllowed = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-";
  return !name.empty() && name.find_first_not_of(kAllowed) == std::string_view::npos;
}

std::string encode_cache_entry(const std::string& key, const CacheEntry& entry) {
  if (!is_cache_key(key)) throw Error(fmt::format("invalid kernel cache key '{}': want 64 lowercase hex digits", key));
  std::string file = fmt::format("{}{}\nkey {}\n", kMagic, kFormatVersion, key);
  for (const auto& [name, bytes] : entry.blobs) {
    if (!is_blob_name(name)) throw Error(fmt::format("invalid kernel cache blob name '{}'", name));
    file += fmt::format("blob {} {}\n", name, bytes.size());
  }
  file += "end\n";
  for (const auto& [name, bytes] : entry.blobs) file += bytes;
  file += fmt::format("{}{}\n", kTrailerPrefix, sha256_hex(file));
  return file;
}

absl::StatusOr<CacheEntry> decode_cache_entry(std::string_view file, std::string_view key) {
  absl::StatusOr<std::string_view> body = verified_body(file);
  if (!body.ok()) return body.status();
  std::string_view rest = *body;
  std::string_view line;
  if (!next_line(rest, line) || !line.starts_with("key ")) return damaged("no key line");
  if (line.substr(4) != key) return damaged(fmt::format("holds the entry for key {}", line.substr(4)));
  // The blob lines, then the payload they describe.
  std::vector<std::pair<std::string, size_t>> blobs;
  size_t payload_size = 0;
  while (true) {
    if (!next_line(rest, line)) return damaged("header has no end line");
    if (line == "end") break;
    const size_t space = line.rfind(' ');
    size_t size = 0;
    if (!line.starts_with("blob ") || space < 5 || !parse_size(line.substr(space + 1), size) ||
        !is_blob_name(line.substr(5, space - 5))) {
      return damaged("malformed blob line");
    }
    blobs.emplace_back(std::string(line.substr(5, space - 5)), size);
    if (size > rest.size() - payload_size) return damaged("blob lengths exceed the file");
    payload_size += size;
  }
  if (payload_size != rest.size()) return damaged("blob lengths do not match the file");
  CacheEntry entry;
  for (const auto& [name, size] : blobs) {
    entry.blobs[name] = std::string(rest.substr(0, size));
    rest.remove_prefix(size);
  }
  return entry;
}

}  // namespace fusejit
