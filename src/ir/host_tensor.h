// A tensor in host memory as the reference interpreter sees it: float64
// values, row-major, with the dtype it is stored in. Values of a tensor with
// dtype bf16 are exactly representable in bf16, and so on; the constructors
// below and round_to_dtype() keep that true.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/dtype.h"
#include "ir/shape.h"

namespace fusejit {

struct HostTensor {
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<double> values;  // shape.numel() entries

  // Values drawn from normal(0, 1) by a seeded generator, rounded to dtype.
  // The same (seed, dtype, shape) always gives the same values, on every
  // platform and thread count: element pair k takes outputs 2k and 2k+1 of
  // the splitmix64 stream seeded with `seed` (counter-based, so chunks can
  // be generated in parallel), turned into two normals by Box-Muller in
  // double precision. Only the libm's log/cos/sin may differ across
  // platforms, by an ulp of a double, which rounding to dtype hides almost
  // always.
  static HostTensor random_normal(DType dtype, const Shape& shape, uint64_t seed);

  int64_t numel() const { return static_cast<int64_t>(values.size()); }
};

// The splitmix64 output function (Steele, Lea, Flood 2014): a bijective
// 64-bit mixer, used to derive seeds and random bits.
uint64_t splitmix64_mix(uint64_t z);

}  // namespace fusejit
