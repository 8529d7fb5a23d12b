#include "ir/host_tensor.h"

#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "ir/error.h"
#include "ir/interpreter_parallel.h"

namespace fusejit {
namespace {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;  // splitmix64's increment

// Output n (0-based) of the splitmix64 generator whose state starts at `seed`.
inline uint64_t splitmix64_at(uint64_t seed, uint64_t n) { return splitmix64_mix(seed + (n + 1) * kGamma); }

// The top 53 bits as a double in (0, 1]: never 0, so log() is finite.
inline double unit_open_low(uint64_t bits) { return static_cast<double>((bits >> 11) + 1) * 0x1p-53; }
// The top 53 bits as a double in [0, 1).
inline double unit(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1p-53; }

}  // namespace

uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

HostTensor HostTensor::random_normal(DType dtype, const Shape& shape, uint64_t seed) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = shape;
  for (int64_t d : shape) {
    if (d < 0) throw Error(fmt::format("HostTensor::random_normal: shape {} has a negative extent", shape));
  }
  if (shape.numel_overflows()) {
    throw Error(fmt::format("HostTensor::random_normal: the number of elements of {} overflows", shape));
  }
  const int64_t n = shape.numel();
  t.values.resize(n);
  double* out = t.values.data();
  const int64_t pairs = (n + 1) / 2;
  detail::parallel_for(pairs, 1 << 16, detail::reference_threads(), [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      const double u1 = unit_open_low(splitmix64_at(seed, 2 * static_cast<uint64_t>(k)));
      const double u2 = unit(splitmix64_at(seed, 2 * static_cast<uint64_t>(k) + 1));
      const double r = std::sqrt(-2.0 * std::log(u1));
      const double theta = 2.0 * std::numbers::pi * u2;
      out[2 * k] = round_to_dtype(r * std::cos(theta), dtype);
      if (2 * k + 1 < n) out[2 * k + 1] = round_to_dtype(r * std::sin(theta), dtype);
    }
  });
  return t;
}

}  // namespace fusejit
