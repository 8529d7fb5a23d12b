// The reference interpreter: runs a graph op by op on the CPU in float64.
// It is the oracle every backend is checked against, so it is written to be
// obviously right first: each op is evaluated from the op table's reference
// formula, composites through their expansion. It is fast enough for the
// examples' sizes ([8192, 4096]) because each op is one loop over memory,
// split across threads in chunks, and intermediates are freed (and their
// memory reused) after their last use. Results never depend on the number of
// threads: every element is computed by the same operations in the same order.
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
  kNone,         // nowhere (casts aside): the float64 values themselves, for checking
                 // the reference's formulas to double precision (such outputs are not
                 // representable in their dtype, unlike every other HostTensor)
};

struct InterpretOptions {
  Rounding rounding = Rounding::kEveryOp;
  std::vector<int32_t> stored;  // node ids, for Rounding::kStoredNodes
  // Finite and >= 0. When > 0, each computed node's float64 values are moved
  // by perturbation * u * magnitude, u uniform in [-1, 1] and drawn per element
  // from `perturbation_seed`, before they are rounded. The magnitude is the
  // value itself, or for a reduction or matmul of n terms the same op over
  // the absolute values of its terms times sqrt(n) (what its rounding error
  // scales with). The distance between such
  // a run and an unperturbed one estimates how far float32 rounding inside
  // kernels can legitimately move each output: tiny for well-conditioned
  // results, large where cancellation amplifies it (the mean of a
  // LayerNorm's outputs is 0 plus rounding noise). See compare.h.
  double perturbation = 0;
  uint64_t perturbation_seed = 0;
  // When true, every value that is not rounded to its dtype is rounded to
  // float32 instead, as a kernel holding it in a float32 register does: the
  // same precision and above all the same range (the square of 1e20 is
  // infinity in float32, not 1e40), a mean's total sum included: it is
  // rounded to float32 before it is divided, as a kernel's float32
  // accumulator would hold it (4096 values of 1e35 sum to infinity; where
  // partial sums overflow in some orders only, see order_dependent). A kernel whose float32 intermediates
  // overflow where float64 ones do not is then compared with what float32
  // arithmetic gives, rather than called wrong (first_wrong_output in
  // fusion/plan_reference.h).
  bool float32_intermediates = false;
  // With float32_intermediates (else InvalidArgument): when not null,
  // receives, for each graph output with such elements, a flag per element
  // (1) set where the float32 result depends on the order a kernel adds
  // terms in: a sum whose partial sums overflow in some orders and not in
  // others, or a product past float32's range that a multiply-add can
  // bring back, and everything computed from one (ir/summation_order.h).
  // The reference's value there is one of several right answers.
  std::map<std::string, std::vector<char>>* order_dependent = nullptr;
};

using TensorMap = std::map<std::string, HostTensor>;

// Runs `graph` (which must verify) on `inputs` (one per graph input, by name,
// with matching dtype and shape; otherwise an error naming the input).
// Returns the graph outputs by name. cast always rounds to its dtype.
// Composites are evaluated through their expansion in float64 and rounded
// once, like any user op. Errors: InvalidArgument for a graph that does not
// verify or bad inputs; ResourceExhausted when memory runs out.
absl::StatusOr<TensorMap> interpret(const Graph& graph, const TensorMap& inputs, const InterpretOptions& options = {});

// OK when `inputs` holds every input of `graph` with its dtype, shape and
// element count, and values its dtype can represent; otherwise
// InvalidArgument naming the input. interpret() and every backend check
// their inputs with it.
absl::Status check_inputs(const Graph& graph, const TensorMap& inputs);

// Inputs for `graph` from HostTensor::random_normal, each input seeded
// differently from `seed` (so x and b never hold the same values). Like the
// graph builder, and unlike the run functions, it throws fusejit::Error
// (naming the input) when an input would not fit in host memory.
TensorMap random_inputs(const Graph& graph, uint64_t seed);

}  // namespace fusejit
