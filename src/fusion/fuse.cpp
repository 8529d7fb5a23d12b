// The fusion pass. Rules, applied to the graph with composites expanded,
// visiting nodes in topological order:
//
// 0. A node no output depends on is not computed (nor is anything only it
//    reads).
// 1. A matmul is a kernel of its own (a library call). It takes an epilogue
//    (matmul_epilogue.h): the add of a bias vector, then relu or a tanh
//    GeLU, as cuBLASLt runs them inside the GEMM; nothing else joins it,
//    and it never joins another kernel.
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
//    FusionOptions::max_kernel_tensors tensors (reads plus writes, each
//    dropout counting as kDropoutKeySlots more), nor hold more than
//    FusionOptions::max_kernel_nodes nodes.
// 7. Last, a kernel that re-reads its rows (longer than the persistent row
//    limit) is cut into runs of its ops, each a kernel, where that weighs
//    less (FusionOptions::kernel_weight; reread_split.h).
// Nothing is recomputed in two kernels, so no duplication decision arises.
// The result is deterministic: it depends only on node order and the options.
#include <algorithm>
#include <optional>
#include <queue>
#include <set>

#include <absl/container/flat_hash_set.h>

#include "fusion/group_dag.h"
#include "fusion/matmul_epilogue.h"
#include "fusion/plan.h"
#include "fusion/plan_builder.h"
#include "fusion/reread_split.h"
#include "ir/composites.h"

