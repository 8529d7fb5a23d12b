#include "ir/verifier.h"

#include <vector>

#include <absl/container/flat_hash_set.h>
#include <absl/strings/str_join.h>
#include <fmt/format.h>

#include "ir/infer.h"

namespace fusejit {
namespace {


// The most bytes a plan of the graph may move, by the bound in
// plan_traffic_bound(): the cost model adds them up in int64.
constexpr double kMaxPlanTrafficBytes = 0x1p62;

// An upper bound on the bytes any plan of `graph` reads and writes, fused or
// not: a kernel reads a value only for an op of its own that uses it,
// re-reading a row at most once per reduction stage (at most one stage per
// reduction of the graph), and writes each value once. So the traffic is at
// most (reductions + 1) x the sum over values of bytes x (uses + 1).
double plan_traffic_bound(const Graph& graph) {
  std::vector<double> uses(graph.num_nodes(), 0.0);
  double reductions = 0;
  for (int32_t id = 0; id < graph.num_nodes(); ++id) {
    const Node& n = graph.node(id);
    if (n.info().kind == OpKind::kReduce) reductions += 1;
    for (const Operand& o : n.operands) {
      if (!o.is_literal()) uses[o.node] += 1;
    }
  }
  double traffic = 0;
  for (int32_t id = 0; id < graph.num_nodes(); ++id) {
    const Node& n = graph.node(id);
    traffic += static_cast<double>(n.shape.numel()) * dtype_size(n.dtype) * (uses[id] + 1);
  }
  return (reductions + 1) * traffic;
}

}  // namespace

std::string diagnostic_prefix(const Graph& graph, SourceLoc loc) {
  if (loc.line <= 0) return "error: ";
  const std::string& file = graph.source_file().empty() ? std::string("<input>") : graph.source_file();
  return fmt::format("{}:{}:{}: error: ", file, loc.line, loc.col);
}

std::vector<std::string> verify_graph(const Graph& graph) {
  std::vector<std::string> errors;
  absl::flat_hash_set<std::string> names;
  auto report = [&](const Node& n, std::string message) {
    errors.push_back(diagnostic_prefix(graph, n.loc) + message);
  };

  for (int32_t id = 0; id < graph.num_nodes(); ++id) {
    const Node& n = graph.node(id);
    if (!is_identifier(n.name)) report(n, fmt::format("'{}' is not a valid name", n.name));
    if (!names.insert(n.name).second) report(n, fmt::format("'{}' is defined more than once", n.name));

    if (!is_valid_op(n.op)) {
      report(n, fmt::format("{}: op {} is not an op of the op table", n.name, static_cast<int>(n.op)));
      continue;
    }
    if (n.op == Op::kInput) {
      if (!n.operands.empty() || n.attrs.size() != 0) report(n, fmt::format("input {} has operands", n.name));
      if (n.shape.rank() < 1 || n.shape.rank() > kMaxRank) {
        report(n, fmt::format("input {}: rank must be 1 to 4, got {}", n.name, n.shape.rank()));
        continue;
      }
      bool extents_ok = true;
      for (int64_t d : n.shape) extents_ok = extents_ok && d > 0;
      if (!extents_ok) {
        report(n, fmt::format("input {}: extents must be positive, got {}", n.name, n.shape));
      } else if (n.shape.numel_overflows()) {
        report(n, fmt::format("input {}: the number of elements of {} overflows", n.name, n.shape));
      } else if (exceeds_value_limit(n.dtype, n.shape)) {
        report(n, fmt::format("input {}: {}{} takes more than the 256 TiB (2^48 bytes) a value may take", n.name,
                              n.dtype, n.shape));
      }
      continue;
    }

    bool operands_ok = true;
    for (const Operand& o : n.operands) {
      if (!o.is_literal() && o.node >= graph.num_nodes()) {
        report(n, fmt::format("{} uses node {}, which does not exist (the graph has {} nodes)", n.name, o.node,
                              graph.num_nodes()));
        operands_ok = false;
      } else if (!o.is_literal() && o.node >= id) {
        report(n, fmt::format("{} uses a value defined after it (node {})", n.name, o.node));
        operands_ok = false;
      }
    }
    if (!operands_ok) continue;
    NodeCheck check = make_node(graph, n.info(), n.operands, n.attrs);
    if (!check.ok()) {
      report(n, check.error);
      continue;
    }
    if (check.node.dtype != n.dtype || check.node.shape != n.shape) {
      report(n, fmt::format("{} is recorded as {}{} but {} gives {}{}", n.name, n.dtype, n.shape, n.info().name,
                            check.node.dtype, check.node.shape));
    } else if (exceeds_value_limit(n.dtype, n.shape)) {
      report(n, fmt::format("{}: {} gives {}{}, more than the 256 TiB (2^48 bytes) a value may take", n.name,
                            n.info().name, n.dtype, n.shape));
    }
  }

  if (errors.empty()) {  // every value has a valid shape and dtype
    if (const double bound = plan_traffic_bound(graph); bound > kMaxPlanTrafficBytes) {
      errors.push_back(fmt::format(
          "error: the graph is too large to plan: its values, counted once per use and once per reduction, "
          "come to {:.3g} bytes, over the 2^62 a plan's byte counts may reach ({} values)",
          bound, graph.num_nodes()));
    }
  }

  if (graph.outputs().empty()) errors.push_back("error: the graph has no output");
  absl::flat_hash_set<int32_t> seen_outputs;
  for (int32_t o : graph.outputs()) {
    if (o < 0 || o >= graph.num_nodes()) {
      errors.push_back(fmt::format("error: output refers to node {}, which does not exist", o));
      continue;
    }
    const Node& n = graph.node(o);
    if (n.op == Op::kInput) report(n, fmt::format("output {} is a graph input; outputs must be computed", n.name));
    if (!seen_outputs.insert(o).second) report(n, fmt::format("{} is listed as an output more than once", n.name));
  }
  return errors;
}

absl::Status verify(const Graph& graph) {
  std::vector<std::string> errors = verify_graph(graph);
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
}

}  // namespace fusejit
