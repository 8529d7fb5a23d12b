// A minimal fork-join loop for the reference interpreter and the input
// generator. Work is split into contiguous chunks whose results do not depend
// on how many threads run them, so results are identical on every machine.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

#include "ir/cpu_count.h"

namespace fusejit::detail {

// Threads the reference may use: the CPUs the process may use, at most 16.
inline int reference_threads() { return std::clamp(usable_cpu_count(), 1, 16); }

// Calls body(begin, end) on disjoint ranges covering [0, n), on up to
// `threads` threads, none with fewer than `min_chunk` items (so small work
// stays on the calling thread). `body` must not throw.
template <typename Body>
void parallel_for(int64_t n, int64_t min_chunk, int threads, const Body& body) {
  if (n <= 0) return;
  const int64_t by_size = std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk));
  const int64_t workers = std::min<int64_t>(std::max(threads, 1), by_size);
  if (workers <= 1) {
    body(int64_t{0}, n);
    return;
  }
  const int64_t chunk = (n + workers - 1) / workers;
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (int64_t w = 1; w < workers; ++w) {
    const int64_t begin = std::min(n, w * chunk);
    const int64_t end = std::min(n, begin + chunk);
    if (begin < end) pool.emplace_back([&body, begin, end] { body(begin, end); });
  }
  body(int64_t{0}, std::min(n, chunk));
  for (std::thread& t : pool) t.join();
}

}  // namespace fusejit::detail
