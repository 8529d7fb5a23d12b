// HBM traffic of kernels as the GPU counts it: dram__bytes_read.sum +
// dram__bytes_write.sum from the CUPTI range profiler (CUDA 12.6 and newer),
// so that `fusejit bench` can print measured bytes beside the cost model's.
//
// libcupti is loaded with dlopen on first use, like libcuda and NVRTC; the
// profiler needs the driver to allow counter access (root, or the nvidia
// module option NVreg_RestrictProfilingToAdminUsers=0). Where any of that is
// missing every call returns an error that says which part, and nothing
// else changes. Internal to src/runtime/.
#pragma once

#include <functional>
#include <memory>

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include "runtime/cuda_driver.h"

namespace fusejit {

// OK when libcupti loaded and has the range profiler; otherwise Unavailable
// with the reason ("built without the CUPTI headers", "libcupti.so.13 not
// found: ...").
absl::Status cupti_status();

// A range profiler on one context, collecting the two DRAM byte counters.
class DramByteCounter {
 public:
  // For device `ordinal`, whose context `context` is current on this thread.
  // Fails (with CUPTI's reason, e.g. CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)
  // where the counters cannot be read.
  static absl::StatusOr<std::unique_ptr<DramByteCounter>> create(cuda::Context context, int ordinal);
  ~DramByteCounter();
  DramByteCounter(const DramByteCounter&) = delete;
  DramByteCounter& operator=(const DramByteCounter&) = delete;

  // Runs `launch`, which enqueues work on the context and waits for it,
  // with every kernel it launches profiled, then `drain`, which must launch
  // exactly one kernel that reads enough to evict L2 and writes nothing (the
  // L2 flush). Returns the DRAM bytes read plus written by `launch`'s
  // kernels, plus the bytes `drain`'s kernel wrote back: the lines those
  // kernels left dirty in L2, which a count of theirs alone would miss.
  // Kernel replay restores memory between passes; the counters are read in
  // one pass, so every kernel runs once from the cache state it was given.
  absl::StatusOr<double> measure(const std::function<absl::Status()>& launch,
                                 const std::function<absl::Status()>& drain);

  struct State;  // CUPTI objects and images

 private:
  explicit DramByteCounter(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace fusejit
