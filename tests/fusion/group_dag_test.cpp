// GroupDag against a brute-force model: random sequences of new groups,
// edges (only those that keep the DAG acyclic) and contractions (only those
// the fusion pass would make), checking after every step that the order is
// topological and that every reachability answer matches a search of the
// model's edges.
#include "fusion/group_dag.h"

#include <random>
#include <set>
#include <utility>

#include <gtest/gtest.h>

namespace fusejit {
namespace {

// Edges (consumer, producer) of the live groups, searched the slow way.
struct Model {
  std::set<std::pair<int, int>> edges;
  std::vector<bool> alive;

  bool reaches(int from, int to) const {  // a path of one or more edges
    std::vector<bool> seen(alive.size(), false);
    std::vector<int> stack{from};
    while (!stack.empty()) {
      const int g = stack.back();
      stack.pop_back();
      for (const auto& [c, p] : edges) {
        if (c != g || seen[p]) continue;
        if (p == to) return true;
        seen[p] = true;
        stack.push_back(p);
      }
    }
    return false;
  }
  bool joined_through_third(int a, int b) const {
    for (int k = 0; k < static_cast<int>(alive.size()); ++k) {
      if (!alive[k] || k == a || k == b) continue;
      if ((reaches(k, a) && reaches(b, k)) || (reaches(k, b) && reaches(a, k))) return true;
    }
    return false;
  }
  void contract(int into, int from) {
    std::set<std::pair<int, int>> next;
    for (auto [c, p] : edges) {
      if (c == from) c = into;
      if (p == from) p = into;
      if (c != p) next.insert({c, p});
    }
    edges = std::move(next);
    alive[from] = false;
  }
};

void expect_agrees(const GroupDag& dag, const Model& model, int step) {
  const int n = static_cast<int>(model.alive.size());
  for (const auto& [c, p] : model.edges) {
    ASSERT_LT(dag.order(p), dag.order(c)) << "step " << step << ": " << c << " reads " << p;
    ASSERT_TRUE(dag.producers(c).contains(p));
    ASSERT_TRUE(dag.consumers(p).contains(c));
  }
  size_t edge_count = 0;
  for (int g = 0; g < n; ++g) {
    if (model.alive[g]) edge_count += dag.producers(g).size();
  }
  ASSERT_EQ(edge_count, model.edges.size()) << "step " << step;
  std::vector<int> mark(n, 0);
  int stamp = 0;
  for (int a = 0; a < n; ++a) {
    if (!model.alive[a]) continue;
    dag.mark_joined_through_third(a, 0, n * 4, mark, ++stamp);  // orders stay below 4n here
    for (int b = 0; b < n; ++b) {
      if (!model.alive[b] || a == b) continue;
      ASSERT_EQ(dag.reaches(a, b), model.reaches(a, b)) << "step " << step << ": " << a << " -> " << b;
      const bool joined = model.joined_through_third(a, b);
      ASSERT_EQ(dag.joined_through_third(a, b), joined) << "step " << step << ": " << a << ", " << b;
      ASSERT_EQ(mark[b] == stamp, joined) << "step " << step << ": marks of " << a << " at " << b;
    }
  }
}

TEST(GroupDag, RandomEditsAgreeWithBruteForce) {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    GroupDag dag;
    Model model;
    for (int step = 0; step < 80; ++step) {
      const int n = static_cast<int>(model.alive.size());
      std::vector<int> live;
      for (int g = 0; g < n; ++g) {
        if (model.alive[g]) live.push_back(g);
      }
      const int action = static_cast<int>(rng() % 10);
      if (live.size() < 2 || action < 3) {
        ASSERT_EQ(dag.add(), n);
        model.alive.push_back(true);
      } else {
        const int a = live[rng() % live.size()];
        const int b = live[rng() % live.size()];
        if (a == b) continue;
        if (action < 8) {
          // An edge in either direction of the order: the ones against it
          // make the DAG reorder. Skipped when it would close a cycle.
          if (model.reaches(b, a)) continue;
          dag.add_edge(a, b);
          model.edges.insert({a, b});
        } else {
          if (model.joined_through_third(a, b)) continue;
          dag.contract(a, b);
          model.contract(a, b);
        }
      }
      expect_agrees(dag, model, step);
      if (HasFatalFailure()) return;
    }
  }
}

// A producer added after its consumer, in a chain: the whole chain moves.
TEST(GroupDag, EdgeAgainstTheOrderMovesWhatDependsOnIt) {
  GroupDag dag;
  for (int i = 0; i < 4; ++i) dag.add();
  dag.add_edge(1, 0);  // 1 reads 0
  dag.add_edge(2, 1);
  dag.add_edge(0, 3);  // 0 reads 3, which was ordered last
  EXPECT_LT(dag.order(3), dag.order(0));
  EXPECT_LT(dag.order(0), dag.order(1));
  EXPECT_LT(dag.order(1), dag.order(2));
  EXPECT_TRUE(dag.reaches(2, 3));
  EXPECT_FALSE(dag.reaches(3, 2));
  // 1 and 3 have 0 between them; 2 and 1 do not.
  EXPECT_TRUE(dag.joined_through_third(1, 3));
  EXPECT_FALSE(dag.joined_through_third(2, 1));
}

}  // namespace
}  // namespace fusejit
