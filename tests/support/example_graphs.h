// Test helpers: the example graphs shipped in examples/graphs, which many
// suites run through every backend.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace fusejit::testing {

// The folder of the example graphs in the source tree.
std::filesystem::path example_graph_dir();
// Every `.fj` file in example_graph_dir(), sorted by name so that test output
// and failures come in the same order on every file system.
std::vector<std::filesystem::path> example_graph_files();
// parse_graph_file, throwing std::runtime_error with the diagnostic.
Graph parse_file_or_throw(const std::filesystem::path& path);

}  // namespace fusejit::testing
