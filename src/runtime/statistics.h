// Summaries of repeated timings.
#pragma once

#include <algorithm>
#include <vector>

namespace fusejit {

// The median (the mean of the middle two for an even count); 0 when empty.
inline double median(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  return n % 2 == 1 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
}

}  // namespace fusejit
