// Whole-graph checks. A graph from the builder or the parser is already
// checked op by op; verify() re-checks everything, so that graphs made by
// passes or by hand (Graph::append) are held to the same rules.
#pragma once

#include <string>
#include <vector>

#include <absl/status/status.h>

#include "ir/graph.h"

namespace fusejit {

// Every problem found, each a line "FILE:LINE:COL: error: ..." when the node
// came from a file, else "error: ...".
std::vector<std::string> verify_graph(const Graph& graph);
// OK, or InvalidArgument with the lines of verify_graph() joined.
absl::Status verify(const Graph& graph);

// The prefix of a diagnostic for `loc` in `graph`'s source file.
std::string diagnostic_prefix(const Graph& graph, SourceLoc loc);

}  // namespace fusejit
