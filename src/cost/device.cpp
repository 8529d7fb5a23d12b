#include "cost/device.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "cost/machine_load.h"
#include "fusion/cpu_work_split.h"
#include "ir/error.h"

namespace fusejit {
namespace {

DeviceSpec datasheet_gpu(std::string name, std::string description, double bandwidth_gbps, double f32_tflops,
                         double tensor_tflops, double boost_ghz, int fp32_lanes_per_sm, int64_t l2_bytes, int sms) {
  DeviceSpec d;
  d.name = std::move(name);
  d.description = std::move(description);
  d.bandwidth_gbps = bandwidth_gbps;
  set_gpu_peaks(d, f32_tflops, tensor_tflops, sms * fp32_lanes_per_sm * boost_ghz * 1e9 / 1e12);
  // XLA's figure for one kernel launch in a stream of launches.
  d.launch_overhead_us = 1.0;
  // A block of 1024 threads holding 16 f32 values each keeps a 16384-element
  // row in registers without spilling (DESIGN.md §4).
  d.persistent_row_limit = 16384;
  d.cache_bytes = l2_bytes;
  d.compute_units = sms;
  return d;
}

}  // namespace

bool plausible_measured_figures(const DeviceSpec& d) {
  auto gbps = [](double v) { return std::isfinite(v) && v >= 1e-3 && v < 1e6; };
  auto tflops = [](double v) { return std::isfinite(v) && v >= 1e-6 && v < 1e6; };
  return gbps(d.bandwidth_gbps) && tflops(d.peak_f32_tflops) &&
         (d.thread_bandwidth_gbps == 0 || gbps(d.thread_bandwidth_gbps)) &&
         std::all_of(d.class_tflops.begin(), d.class_tflops.end(), tflops) && std::isfinite(d.launch_overhead_us) &&
         std::isfinite(d.matmul_pack_gelems) && d.matmul_pack_gelems >= 0 && d.matmul_pack_gelems < 1e6 &&
         d.launch_overhead_us >= 0 && d.launch_overhead_us < 1e6 && d.overlap >= 0 && d.overlap <= 1 &&
         ((d.others_busy_share >= 0 && d.others_busy_share <= 1) || d.others_busy_share == kUnknownShare) &&
         d.busy_remeasures >= 0;
}

DeviceSpec better_measured_figures(const DeviceSpec& cached, const DeviceSpec& measured) {
  DeviceSpec d = measured;
  d.bandwidth_gbps = std::max(cached.bandwidth_gbps, measured.bandwidth_gbps);
  d.thread_bandwidth_gbps = std::max(cached.thread_bandwidth_gbps, measured.thread_bandwidth_gbps);
  d.peak_f32_tflops = std::max(cached.peak_f32_tflops, measured.peak_f32_tflops);
  d.peak_tensor_tflops = std::max(cached.peak_tensor_tflops, measured.peak_tensor_tflops);
  for (size_t c = 0; c < d.class_tflops.size(); ++c) {
    d.class_tflops[c] = std::max(cached.class_tflops[c], measured.class_tflops[c]);
  }
  // The GEMM's rate and packing rate are one fit of two timings (a rate
  // with packing in it where the packing rate is 0): both come from the
  // measurement that predicts a GEMM of one row block per thread faster,
  // never one figure from each.
  const int gemm = static_cast<int>(CostClass::kMatmul);
  auto block_seconds = [gemm](const DeviceSpec& m) {  // per K x N, up to the thread count
    return 2.0 * kCpuMatmulRowBlock / (m.class_tflops[gemm] * 1e12) +
           (m.matmul_pack_gelems > 0 ? 1 / (m.matmul_pack_gelems * 1e9) : 0.0);
  };
  const DeviceSpec& faster_gemm = block_seconds(cached) < block_seconds(measured) ? cached : measured;
  d.class_tflops[gemm] = faster_gemm.class_tflops[gemm];
  d.matmul_pack_gelems = faster_gemm.matmul_pack_gelems;
  // The bf16 GEMM's rate had that measurement's packing rate taken out
  // (runtime/cpu_calibration.cpp): it goes with it.
  const int bf16_gemm = static_cast<int>(CostClass::kMatmulBf16);
  d.class_tflops[bf16_gemm] = faster_gemm.class_tflops[bf16_gemm];
  d.launch_overhead_us = std::min(cached.launch_overhead_us, measured.launch_overhead_us);
  d.others_busy_share = std::min(cached.others_busy_share, measured.others_busy_share);
  d.busy_remeasures = d.others_busy_share > kBusyShare ? cached.busy_remeasures + 1 : 0;
  return d;
}

bool is_small_regular_file(const std::string& path, uint64_t max_bytes) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::is_regular_file(status)) return false;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  return !ec && size <= max_bytes;
}

void set_gpu_peaks(DeviceSpec& d, double f32_tflops, double tensor_tflops, double issue_tops) {
  d.peak_f32_tflops = f32_tflops;
  d.peak_tensor_tflops = tensor_tflops;
  d.class_tflops.fill(f32_tflops);
  d.class_tflops[static_cast<int>(CostClass::kMatmul)] = tensor_tflops;
  d.class_tflops[static_cast<int>(CostClass::kMatmulBf16)] = tensor_tflops;
  d.issue_tops = issue_tops;
}

std::vector<std::string> device_names() { return {"h100", "h200", "a100", "cpu"}; }

DeviceSpec gpu_device(std::string_view name) {
  constexpr int64_t kMB = 1024 * 1024;
  if (name == "h200") {
    return datasheet_gpu("h200", "NVIDIA H200 SXM 141 GB (datasheet)", 4800, 67, 989, 1.98, 128, 50 * kMB, 132);
  }
  if (name == "a100") {
    return datasheet_gpu("a100", "NVIDIA A100 SXM 80 GB (datasheet)", 2039, 19.5, 312, 1.41, 64, 40 * kMB, 108);
  }
  if (name == "h100") {
    return datasheet_gpu("h100", "NVIDIA H100 SXM5 80 GB (datasheet)", 3350, 67, 989, 1.98, 128, 50 * kMB, 132);
  }
  // A typo must not quietly price a plan on another GPU.
  throw Error(fmt::format("gpu_device: unknown GPU '{}'; the datasheet GPUs are h100, h200 and a100 (find_device "
                          "returns a status instead)",
                          name));
}

absl::StatusOr<DeviceSpec> find_device(std::string_view name) {
  if (name == "h100" || name == "h200" || name == "a100") return gpu_device(name);
  if (name == "cpu") return cpu_device();
  return absl::NotFoundError(fmt::format("unknown device '{}'; known devices: {}", name,
                                         fmt::join(device_names(), ", ")));
}

}  // namespace fusejit
