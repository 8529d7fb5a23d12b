#include "fusion/fusion_boundaries.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace fusejit {
namespace {

// The shape a node runs over, as the fusion pass compares it: a reduction
// over its operand's rows, anything else over its own shape.
const Shape& space_of(const Graph& graph, const Node& n) {
  return n.info().kind == OpKind::kReduce ? graph.node(n.operands[0].node).shape : n.shape;
}

Shape per_row(Shape s) {
  s[s.rank() - 1] = 1;
  return s;
}

// fuse.cpp's Partitioner::hosts: whether `host` iterates over a space `n` runs in.
bool hosts(const Graph& graph, const Kernel& host, const Node& n) {
  if (host.kind == KernelKind::kMatmul) return false;
  const bool is_reduce = n.info().kind == OpKind::kReduce;
  const Shape& space = space_of(graph, n);
  if (host.kind == KernelKind::kPointwise) return space == host.iteration;
  return space == host.iteration || (!is_reduce && space == per_row(host.iteration));
}

// The nodes of `consumer` that read `tensor`.
std::vector<int32_t> readers_in(const Graph& graph, const Kernel& consumer, int32_t tensor) {
  std::vector<int32_t> out;
  for (int32_t id : consumer.nodes) {
    for (const Operand& o : graph.node(id).operands) {
      if (!o.is_literal() && o.node == tensor) {
        out.push_back(id);
        break;
      }
    }
  }
  return out;
}

std::string reason_for(const FusionPlan& plan, const FusionOptions& options, int a, int b,
                       const std::vector<int32_t>& crossing, const std::vector<std::set<int>>& reaches) {
  const Graph& graph = *plan.graph;
  const Kernel& pa = plan.kernels[static_cast<size_t>(a)];
  const Kernel& pb = plan.kernels[static_cast<size_t>(b)];
  if (pa.kind == KernelKind::kMatmul || pb.kind == KernelKind::kMatmul) {
    return "a matmul runs as a library call (cuBLAS on a GPU, the generated GEMM on the CPU), a kernel of its own";
  }
  for (int32_t t : crossing) {
    for (int32_t id : readers_in(graph, pb, t)) {
      const Node& n = graph.node(id);
      if (hosts(graph, pa, n)) continue;
      const bool reduce = n.info().kind == OpKind::kReduce;
      return fmt::format(
          "{} '{}' {} {}; {} runs over {}{}", n.info().name, n.name, reduce ? "reduces the rows of" : "runs over",
          space_of(graph, n), pa.name, pa.iteration,
          pa.kind == KernelKind::kRow ? fmt::format(" and its per-row values over {}", per_row(pa.iteration)) : "");
    }
  }
  for (const Kernel* k : {&pa, &pb}) {
    if (k->row_strategy == RowStrategy::kReread) {
      return fmt::format(
          "{}'s rows of {} elements are longer than the device keeps on chip ({}), so it walks each row in {} "
          "passes and loads what it needs in each; ops apart from it load their inputs once, which moves fewer "
          "bytes",
          k->name, k->iteration.last(), options.persistent_row_limit, k->row_passes);
    }
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
  std::set<int32_t> needed_elsewhere(graph.outputs().begin(), graph.outputs().end());
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    if (static_cast<int>(k) == a || static_cast<int>(k) == b) continue;
    needed_elsewhere.insert(plan.kernels[k].reads.begin(), plan.kernels[k].reads.end());
  }
  std::set<int32_t> writes;
  for (const Kernel* k : {&pa, &pb}) {
    for (int32_t w : k->writes) {
      if (needed_elsewhere.contains(w)) writes.insert(w);
    }
  }
  int64_t dropouts = 0;
  for (int32_t id : nodes) dropouts += graph.node(id).op == Op::kDropout ? 1 : 0;
  const int64_t tensors = std::ssize(reads) + std::ssize(writes) + kDropoutKeySlots * dropouts;
  if (tensors > options.max_kernel_tensors) {
    return fmt::format("together they would take {} tensors{}, more than a kernel may take (max_kernel_tensors {})",
                       tensors, dropouts > 0 ? fmt::format(" (each dropout counting {})", kDropoutKeySlots + 1) : "",
                       options.max_kernel_tensors);
  }
  if (std::ssize(nodes) > options.max_kernel_nodes) {
    return fmt::format("together they would hold {} nodes, more than a kernel may hold (max_kernel_nodes {})",
                       nodes.size(), options.max_kernel_nodes);
  }
  for (int c = a + 1; c < b; ++c) {
    if (reaches[static_cast<size_t>(a)].contains(c) && reaches[static_cast<size_t>(c)].contains(b)) {
      return fmt::format(
          "{} runs between them (it needs what {} writes, and {} needs what it writes): one kernel "
          "for both would have to wait for it inside itself",
          plan.kernels[static_cast<size_t>(c)].name, pa.name, pb.name);
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
  std::vector<int> writer(static_cast<size_t>(graph.num_nodes()), -1);
  for (int k = 0; k < n; ++k) {
    for (int32_t w : plan.kernels[static_cast<size_t>(k)].writes) writer[static_cast<size_t>(w)] = k;
  }
  // Which later kernels each kernel reaches through the tensors between them.
  std::vector<std::set<int>> reaches(static_cast<size_t>(n));
  for (int k = n - 1; k >= 0; --k) {
    for (int later = k + 1; later < n; ++later) {
      for (int32_t r : plan.kernels[static_cast<size_t>(later)].reads) {
        if (writer[static_cast<size_t>(r)] == k) {
          reaches[static_cast<size_t>(k)].insert(later);
          reaches[static_cast<size_t>(k)].insert(reaches[static_cast<size_t>(later)].begin(),
                                                 reaches[static_cast<size_t>(later)].end());
          break;
        }
      }
    }
  }
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      std::vector<int32_t> crossing;
      for (int32_t r : plan.kernels[static_cast<size_t>(b)].reads) {
        if (writer[static_cast<size_t>(r)] == a) crossing.push_back(r);
      }
      if (crossing.empty()) continue;
      FusionBoundary boundary{.producer = a, .consumer = b, .tensors = {}, .reason = {}};
      for (int32_t t : crossing) boundary.tensors.push_back(graph.node(t).name);
      boundary.reason = reason_for(plan, options, a, b, crossing, reaches);
      out.push_back(std::move(boundary));
    }
  }
  return out;
}

}  // namespace fusejit
