// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3")
// and the dropout mask built on it. The mask is keyed by the global element
// index, never by thread layout, so every backend draws the same mask:
//   key = (seed lo, seed hi); counter = (i/8 lo, i/8 hi, 0, 0);
//   r = philox(counter, key), read as eight 16-bit numbers, little-endian:
//   bits = (r[(i % 8) / 2] >> (16 * (i % 2))) & 0xffff;
//   u = bits * 2^-16; keep iff u >= p; kept values are scaled by 1 / (1 - p).
// The result is x * (keep ? dropout_scale(p) : 0), a multiplication as in
// PyTorch (x * mask * scale): a dropped NaN or infinity gives NaN, not 0.
//
// Why 16 bits per element rather than DESIGN.md §4's suggested 24 (one
// 32-bit word per element): one Philox call then decides 8 elements, not 4,
// which halves the integer work that dominates dropout's cost (on sm_90
// the fused demo kernel went from 53.5 to 48.1 SASS instructions per bf16
// element, bench/results/2026-12-01-dropout-16-bit.md).
// The price is resolution: the drop probability is ceil(p * 2^16) / 2^16,
// within 2^-16 (1.5e-5) of p, where FlashAttention's 8-bit mask is within
// 2^-8. PyTorch's scale 1 / (1 - p) is kept.
//
// "u >= p" compares the exact u with the exact double p. Because u is a
// multiple of 2^-16, it equals the integer test bits >= ceil(p * 2^16);
// backends should use that test (dropout_threshold) rather than compare u with
// a float-rounded p, which could disagree for some p.
#pragma once

#include <array>
#include <cstdint>

namespace fusejit {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key);

// The key of each of the ten rounds (the key bumped by the Weyl constants
// before rounds 1-9): round r uses keys[2r] and keys[2r + 1]. A CUDA kernel
// takes them as a parameter rather than adding them up itself, which cost
// its loop 10 uniform additions per Philox call (codegen/cuda/fj_philox.cuh).
using PhiloxRoundKeys = std::array<uint32_t, 20>;
PhiloxRoundKeys philox_round_keys(PhiloxKey key);

// Elements decided by one Philox call, and the bits each one gets.
inline constexpr int kDropoutGroup = 8;
inline constexpr int kDropoutBits = 16;

// The key and counter of the mapping above.
PhiloxKey dropout_key(uint64_t seed);
PhiloxCounter dropout_counter(uint64_t index);

// The 16-bit number that decides element `index`, from the Philox output of
// its group (dropout_counter(index)): number index % 8, little-endian.
uint32_t dropout_number(const PhiloxCounter& output, uint64_t index);
// The 16-bit number that decides element `index`, and the uniform number in
// [0, 1) it stands for (bits * 2^-16, exact in float).
uint32_t dropout_bits(uint64_t seed, uint64_t index);
float dropout_uniform(uint64_t seed, uint64_t index);
// The integer form of "u >= p": element i is kept iff dropout_bits >= dropout_threshold(p).
// p in [0, 1) gives a threshold in [0, 2^16].
uint32_t dropout_threshold(double p);
// Whether dropout with probability p keeps element `index`.
bool dropout_keeps(uint64_t seed, uint64_t index, double p);
// The scale applied to kept elements: 1 / (1 - p) computed in double and
// rounded once to float, the constant a code generator prints into a kernel.
float dropout_scale(double p);

}  // namespace fusejit
