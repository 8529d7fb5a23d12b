// How close a computed tensor is to the reference (DESIGN.md §6):
// ||out - ref|| / ||ref|| over the finite elements, with non-finite values
// required to match exactly (a NaN where the reference has a NaN, the same
// infinity where it has an infinity); anything else makes the error NaN,
// which no tolerance accepts. Since a norm hides a few wrong elements among
// many right ones (one per row of 4096 is a relative error of 0.02, within
// bf16's tolerance), each element must also be within kElementSlack
// tolerances of its own magnitude plus the tensor's root mean square.
#pragma once

#include <string>
#include <vector>

#include "ir/host_tensor.h"

namespace fusejit {

// The largest relative error accepted for a result stored in `t` and
// computed in f32 (the reference rounds the same stores in float64).
double tolerance(DType t);

// How many tolerances one element may be off, relative to |ref| + the
// reference's root mean square: rounding that an operation amplifies (a
// 16-bit value one unit in the last place off before an exp) moves a few
// elements several times the norm's typical error, while an element that is
// simply wrong (a dropout mask bit, a forgotten tail) is off by about its
// own magnitude, 10 and more tolerances even in bf16.
inline constexpr double kElementSlack = 4;

struct Comparison {
  double relative_error = 0;  // NaN when dtypes, shapes or non-finite values disagree
  // The largest |out - ref| / (|ref| + rms(ref)) over the finite elements
  // compared (rms from the same scale as relative_error: the perturbed
  // reference's floor included).
  double element_error = 0;
  // "" where within the tolerance of the reference's dtype, else what
  // disagrees: "element 17 (row 0, column 17) is 1.5 where the reference
  // has nan" (a non-finite value), "it differs most at element 3: 0 where
  // the reference has 1" (finite values), an element off on its own, a
  // shape, a dtype, or a tensor whose values do not fill its shape.
  std::string mismatch;
  int64_t skipped = 0;                                                   // elements left out as `skip` asked
  bool within(DType t) const {                                           // false for NaN
    return relative_error <= tolerance(t) && element_error <= kElementSlack * tolerance(t);
  }
};

// `skip`, when not null, has one flag per element: those set (as
// InterpretOptions::order_dependent sets them, where float32 allows several
// answers) are left out, of the error and of its norm alike.
Comparison compare_tensors(const HostTensor& out, const HostTensor& ref, const std::vector<char>* skip = nullptr);

// For results that cancellation makes ill-conditioned (a mean of LayerNorm
// outputs is 0 plus rounding noise, so any ||ref|| is noise too): `perturbed`
// is the reference rerun with every intermediate perturbed by
// kRoundoffPerturbation (InterpretOptions::perturbation), and the error is
// measured against max(||ref||, kRoundoffMargin * ||perturbed - ref|| /
// tolerance). A well-conditioned result moves by about that perturbation, far
// below tolerance * ||ref||, so nothing is loosened there; an ill-conditioned
// one is judged against the noise that float32 rounding legitimately makes.
inline constexpr double kRoundoffPerturbation = 0x1p-22;  // 4 float32 ulps
inline constexpr double kRoundoffMargin = 4;
Comparison compare_tensors(const HostTensor& out, const HostTensor& ref, const HostTensor& perturbed,
                           const std::vector<char>* skip = nullptr);
double relative_error(const HostTensor& out, const HostTensor& ref);

}  // namespace fusejit
