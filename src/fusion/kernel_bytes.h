// The global-memory bytes a kernel of a plan moves: what the roofline cost
// model charges (cost/cost_model.h) and what the fused planner compares
// when it decides whether a re-reading row kernel is worth keeping whole
// (make_fused_plan). Exact for the code fusejit generates: each tensor
// read or written once at its own size, except that a re-reading row
// kernel loads a row-shaped read in each pass that needs it.
#pragma once

#include <cstdint>

#include "fusion/plan.h"

namespace fusejit {

// Whether `n`, read or written by `kernel`, differs from row to row: not a
// broadcast [N] vector nor a per-row scalar. A re-reading row kernel
// fetches such a read again in each pass that needs it.
bool is_row_shaped(const Node& n, const Kernel& kernel);
// Whether a thread of `kernel` loads or stores `n` element by element along
// the row: a row-shaped tensor; in a kernel of a single row, anything as
// long as that row (its [N] vectors are that row, loaded once each, not
// kept for rows to come); in rows of one element, anything of the kernel's
// size.
bool is_streamed_along_row(const Node& n, const Kernel& kernel);

struct KernelBytes {
  int64_t read = 0;
  int64_t written = 0;
  int64_t total() const { return read + written; }
};
KernelBytes kernel_bytes(const Graph& graph, const Kernel& kernel);

// What a device with `cache_bytes` of last-level cache (L2 on a GPU) reads
// on top of kernel_bytes() because a broadcast read does not stay cached
// until its next use. kernel_bytes() charges a broadcast operand once:
// each later use finds it in cache. That holds while the traffic between
// two uses of an element fits the cache: a [4096] bias over [M, 4096] is
// used again 4096 elements later. A [4096, 4096] positional table added
// to [4, 4096, 4096] is used again 16M elements later, 144 MiB of the
// kernel's traffic, and is read from memory 4 times (measured on the CPU:
// 1.72x the time charged for one read). For each dimension the operand is
// broadcast along, outside a dimension it varies in, whose next use lies
// beyond the cache, the operand is charged once more per step of that
// dimension. 0 where `cache_bytes` is 0 (not known) or for a matmul.
int64_t broadcast_reread_bytes(const Graph& graph, const Kernel& kernel, int64_t cache_bytes);

}  // namespace fusejit
