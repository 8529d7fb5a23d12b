// The CUDA backend: a GPU (cuda, cuda:N) through the driver API (libcuda loaded with
// dlopen), kernels compiled by NVRTC, matmuls on cuBLAS (also dlopen'ed).
// The pieces: cuda_backend_resources (RAII handles and the GPU's context),
// cuda_backend_launch (grids and the cost model's device), cuda_backend_plan
// (a loaded plan), cuda_backend_matmul (cuBLAS calls).
#include <fmt/format.h>

#include "fusion/plan_verify.h"
#include "ir/error.h"
#include "runtime/backend.h"
#include "runtime/cuda_backend_launch.h"
#include "runtime/cuda_backend_plan.h"
#include "runtime/cuda_backend_resources.h"

namespace fusejit {
namespace {

using cuda_backend::CudaGpu;
using cuda_backend::DeviceBuffer;
using cuda_backend::EventTimer;

class CudaBackend final : public Backend {
 public:
  CudaBackend(std::shared_ptr<CudaGpu> gpu, DeviceSpec spec) : gpu_(std::move(gpu)), spec_(std::move(spec)) {}

  std::string_view name() const override { return "cuda"; }
  std::string description() const override { return gpu_->info().summary(gpu_->device()); }
  DeviceSpec device() const override { return spec_; }

  absl::StatusOr<std::unique_ptr<LoadedPlan>> load(const FusionPlan& plan, const LoadOptions& options) override {
    if (absl::Status s = verify_plan(plan); !s.ok()) return s;
    return cuda_backend::load_plan(gpu_, plan, options);
  }

  absl::StatusOr<std::unique_ptr<CopyTimer>> prepare_copy(int64_t bytes) override;
  absl::Status flush_cache() override {
    absl::StatusOr<cuda::ContextScope> context = gpu_->enter();
    if (!context.ok()) return context.status();
    // Not waited for: time_kernel's start event follows it on the stream.
    return gpu_->queue_l2_flush();
  }

 private:
  std::shared_ptr<CudaGpu> gpu_;
  DeviceSpec spec_;
};

// A device-to-device copy (cuMemcpyDtoD) timed with CUDA events.
class CudaCopyTimer final : public CopyTimer {
 public:
  CudaCopyTimer(std::shared_ptr<CudaGpu> gpu, DeviceBuffer src, DeviceBuffer dst, EventTimer timer)
      : gpu_(std::move(gpu)), src_(std::move(src)), dst_(std::move(dst)), timer_(std::move(timer)) {}
  absl::StatusOr<double> time_us() override {
    absl::StatusOr<cuda::ContextScope> context = gpu_->enter();
    if (!context.ok()) return context.status();
    // Timed as kernels are (time_with_write_back_us): from a flushed L2,
    // with its write-backs, and with the GPU busy when it is submitted.
    if (absl::Status s = gpu_->queue_l2_flush(); !s.ok()) return s;
    return time_with_write_back_us(*gpu_, timer_,
                                   [&] { return cuda::memcpy_dtod(dst_.get(), src_.get(), src_.size()); });
  }

 private:
  std::shared_ptr<CudaGpu> gpu_;
  DeviceBuffer src_, dst_;
  EventTimer timer_;
};

absl::StatusOr<std::unique_ptr<CopyTimer>> CudaBackend::prepare_copy(int64_t bytes) {
  if (bytes <= 0) return absl::InvalidArgumentError(fmt::format("a copy of {} bytes", bytes));
  absl::StatusOr<cuda::ContextScope> context = gpu_->enter();
  if (!context.ok()) return context.status();
  const auto size = static_cast<size_t>(bytes);
  absl::StatusOr<DeviceBuffer> src = DeviceBuffer::allocate(size, fmt::format("a {}-byte copy source", bytes));
  if (!src.ok()) return src.status();
  absl::StatusOr<DeviceBuffer> dst = DeviceBuffer::allocate(size, fmt::format("a {}-byte copy target", bytes));
  if (!dst.ok()) return dst.status();
  absl::StatusOr<EventTimer> timer = EventTimer::create();
  if (!timer.ok()) return timer.status();
  // Touch both buffers once (first-touch page mapping stays out of the timing).
  if (absl::Status s = cuda::memset_d8(src->get(), 0x5A, size); !s.ok()) return s;
  if (absl::Status s = cuda::memcpy_dtod(dst->get(), src->get(), size); !s.ok()) return s;
  if (absl::Status s = cuda::context_synchronize(); !s.ok()) return s;
  return std::unique_ptr<CopyTimer>(new CudaCopyTimer(gpu_, *std::move(src), *std::move(dst), *std::move(timer)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> make_cuda_backend(int device) {
  absl::StatusOr<std::shared_ptr<CudaGpu>> gpu = CudaGpu::open(device);
  if (!gpu.ok()) return gpu.status();
  DeviceSpec spec = cuda_backend::device_spec_for((*gpu)->info(), (*gpu)->clock_khz());
  auto backend = std::make_unique<CudaBackend>(*gpu, spec);
  if (spec.bandwidth_gbps <= 0) {
    // Some drivers report no memory clock; the copy ceiling stands in for it.
    constexpr int64_t kProbeBytes = int64_t{256} << 20;
    absl::StatusOr<double> copy = backend->measure_copy_gbps(kProbeBytes);
    if (!copy.ok()) return copy.status();
    spec.bandwidth_gbps = *copy;
    spec.description +=
        fmt::format("; bandwidth {:.0f} GB/s from a device copy (the driver reports no memory clock)", *copy);
    backend = std::make_unique<CudaBackend>(*gpu, spec);
  }
  return backend;
}

}  // namespace fusejit
