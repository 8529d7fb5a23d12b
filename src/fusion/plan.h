// A FusionPlan: the kernels that execute a graph, in launch order.
//
// Each kernel owns a set of nodes of the plan's graph, reads some global
// tensors (graph inputs, or values an earlier kernel wrote) and writes the
// values that leave it (graph outputs, and values a later kernel reads).
// Everything else stays in registers. Both plans work on the user's graph
// with composites expanded (names and outputs kept): the fused plan so that
// a reduction and the elementwise ops around it can share a row kernel, the
// unfused plan, one kernel per user op, so that both run the same
// primitives. A node of the plan's graph may thus be a primitive of a
// composite (the result of a layer_norm is a mul there).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ir/graph.h"

namespace fusejit {

enum class KernelKind : uint8_t {
  kPointwise,  // every node has the kernel's iteration shape
  kRow,        // reductions over the last dimension with their prologue and epilogue
  kMatmul,     // one matmul and its epilogue (matmul_epilogue.h), run by a library (cuBLAS(Lt)) or the CPU's GEMM
};
std::string_view kernel_kind_name(KernelKind kind);

// How a row kernel holds its row.
enum class RowStrategy : uint8_t {
  kNone,        // not a row kernel
  kPersistent,  // the row is read once and kept on chip (registers/shared memory, or cache on a CPU)
  kReread,      // the row is too long to keep: each reduction stage re-reads it from memory
};
std::string_view row_strategy_name(RowStrategy s);

// The per-row space of a row space [..., N]: [..., 1].
inline Shape per_row(Shape s) {
  s[s.rank() - 1] = 1;
  return s;
}

// Whether a kernel of `kind` over `iteration` can compute node `n` of
// `graph`: a pointwise kernel what runs over its shape; a row kernel that,
// a reduction of rows of that shape, or a per-row value ([..., 1]); a
// matmul nothing by this rule (its epilogue joins by matmul_epilogue.h's). The fusion pass joins by it (fuse.cpp), and
// fusion_boundaries explains by it.
bool kernel_space_hosts(KernelKind kind, const Shape& iteration, const Graph& graph, const Node& n);

struct Kernel {
  std::string name;  // deterministic: "k{index}_{user ops}"
  KernelKind kind = KernelKind::kPointwise;
  std::vector<int32_t> nodes;   // in topological order
  std::vector<int32_t> reads;   // global tensors read (ids of the plan's graph), in first-use order
  std::vector<int32_t> writes;  // values stored to memory, in node order
  Shape iteration;              // pointwise: the shape iterated; row: the row space [..., N]; matmul: result
  std::vector<std::string> user_ops;  // the user's ops this kernel implements, in order ("layer_norm")

