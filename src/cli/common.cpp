// What several commands share (declared in commands.h): loading a graph
// file and opening a backend, each printing why it failed.
#include <charconv>
#include <memory>
#include <optional>
#include <string>

#include <absl/container/flat_hash_map.h>
#include <fmt/format.h>

#include "cli/commands.h"
#include "fusejit.h"

namespace fusejit::cli {

CLI::Validator seed_validator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        uint64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (text.empty() || ec != std::errc() || ptr != end) {
          return "a seed is an integer from 0 to 18446744073709551615, not '" + text + "'";
        }
        return "";
      },
      "UINT64");
}

std::optional<Graph> load_graph(const std::string& file) {
  absl::StatusOr<Graph> graph = parse_graph_file(file);
  if (!graph.ok()) {
    fmt::print(stderr, "{}\n", status_text(graph.status()));
    return std::nullopt;
  }
  // Not an error (a graph being edited often has loose ends), but the user
  // should know that no plan computes these, and where they are.
  const std::vector<bool> live = graph->reaches_outputs();
  for (int32_t id = 0; id < graph->num_nodes(); ++id) {
    if (live[id]) continue;
    const Node& n = graph->node(id);
    // An input no output reads is often a name mistyped where it is used.
    warn(fmt::format("{}:{}:{}: '{}' is not used by any output; {}", graph->source_file(), n.loc.line, n.loc.col,
                     n.name, n.op == Op::kInput ? "no plan reads it" : "it is not computed"));
  }
  // Dropouts with one seed draw the same random numbers at the same element
  // indices: stacked layers written with the default seed (0) would drop
  // the same positions in every layer, which is rarely what was meant.
  absl::flat_hash_map<int64_t, int32_t> first_with_seed;
  for (int32_t id = 0; id < graph->num_nodes(); ++id) {
    const Node& n = graph->node(id);
    if (n.op != Op::kDropout || !live[id]) continue;
    const int64_t seed = n.attrs.get_int("seed");
    const auto [it, first] = first_with_seed.try_emplace(seed, id);
    if (first) continue;
    const Node& earlier = graph->node(it->second);
    warn(fmt::format("{}:{}:{}: dropout '{}' has seed {}, as '{}' (line {}) has: they drop the same element "
                     "positions; give each dropout a seed of its own (seed=N)",
                     graph->source_file(), n.loc.line, n.loc.col, n.name, seed, earlier.name, earlier.loc.line));
  }
  return *std::move(graph);
}

std::unique_ptr<Backend> open_backend(const std::string& name) {
  if (name == "auto") {
    // The GPU when it is usable; otherwise the CPU, saying why not the GPU.
    absl::StatusOr<std::unique_ptr<Backend>> cuda = make_backend("cuda");
    if (cuda.ok()) return *std::move(cuda);
    fmt::print(stderr, "fusejit: note: --backend auto runs on the CPU: {}\n", status_text(cuda.status()));
    return open_backend("cpu");
  }
  absl::StatusOr<std::unique_ptr<Backend>> backend = make_backend(name);
  if (!backend.ok()) {
    fmt::print(stderr, "fusejit: error: backend {}: {}\n", name, status_text(backend.status()));
    return nullptr;
  }
  return *std::move(backend);
}

}  // namespace fusejit::cli
