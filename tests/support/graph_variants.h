// Test helpers: variants of a graph (smaller extents, so that example graphs
// of transformer size run through the float64 reference in milliseconds;
// other input dtypes), and a set of small graphs of many shapes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace fusejit::testing {

// parse_graph, throwing std::runtime_error with the diagnostic on a syntax error.
Graph parse_or_throw(std::string_view text, std::string_view name = "<test>");

// Rebuilds `graph` with every input extent e replaced by resize.at(e) when
// present. Extents that were equal stay equal, so shapes stay compatible.
Graph resize_extents(const Graph& graph, const std::map<int64_t, int64_t>& resize);
// resize_extents() mapping each distinct extent above `limit` to a small odd
// extent of its own (17, 19, 23, ...), in increasing order.
Graph shrink(const Graph& graph, int64_t limit = 64);
// Rebuilds `graph` with every input stored as `dtype` (types downstream follow).
Graph with_input_dtype(const Graph& graph, DType dtype);

// Small graphs in the text format covering what fusion must handle:
// diamonds, a value used by two reductions, intermediate outputs,
// broadcasts both ways, matmul epilogues, mixed dtypes, siblings, every
// composite, dropout before a reduction.
const std::vector<std::string>& varied_graph_texts();

// `layers` repetitions of one layer, h' = layer_norm(dropout(matmul(h, w) +
// b), g, be), with weights and a seed of its own per layer; every layer's
// dropout result is an output, so a layer run with another layer's seed or
// tensors shows. Fused, each layer is a matmul and a row kernel that are the
// same code as every other layer's.
std::string stacked_layers_text(int layers);

}  // namespace fusejit::testing
