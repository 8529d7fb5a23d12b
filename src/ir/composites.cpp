#include "ir/composites.h"

#include <vector>

#include "ir/builder.h"

namespace fusejit {

Value expand_layer_norm(std::span<const Value> operands, const Attrs& attrs) {
  const Value x = operands[0];
  const Value centered = x - mean(x);
  const Value variance = mean(square(centered));
  Value y = centered * rsqrt(variance + attrs.get_float("eps"));
  if (operands.size() > 1) y = y * operands[1];
  if (operands.size() > 2) y = y + operands[2];
  return y;
}

Value expand_rms_norm(std::span<const Value> operands, const Attrs& attrs) {
  const Value x = operands[0];
  Value y = x * rsqrt(mean(square(x)) + attrs.get_float("eps"));
  if (operands.size() > 1) y = y * operands[1];
  return y;
}

Value expand_softmax(std::span<const Value> operands, const Attrs&) {
  const Value x = operands[0];
  const Value e = exp(x - max(x));
  // One reciprocal per row and a multiply per element: an IEEE division per
  // element cost a GPU thread 16 division sequences per row (17 MUFU.RCP
  // with their slow-path checks) and the CPU a vdivps per 8 elements, for
  // at most one ulp more error than e / sum(e).
  return e * reciprocal(sum(e));
}

Value expand_log_softmax(std::span<const Value> operands, const Attrs&) {
  const Value x = operands[0];
  const Value shifted = x - max(x);
  return shifted - log(sum(exp(shifted)));
}

Graph expand_composites(const Graph& graph, std::vector<int32_t>* origin) {
  Graph out;
  std::vector<int32_t> remap(graph.num_nodes(), -1);
  for (int32_t id = 0; id < graph.num_nodes(); ++id) {
    const Node& n = graph.node(id);
    Node copy = n;
    for (Operand& o : copy.operands) {
      if (!o.is_literal()) o.node = remap[o.node];
    }
    // Expansion temporaries are named by the builder; one may hold a name
    // the original graph uses further down. The user's name wins.
    if (auto taken = out.find(n.name)) out.rename(*taken, out.fresh_name("t"));
    if (n.info().kind != OpKind::kComposite) {
      remap[id] = out.append(std::move(copy));
      continue;
    }
    std::vector<Value> args;
    for (const Operand& o : copy.operands) args.emplace_back(&out, o.node);
    const Value result = n.info().expand(args, n.attrs);
    // The last primitive of the expansion carries the composite's name, so
    // that outputs keep their names.
    if (auto taken = out.find(n.name); taken && *taken != result.id()) out.rename(*taken, out.fresh_name("t"));
    out.rename(result.id(), n.name);
    remap[id] = result.id();
  }
  for (int32_t o : graph.outputs()) out.add_output(remap[o]);
  if (origin != nullptr) {
    // Every node of `out` was appended while expanding exactly one node of
    // `graph`, in order; walk both to record which.
    origin->assign(out.num_nodes(), -1);
    int32_t next = 0;
    for (int32_t id = 0; id < graph.num_nodes(); ++id) {
      for (; next <= remap[id]; ++next) (*origin)[next] = id;
    }
  }
  return out;
}

}  // namespace fusejit
