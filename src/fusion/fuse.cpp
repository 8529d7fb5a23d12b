// The fusion pass. Rules, applied to the graph with composites expanded,
// visiting nodes in topological order:
//
// 0. A node no output depends on is not computed (nor is anything only it
//    reads).
// 1. A matmul is a kernel of its own (a library call) and a fusion boundary.
// 2. An elementwise node joins the kernel of one of its producers when the
//    node runs over that kernel's iteration space: the same shape for a
//    pointwise kernel; the row space [..., N] or the per-row space [..., 1]
//    for a row kernel (values computed once per row, such as the variance).
//    Otherwise it starts a pointwise kernel.
// 3. A reduction over the last dimension joins the kernel that produces its
//    operand when that kernel iterates over exactly the reduced shape: a
//    pointwise prologue becomes a row kernel, and reductions over the same
//    rows (mean then variance; max then sum) share it.
// 4. After placing a node, the other producer kernels it reads that could
//    host it are merged into its kernel (this joins siblings such as
//    rms_norm(x) * silu(gate)); kernels of the same space that read a common
//    input are merged at the end (siblings reading the same inputs).
// 5. A join or merge never creates a cycle between kernels: it is refused
//    when a third kernel lies on a path between the two.
// 6. A join or merge never makes a kernel take more than
//    FusionOptions::max_kernel_tensors tensors (reads plus writes).
// Nothing is recomputed in two kernels, so no duplication decision arises.
// The result is deterministic: it depends only on node order.
#include <algorithm>
#include <optional>

#include <absl/container/flat_hash_set.h>

#include "fusion/plan.h"
#include "fusion/plan_builder.h"
#include "ir/composites.h"

namespace fusejit {
namespace {

struct Group {
  KernelKind kind = KernelKind::kPointwise;
  Shape iteration;
  std::vector<int32_t> nodes;
  absl::flat_hash_set<int> deps;  // groups read directly
  bool alive = true;
};

class Partitioner {
 public:
  Partitioner(const Graph& graph, int max_tensors)
      : graph_(graph),
        max_tensors_(max_tensors),
        live_(graph.reaches_outputs()),
        group_of_(graph.num_nodes(), -1),
        users_(graph.num_nodes()) {
    for (int32_t id = 0; id < graph.num_nodes(); ++id) {
      if (!live_[id]) continue;  // computed nowhere, so it reads nothing
      for (const Operand& o : graph.node(id).operands) {
        if (!o.is_literal()) users_[o.node].push_back(id);
      }
    }
  }

  std::vector<KernelGroup> run() {
    for (int32_t id = 0; id < graph_.num_nodes(); ++id) {
      if (live_[id]) place(id);
    }
    merge_siblings();
    return ordered_groups();
  }

 private:
  static Shape per_row(Shape s) {
    s[s.rank() - 1] = 1;
    return s;
  }

  bool hosts(const Group& g, const Node& n) const {
    if (g.kind == KernelKind::kMatmul) return false;
    const bool is_reduce = n.info().kind == OpKind::kReduce;
    const Shape& space = is_reduce ? graph_.node(n.operands[0].node).shape : n.shape;
    if (g.kind == KernelKind::kPointwise) return space == g.iteration;
    return space == g.iteration || (!is_reduce && space == per_row(g.iteration));
  }

  // Whether `from` reaches `to` through the dependency edges (to ∈ deps*(from)).
  bool depends(int from, int to) const {
    std::vector<int> stack{from};
    absl::flat_hash_set<int> seen{from};
    while (!stack.empty()) {
      const int g = stack.back();
      stack.pop_back();
      for (int d : groups_[g].deps) {
        if (d == to) return true;
        if (seen.insert(d).second) stack.push_back(d);
      }
    }
    return false;
  }

  // Merging a and b is safe when no third group lies on a path between them.
  bool can_merge(int a, int b) const {
    for (int k = 0; k < static_cast<int>(groups_.size()); ++k) {
      if (k == a || k == b || !groups_[k].alive) continue;
      if ((depends(k, a) && depends(b, k)) || (depends(k, b) && depends(a, k))) return false;
    }
    return true;
  }

  void merge(int into, int from) {
    Group& dst = groups_[into];
    Group& src = groups_[from];
    if (src.kind == KernelKind::kRow && dst.kind == KernelKind::kPointwise) {
      dst.kind = KernelKind::kRow;
      dst.iteration = src.iteration;
    }
    for (int32_t id : src.nodes) group_of_[id] = into;
    dst.nodes.insert(dst.nodes.end(), src.nodes.begin(), src.nodes.end());
    std::sort(dst.nodes.begin(), dst.nodes.end());
    for (int d : src.deps) dst.deps.insert(d);
    dst.deps.erase(into);
    dst.deps.erase(from);
    src.alive = false;
    src.nodes.clear();
    for (Group& g : groups_) {
      if (g.deps.erase(from) > 0 && &g != &dst) g.deps.insert(into);
    }
  }

