#include "runtime/sha256.h"

#include <gtest/gtest.h>

#include <string>

#include "runtime/runtime_test_util.h"

namespace fusejit {
namespace {

// FIPS 180-2, appendix B.
TEST(Sha256, EmptyMessage) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, Abc) { EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"); }

TEST(Sha256, TwoBlockMessageOf448Bits) {
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, OneMillionA) {
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Lengths around the padding boundaries (55, 56, 63, 64 bytes) against coreutils.
TEST(Sha256, MatchesSha256sumAroundBlockBoundaries) {
  const testing::TempDir tmp("fusejit-sha");
  const std::string& dir = tmp.path();
  for (size_t n : {1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 1000}) {
    std::string data;
    for (size_t i = 0; i < n; ++i) data += static_cast<char>((i * 131 + 7) & 0xff);
    testing::write_file(dir + "/data", data);
    const testing::CommandResult r = testing::run_command("sha256sum " + dir + "/data");
    if (r.exit_code != 0) GTEST_SKIP() << "sha256sum not available: " << r.err;
    EXPECT_EQ(sha256_hex(data), r.out.substr(0, 64)) << n << " bytes";
  }
}

TEST(Sha256, IncrementalUpdatesEqualOneShot) {
  std::string data;
  for (int i = 0; i < 300; ++i) data += static_cast<char>(i * 7);
  for (size_t chunk : {1, 3, 63, 64, 65, 200}) {
    Sha256 hash;
    for (size_t i = 0; i < data.size(); i += chunk) hash.update(std::string_view(data).substr(i, chunk));
    EXPECT_EQ(hash.hex_digest(), sha256_hex(data)) << "chunks of " << chunk;
  }
}

}  // namespace
}  // namespace fusejit
