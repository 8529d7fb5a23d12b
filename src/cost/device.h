// Device descriptions for the roofline model.
//
// A kernel's predicted time is max(bytes / bandwidth, compute time) plus a
// launch overhead; on a CPU, whose cores overlap the two little, their sum
// plus the launch (DeviceSpec::overlap).
// On a GPU the compute time of elementwise and row work is its estimated
// SASS instructions at the issue rate (issue_tops; cost/gpu_instructions.h):
// FLOPs undercount it, since an IEEE division, a Philox draw or a block
// reduction's shuffles are many instructions that the FLOP weights barely
// see.
// On a CPU the compute time sums, over op cost classes, FLOPs / the class's
// throughput. The classes differ by an order of magnitude (Philox and erf
// cost far more than an FMA), so the `cpu` device measures each class on
// this machine; an FMA peak alone would call a chain memory-bound that this
// CPU in fact computes too slowly.
// f32 matmul uses the FP32 peak, bf16/f16 matmul the tensor-core peak.
#pragma once

#include <array>
#include <limits>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <absl/status/statusor.h>

#include "ir/op_table.h"

namespace fusejit {

// A persistent_row_limit that no row reaches: the CPU backend's row kernels
// read each row from memory once whatever its length (their f32 row arrays
// spill to cache by themselves), so no plan for the CPU re-reads rows.
inline constexpr int64_t kAnyRowLength = std::numeric_limits<int64_t>::max();

struct DeviceSpec {
  std::string name;         // "h100"
  std::string description;  // "NVIDIA H100 SXM5 80 GB (datasheet)"
  double bandwidth_gbps = 0;       // memory bandwidth, 1e9 bytes/s
  // A CPU: what one thread copies alone, 1e9 bytes/s, for kernels whose
  // work is split over fewer threads than the machine has
  // (fusion/cpu_work_split.h). 0 where unmeasured: bandwidth_gbps shared
  // evenly by compute_units threads.
  double thread_bandwidth_gbps = 0;
  double peak_f32_tflops = 0;      // FP32 (CUDA cores / SIMD FMA)
  double peak_tensor_tflops = 0;   // dense bf16/f16 matmul
  // Throughput of each cost class in TFLOP/s of the op table's FLOP weights
  // (a GPU: the FP32 peak, but the tensor peak for matmul; the CPU: each
  // class measured with JIT kernels, matmul's with the generated GEMM).
  std::array<double, kNumCostClasses> class_tflops{};
  // The CPU: elements of B its GEMM packs per second, 1e9/s, all threads
  // together. Each thread packs all of B once per block of up to
  // kCpuMatmulRowBlock rows (fusion/cpu_work_split.h), which a GEMM of few
  // rows per thread pays over few rows; the matmul class is then the rate
  // of the multiply-adds alone. Measured with two GEMMs of different row
  // counts (runtime/cpu_calibration.cpp); 0 where it is not modelled (a
  // GPU, or a CPU without the JIT calibration).
  double matmul_pack_gelems = 0;
  // GPUs: thread-instructions retired per second, 1e12: SMs x FP32 lanes
  // per SM x clock. On an H100/H200 that is the issue rate (4 schedulers x
  // 32 lanes = its 128 FP32 lanes); an A100 (64 FP32 lanes per SM) takes
  // two clocks per FP32 warp instruction, so code that is mostly FP32, as
  // fusejit's is, retires at half its issue rate. Integer instructions run
  // on narrower pipes beside the FP32 ones; the model does not separate
  // them. 0 where instructions are not modelled (a CPU).
  double issue_tops = 0;
  double launch_overhead_us = 0;
  // How much of the shorter of a kernel's memory and compute times runs
  // under the longer: time = max(m, c) + (1 - overlap) * min(m, c). 1 is
  // the roofline's max, right for a GPU, whose thousands of warps in flight
  // hide one behind the other. A CPU core overlaps them little: its few
  // dozen misses in flight stall behind long arithmetic, and a row kernel
  // loads its row in one loop and computes in others. On the AMD EPYC VM 34
  // kernels ran at a median 1.43x the max (0.99-2.11x) and 1.03x the sum
  // (0.80-1.28x), so the `cpu` device takes 0 (cpu_identity). A probe that
  // measured the overlap of one exp kernel gave 19-42%, which fitted the 34
  // worse than 0 (bench/results/2026-12-06-cpu-overlap.md).
  double overlap = 1.0;
  // Longest row (elements) a row kernel keeps on chip; longer rows are
  // re-read once per reduction stage. kAnyRowLength: every row is read once.
  int64_t persistent_row_limit = 0;
  int64_t cache_bytes = 0;           // last-level cache (L2 on a GPU)
  int compute_units = 0;             // SMs or cores
  bool measured = false;             // figures measured on this machine rather than a datasheet
  // A measured device: the share of the machine's CPU time that other
  // programs took while its figures were measured (cost/machine_load.h);
  // above kBusyShare they may be low, and are measured again by a process
  // that finds the machine idle.
  double others_busy_share = 0;  // kUnknownShare (-1) where it could not be read
  // How many times figures measured on a busy machine were measured again
  // for it (up to kMaxBusyRemeasures; 0 once a measurement was idle).
  int busy_remeasures = 0;
  // A CPU whose JIT kernels round 16-bit outputs stored from an array with
  // one instruction per vector (codegen/cpu/fj_kernel.h): bf16 with
  // AVX512-BF16's vcvtneps2bf16, f16 with F16C's vcvtps2ph. The cost model
  // prices those stores at kCpuNarrowBf16Native and kCpuNarrowF16Native
  // (cost/cpu_conversions.h).
  bool native_bf16_stores = false;
  bool native_f16_stores = false;

