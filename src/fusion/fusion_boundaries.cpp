#include "fusion/fusion_boundaries.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "fusion/matmul_epilogue.h"

namespace fusejit {
namespace {

// Whether kernels of these two spaces could ever be one: the same space,
// or a row kernel and what runs over its rows or its per-row values.
bool spaces_meet(const Kernel& a, const Kernel& b) {
  if (a.iteration == b.iteration) return true;
  if (a.kind == KernelKind::kRow && b.iteration == per_row(a.iteration)) return true;
  return b.kind == KernelKind::kRow && a.iteration == per_row(b.iteration);
}

// What the boundaries of one plan share: which kernel writes each tensor,
// how many kernels read it, and the kernel graph for the in-between rule.
// Everything here is computed once per plan, so that the reason for each
// boundary costs about the size of the two kernels, not of the plan: a
// model of thousands of layers has tens of thousands of boundaries.
struct PlanFacts {
  std::vector<int> writer;                  // by node id; -1 for an input
  std::vector<int> reader_count;            // by node id: kernels that read it
  std::vector<bool> is_output;              // by node id
  std::vector<std::vector<int>> consumers;  // by kernel: later kernels reading what it writes
  std::vector<int> uses;                    // by node id: operands of the plan's nodes that name it
  std::vector<std::vector<int>> computed_in;  // by node id: the kernels holding it, in plan order
  // kernel_between()'s marks: kernel k was seen in the search numbered
  // seen[k], so that no search clears them.
  mutable std::vector<int> seen;
  mutable int search = 0;
};

// A kernel strictly between a and b that a reaches and that reaches b:
// searched from a, only through kernels before b.
int kernel_between(const PlanFacts& facts, int a, int b) {
  const int search = ++facts.search;
  std::vector<int> stack;
  for (int c : facts.consumers[static_cast<size_t>(a)]) {
    if (c < b && facts.seen[static_cast<size_t>(c)] != search) {
      facts.seen[static_cast<size_t>(c)] = search;
      stack.push_back(c);
    }
  }
  while (!stack.empty()) {
    const int c = stack.back();
    stack.pop_back();
    for (int d : facts.consumers[static_cast<size_t>(c)]) {
      if (d == b) return c;
      if (d < b && facts.seen[static_cast<size_t>(d)] != search) {
        facts.seen[static_cast<size_t>(d)] = search;
        stack.push_back(d);
      }
    }
  }
  return -1;
}

std::string reason_for(const FusionPlan& plan, const FusionOptions& options, const PlanFacts& facts, int a, int b,
                       const std::vector<int32_t>& crossing) {
  const Graph& graph = *plan.graph;
  const Kernel& pa = plan.kernels[static_cast<size_t>(a)];
  const Kernel& pb = plan.kernels[static_cast<size_t>(b)];
  if (pb.kind == KernelKind::kMatmul) {
    const Node& mm = graph.node(pb.nodes.front());
    const bool operands = std::any_of(crossing.begin(), crossing.end(), [&](int32_t t) {
      return std::any_of(mm.operands.begin(), mm.operands.end(), [&](const Operand& o) { return o.node == t; });
    });
    return operands ? "a matmul runs as a library call (cuBLAS on a GPU, the generated GEMM on the CPU) that reads "
                      "its operands from memory"
                    : "a matmul's epilogue, run by the library call (cuBLASLt on a GPU), reads its bias from memory";
  }
  if (pa.kind == KernelKind::kMatmul) {
    // The first node of b that reads what the matmul kernel stores: why it
    // is not the next step of the epilogue.
    const int32_t last = pa.nodes.back();
    const int uses = facts.uses[static_cast<size_t>(last)];
    for (int32_t id : pb.nodes) {
      const Node& n = graph.node(id);
      const int reads_last = static_cast<int>(std::count_if(
          n.operands.begin(), n.operands.end(), [&](const Operand& o) { return !o.is_literal() && o.node == last; }));
      if (reads_last == 0) continue;
      const bool used_elsewhere = facts.is_output[static_cast<size_t>(last)] || uses > reads_last;
      std::string why = matmul_epilogue_refusal(graph, pa.nodes, id, used_elsewhere);
      if (n.info().kind == OpKind::kReduce) {
        // Named by what it reduces: a reduction of a composite (layer_norm's
        // mean) has a name of the expansion's, not the user's.
        why = fmt::format("a reduction of {}'s rows follows, and a matmul kernel's epilogue is elementwise",
                          graph.node(last).name);
      }
      if (!why.empty()) return "a matmul runs as a library call: " + why;
      // An add the epilogue could take, but for where its bias comes
      // from: computed in a kernel that runs after the matmul's (b, which
      // also reads the product), it cannot be in memory when the matmul
      // runs. Found by a probe, which got the generic reason below.
      if (n.op == Op::kAdd) {
        for (const Operand& o : n.operands) {
          if (o.is_literal() || o.node == last) continue;
          for (int k : facts.computed_in[static_cast<size_t>(o.node)]) {
            if (k <= a) continue;
            return fmt::format(
                "a matmul runs as a library call: {} '{}' adds {}, which a later kernel computes ({}), and an "
                "epilogue reads its bias from memory when the matmul runs",
                n.info().name, n.name, graph.node(o.node).name, plan.kernels[k].name);
          }
        }
      }
    }
    return "a matmul runs as a library call (cuBLAS on a GPU, the generated GEMM on the CPU), a kernel of its own";
  }
  // A node of b that a's space cannot compute.
  for (int32_t t : crossing) {
    for (int32_t id : pb.nodes) {
      const Node& n = graph.node(id);
      const bool reads_t = std::any_of(n.operands.begin(), n.operands.end(),
                                       [&](const Operand& o) { return !o.is_literal() && o.node == t; });
      if (!reads_t || kernel_space_hosts(pa.kind, pa.iteration, graph, n)) continue;
      const bool reduce = n.info().kind == OpKind::kReduce;
      return fmt::format(
          "{} '{}' {} {}; {} runs over {}{}", n.info().name, n.name, reduce ? "reduces the rows of" : "runs over",
          reduce ? graph.node(n.operands[0].node).shape : n.shape, pa.name, pa.iteration,
          pa.kind == KernelKind::kRow ? fmt::format(" and its per-row values over {}", per_row(pa.iteration)) : "");
    }
  }
  if (!spaces_meet(pa, pb)) {
    return fmt::format("{} runs over {} and {} over {}: no kernel runs over both", pa.name, pa.iteration, pb.name,
                       pb.iteration);
  }
  // Joined, the two would take what either reads from elsewhere, and write
  // what a third kernel or the graph's outputs need.
  std::set<int32_t> nodes(pa.nodes.begin(), pa.nodes.end());
  nodes.insert(pb.nodes.begin(), pb.nodes.end());
  std::set<int32_t> reads;
  for (const Kernel* k : {&pa, &pb}) {
    for (int32_t r : k->reads) {
      if (!nodes.contains(r)) reads.insert(r);
    }
  }
  int64_t writes = 0;
  for (const Kernel* k : {&pa, &pb}) {
    for (int32_t w : k->writes) {
      // Read by a kernel other than these two, or a graph output.
      const int readers_here = (std::count(pb.reads.begin(), pb.reads.end(), w) > 0 ? 1 : 0) +
                               (std::count(pa.reads.begin(), pa.reads.end(), w) > 0 ? 1 : 0);
      if (facts.is_output[static_cast<size_t>(w)] || facts.reader_count[static_cast<size_t>(w)] > readers_here) {
        ++writes;
      }
    }
  }
  int64_t dropouts = 0;
  for (int32_t id : nodes) dropouts += graph.node(id).op == Op::kDropout ? 1 : 0;
  const int64_t tensors = std::ssize(reads) + writes + kDropoutKeySlots * dropouts;
  if (tensors > options.max_kernel_tensors) {
    return fmt::format(
        "together they would take {} tensors{}, more than a kernel may take (max_kernel_tensors {})", tensors,
        dropouts == 0   ? ""
        : dropouts == 1 ? fmt::format(" ({} read or written, and {} for the dropout's Philox keys)",
                                      tensors - kDropoutKeySlots, kDropoutKeySlots)
                        : fmt::format(" ({} read or written, and {} for each of {} dropouts' Philox keys)",
                                      tensors - kDropoutKeySlots * dropouts, kDropoutKeySlots, dropouts),
        options.max_kernel_tensors);
  }
  if (std::ssize(nodes) > options.max_kernel_nodes) {
    return fmt::format("together they would hold {} nodes, more than a kernel may hold (max_kernel_nodes {})",
                       nodes.size(), options.max_kernel_nodes);
  }
  if (const int c = kernel_between(facts, a, b); c >= 0) {
    return fmt::format(
        "{} runs between them (it needs what {} writes, and {} needs what it writes): one kernel "
        "for both would have to wait for it inside itself",
        plan.kernels[static_cast<size_t>(c)].name, pa.name, pb.name);
  }
  for (const Kernel* k : {&pa, &pb}) {
    if (k->row_strategy == RowStrategy::kReread) {
      return fmt::format(
          "{}'s rows of {} elements are longer than the device keeps on chip ({}), so it walks each row in {} "
          "passes and loads what it needs in each (and computes it again); ops apart from it load their inputs "
          "and compute once, which {}",
          k->name, k->iteration.last(), options.persistent_row_limit, k->row_passes,
          options.kernel_weight
              ? "weighs less (FusionOptions::kernel_weight: the predicted time on the device planned for)"
              : "moves fewer bytes");
    }
  }
  return "no rule of the fusion pass joins them: each node joins the kernel of one producer, and kernels of one "
         "space merge only when they read a common input (README: What fuses)";
}

}  // namespace

std::vector<FusionBoundary> fusion_boundaries(const FusionPlan& plan, const FusionOptions& options) {
  std::vector<FusionBoundary> out;
  if (!plan.graph) return out;
  const Graph& graph = *plan.graph;
  const int n = static_cast<int>(plan.kernels.size());
  const auto nodes = static_cast<size_t>(graph.num_nodes());
  PlanFacts facts{.writer = std::vector<int>(nodes, -1),
                  .reader_count = std::vector<int>(nodes, 0),
                  .is_output = std::vector<bool>(nodes, false),
                  .consumers = std::vector<std::vector<int>>(static_cast<size_t>(n)),
                  .uses = std::vector<int>(nodes, 0),
                  .computed_in = std::vector<std::vector<int>>(nodes),
                  .seen = std::vector<int>(static_cast<size_t>(n), 0)};
  for (int32_t id : graph.outputs()) facts.is_output[static_cast<size_t>(id)] = true;
  for (int k = 0; k < n; ++k) {
    const Kernel& kernel = plan.kernels[static_cast<size_t>(k)];
    for (int32_t w : kernel.writes) facts.writer[static_cast<size_t>(w)] = k;
    for (int32_t id : kernel.nodes) {
      facts.computed_in[static_cast<size_t>(id)].push_back(k);
      for (const Operand& o : graph.node(id).operands) {
        if (!o.is_literal()) ++facts.uses[static_cast<size_t>(o.node)];
      }
    }
  }
  // The tensors each (writer, reader) pair passes, in one walk over the reads.
  std::map<std::pair<int, int>, std::vector<int32_t>> crossing;
  for (int k = 0; k < n; ++k) {
    for (int32_t r : plan.kernels[static_cast<size_t>(k)].reads) {
      ++facts.reader_count[static_cast<size_t>(r)];
      const int w = facts.writer[static_cast<size_t>(r)];
      if (w < 0 || w == k) continue;
      std::vector<int32_t>& tensors = crossing[{w, k}];
      if (tensors.empty()) facts.consumers[static_cast<size_t>(w)].push_back(k);
      tensors.push_back(r);
    }
  }
  for (const auto& [pair, tensors] : crossing) {
    FusionBoundary boundary{.producer = pair.first, .consumer = pair.second, .tensors = {}, .reason = {}};
    for (int32_t t : tensors) boundary.tensors.push_back(graph.node(t).name);
    boundary.reason = reason_for(plan, options, facts, pair.first, pair.second, tensors);
    out.push_back(std::move(boundary));
  }
  return out;
}

}  // namespace fusejit
