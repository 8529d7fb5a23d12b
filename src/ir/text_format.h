// The .fj text format: one statement per line, '#' starts a comment.
//
//   input x: bf16[8192, 4096]
//   input b: bf16[4096]
//   h = add(x, b)
//   g = gelu(h)                    # gelu(h, approximate=tanh) for the tanh form
//   d = dropout(g, p=0.1, seed=42)
//   y = layer_norm(d, gamma, beta, eps=1e-5)
//   output y
//
// Operands are value names or numeric literals; attributes are key=value
// after the operands; `output` takes one or more names separated by commas
// and may appear more than once. print_graph() writes the canonical form
// (attributes at their default value are left out), and
// parse_graph(print_graph(g)) gives back g and the same text.
#pragma once

#include <string>
#include <string_view>

#include <absl/status/statusor.h>

#include "ir/graph.h"

namespace fusejit {

// Parses and verifies. On failure the status message holds every error
// found, one per line, each "FILE:LINE:COL: error: message" (FILE is
// `file_name`; LINE and COL are 1-based, COL counting bytes).
absl::StatusOr<Graph> parse_graph(std::string_view text, std::string_view file_name = "<input>");
// Reads `path` and parses it; the graph's source_file() is `path`. "-"
// reads standard input, named "<stdin>" in diagnostics (a file named "-"
// is "./-").
absl::StatusOr<Graph> parse_graph_file(const std::string& path);
// What parse_graph_file reads: the text of `path` ("-": standard input),
// stopping a little past the largest text parse_graph accepts, so that an
// endless file (/dev/zero) is refused by parse_graph rather than read to
// the end. Errors are "FILE: error: cannot open|read the file: WHY".
absl::StatusOr<std::string> read_graph_text(const std::string& path);
// How diagnostics name the graph read from `path`: "<stdin>" for "-".
std::string graph_source_name(const std::string& path);

// The canonical text of a graph. An id the graph has no node for (in a
// graph verify() refuses) prints as `<no node ID>`.
std::string print_graph(const Graph& graph);
// The canonical text of one node's statement, without the newline.
std::string print_statement(const Graph& graph, const Node& node);

}  // namespace fusejit
