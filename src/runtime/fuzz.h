// Differential fuzzing of whole graphs: random valid graphs from the whole
// op table, each run as the unfused and the fused plan on a backend and
// compared with the reference interpreter (and, on request, every CUDA
// kernel compiled by NVRTC). A failing graph is shrunk to the fewest
// statements that still fail, and reported in the text format with its seed.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "runtime/backend.h"

namespace fusejit {

// A random graph in the text format. The same seed always gives the same
// text: every dtype, ranks 1-4, broadcasting both ways ([N] and [..., 1]
// operands), chains and diamonds, reductions, composites, dropout, casts,
// matmul, literals, several outputs including intermediates, and odd extents
// (1, 3, 1000, 4097) at sizes the reference interpreter runs in milliseconds.
std::string random_graph_text(uint64_t seed);

struct FuzzFailure {
  // The --seed whose first graph this is: a run of one graph from it
  // (FuzzOptions::seed = seed, graphs = 1) checks the same graph again.
  uint64_t seed = 0;
  std::string what;           // what went wrong, on the shrunk graph
  std::string graph;          // the shrunk graph, in the text format
  int original_statements = 0;
  int shrunk_statements = 0;
  // Not a mismatch: the graph could not be checked (GraphCheck::not_checked),
  // and is reported unshrunk. A generated graph is small, so running out of
  // memory on one likely means a leak or a runaway size: the run fails.
  bool not_checked = false;
};

struct FuzzOptions {
  int graphs = 100;
  uint64_t seed = 1;
  Backend* backend = nullptr;  // nullptr: the plans are not run
  bool cuda_compile = false;   // compile every kernel of both plans with NVRTC
  std::string cuda_arch = "sm_90";
  // Inputs with special values among the normal ones (special_value_inputs).
  bool special_values = false;
  std::function<void(std::string_view)> progress;
  // Called for each failure as it is found (after shrinking), so that a long
  // run shows its failures before it ends.
  std::function<void(const FuzzFailure&)> on_failure;
  // Checked before each graph and after it: true stops the run, and the graph
  // in progress is not counted (an interrupt that killed its compiler must
  // not pass for a mismatch).
  std::function<bool()> stop_requested;
};

struct FuzzResult {
  int graphs = 0;        // graphs checked to the end
  bool stopped = false;  // by stop_requested, before all were checked
  int64_t kernels = 0;   // kernels compiled (host compiler and NVRTC)
  int mismatches = 0;    // graphs whose results or compiles failed
  int not_checked = 0;   // graphs this machine could not check (GraphCheck::not_checked)
  std::vector<FuzzFailure> failures;
};

// What checking one graph found.
struct GraphCheck {
  // What failed: a result that differs from the reference, a compile or run
  // that fails; empty when every check passed.
  std::string mismatch;
  // Why the graph could not be checked here, which says nothing about the
  // backends: its inputs, buffers or reference do not fit in memory.
  std::string not_checked;
  bool passed() const { return mismatch.empty() && not_checked.empty(); }
};

// Checks one graph. `kernels` is increased by the kernels compiled.
GraphCheck check_graph_text(const std::string& text, const FuzzOptions& options, int64_t* kernels);

// random_inputs(graph, seed) with special values in about one row in 4
// (along the last dimension), there about one element in 8, each a special
// value of its dtype: +-0, +-inf, NaN, the largest finite
// magnitude, the smallest normal and subnormal ones, and where the dtype
// reaches them 3e38 (whose sums overflow float32 in some orders only) and
// 1e20 (whose square overflows float32).
TensorMap special_value_inputs(const Graph& graph, uint64_t seed);

// Checks that `options` can check anything at all: a one-op graph through
// the same steps. Empty when it can, else what failed, which every graph
// would then repeat (a host compiler that rejects FUSEJIT_CXXFLAGS, a
// broken toolchain): a fuzz run reports that once instead of a mismatch
// per graph.
std::string fuzz_preflight(const FuzzOptions& options);

// The smallest graph (fewest statements) derived from `text` by dropping
// outputs and bypassing statements (uses of a value replaced by one of its
// operands of the same shape) for which `fails` still holds.
std::string shrink_graph_text(const std::string& text, const std::function<bool(const std::string&)>& fails);

FuzzResult run_fuzz(const FuzzOptions& options);

}  // namespace fusejit
