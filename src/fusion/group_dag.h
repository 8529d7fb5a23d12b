// The kernels the fusion pass is forming, as a DAG whose edges say which
// kernel reads which. The pass asks two questions of it many times per node:
// "does kernel A (transitively) read kernel B?" and "would merging A and B
// create a cycle?". Answering them by searching the whole DAG made planning a
// stack of transformer layers O(n^4) (200 layers took 200 s). Here the groups
// are kept in a topological order, updated as edges are added (Pearce and
// Kelly, "A dynamic topological sort algorithm for directed acyclic graphs",
// JEA 2006), so a search for B from A never leaves the groups ordered between
// them: planning stays near linear in the graph's size.
#pragma once

#include <vector>

#include <absl/container/flat_hash_set.h>

namespace fusejit {

class GroupDag {
 public:
  // A new group, ordered after every existing one; returns its index.
  int add();

  // `consumer` reads `producer`. The edge must not close a cycle.
  void add_edge(int consumer, int producer);

  // `from`'s edges become `into`'s and `from` leaves the DAG; the edge
  // between them, if any, disappears. The result must be acyclic, which holds
  // when no third group lies on a path between them (!joined_through_third).
  void contract(int into, int from);

  // Whether `to` is a transitive producer of `from` (a path from -> ... -> to).
  bool reaches(int from, int to) const;

  // Whether a path of two or more edges joins a and b, in either direction:
  // merging them would put a third group both before and after the merged one.
  bool joined_through_third(int a, int b) const;

  // Marks with `stamp` in `mark` every group joined to g by a path of two or
  // more edges (the groups g may not merge with), looking only at groups whose
  // order lies in [lo_order, hi_order]. One search answers
  // joined_through_third(g, b) for many b.
  void mark_joined_through_third(int g, int lo_order, int hi_order, std::vector<int>& mark, int stamp) const;

  const absl::flat_hash_set<int>& producers(int g) const { return producers_[g]; }
  const absl::flat_hash_set<int>& consumers(int g) const { return consumers_[g]; }
  int order(int g) const { return order_[g]; }
  int size() const { return static_cast<int>(order_.size()); }

 private:
  // Groups reached from `start` along `edges` (consumers_ or producers_)
  // whose order is in [lo, hi], `start` included; appended to `out`.
  void collect(int start, const std::vector<absl::flat_hash_set<int>>& edges, int lo, int hi,
               std::vector<int>& out) const;
  // Whether a path from one of `starts` (none of them `to`) reaches `to`.
  bool any_reaches(std::vector<int> starts, int to) const;
  int new_stamp() const;

  std::vector<absl::flat_hash_set<int>> producers_;  // groups each group reads
  std::vector<absl::flat_hash_set<int>> consumers_;  // groups reading each group
  std::vector<int> order_;                           // a topological order: a producer's is below its consumers'
  int next_order_ = 0;
  // Search scratch: visited_[g] == stamp_ means g was seen in the current search.
  mutable std::vector<int> visited_;
  mutable int stamp_ = 0;
};

}  // namespace fusejit
