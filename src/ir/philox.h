// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3")
// and the dropout mask built on it. The mask is keyed by the global element
// index, never by thread layout, so every backend draws the same mask:
//   key = (seed lo, seed hi); counter = (i/4 lo, i/4 hi, 0, 0);
//   word = philox(counter, key)[i % 4]; u = (word >> 8) * 2^-24;
//   keep iff u >= p; kept values are scaled by 1 / (1 - p).
#pragma once

#include <array>
#include <cstdint>

namespace fusejit {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key);

// The uniform number in [0, 1) that decides element `index` (exact in float).
float dropout_uniform(uint64_t seed, uint64_t index);
// Whether dropout with probability p keeps element `index`.
bool dropout_keeps(uint64_t seed, uint64_t index, double p);
// The scale applied to kept elements, computed in float as devices do.
float dropout_scale(double p);

}  // namespace fusejit
