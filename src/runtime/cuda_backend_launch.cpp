#include "runtime/cuda_backend_launch.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

namespace fusejit::cuda_backend {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The datasheet a GPU name matches ("NVIDIA H100 80GB HBM3" -> h100), or "".
std::string datasheet_for(const std::string& gpu_name) {
  for (const auto& [marker, key] : {std::pair{"H200", "h200"}, {"H100", "h100"}, {"A100", "a100"}}) {
    if (gpu_name.find(marker) != std::string::npos) return key;
  }
  return "";
}

}  // namespace

bool all_aligned(const std::vector<cuda::DevicePtr>& pointers) {
  return std::all_of(pointers.begin(), pointers.end(), [](cuda::DevicePtr p) { return p % 16 == 0; });
}

CudaAccess access_for(const std::vector<cuda::DevicePtr>& pointers) {
  return all_aligned(pointers) ? CudaAccess::kVector : CudaAccess::kScalar;
}

LaunchConfig launch_config(const CudaKernelSource& kernel, int sm_count, int max_threads_per_sm, int blocks_per_sm,
                           int64_t count) {
  if (count < 0) count = kernel.count;
  LaunchConfig c;
  int64_t blocks = 1;
  if (kernel.variant == CudaVariant::kPointwise) {
    c.block.x = static_cast<unsigned>(kernel.block_threads);
    const bool vector = kernel.access == CudaAccess::kVector;
    const int64_t steps = vector ? ceil_div(count, kernel.vector_width) : count;
    blocks = ceil_div(steps, kernel.block_threads);
  } else if (kernel.variant == CudaVariant::kWarpPerRow) {
    c.block.x = static_cast<unsigned>(kernel.block_threads);
    c.block.y = static_cast<unsigned>(kernel.rows_per_block);
    blocks = ceil_div(count, kernel.rows_per_block);
  } else {  // block per row, re-read
    c.block.x = static_cast<unsigned>(kernel.block_threads);
    blocks = count;
  }
  const int64_t threads_per_block = int64_t{c.block.x} * c.block.y;
  int64_t resident_per_sm = std::max<int64_t>(1, max_threads_per_sm / std::max<int64_t>(1, threads_per_block));
  if (blocks_per_sm > 0) resident_per_sm = std::min<int64_t>(resident_per_sm, blocks_per_sm);
  const int64_t wave = std::max<int64_t>(1, int64_t{sm_count} * resident_per_sm);
  c.grid.x = static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, wave));
  return c;
}

int fp32_lanes_per_sm(int cc_major, int cc_minor) {
  if (cc_major == 6 && cc_minor == 0) return 64;  // P100
  if (cc_major == 7) return 64;                   // V100, T4
  if (cc_major == 8 && cc_minor == 0) return 64;  // A100
  return 128;                                     // Maxwell, Pascal 6.1+, Ampere 8.6+, Ada, Hopper, Blackwell
}

double issue_tops_for(const GpuInfo& gpu, int clock_khz) {
  return static_cast<double>(gpu.sm_count) * fp32_lanes_per_sm(gpu.cc_major, gpu.cc_minor) * clock_khz * 1e3 / 1e12;
}

DeviceSpec device_spec_for(const GpuInfo& gpu, int clock_khz) {
  const std::string running = gpu.summary();
  if (const std::string key = datasheet_for(gpu.name); !key.empty()) {
    DeviceSpec d = gpu_device(key);
    const std::string datasheet = d.description;
    // PCIe and NVL parts have fewer SMs than the SXM datasheet: scale the peaks.
    if (gpu.sm_count > 0 && d.compute_units > 0 && gpu.sm_count != d.compute_units) {
      const double ratio = static_cast<double>(gpu.sm_count) / d.compute_units;
      set_gpu_peaks(d, d.peak_f32_tflops * ratio, d.peak_tensor_tflops * ratio, d.issue_tops * ratio);
      d.compute_units = gpu.sm_count;
    }
    // The instruction rate from this GPU's own SMs and clock: a PCIe part
    // runs fewer SMs at a lower clock than the SXM datasheet.
    if (gpu.sm_count > 0 && clock_khz > 0) d.issue_tops = issue_tops_for(gpu, clock_khz);
    if (gpu.l2_bytes > 0) d.cache_bytes = gpu.l2_bytes;
    // The driver's memory clock tells a 2.0 TB/s H100 PCIe from a 3.35 TB/s
    // SXM; a reading far from the datasheet is more likely a misreported
    // clock than a different memory system.
    std::string bandwidth_source = "datasheet";
    if (gpu.bandwidth_gbps > d.bandwidth_gbps / 2 && gpu.bandwidth_gbps < d.bandwidth_gbps * 2) {
      d.bandwidth_gbps = gpu.bandwidth_gbps;
      bandwidth_source = "driver";
    }
    d.description = fmt::format("{}: {} with {} bandwidth {:.0f} GB/s, SMs and L2 from the driver", running, datasheet,
                                bandwidth_source, d.bandwidth_gbps);
    return d;
  }
  DeviceSpec d;
  d.name = "cuda";
  const double issue = issue_tops_for(gpu, clock_khz);
  const double f32 = 2 * issue;  // an FMA per FP32 lane per clock, counted as two FLOPs
  // Dense bf16 tensor-core throughput relative to FP32, from datasheets:
  // about 16x on data-centre parts (A100, H100, B200: cc X.0), 2-4x on
  // consumer and inference parts, 8x on Volta; no tensor cores before Volta.
  double tensor_ratio = 1;
  if (gpu.cc_major >= 8) {
    tensor_ratio = gpu.cc_minor == 0 ? 16 : 4;
  } else if (gpu.cc_major == 7) {
    tensor_ratio = 8;
  }
  set_gpu_peaks(d, f32, f32 * tensor_ratio, issue);
  d.bandwidth_gbps = gpu.bandwidth_gbps;
  d.launch_overhead_us = 1.0;
  d.persistent_row_limit = 16384;
  d.cache_bytes = gpu.l2_bytes;
  d.compute_units = gpu.sm_count;
  d.description = fmt::format(
      "{}: from the driver; FP32 peak {:.1f} TFLOP/s estimated from SMs and clock, tensor peak a rough {:.0f}x that",
      running, f32, tensor_ratio);
  return d;
}

}  // namespace fusejit::cuda_backend
