// Independent jobs of uneven length (compiler runs, one per kernel or
// module) run on several threads: each thread takes the next job not yet
// taken, so a long job does not hold up the short ones queued behind it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

#include "ir/cpu_count.h"

namespace fusejit {

// Calls job(i) once for each i in [0, n), on up to `threads` threads (the
// CPUs this process may use when threads <= 0), the calling thread among
// them; returns when all are done. `job` must not throw.
template <typename Job>
void run_jobs(size_t n, int threads, const Job& job) {
  if (threads <= 0) threads = usable_cpu_count();
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) job(i);
  };
  const size_t helpers = std::min(n, static_cast<size_t>(std::max(threads, 1))) - (n == 0 ? 0 : 1);
  std::vector<std::thread> pool;
  for (size_t t = 0; t < helpers; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
}

}  // namespace fusejit
