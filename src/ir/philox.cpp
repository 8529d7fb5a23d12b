#include "ir/philox.h"

#include <cmath>

namespace fusejit {
namespace {

constexpr uint32_t kM0 = 0xD2511F53u;
constexpr uint32_t kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kW1 = 0xBB67AE85u;  // sqrt(3) - 1

inline void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

}  // namespace

PhiloxRoundKeys philox_round_keys(PhiloxKey k) {
  // The key is bumped between rounds (nine times), as in Random123.
  PhiloxRoundKeys keys{};
  for (int round = 0; round < 10; ++round) {
    keys[2 * round] = k[0] + static_cast<uint32_t>(round) * kW0;  // mod 2^32
    keys[2 * round + 1] = k[1] + static_cast<uint32_t>(round) * kW1;
  }
  return keys;
}

PhiloxCounter philox4x32_10(PhiloxCounter c, PhiloxKey k) {
  const PhiloxRoundKeys keys = philox_round_keys(k);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kM0, c[0], hi0, lo0);
    mulhilo(kM1, c[2], hi1, lo1);
    c = {hi1 ^ c[1] ^ keys[2 * round], lo1, hi0 ^ c[3] ^ keys[2 * round + 1], lo0};
  }
  return c;
}

PhiloxKey dropout_key(uint64_t seed) { return {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}; }

PhiloxCounter dropout_counter(uint64_t index) {
  const uint64_t group = index / kDropoutGroup;
  return {static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32), 0, 0};
}

uint32_t dropout_number(const PhiloxCounter& output, uint64_t index) {
  return (output[(index % kDropoutGroup) / 2] >> (kDropoutBits * (index % 2))) & 0xffffu;
}

uint32_t dropout_bits(uint64_t seed, uint64_t index) {
  return dropout_number(philox4x32_10(dropout_counter(index), dropout_key(seed)), index);
}

float dropout_uniform(uint64_t seed, uint64_t index) {
  return static_cast<float>(dropout_bits(seed, index)) * 0x1p-16f;  // exact in float
}

uint32_t dropout_threshold(double p) {
  if (!(p > 0)) return 0;  // also maps NaN to "keep all"; the verifier rejects NaN anyway
  if (p >= 1) return 1u << kDropoutBits;
  return static_cast<uint32_t>(std::ceil(p * 0x1p16));  // p * 2^16 is exact
}

bool dropout_keeps(uint64_t seed, uint64_t index, double p) {
  return static_cast<double>(dropout_uniform(seed, index)) >= p;
}

float dropout_scale(double p) { return static_cast<float>(1.0 / (1.0 - p)); }

}  // namespace fusejit
