// SHA-256 (FIPS 180-4), for cache keys and for the digests that verify cache
// entries on disk. Own implementation: a few dozen lines, no crypto library.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace fusejit {

// Incremental hashing, so that a key can be built from several parts
// without concatenating them first.
class Sha256 {
 public:
  Sha256();
  Sha256& update(std::string_view data);
  // The digest as 64 lowercase hex digits. Call once; the object is spent.
  std::string hex_digest();

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

// sha256_hex("abc") == "ba7816bf...f20015ad".
std::string sha256_hex(std::string_view data);

}  // namespace fusejit
