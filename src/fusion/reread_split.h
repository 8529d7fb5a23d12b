// Splitting a re-reading row kernel of the fused plan.
//
// A row too long to keep on chip is walked once per reduction stage, and
// each pass loads what it needs again and computes it again: an op fused
// early into a long chain has its inputs loaded, and itself computed, in
// every later pass, where a kernel of its own would do both once. So the
// fusion pass (fuse.cpp) cuts such a kernel's user ops, in their order,
// into consecutive runs, each a kernel of its own:
//   - a row kernel over the whole kernel's rows, where the run holds a
//     reduction;
//   - a pointwise kernel, where every node of the run is elementwise over
//     one shape (ops of that shape, or the tail of a composite that the
//     node limit cut, such as a layer_norm's normalizing multiply);
//   - a single op, as the unfused plan runs it.
// Of all such cuts it takes the one whose kernels weigh least together
// (FusionOptions::kernel_weight: predicted time on the target device,
// else bytes), and the kernel whole unless a cut weighs strictly less.
//
// The search is a shortest path over the cut points: each run's weight
// depends on the run alone, since what the other kernels read and write
// stays the same. Weighing a run costs about its ops times its passes, so
// weighing every run of a kernel of n ops grows as n^4; it weighs every run
// of up to kRereadSplitShortRun ops and every longer run that leaves out
// at most kRereadSplitShortRun ops at either end (a long row kernel giving
// up ops at its ends). So it is exact for a kernel of up to
// that many ops, as the re-reading kernels of real models are (a softmax
// or log_softmax over a vocabulary with its prologue), and a kernel of the
// node limit's 256 nodes is weighed in a fraction of a second.
#pragma once

#include <cstdint>
#include <vector>

#include "fusion/plan_builder.h"

namespace fusejit {

// See above: runs of up to this many ops are all weighed.
inline constexpr int kRereadSplitShortRun = 12;

// The graph a fused plan is made on (composites expanded), and what the
// split needs to know of it.
struct ExpandedGraph {
  std::shared_ptr<const Graph> graph;
  const Graph* user_graph = nullptr;  // the graph the user wrote
  std::vector<int32_t> origin;        // origin[id]: the user node that node id implements
};

// The groups to launch in place of `group`, a group of the fused plan whose
// kernel re-reads its rows, in launch order: {group} when it weighs least
// whole. `users[id]`: the nodes of the plan (those computed) that use node
// `id`; `is_output[id]`: whether the user asked for node `id`.
std::vector<KernelGroup> split_rereading_group(const KernelGroup& group, const ExpandedGraph& expanded,
                                               const std::vector<std::vector<int32_t>>& users,
                                               const std::vector<bool>& is_output, const FusionOptions& options);

}  // namespace fusejit
