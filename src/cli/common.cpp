// What several commands share (declared in commands.h): loading a graph
// file and opening a backend, each printing why it failed.
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "fusejit.h"

namespace fusejit::cli {

std::optional<Graph> load_graph(const std::string& file) {
  absl::StatusOr<Graph> graph = parse_graph_file(file);
  if (!graph.ok()) {
    fmt::print(stderr, "{}\n", status_text(graph.status()));
    return std::nullopt;
  }
  return *std::move(graph);
}

std::unique_ptr<Backend> open_backend(const std::string& name) {
  absl::StatusOr<std::unique_ptr<Backend>> backend = make_backend(name);
  if (!backend.ok()) {
    fmt::print(stderr, "fusejit: error: backend {}: {}\n", name, status_text(backend.status()));
    return nullptr;
  }
  return *std::move(backend);
}

}  // namespace fusejit::cli
