// Expansions of the composite ops into primitives. They define what a
// composite means: the reference interpreter evaluates a composite through
// its expansion, and the fusion pass fuses the expanded primitives.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ir/attrs.h"

namespace fusejit {

class Value;
class Graph;

// layer_norm(x, gamma?, beta?, eps): (x - mean) * rsqrt(var + eps) * gamma + beta,
// with the biased variance mean((x - mean)^2), as torch.nn.functional.layer_norm.
Value expand_layer_norm(std::span<const Value> operands, const Attrs& attrs);
// rms_norm(x, gamma?, eps): x * rsqrt(mean(x^2) + eps) * gamma.
Value expand_rms_norm(std::span<const Value> operands, const Attrs& attrs);
// softmax(x): exp(x - max(x)) / sum(exp(x - max(x))).
Value expand_softmax(std::span<const Value> operands, const Attrs& attrs);
// log_softmax(x): (x - max(x)) - log(sum(exp(x - max(x)))).
Value expand_log_softmax(std::span<const Value> operands, const Attrs& attrs);

// A copy of `graph` with every composite replaced by its primitives, names
// and outputs kept (a composite's result keeps its name). When `origin` is
// given, (*origin)[id] is the node of `graph` that node `id` of the result
// implements (for a primitive of an expansion: the composite).
Graph expand_composites(const Graph& graph, std::vector<int32_t>* origin = nullptr);

}  // namespace fusejit
