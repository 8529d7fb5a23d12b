// Philox4x32-10 against the Random123 known-answer vectors, and the dropout
// mask built on it (DESIGN.md §4): mapping, statistics, determinism.
#include "ir/philox.h"

#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "fusejit.h"
#include "ir/interpreter.h"

namespace fusejit {
namespace {

struct KnownAnswer {
  PhiloxCounter counter;
  PhiloxKey key;
  PhiloxCounter expected;
};

// From Random123's kat_vectors (philox4x32 with 10 rounds), as listed in DESIGN.md §4.
TEST(PhiloxTest, Random123KnownAnswers) {
  const KnownAnswer answers[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const KnownAnswer& a : answers) {
    EXPECT_EQ(philox4x32_10(a.counter, a.key), a.expected) << std::hex << a.counter[0] << " " << a.key[0];
  }
}

// The round keys a CUDA kernel takes (philox4x32_10 uses them too, so the
// known answers above check their values): the key, then bumped by the Weyl
// constants once per round, wrapping at 2^32.
TEST(PhiloxTest, RoundKeysStartAtTheKeyAndStepByTheWeylConstants) {
  const PhiloxRoundKeys keys = philox_round_keys({0xfffffff0u, 0x12345678u});
  EXPECT_EQ(keys[0], 0xfffffff0u);
  EXPECT_EQ(keys[1], 0x12345678u);
  for (int round = 1; round < 10; ++round) {
    EXPECT_EQ(keys[2 * round], static_cast<uint32_t>(keys[2 * round - 2] + 0x9E3779B9u)) << round;
    EXPECT_EQ(keys[2 * round + 1], static_cast<uint32_t>(keys[2 * round - 1] + 0xBB67AE85u)) << round;
  }
}

TEST(PhiloxTest, DropoutMappingUsesGlobalIndex) {
  const uint64_t seed = 0x0123456789abcdefull;
  EXPECT_EQ(dropout_key(seed), (PhiloxKey{0x89abcdef, 0x01234567}));
  // Element 8g + lane reads 16-bit number `lane` of counter (g lo, g hi, 0,
  // 0)'s output taken as little-endian bytes, also past 2^32 groups.
  for (uint64_t group : {uint64_t{0}, uint64_t{1}, uint64_t{12345}, (uint64_t{1} << 32) + 7}) {
    const PhiloxCounter words =
        philox4x32_10({static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32), 0, 0}, dropout_key(seed));
    uint16_t halves[8];
    static_assert(sizeof halves == sizeof words);
    std::memcpy(halves, words.data(), sizeof halves);  // little-endian x86 and GPUs: the mapping's byte order
    for (uint32_t lane = 0; lane < 8; ++lane) {
      const uint64_t index = 8 * group + lane;
      EXPECT_EQ(dropout_counter(index),
                (PhiloxCounter{static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32), 0, 0}));
      EXPECT_EQ(dropout_bits(seed, index), halves[lane]) << "group " << group << " lane " << lane;
      EXPECT_EQ(dropout_uniform(seed, index), static_cast<float>(halves[lane]) / 65536.0f);
    }
  }
}

