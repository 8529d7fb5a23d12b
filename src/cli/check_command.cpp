#include <memory>
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

void register_check(CLI::App& app, int& exit_code) {
  auto file = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("check", "Parse and verify a .fj graph; print its canonical text");
  cmd->add_option("FILE", *file, "graph in the .fj text format")->required();
  cmd->callback([file, &exit_code] {
    const std::optional<Graph> graph = load_graph(*file);
    if (!graph) {
      exit_code = 1;
      return;
    }
    fmt::print("{}", print_graph(*graph));
    exit_code = 0;
  });
}

}  // namespace fusejit::cli
