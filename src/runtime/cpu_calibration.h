// The `cpu` device as the CPU backend sees it. cost/device.h measures this
// machine's copy bandwidth and FMA peak with the library's own loops, and
// the throughput of each op cost class with scalar library math; the CPU
// backend's kernels use vectorized math of their own (codegen/cpu/fj_math.h)
// and a thread pool, so their throughput differs by several times. This
// replaces each class's throughput with what a JIT-compiled kernel of an op
// of that class reaches on L2-resident data on every thread, and the launch
// overhead with the thread pool's. The figures are cached next to
// cpu-device.json (cpu-device-jit.json), keyed by the compiler and the CPU.
#pragma once

#include <string>

#include <absl/status/statusor.h>

#include "cost/device.h"

namespace fusejit {

class Backend;

// What a cached calibration is valid for: fusejit's version, the compiler,
// the thread count, the CPU, and a digest of the probe kernels' source (so
// that new CPU math or kernel templates are measured again).
std::string cpu_calibration_key();

// Where calibrated_cpu_device() caches its figures:
// cache_directory()/cpu-device-jit.json.
std::string cpu_calibration_cache_path();

// cpu_device() with the JIT's class throughputs and launch overhead.
absl::StatusOr<DeviceSpec> calibrated_cpu_device(Backend& cpu_backend);

}  // namespace fusejit