TEST(PhiloxTest, UniformIsInUnitIntervalOnA16BitGrid) {
  int64_t odd = 0, high = 0;
  for (uint64_t i = 0; i < 10000; ++i) {
    const float u = dropout_uniform(7, i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    const double scaled = static_cast<double>(u) * 65536.0;
    ASSERT_EQ(scaled, std::floor(scaled));
    odd += static_cast<int64_t>(scaled) & 1;  // the lowest bit is used,
    high += u >= 0.5f;                        // and the highest
  }
  EXPECT_NEAR(odd, 5000, 300);
  EXPECT_NEAR(high, 5000, 300);
}

TEST(PhiloxTest, ThresholdIsTheExactComparison) {
  // Includes p just above grid points, where a float-rounded p would land on
  // the grid point below, and p just below 1.
  const double ps[] = {0.0, 1e-9, 0.1, 0.25, 0.5, 0.5 + 1e-12, 0.7, 0.9, 0.999999, 1.0 - 0x1p-30};
  for (double p : ps) {
    const uint32_t threshold = dropout_threshold(p);
    for (uint64_t i = 0; i < 4000; ++i) {
      const float u = dropout_uniform(3, i);
      ASSERT_EQ(dropout_bits(3, i) >= threshold, static_cast<double>(u) >= p) << "p=" << p << " i=" << i;
      ASSERT_EQ(dropout_keeps(3, i, p), static_cast<double>(u) >= p);
    }
    // The boundary itself: u = threshold * 2^-16 is the smallest kept value.
    if (threshold > 0 && threshold < (1u << 16)) {
      EXPECT_GE(threshold * 0x1p-16, p);
      EXPECT_LT((threshold - 1) * 0x1p-16, p);
    }
  }
  EXPECT_EQ(dropout_threshold(0.0), 0u);
  EXPECT_EQ(dropout_threshold(0.5), 1u << 15);
  EXPECT_EQ(dropout_threshold(0.5 + 1e-12), (1u << 15) + 1);
  EXPECT_EQ(dropout_threshold(0.999999), 1u << 16);  // drops everything: 1 - 2^-16 < p
  EXPECT_EQ(dropout_threshold(1.0), 1u << 16);
}

TEST(PhiloxTest, ScaleIsOneOverKeepProbabilityInFloat) {
  EXPECT_EQ(dropout_scale(0.0), 1.0f);
  EXPECT_EQ(dropout_scale(0.5), 2.0f);
  EXPECT_EQ(dropout_scale(0.1), static_cast<float>(1.0 / 0.9));
  EXPECT_EQ(dropout_scale(0.75), 4.0f);
}

// Runs dropout(x, p, seed) on x = 1 + (i mod 7) / 8 (exact in f32, never 0).
HostTensor run_dropout(const Shape& shape, double p, int64_t seed) {
  Graph g;
  auto x = g.input("x", DType::kF32, shape);
  g.output("y", dropout(x, p, seed));
  HostTensor in{DType::kF32, shape, {}};
  for (int64_t i = 0; i < shape.numel(); ++i) in.values.push_back(1.0 + static_cast<double>(i % 7) / 8.0);
  auto out = interpret(g, {{"x", in}}, {Rounding::kOutputsOnly});
  EXPECT_TRUE(out.ok()) << out.status();
  return out->at("y");
}

constexpr int64_t kRows = 1000, kCols = 1000;  // 1e6 elements

TEST(PhiloxDropoutTest, KeptFractionAndScale) {
  for (double p : {0.1, 0.5, 0.9}) {
    const HostTensor y = run_dropout({kRows, kCols}, p, 42);
    const double scale = dropout_scale(p);
    int64_t kept = 0;
    for (int64_t i = 0; i < y.numel(); ++i) {
      const double x = 1.0 + static_cast<double>(i % 7) / 8.0;
      const bool keeps = dropout_keeps(42, i, p);
      ASSERT_EQ(y.values[i] != 0.0, keeps) << "element " << i;
      if (keeps) {
        ++kept;
        ASSERT_EQ(y.values[i], round_to_dtype(x * scale, DType::kF32)) << "element " << i;
      }
    }
    const double n = static_cast<double>(y.numel());
    const double sigma = std::sqrt(p * (1 - p) / n);
    EXPECT_NEAR(static_cast<double>(kept) / n, 1 - p, 6 * sigma) << "p=" << p;
  }
}

TEST(PhiloxDropoutTest, SameSeedSameMaskOtherSeedOtherMask) {
  const double p = 0.3;
  const HostTensor a = run_dropout({kRows, kCols}, p, 1234);
  const HostTensor b = run_dropout({kRows, kCols}, p, 1234);
  const HostTensor c = run_dropout({kRows, kCols}, p, 1235);
  EXPECT_EQ(a.values, b.values);
  int64_t differ = 0;
  for (int64_t i = 0; i < a.numel(); ++i) differ += (a.values[i] == 0) != (c.values[i] == 0);
  // Independent masks disagree with probability 2p(1-p).
  const double n = static_cast<double>(a.numel());
  const double expected = 2 * p * (1 - p);
  EXPECT_NEAR(static_cast<double>(differ) / n, expected, 6 * std::sqrt(expected * (1 - expected) / n));
}

TEST(PhiloxDropoutTest, ZeroProbabilityKeepsEverything) {
  const HostTensor y = run_dropout({3, 5, 7}, 0.0, 9);
  for (int64_t i = 0; i < y.numel(); ++i) EXPECT_EQ(y.values[i], 1.0 + static_cast<double>(i % 7) / 8.0);
}

TEST(PhiloxDropoutTest, MaskFollowsTheFlatIndexWhateverTheShape) {
  // The same 840 elements as [840] and as [2, 3, 4, 35] get the same mask.
  const HostTensor flat = run_dropout({840}, 0.4, 5);
  const HostTensor nd = run_dropout({2, 3, 4, 35}, 0.4, 5);
  EXPECT_EQ(flat.values, nd.values);
}

TEST(PhiloxDropoutTest, LargeSeedsUseBothKeyWords) {
  const uint64_t lo = 77, hi = (uint64_t{1} << 32) | 77;
  int64_t differ = 0;
  for (uint64_t i = 0; i < 1000; ++i) differ += dropout_keeps(lo, i, 0.5) != dropout_keeps(hi, i, 0.5);
  EXPECT_GT(differ, 300);
}

}  // namespace
}  // namespace fusejit
