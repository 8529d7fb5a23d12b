#include "ir/graph_warnings.h"

#include <algorithm>
#include <cmath>

#include <absl/container/flat_hash_map.h>
#include <fmt/format.h>

#include "ir/philox.h"
#include "ir/verifier.h"

namespace fusejit {
namespace {

// "FILE:LINE:COL: " for a node read from a file; "" for one built in C++.
std::string where(const Graph& graph, const Node& node) {
  if (node.loc.line <= 0) return "";
  return fmt::format("{}:{}:{}: ", graph.source_file(), node.loc.line, node.loc.col);
}

}  // namespace

std::vector<std::string> graph_warnings(const Graph& graph) {
  std::vector<std::string> warnings;
  if (!verify(graph).ok()) return warnings;  // the walks below trust operand ids and attributes
  // Not an error (a graph being edited often has loose ends), but no plan
  // computes these, and an input no output reads is often a name mistyped
  // where it is used.
  const std::vector<bool> live = graph.reaches_outputs();
  for (int32_t id = 0; id < graph.num_nodes(); ++id) {
    if (live[id]) continue;
    const Node& n = graph.node(id);
    warnings.push_back(fmt::format("{}'{}' is not used by any output; {}", where(graph, n), n.name,
                                   n.op == Op::kInput ? "no plan reads it" : "it is not computed"));
  }
  // The mask decides with 16-bit numbers (ir/philox.h): it keeps a multiple
  // of 2^-16 of the elements, and scales them by 1 / (1 - p). Near p = 1 the
  // two part: a p within 2^-16 of 1 drops every element, and one a little
  // further off (from about 0.9985, depending on how p rounds) can keep,
  // scaled, a mean 1% or more off the input's. Up to p = 0.99 it is within
  // 0.2%.
  for (int32_t id = 0; id < graph.num_nodes(); ++id) {
    const Node& n = graph.node(id);
    if (n.op != Op::kDropout || !live[id]) continue;
    const double p = n.attrs.get_float("p");  // in [0, 1): the graph verifies
    const uint32_t kept = (1u << kDropoutBits) - dropout_threshold(p);
    if (kept == 0) {
      warnings.push_back(
          fmt::format("{}dropout '{}' has p={}, within 2^-16 of 1: its mask, drawn from 16-bit "
                      "random numbers, drops every element",
                      where(graph, n), n.name, p));
    } else if (const double mean = kept / ((1 - p) * 0x1p16); std::abs(mean - 1) > 0.01) {
      warnings.push_back(fmt::format(
          "{}dropout '{}' has p={}: its mask, drawn from 16-bit random numbers, keeps {} elements in 65536 where "
          "1 - p asks for {:.3g}, so its output's mean is {:.3g} times its input's",
          where(graph, n), n.name, p, kept, (1 - p) * 0x1p16, mean));
    }
  }
  // Dropouts with one seed draw the same random numbers at the same element
  // indices: stacked layers written with the default seed (0) would drop
  // the same positions in every layer, which is rarely what was meant.
  absl::flat_hash_map<int64_t, int32_t> first_with_seed;
  for (int32_t id = 0; id < graph.num_nodes(); ++id) {
    const Node& n = graph.node(id);
    // One with p=0 drops nothing, so shares nothing with another.
    if (n.op != Op::kDropout || !live[id] || n.attrs.get_float("p") == 0) continue;
    const int64_t seed = n.attrs.get_int("seed");
    const auto [it, first] = first_with_seed.try_emplace(seed, id);
    if (first) continue;
    const Node& earlier = graph.node(it->second);
    const std::string earlier_line = earlier.loc.line > 0 ? fmt::format(" (line {})", earlier.loc.line) : "";
    // With another p the same numbers still decide both: every position
    // the smaller p drops, the larger drops too.
    // Of another shape, the same flat index is another position.
    const bool same_shape = n.shape == earlier.shape;
    const double p = n.attrs.get_float("p"), earlier_p = earlier.attrs.get_float("p");
    const std::string same =
        p == earlier_p
            ? fmt::format("they drop the same {}", same_shape ? "element positions" : "flat element indices")
            : fmt::format(
                  "they draw the same random numbers, so every {} the one with p={} drops, the one with p={} "
                  "drops too",
                  same_shape ? "element position" : "flat element index", std::min(p, earlier_p),
                  std::max(p, earlier_p));
    warnings.push_back(
        fmt::format("{}dropout '{}' has seed {}, as '{}'{} has: {}; give each dropout a seed of its own "
                    "(seed=N)",
                    where(graph, n), n.name, seed, earlier.name, earlier_line, same));
  }
  return warnings;
}

}  // namespace fusejit