  std::vector<int> producer_groups(const Node& n) const {
    std::vector<int> out;
    for (const Operand& o : n.operands) {
      if (o.is_literal() || group_of_[o.node] < 0) continue;
      const int g = group_of_[o.node];
      if (std::find(out.begin(), out.end(), g) == out.end()) out.push_back(g);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  // Whether one kernel made of the groups `gs` plus node `extra` (-1: none)
  // takes at most max_tensors_ tensors: what it reads from outside plus what
  // it writes (a graph output, or a value used by a node outside, counting
  // users not placed yet, so the count never falls short of the final one).
  bool fits(std::initializer_list<int> gs, int32_t extra) const {
    auto inside = [&](int32_t id) {
      return id == extra || (group_of_[id] >= 0 && std::find(gs.begin(), gs.end(), group_of_[id]) != gs.end());
    };
    absl::flat_hash_set<int32_t> reads;
    int64_t writes = 0;
    auto count = [&](int32_t id) {
      for (const Operand& o : graph_.node(id).operands) {
        if (!o.is_literal() && !inside(o.node)) reads.insert(o.node);
      }
      bool written = graph_.is_output(id);
      for (int32_t u : users_[id]) written = written || !inside(u);
      writes += written;
    };
    for (int g : gs) {
      for (int32_t id : groups_[g].nodes) count(id);
    }
    if (extra >= 0) count(extra);
    return static_cast<int64_t>(reads.size()) + writes <= max_tensors_;
  }

  // Joining `g` adds edges g -> p for every other producer p; refused if some p already reaches g.
  bool can_join(int g, const std::vector<int>& producers) const {
    for (int p : producers) {
      if (p != g && depends(p, g)) return false;
    }
    return true;
  }

  void place(int32_t id) {
    const Node& n = graph_.node(id);
    const OpKind kind = n.info().kind;
    if (kind == OpKind::kInput) return;
    const std::vector<int> producers = producer_groups(n);
    std::optional<int> target;
    if (kind != OpKind::kMatmul) {
      for (int p : producers) {
        if (hosts(groups_[p], n) && can_join(p, producers) && fits({p}, id)) {
          target = p;
          break;
        }
      }
    }
    if (!target) {
      Group g;
      g.kind = kind == OpKind::kMatmul ? KernelKind::kMatmul
               : kind == OpKind::kReduce ? KernelKind::kRow
                                         : KernelKind::kPointwise;
      g.iteration = kind == OpKind::kReduce ? graph_.node(n.operands[0].node).shape : n.shape;
      groups_.push_back(std::move(g));
      target = static_cast<int>(groups_.size()) - 1;
    }
    Group& g = groups_[*target];
    if (kind == OpKind::kReduce && g.kind == KernelKind::kPointwise) g.kind = KernelKind::kRow;
    g.nodes.push_back(id);
    group_of_[id] = *target;
    for (int p : producers) {
      if (p != *target) g.deps.insert(p);
    }
    if (kind == OpKind::kMatmul) return;
    // Pull in the other producers that can live in this kernel.
    for (int p : producers) {
      if (p == *target || !groups_[p].alive || !compatible(*target, p) || !can_merge(*target, p) ||
          !fits({*target, p}, -1)) {
        continue;
      }
      merge(*target, p);
    }
  }

  // Whether every node of group b could live in group a's kernel (and vice versa).
  bool compatible(int a, int b) const {
    const Group& ga = groups_[a];
    const Group& gb = groups_[b];
    if (ga.kind == KernelKind::kMatmul || gb.kind == KernelKind::kMatmul) return false;
    if (ga.kind == KernelKind::kRow && gb.kind == KernelKind::kRow) return ga.iteration == gb.iteration;
    const Group& row = ga.kind == KernelKind::kRow ? ga : gb;
    const Group& other = ga.kind == KernelKind::kRow ? gb : ga;
    if (row.kind != KernelKind::kRow) return ga.iteration == gb.iteration;
    return other.iteration == row.iteration || other.iteration == per_row(row.iteration);
  }

  bool reads_common_input(int a, int b) const {
    absl::flat_hash_set<int32_t> reads;
    for (int32_t id : groups_[a].nodes) {
      for (const Operand& o : graph_.node(id).operands) {
        if (!o.is_literal() && group_of_[o.node] != a) reads.insert(o.node);
      }
    }
    for (int32_t id : groups_[b].nodes) {
      for (const Operand& o : graph_.node(id).operands) {
        if (!o.is_literal() && group_of_[o.node] != b && reads.contains(o.node)) return true;
      }
    }
    return false;
  }

  void merge_siblings() {
    for (int a = 0; a < static_cast<int>(groups_.size()); ++a) {
      for (int b = a + 1; b < static_cast<int>(groups_.size()); ++b) {
        if (!groups_[a].alive || !groups_[b].alive) continue;
        if (compatible(a, b) && reads_common_input(a, b) && can_merge(a, b) && fits({a, b}, -1)) merge(a, b);
      }
    }
  }

  // Kahn's algorithm; among ready groups the one with the earliest node goes first.
  std::vector<KernelGroup> ordered_groups() const {
    std::vector<int> alive;
    for (int g = 0; g < static_cast<int>(groups_.size()); ++g) {
      if (groups_[g].alive) alive.push_back(g);
    }
    std::vector<KernelGroup> out;
    absl::flat_hash_set<int> done;
    while (out.size() < alive.size()) {
      int best = -1;
      for (int g : alive) {
        if (done.contains(g)) continue;
        bool ready = true;
        for (int d : groups_[g].deps) ready = ready && done.contains(d);
        if (ready && (best < 0 || groups_[g].nodes.front() < groups_[best].nodes.front())) best = g;
      }
      done.insert(best);
      out.push_back({groups_[best].kind, groups_[best].iteration, groups_[best].nodes});
    }
    return out;
  }

  const Graph& graph_;
  const int max_tensors_;
  const std::vector<bool> live_;  // Graph::reaches_outputs(): the nodes worth computing
  std::vector<int> group_of_;
  std::vector<std::vector<int32_t>> users_;
  std::vector<Group> groups_;
};

}  // namespace

FusionPlan make_fused_plan(const Graph& graph, const FusionOptions& options) {
  std::vector<int32_t> origin;
  auto expanded = std::make_shared<const Graph>(expand_composites(graph, &origin));
  std::vector<KernelGroup> groups = Partitioner(*expanded, options.max_kernel_tensors).run();
  return build_plan("fused", expanded, graph, origin, std::move(groups), options);
}

}  // namespace fusejit
