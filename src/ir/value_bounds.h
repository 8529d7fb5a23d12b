// Lower bounds on the values a graph computes, known from its ops alone
// (a square is never negative; a mean of values >= L is about >= L; adding
// LayerNorm's epsilon to a variance gives at least epsilon). A code
// generator uses them where a cheaper instruction is exact only on part of
// the range: rsqrt on a GPU flushes subnormal inputs (rsqrt.approx.ftz) one
// instruction instead of four where its operand is known to be normal.
#pragma once

#include <cstdint>
#include <optional>

#include "ir/graph.h"

namespace fusejit {

// A number every element of the value is at least, whether the kernel
// computes it in f32 or rounds it to the node's dtype; nullopt where the
// ops say nothing (any input, a difference, a division). NaN elements are
// outside the claim: an op that gives NaN for NaN does so either way.
std::optional<double> lower_bound(const Graph& graph, const Operand& operand);

// Whether every element of `operand` is at least FLT_MIN (2^-126), so that
// flushing subnormal inputs to zero cannot change a result.
bool is_at_least_min_normal(const Graph& graph, const Operand& operand);

}  // namespace fusejit
