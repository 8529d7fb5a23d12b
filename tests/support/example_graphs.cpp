#include "support/example_graphs.h"

#include <algorithm>
#include <stdexcept>

#include "ir/error.h"
#include "ir/text_format.h"

namespace fusejit::testing {

std::filesystem::path example_graph_dir() { return std::filesystem::path(FUSEJIT_SOURCE_DIR) / "examples" / "graphs"; }

std::vector<std::filesystem::path> example_graph_files() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(example_graph_dir())) {
    if (entry.path().extension() == ".fj") files.push_back(entry.path());
  }
  // Every test that loops over the examples would pass over none.
  if (files.empty()) throw std::runtime_error("no .fj example graphs in " + example_graph_dir().string());
  std::sort(files.begin(), files.end());
  return files;
}

Graph parse_file_or_throw(const std::filesystem::path& path) {
  absl::StatusOr<Graph> g = parse_graph_file(path.string());
  if (!g.ok()) throw std::runtime_error(std::string(status_text(g.status())));
  return *std::move(g);
}

}  // namespace fusejit::testing
