// Warnings about a graph that verifies but is probably not what its author
// meant: values no output uses, dropouts that share a seed, and a dropout
// whose p is so near 1 that its 16-bit mask drops every element or keeps a
// count its 1 / (1 - p) scale does not fit. The command
// line prints them when it loads a graph; a program using the library can
// print them the same way.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace fusejit {

// One message per finding, in node order: "FILE:LINE:COL: 'h' is not used by
// any output; it is not computed" for a graph read from a file, the same
// without the location for one built in C++. A graph that does not verify
// has errors, which matter more: it gets no warnings.
std::vector<std::string> graph_warnings(const Graph& graph);

}  // namespace fusejit
