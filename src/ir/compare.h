// How close a computed tensor is to the reference (DESIGN.md §6):
// ||out - ref|| / ||ref|| over the finite elements, with non-finite values
// required to match exactly (a NaN where the reference has a NaN, the same
// infinity where it has an infinity); anything else makes the error NaN,
// which no tolerance accepts.
#pragma once

#include <string>

#include "ir/host_tensor.h"

namespace fusejit {

// The largest relative error accepted for a result stored in `t` and
// computed in f32 (the reference rounds the same stores in float64).
double tolerance(DType t);

struct Comparison {
  double relative_error = 0;  // NaN when shapes or non-finite values disagree
  std::string mismatch;       // "" or the first disagreement: "element 17 (row 0, column 17): 1.5 vs nan"
  bool within(DType t) const { return relative_error <= tolerance(t); }  // false for NaN
};

Comparison compare_tensors(const HostTensor& out, const HostTensor& ref);
double relative_error(const HostTensor& out, const HostTensor& ref);

}  // namespace fusejit
