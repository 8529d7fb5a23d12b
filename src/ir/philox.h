// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3")
// and the dropout mask built on it. The mask is keyed by the global element
// index, never by thread layout, so every backend draws the same mask:
//   key = (seed lo, seed hi); counter = (i/4 lo, i/4 hi, 0, 0);
//   word = philox(counter, key)[i % 4]; u = (word >> 8) * 2^-24;
//   keep iff u >= p; kept values are scaled by 1 / (1 - p).
// The result is x * (keep ? dropout_scale(p) : 0), a multiplication as in
// PyTorch (x * mask * scale): a dropped NaN or infinity gives NaN, not 0.
//
// "u >= p" compares the exact u with the exact double p. Because u is a
// multiple of 2^-24, it equals the integer test (word >> 8) >= ceil(p * 2^24);
// backends should use that test (dropout_threshold) rather than compare u with
// a float-rounded p, which would disagree for some p (e.g. p >= 0.5).
#pragma once

#include <array>
#include <cstdint>

namespace fusejit {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key);

// The key and counter of the mapping above.
PhiloxKey dropout_key(uint64_t seed);
PhiloxCounter dropout_counter(uint64_t index);

// The uniform number in [0, 1) that decides element `index` (exact in float).
float dropout_uniform(uint64_t seed, uint64_t index);
// The integer form of "u >= p": element i is kept iff (word >> 8) >= dropout_threshold(p).
// p in [0, 1) gives a threshold in [0, 2^24].
uint32_t dropout_threshold(double p);
// Whether dropout with probability p keeps element `index`.
bool dropout_keeps(uint64_t seed, uint64_t index, double p);
// The scale applied to kept elements: 1 / (1 - p) computed in double and
// rounded once to float, the constant a code generator prints into a kernel.
float dropout_scale(double p);

}  // namespace fusejit