  // Row kernels only.
  RowStrategy row_strategy = RowStrategy::kNone;
  int reduction_stages = 0;  // reductions that depend on each other (layer_norm: mean, then variance = 2)
  // Times the row-shaped inputs are read: 1 when persistent; when re-reading,
  // once per reduction stage plus once more to write row-shaped outputs.
  int row_passes = 1;
};

struct FusionPlan {
  std::string label;  // "unfused" or "fused"
  std::shared_ptr<const Graph> graph;
  std::vector<Kernel> kernels;
};

// What one dropout op adds to a kernel's parameters, in pointers
// (FusionOptions::max_kernel_tensors).
inline constexpr int kDropoutKeySlots = 10;

struct FusionOptions {
  // Longest row (elements) a row kernel keeps on chip; longer rows use the
  // re-read variant. Comes from the target device (cost/device.h).
  int64_t persistent_row_limit = 16384;
  // Most tensors one kernel takes (reads plus writes), each dropout op
  // counting as kDropoutKeySlots more: a CUDA kernel takes a dropout's ten
  // Philox round keys as parameters, 80 bytes, the space of 10 pointers. A
  // CUDA kernel's parameters must fit in 4 KiB on every architecture (32
  // KiB only from Volta with CUDA 12.1); 256 pointers are 2 KiB, leaving
  // room for the scalars. A fused group that would need more is split, so a
  // wide graph (thousands of inputs added up, or a long chain of dropouts)
  // still compiles everywhere. At least 4: the unfused plan's kernel for
  // layer_norm(x, gamma, beta) takes 4.
  int max_kernel_tensors = 256;
  // Most nodes (composites expanded: a layer_norm is 9) one kernel holds. A
  // compiler's time grows faster than a kernel's size (NVRTC: a chain of 50
  // bias-GeLU-dropout-LayerNorm layers, 600 nodes, in one kernel took 6.6 s,
  // of 200 layers over two minutes), so a longer fused chain is split into
  // kernels of at most this many, at the price of a write and a read per
  // split; the transformer blocks fusejit is for fuse far below it.
  int max_kernel_nodes = 256;
  // What the pass minimizes where it weighs alternatives (which ops a
  // re-reading row kernel gives up to kernels of their own): a kernel's
  // weight, summed over the kernels an alternative makes. Empty: its bytes
  // (kernel_bytes). fusion_options_for (cost/cost_model.h) sets it to the
  // kernel's predicted time on the target device, which the fusion pass
  // cannot compute itself (it does not know the cost model): fewer bytes
  // are not always less time, as when a re-reading kernel recomputes a
  // GeLU in each pass on the few SMs its rows occupy. It is called with a
  // plan that holds only the graph (no kernels) and a candidate kernel of
  // it (named k0_...). A weight that is not finite is never better: a
  // kernel none of whose cuts weighs a finite amount stays whole.
  std::function<double(const FusionPlan& plan, const Kernel& kernel)> kernel_weight;
};

// For each node of `kernel` (in kernel.nodes order), the number of the
// kernel's reductions whose results it needs: 0 for the prologue, 1 after
// the mean of a layer_norm, 2 after its variance. A reduction has the level
// of its operand, and its result is available from the next level on. This
// is the pass in which a re-reading row kernel first computes the node; the
// cost model and the code generators both follow it.
std::vector<int> reduction_levels(const Graph& graph, const Kernel& kernel);

// For a re-reading row kernel (RowStrategy::kReread), what each pass needs,
// indexed by pass: the elementwise nodes of the row that the pass's
// reductions (and, in the last pass, the row-shaped writes) depend on, and
// the reads varying along the row ([N] vectors included) that those use.
// The CUDA generator computes and loads exactly these in each pass; the
// cost model charges them. A pass needs only part of the row's work: in
// layer_norm(add(layer_norm(x), h)) the second input h is loaded from the
// third pass on, not in all five. Empty for other kernels.
std::vector<std::set<int32_t>> row_pass_needs(const Graph& graph, const Kernel& kernel);

// How many times `kernel` computes each of its nodes, in kernel.nodes
// order: once, except in a re-reading row kernel, which computes an
// elementwise node of the row in each pass that needs it (row_pass_counts)
// and combines a reduction once, in its own pass. The cost model counts
// FLOPs and GPU instructions with it.
std::vector<int> compute_counts(const Graph& graph, const Kernel& kernel);

// row_pass_needs() counted: how many passes need each node of the kernel
// and each of its reads, indexed like kernel.nodes and kernel.reads (0 for
// what no pass needs). Empty vectors for a kernel that does not re-read.
// What the cost model asks, without a set per pass: the fusion pass weighs
// thousands of candidate kernels with it.
struct RowPassCounts {
  std::vector<int> nodes;
  std::vector<int> reads;
};
RowPassCounts row_pass_counts(const Graph& graph, const Kernel& kernel);

// Whether the kernel must round node `id` to its dtype right where it is
// computed: the node is stored in a 16-bit dtype and also used by another
// node of the kernel. Its users then see the value as stored, as they would
// in any other kernel (and as the reference interpreter computes it),
// rather than the wider value that happens to be in a register. The code
// generators do it; the GPU cost model counts it.
bool rounds_in_kernel(const Graph& graph, const Kernel& kernel, int32_t id);

// One kernel per user op, as an eager framework runs the graph. In both
// plans, ops that no output depends on (Graph::unused_nodes) are not computed.
// Both throw Error for a graph that does not verify (ir/verifier.h: e.g. one
// with no output) and for options out of range.
FusionPlan make_unfused_plan(const Graph& graph, const FusionOptions& options = {});
// The fused plan (see fuse.cpp for the rules).
FusionPlan make_fused_plan(const Graph& graph, const FusionOptions& options = {});

// A readable multi-line description of the plan.
std::string describe(const FusionPlan& plan);

}  // namespace fusejit
