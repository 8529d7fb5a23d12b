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

// What handing work to every thread of the pool and waiting for it costs,
// in microseconds (the median of 101 hand-offs of nothing): the CPU's
// launch overhead. It differs from one process to the next (1.8 us in
// one, 50-90 in another on the development VM, as the pool's threads
// share a vCPU with the caller or wake a halted one), so `bench` measures
// it again in its own process.
double measure_pool_launch_us();

// The matmul class and B's packing rate (DeviceSpec::matmul_pack_gelems)
// from two timings of one GEMM that differ only in rows per thread, each
// thread packing all of B once in both: seconds = packing + flops / rate,
// the same packing in both. `packed_elements`: the elements of B packed,
// all threads. Where the two give no packing time of at least 2% of the
// longer GEMM's (noise, or a CPU that packs at no cost), the rate is the
// longer GEMM's with its packing in it, and the packing rate 0 (not
// modelled).
struct GemmFigures {
  double tflops = 0;
  double pack_gelems = 0;
};
GemmFigures gemm_figures(double seconds, double flops, double fewer_rows_seconds, double fewer_rows_flops,
                         double packed_elements);

}  // namespace fusejit
