// The canonical .fj text: nodes in graph order, attributes in spec order and
// only where they differ from their default, numbers in the shortest form
// that reads back to the same double, one `output` line at the end.
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/text_format.h"

namespace fusejit {
namespace {

bool is_default(const AttrSpec& spec, const AttrValue& value) {
  if (spec.default_text.empty()) return false;  // required: always written
  absl::StatusOr<AttrValue> default_value = parse_attr_value(spec, spec.default_text);
  return default_value.ok() && *default_value == value;
}

// A graph built with Graph::add_output or edited by hand may name a node it
// lacks until verify() refuses it; printing it is how a user looks for
// what went wrong, so the missing node is shown, not read past the end.
std::string name_of(const Graph& graph, int32_t id) {
  if (id < 0 || static_cast<size_t>(id) >= graph.nodes().size()) return fmt::format("<no node {}>", id);
  return graph.node(id).name;
}

std::string call_text(const Graph& graph, const Node& node) {
  std::vector<std::string> args;
  for (const Operand& o : node.operands) {
    args.push_back(o.is_literal() ? fmt::format("{}", o.literal) : name_of(graph, o.node));
  }
  for (const AttrSpec& spec : node.info().attrs) {
    const AttrValue* value = node.attrs.find(spec.name);
    if (value != nullptr && !is_default(spec, *value)) {
      args.push_back(fmt::format("{}={}", spec.name, format_attr_value(*value)));
    }
  }
  return fmt::format("{}({})", node.info().name, fmt::join(args, ", "));
}

}  // namespace

std::string print_statement(const Graph& graph, const Node& node) {
  if (node.op == Op::kInput) return fmt::format("input {}: {}{}", node.name, node.dtype, node.shape);
  return fmt::format("{} = {}", node.name, call_text(graph, node));
}

std::string print_graph(const Graph& graph) {
  std::string out;
  for (const Node& node : graph.nodes()) {
    out += print_statement(graph, node);
    out += '\n';
  }
  if (!graph.outputs().empty()) {
    std::vector<std::string> names;
    for (int32_t id : graph.outputs()) names.push_back(name_of(graph, id));
    fmt::format_to(std::back_inserter(out), "output {}\n", fmt::join(names, ", "));
  }
  return out;
}

}  // namespace fusejit
