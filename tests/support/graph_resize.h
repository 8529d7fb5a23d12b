// Test helper: the same graph with smaller extents, so that example graphs
// of transformer size run through the float64 reference in milliseconds.
#pragma once

#include <cstdint>
#include <map>

#include "ir/graph.h"

namespace fusejit::testing {

// Rebuilds `graph` with every input extent e replaced by resize.at(e) when
// present. Extents that were equal stay equal, so shapes stay compatible.
Graph resize_extents(const Graph& graph, const std::map<int64_t, int64_t>& resize);
// resize_extents() mapping each distinct extent above `limit` to a small odd
// extent of its own (17, 19, 23, ...), in increasing order.
Graph shrink(const Graph& graph, int64_t limit = 64);

}  // namespace fusejit::testing
