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

}  // namespace fusejit
