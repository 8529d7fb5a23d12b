#include "fusion/group_dag.h"

#include <algorithm>

namespace fusejit {

int GroupDag::add() {
  producers_.emplace_back();
  consumers_.emplace_back();
  order_.push_back(next_order_++);
  visited_.push_back(0);
  return size() - 1;
}

int GroupDag::new_stamp() const { return ++stamp_; }

void GroupDag::collect(int start, const std::vector<absl::flat_hash_set<int>>& edges, int lo, int hi,
                       std::vector<int>& out) const {
  const int stamp = new_stamp();
  visited_[start] = stamp;
  std::vector<int> stack{start};
  while (!stack.empty()) {
    const int g = stack.back();
    stack.pop_back();
    out.push_back(g);
    for (int next : edges[g]) {
      if (visited_[next] == stamp || order_[next] < lo || order_[next] > hi) continue;
      visited_[next] = stamp;
      stack.push_back(next);
    }
  }
}

void GroupDag::add_edge(int consumer, int producer) {
  if (!producers_[consumer].insert(producer).second) return;
  consumers_[producer].insert(consumer);
  const int lo = order_[consumer];
  const int hi = order_[producer];
  if (hi < lo) return;  // already in order
  // The producer is ordered after its new consumer. Only groups between the
  // two can be out of place: the consumer and what reads it, up to the
  // producer's order, must move after the producer and what it reads, down
  // to the consumer's order. They swap among the order numbers they hold.
  std::vector<int> after;
  std::vector<int> before;
  collect(consumer, consumers_, lo, hi, after);
  collect(producer, producers_, lo, hi, before);
  auto by_order = [&](int a, int b) { return order_[a] < order_[b]; };
  std::sort(after.begin(), after.end(), by_order);
  std::sort(before.begin(), before.end(), by_order);
  std::vector<int> slots;
  slots.reserve(before.size() + after.size());
  for (int g : before) slots.push_back(order_[g]);
  for (int g : after) slots.push_back(order_[g]);
  std::sort(slots.begin(), slots.end());
  size_t i = 0;
  for (int g : before) order_[g] = slots[i++];
  for (int g : after) order_[g] = slots[i++];
}

void GroupDag::contract(int into, int from) {
  absl::flat_hash_set<int> producers = std::move(producers_[from]);
  absl::flat_hash_set<int> consumers = std::move(consumers_[from]);
  producers_[from].clear();
  consumers_[from].clear();
  for (int p : producers) consumers_[p].erase(from);
  for (int c : consumers) producers_[c].erase(from);
  for (int p : producers) {
    if (p != into) add_edge(into, p);
  }
  for (int c : consumers) {
    if (c != into) add_edge(c, into);
  }
}

bool GroupDag::any_reaches(std::vector<int> stack, int to) const {
  const int stamp = new_stamp();
  for (int g : stack) visited_[g] = stamp;
  while (!stack.empty()) {
    const int g = stack.back();
    stack.pop_back();
    for (int p : producers_[g]) {
      if (p == to) return true;
      // A group ordered below `to` reads nothing ordered above it.
      if (visited_[p] == stamp || order_[p] < order_[to]) continue;
      visited_[p] = stamp;
      stack.push_back(p);
    }
  }
  return false;
}

bool GroupDag::reaches(int from, int to) const {
  return from != to && order_[from] > order_[to] && any_reaches({from}, to);
}

bool GroupDag::joined_through_third(int a, int b) const {
  const int hi = order_[a] > order_[b] ? a : b;
  const int lo = hi == a ? b : a;
  // Only the later group can read the earlier one: search from what the
  // later one reads, other than the earlier one itself, for the earlier one.
  std::vector<int> starts;
  for (int p : producers_[hi]) {
    if (p != lo && order_[p] > order_[lo]) starts.push_back(p);
  }
  return any_reaches(std::move(starts), lo);
}

void GroupDag::mark_joined_through_third(int g, int lo_order, int hi_order, std::vector<int>& mark, int stamp) const {
  // Walk from g's direct neighbours; what they reach is two or more edges away.
  auto walk = [&](const std::vector<absl::flat_hash_set<int>>& edges) {
    const int seen = new_stamp();
    std::vector<int> stack;
    for (int n : edges[g]) {
      if (order_[n] < lo_order || order_[n] > hi_order) continue;
      visited_[n] = seen;
      stack.push_back(n);
    }
    while (!stack.empty()) {
      const int n = stack.back();
      stack.pop_back();
      for (int next : edges[n]) {
        if (order_[next] < lo_order || order_[next] > hi_order) continue;
        mark[next] = stamp;
        if (visited_[next] == seen) continue;
        visited_[next] = seen;
        stack.push_back(next);
      }
    }
  };
  walk(producers_);
  walk(consumers_);
}

}  // namespace fusejit
