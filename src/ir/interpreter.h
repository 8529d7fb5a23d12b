// The reference interpreter: runs a graph op by op on the CPU in float64.
// It is the oracle every backend is checked against, so it is written to be
// obviously right rather than fast: each op is evaluated from the op table's
// reference formula, composites through their expansion.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "ir/graph.h"
#include "ir/host_tensor.h"

namespace fusejit {

// Where results are rounded to their dtype.
enum class Rounding {
  kEveryOp,      // every user op's result (what an unfused run stores)
  kOutputsOnly,  // only graph outputs (what a fully fused run stores)
  kStoredNodes,  // graph outputs plus the nodes listed in InterpretOptions::stored
};

struct InterpretOptions {
  Rounding rounding = Rounding::kEveryOp;
  std::vector<int32_t> stored;  // node ids, for Rounding::kStoredNodes
};

using TensorMap = std::map<std::string, HostTensor>;

// Runs `graph` (which must verify) on `inputs` (one per graph input, by name,
// with matching dtype and shape; otherwise an error naming the input).
// Returns the graph outputs by name. cast always rounds to its dtype.
absl::StatusOr<TensorMap> interpret(const Graph& graph, const TensorMap& inputs,
                                    const InterpretOptions& options = {});

// Inputs for `graph` from HostTensor::random_normal, each input seeded
// differently from `seed` (so x and b never hold the same values).
TensorMap random_inputs(const Graph& graph, uint64_t seed);

}  // namespace fusejit