namespace fusejit {
namespace {

struct Group {
  KernelKind kind = KernelKind::kPointwise;
  Shape iteration;
  std::vector<int32_t> nodes;  // ascending
  // What the group's tensor count is made of, kept up to date so that a
  // join or merge is judged without walking the group's nodes (which made a
  // long chain quadratic): the nodes outside it that its nodes read, and its
  // nodes that it writes (graph outputs, or read by a node outside it or by
  // one not placed yet).
  absl::flat_hash_set<int32_t> reads;
  absl::flat_hash_set<int32_t> written;
  bool alive = true;
};

class Partitioner {
 public:
  Partitioner(const Graph& graph, int max_tensors, int max_nodes)
      : graph_(graph),
        max_tensors_(max_tensors),
        max_nodes_(max_nodes),
        live_(graph.reaches_outputs()),
        is_output_(graph.num_nodes(), false),
        group_of_(graph.num_nodes(), -1),
        users_(graph.num_nodes()),
        outside_uses_(graph.num_nodes(), 0),
        readers_(graph.num_nodes()) {
    for (int32_t id : graph.outputs()) is_output_[id] = true;
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
  bool hosts(const Group& g, const Node& n) const { return kernel_space_hosts(g.kind, g.iteration, graph_, n); }

  // Whether node `id` can be the next step of matmul group g's epilogue.
  bool takes_epilogue(const Group& g, int32_t id) const {
    if (g.kind != KernelKind::kMatmul) return false;
    const int32_t last = g.nodes.back();
    const bool used_elsewhere = is_output_[last] || users_[last].size() != 1;
    return matmul_epilogue_refusal(graph_, g.nodes, id, used_elsewhere).empty();
  }

  // Merging a and b is safe when no third group lies on a path between them.
  bool can_merge(int a, int b) const { return !dag_.joined_through_third(a, b); }

  // Joining `g` adds edges g -> p for every other producer p; refused if some p already reaches g.
  bool can_join(int g, const std::vector<int>& producers) const {
    for (int p : producers) {
      if (p != g && dag_.reaches(p, g)) return false;
    }
    return true;
  }

  // Takes from outside_uses_[x] the uses of x by nodes of group `other`
  // (about to merge with x's group).
  void forget_uses_by(int32_t x, int other) {
    for (int32_t u : users_[x]) outside_uses_[x] -= group_of_[u] == other;
  }

  void merge(int into, int from) {
    Group& dst = groups_[into];
    Group& src = groups_[from];
    for (int32_t x : dst.written) forget_uses_by(x, from);
    for (int32_t x : src.written) forget_uses_by(x, into);
    if (src.kind == KernelKind::kRow && dst.kind == KernelKind::kPointwise) {
      dst.kind = KernelKind::kRow;
      dst.iteration = src.iteration;
    }
    for (int32_t id : src.nodes) group_of_[id] = into;
    const size_t middle = dst.nodes.size();
    dst.nodes.insert(dst.nodes.end(), src.nodes.begin(), src.nodes.end());
    std::inplace_merge(dst.nodes.begin(), dst.nodes.begin() + static_cast<std::ptrdiff_t>(middle), dst.nodes.end());
    dst.written.insert(src.written.begin(), src.written.end());
    absl::erase_if(dst.written, [&](int32_t x) { return outside_uses_[x] == 0 && !is_output_[x]; });
    for (int32_t x : src.reads) {
      if (dst.reads.insert(x).second) readers_[x].push_back(into);
    }
    absl::erase_if(dst.reads, [&](int32_t x) { return group_of_[x] == into; });
    dag_.contract(into, from);
    src.alive = false;
    src.nodes.clear();
    src.reads.clear();
    src.written.clear();
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
  // holds at most max_nodes_ nodes and takes at most max_tensors_ tensors:
  // what it reads from outside plus what it writes (a graph output, or a
  // value used by a node outside, counting users not placed yet, so the
  // count never falls short of the final one), each dropout counting as
  // kDropoutKeySlots more.
  bool fits(std::initializer_list<int> gs, int32_t extra) const {
    size_t nodes = extra >= 0 ? 1 : 0;
    for (int g : gs) nodes += groups_[g].nodes.size();
    if (nodes > static_cast<size_t>(max_nodes_)) return false;
    // A dropout's Philox round keys are a CUDA kernel's parameter too: 80
    // bytes, the space of kDropoutKeySlots pointers.
    int64_t dropouts = extra >= 0 && graph_.node(extra).op == Op::kDropout ? 1 : 0;
    for (int g : gs) {
      for (int32_t id : groups_[g].nodes) dropouts += graph_.node(id).op == Op::kDropout ? 1 : 0;
    }
    auto inside = [&](int32_t id) {
      return id == extra || (group_of_[id] >= 0 && std::find(gs.begin(), gs.end(), group_of_[id]) != gs.end());
    };
    absl::flat_hash_set<int32_t> reads;
    int64_t writes = 0;
    for (int g : gs) {
      for (int32_t x : groups_[g].reads) {
        if (!inside(x)) reads.insert(x);
      }
      // A node its own group does not write has every user in that group.
      for (int32_t x : groups_[g].written) {
        // Users not placed yet come last: look at them first.
        writes +=
            is_output_[x] || std::any_of(users_[x].rbegin(), users_[x].rend(), [&](int32_t u) { return !inside(u); });
      }
    }
    if (extra >= 0) {
      for (const Operand& o : graph_.node(extra).operands) {
        if (!o.is_literal() && !inside(o.node)) reads.insert(o.node);
      }
      writes += is_output_[extra] || !users_[extra].empty();  // its users come later
    }
    return static_cast<int64_t>(reads.size()) + writes + kDropoutKeySlots * dropouts <= max_tensors_;
  }

  int new_group(KernelKind kind, Shape iteration) {
    const int index = dag_.add();
    Group g;
    g.kind = kind;
    g.iteration = std::move(iteration);
    groups_.push_back(std::move(g));
    return index;
  }

  // Puts node `id` into group `target`, updating what the group reads and writes.
  void add_node(int target, int32_t id) {
    Group& g = groups_[target];
    g.nodes.push_back(id);
    group_of_[id] = target;
    outside_uses_[id] = static_cast<int>(users_[id].size());
    if (is_output_[id] || !users_[id].empty()) g.written.insert(id);
    for (const Operand& o : graph_.node(id).operands) {
      if (o.is_literal()) continue;
      if (group_of_[o.node] == target) {
        if (--outside_uses_[o.node] == 0 && !is_output_[o.node]) g.written.erase(o.node);
      } else if (g.reads.insert(o.node).second) {
        readers_[o.node].push_back(target);
      }
    }
  }

  void place(int32_t id) {
    const Node& n = graph_.node(id);
    const OpKind kind = n.info().kind;
    if (kind == OpKind::kInput) return;
    const std::vector<int> producers = producer_groups(n);
    std::optional<int> target;
    if (kind != OpKind::kMatmul) {
      for (int p : producers) {
        if ((hosts(groups_[p], n) || (kind != OpKind::kReduce && takes_epilogue(groups_[p], id))) &&
            can_join(p, producers) && fits({p}, id)) {
          target = p;
          break;
        }
      }
    }
    if (!target) {
      target = new_group(kind == OpKind::kMatmul   ? KernelKind::kMatmul
                         : kind == OpKind::kReduce ? KernelKind::kRow
                                                   : KernelKind::kPointwise,
                         kind == OpKind::kReduce ? graph_.node(n.operands[0].node).shape : n.shape);
    }
    if (kind == OpKind::kReduce && groups_[*target].kind == KernelKind::kPointwise) {
      groups_[*target].kind = KernelKind::kRow;
    }
    add_node(*target, id);
    for (int p : producers) {
      if (p != *target) dag_.add_edge(*target, p);
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
    const auto& small = groups_[a].reads.size() <= groups_[b].reads.size() ? groups_[a].reads : groups_[b].reads;
    const auto& large = &small == &groups_[a].reads ? groups_[b].reads : groups_[a].reads;
    return std::any_of(small.begin(), small.end(), [&](int32_t x) { return large.contains(x); });
  }

  // Adds to `candidates` the groups after `after` that read one of `nodes`
  // (readers_ may name groups that have since merged away or stopped reading
  // a node: every candidate is checked again).
  // Matmul groups are left out: compatible() refuses them, so they never
  // merge here (nor change kind), and a weight that every layer's matmul
  // reads would otherwise make each a candidate of every earlier one.
  template <typename Nodes>
  void add_sibling_candidates(const Nodes& nodes, int after, std::set<int>& candidates) const {
    for (int32_t x : nodes) {
      for (int r : readers_[x]) {
        if (r > after && groups_[r].alive && groups_[r].kind != KernelKind::kMatmul) candidates.insert(r);
      }
    }
  }

  // For each group a in index order, each later group b that reads a common
  // input is merged into a when the rules allow, in index order of b, with a
  // as it stands after earlier merges.
  void merge_siblings() {
    // joined[c] == stamp: c is joined to a through a third group (as a stands now).
    std::vector<int> joined(groups_.size(), 0);
    int stamp = 0;
    for (int a = 0; a < static_cast<int>(groups_.size()); ++a) {
      if (!groups_[a].alive || groups_[a].kind == KernelKind::kMatmul) continue;
      std::set<int> candidates;
      add_sibling_candidates(groups_[a].reads, a, candidates);
      bool joined_fresh = false;
      while (!candidates.empty()) {
        const int b = *candidates.begin();
        candidates.erase(candidates.begin());
        if (!groups_[b].alive || !compatible(a, b) || !reads_common_input(a, b)) continue;
        if (!joined_fresh) {
          // One search answers can_merge(a, c) for every candidate c.
          int lo = std::min(dag_.order(a), dag_.order(b));
          int hi = std::max(dag_.order(a), dag_.order(b));
          for (int c : candidates) {
            lo = std::min(lo, dag_.order(c));
            hi = std::max(hi, dag_.order(c));
          }
          dag_.mark_joined_through_third(a, lo, hi, joined, ++stamp);
          joined_fresh = true;
        }
        if (joined[b] == stamp || !fits({a, b}, -1)) continue;
        std::vector<int32_t> new_reads;
        for (int32_t x : groups_[b].reads) {
          if (!groups_[a].reads.contains(x) && group_of_[x] != a) new_reads.push_back(x);
        }
        merge(a, b);
        joined_fresh = false;
        add_sibling_candidates(new_reads, b, candidates);
      }
    }
  }

  // Kahn's algorithm; among ready groups the one with the earliest node goes first.
  std::vector<KernelGroup> ordered_groups() const {
    std::vector<int> waiting_on(groups_.size(), 0);
    using Ready = std::pair<int32_t, int>;  // (first node, group)
    std::priority_queue<Ready, std::vector<Ready>, std::greater<>> ready;
    for (int g = 0; g < static_cast<int>(groups_.size()); ++g) {
      if (!groups_[g].alive) continue;
      waiting_on[g] = static_cast<int>(dag_.producers(g).size());
      if (waiting_on[g] == 0) ready.push({groups_[g].nodes.front(), g});
    }
    std::vector<KernelGroup> out;
    while (!ready.empty()) {
      const int g = ready.top().second;
      ready.pop();
      out.push_back({groups_[g].kind, groups_[g].iteration, groups_[g].nodes});
      for (int c : dag_.consumers(g)) {
        if (--waiting_on[c] == 0) ready.push({groups_[c].nodes.front(), c});
      }
    }
    return out;
  }

  const Graph& graph_;
  const int max_tensors_;
  const int max_nodes_;
  const std::vector<bool> live_;  // Graph::reaches_outputs(): the nodes worth computing
  std::vector<bool> is_output_;   // Graph::is_output(), which searches the outputs, as a table
  std::vector<int> group_of_;
  std::vector<std::vector<int32_t>> users_;  // ascending
  // Per placed node: its uses (operand slots) by nodes outside its group or not placed yet.
  std::vector<int> outside_uses_;
  // Per node: groups that read it (or once did), for finding siblings.
  std::vector<std::vector<int>> readers_;
  std::vector<Group> groups_;
  GroupDag dag_;  // group i of groups_ is group i of dag_
};

}  // namespace

FusionPlan make_fused_plan(const Graph& graph, const FusionOptions& options) {
  require_plannable(graph, options);
  ExpandedGraph expanded{nullptr, &graph, {}};
  expanded.graph = std::make_shared<const Graph>(expand_composites(graph, &expanded.origin));
  const Graph& g = *expanded.graph;
  std::vector<KernelGroup> groups = Partitioner(g, options.max_kernel_tensors, options.max_kernel_nodes).run();
  // A kernel that re-reads its rows gives up ops to kernels of their own
  // where that weighs less (reread_split.h).
  std::vector<std::vector<int32_t>> users;
  std::vector<bool> is_output;
  std::vector<KernelGroup> split;
  for (size_t k = 0; k < groups.size(); ++k) {
    if (row_strategy_of(groups[k], options) != RowStrategy::kReread) {
      split.push_back(std::move(groups[k]));
      continue;
    }
    if (users.empty()) {
      users.resize(static_cast<size_t>(g.num_nodes()));
      is_output.assign(static_cast<size_t>(g.num_nodes()), false);
      for (int32_t id : g.outputs()) is_output[static_cast<size_t>(id)] = true;
      const std::vector<bool> live = g.reaches_outputs();
      for (int32_t id = 0; id < g.num_nodes(); ++id) {
        if (!live[static_cast<size_t>(id)]) continue;
        for (const Operand& o : g.node(id).operands) {
          if (!o.is_literal()) users[static_cast<size_t>(o.node)].push_back(id);
        }
      }
    }
    for (KernelGroup& run : split_rereading_group(groups[k], expanded, users, is_output, options)) {
      split.push_back(std::move(run));
    }
  }
  return build_plan("fused", expanded.graph, graph, expanded.origin, std::move(split), options);
}

}  // namespace fusejit