  // Intensity (FLOP/byte) above which a kernel is compute-bound.
  double ridge_f32() const { return peak_f32_tflops * 1e3 / bandwidth_gbps; }
  double ridge_tensor() const { return peak_tensor_tflops * 1e3 / bandwidth_gbps; }
  // Whether generated kernels are charged by instructions (a GPU).
  bool models_instructions() const { return issue_tops > 0; }
};

// Sets a GPU's peaks and the instruction rate (issue_tops above) that
// generated kernels are charged at (cost/gpu_instructions.h). Matmuls run
// at the FP32 (SGEMM) or tensor (bf16/f16) peak.
void set_gpu_peaks(DeviceSpec& d, double f32_tflops, double tensor_tflops, double issue_tops);

// Names accepted by find_device(): h100, h200, a100, cpu.
std::vector<std::string> device_names();
// A datasheet GPU, or the measured CPU of this machine (see cpu_device()).
// For the CPU this is the portable probe: its op throughputs come from
// library math, several times off what the CPU backend's generated kernels
// reach. Predictions that match `fusejit plan --device cpu`, `fusejit
// bench` and the kernels that run come from the CPU backend's device():
// make_cpu_backend() then Backend::device() (runtime/backend.h).
absl::StatusOr<DeviceSpec> find_device(std::string_view name);
// h100, h200 or a100; another name throws fusejit::Error (find_device
// returns a status instead).
DeviceSpec gpu_device(std::string_view name);

// The CPU of this machine: copy bandwidth, FMA peak and each cost class's
// throughput, measured once and cached in the fusejit cache directory
// (FUSEJIT_CACHE_DIR, else $XDG_CACHE_HOME/fusejit, else ~/.cache/fusejit).
// A corrupt cache file is measured again, and so are figures measured
// while other programs kept the CPUs busy, by a process that finds them
// idle (cost/machine_load.h); an unwritable directory only costs the
// caching.
DeviceSpec cpu_device();
// Measures without the cache (a few seconds).
DeviceSpec measure_cpu_device();
// What is known about this CPU without measuring (name, threads, caches,
// row limit, overlap 0): enough to plan, not to predict times.
DeviceSpec cpu_identity();
// Where cpu_device() caches its figures: cache_directory()/cpu-device.json.
std::string cpu_device_cache_path();

// The directory fusejit caches in (not created).
std::string cache_directory();

// Whether a measured device's figures, as read back from a cache file,
// are ones a machine can have: bandwidths from 1e-3 to 1e6 GB/s (a MB/s
// and up), peaks and class throughputs from 1e-6 to 1e6 TFLOP/s (a
// MFLOP/s and up; a bandwidth of 5e-324 printed "ridge inf" and "-nanx"),
// launch overhead 0 to 1e6 µs, the busy share 0 to 1 or unknown. A file edited by hand or damaged gets measured again
// rather than predicting "inf us" or a negative launch. The overlap, which no cache file holds, must be in [0, 1] too
// (NaN is not), so that a DeviceSpec built by hand is held to the same.
bool plausible_measured_figures(const DeviceSpec& d);

// The figures of two measurements of the same machine, each the better
// one (the higher bandwidths, peaks, class throughputs and packing rate, the lower launch
// overhead and busy share): a neighbour only ever slows a probe down, so a
// measurement taken again because the first was busy keeps what the first
// got right. The rest is `measured`'s, and busy_remeasures counts this one
// where the result is still busy (0 where it is not).
DeviceSpec better_measured_figures(const DeviceSpec& cached, const DeviceSpec& measured);

// Whether `path` is a regular file of at most `max_bytes`: a cache file
// checked before it is parsed, so that a link to /dev/zero or a FIFO under
// its name is measured anew instead of read forever.
bool is_small_regular_file(const std::string& path, uint64_t max_bytes);
inline constexpr uint64_t kDeviceCacheFileMaxBytes = uint64_t{1} << 20;  // cpu-device*.json

}  // namespace fusejit
