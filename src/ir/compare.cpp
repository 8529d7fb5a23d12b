#include "ir/compare.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace fusejit {

double tolerance(DType t) {
  switch (t) {
    case DType::kF32: return 1e-5;
    case DType::kF16: return 4e-3;
    case DType::kBF16: return 3e-2;
  }
  return 0;
}

namespace {

// NaN as "nan" whatever its sign bit (fmt writes "-nan" for some), so that
// messages say the same thing for the same value.
std::string number(double v) { return std::isnan(v) ? "nan" : fmt::format("{}", v); }

std::string where(const Shape& shape, int64_t i) {
  if (shape.rank() < 2) return fmt::format("element {}", i);
  return fmt::format("element {} (row {}, column {})", i, i / shape.last(), i % shape.last());
}

// ||out - ref|| / max(||ref||, floor) over the finite elements not skipped.
Comparison compare_against(const HostTensor& out, const HostTensor& ref, double floor, const std::vector<char>* skip) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  if (out.shape != ref.shape) {
    return {.relative_error = kNaN,
            .mismatch = fmt::format("shape {} where the reference has {}", out.shape, ref.shape)};
  }
  // The same shape, but values that do not fill it (a tensor built by hand).
  for (const auto& [t, whose] : {std::pair{&out, "the result"}, std::pair{&ref, "the reference"}}) {
    if (t->values.size() != static_cast<size_t>(t->shape.numel())) {
      return {.relative_error = kNaN,
              .mismatch = fmt::format("{} holds {} values where its shape {} needs {}", whose, t->values.size(),
                                      t->shape, t->shape.numel())};
    }
  }
  // Values rounded to another dtype than the reference's are not the result
  // it describes, however close they are.
  if (out.dtype != ref.dtype) {
    return {.relative_error = kNaN,
            .mismatch = fmt::format("dtype {} where the reference has {}", out.dtype, ref.dtype)};
  }
  if (skip != nullptr && skip->size() != out.values.size()) {
    return {.relative_error = kNaN,
            .mismatch = fmt::format("{} flags of elements to skip for {} values", skip->size(), out.values.size())};
  }
  Comparison c;
  double diff = 0, norm = 0;
  size_t counted = 0;
  size_t largest = 0;  // the element that differs most
  double largest_diff = 0;
  for (size_t i = 0; i < out.values.size(); ++i) {
    if (skip != nullptr && (*skip)[i] != 0) {
      ++c.skipped;
      continue;
    }
    const double a = out.values[i], b = ref.values[i];
    if (!std::isfinite(a) || !std::isfinite(b)) {
      const bool same = (std::isnan(a) && std::isnan(b)) || a == b;
      if (!same) {
        return {.relative_error = kNaN,
                .mismatch = fmt::format("{} is {} where the reference has {}",
                                        where(out.shape, static_cast<int64_t>(i)), number(a), number(b))};
      }
      continue;
    }
    diff += (a - b) * (a - b);
    norm += b * b;
    ++counted;
    if (std::fabs(a - b) > largest_diff) {
      largest_diff = std::fabs(a - b);
      largest = i;
    }
  }
  const double scale = std::max(std::sqrt(norm), floor);
  c.relative_error = scale > 0 ? std::sqrt(diff) / scale : std::sqrt(diff);
  // Each element against its own magnitude plus the tensor's root mean
  // square (the norm's scale shared out): a second pass, as the scale is
  // known only now.
  const double rms = counted > 0 ? scale / std::sqrt(static_cast<double>(counted)) : 0;
  size_t worst = 0;
  for (size_t i = 0; i < out.values.size(); ++i) {
    if (skip != nullptr && (*skip)[i] != 0) continue;
    const double a = out.values[i], b = ref.values[i];
    if (!std::isfinite(a) || !std::isfinite(b)) continue;
    const double bound = std::fabs(b) + rms;
    const double e = bound > 0 ? std::fabs(a - b) / bound : std::fabs(a - b);
    if (e > c.element_error) {
      c.element_error = e;
      worst = i;
    }
  }
  // Over the tolerance, say where: the norm has no one wrong element, but
  // the one that differs most is where to look; an element far off on its
  // own is named as such.
  if (c.relative_error > tolerance(ref.dtype)) {
    c.mismatch = fmt::format("it differs most at {}: {} where the reference has {}",
                             where(out.shape, static_cast<int64_t>(largest)), number(out.values[largest]),
                             number(ref.values[largest]));
  } else if (!c.within(ref.dtype)) {
    c.mismatch = fmt::format(
        "{} is {} where the reference has {}: off by {:.3g} times its magnitude plus the "
        "tensor's root mean square {:.3g}, over the {:.3g} one element may be off",
        where(out.shape, static_cast<int64_t>(worst)), number(out.values[worst]), number(ref.values[worst]),
        c.element_error, rms, kElementSlack * tolerance(ref.dtype));
  }
  return c;
}

}  // namespace

Comparison compare_tensors(const HostTensor& out, const HostTensor& ref, const std::vector<char>* skip) {
  return compare_against(out, ref, 0, skip);
}

Comparison compare_tensors(const HostTensor& out, const HostTensor& ref, const HostTensor& perturbed,
                           const std::vector<char>* skip) {
  double moved = 0;  // ||perturbed - ref|| over the elements finite in both and not skipped
  for (size_t i = 0; i < ref.values.size() && i < perturbed.values.size(); ++i) {
    if (skip != nullptr && i < skip->size() && (*skip)[i] != 0) continue;
    const double d = perturbed.values[i] - ref.values[i];
    if (std::isfinite(d)) moved += d * d;
  }
  return compare_against(out, ref, kRoundoffMargin * std::sqrt(moved) / tolerance(ref.dtype), skip);
}

double relative_error(const HostTensor& out, const HostTensor& ref) { return compare_tensors(out, ref).relative_error; }

}  // namespace fusejit
