#include "runtime/cuda_backend_resources.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "ir/error.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/warnings.h"

namespace fusejit::cuda_backend {
namespace {

// Destructors cannot return a status; a failure to free is worth a warning
// (it usually means an earlier kernel corrupted the context), never a crash.
void warn_if_failed(const absl::Status& s, std::string_view what) {
  if (!s.ok()) warn(fmt::format("CUDA backend: {}: {}", what, status_text(s)));
}

}  // namespace

absl::StatusOr<DeviceBuffer> DeviceBuffer::allocate(size_t bytes, std::string_view what) {
  absl::StatusOr<cuda::DevicePtr> ptr = cuda::mem_alloc(bytes);
  if (!ptr.ok()) {
    return absl::Status(ptr.status().code(),
                        fmt::format("cannot allocate {} on the GPU: {}", what, status_text(ptr.status())));
  }
  return DeviceBuffer(*ptr, bytes);
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != 0) warn_if_failed(cuda::mem_free(ptr_), fmt::format("freeing {} bytes", bytes_));
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, 0)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    DeviceBuffer old(std::move(*this));
    ptr_ = std::exchange(other.ptr_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

absl::StatusOr<ModuleHandle> ModuleHandle::load(const std::string& image, std::string_view kernel) {
  absl::StatusOr<cuda::Module> module = cuda::load_module(image);
  if (!module.ok()) {
    return absl::Status(module.status().code(),
                        fmt::format("loading kernel {} onto the GPU: {}", kernel, status_text(module.status())));
  }
  return ModuleHandle(*module);
}

ModuleHandle::~ModuleHandle() {
  if (module_ != nullptr) warn_if_failed(cuda::unload_module(module_), "unloading a module");
}

ModuleHandle& ModuleHandle::operator=(ModuleHandle&& other) noexcept {
  if (this != &other) {
    ModuleHandle old(std::move(*this));
    module_ = std::exchange(other.module_, nullptr);
  }
  return *this;
}

absl::StatusOr<EventTimer> EventTimer::create() {
  EventTimer timer;
  absl::StatusOr<cuda::Event> start = cuda::event_create();
  if (!start.ok()) return start.status();
  timer.start_ = *start;
  absl::StatusOr<cuda::Event> stop = cuda::event_create();
  if (!stop.ok()) return stop.status();
  timer.stop_ = *stop;
  return timer;
}

EventTimer::~EventTimer() {
  for (cuda::Event e : {start_, stop_}) {
    if (e != nullptr) warn_if_failed(cuda::event_destroy(e), "destroying an event");
  }
}

absl::Status EventTimer::start() { return cuda::event_record(start_); }

absl::StatusOr<double> EventTimer::stop_ms() {
  if (absl::Status s = cuda::event_record(stop_); !s.ok()) return s;
  if (absl::Status s = cuda::event_synchronize(stop_); !s.ok()) return s;
  absl::StatusOr<float> ms = cuda::event_elapsed_ms(start_, stop_);
  if (!ms.ok()) return ms.status();
  return static_cast<double>(*ms);
}

absl::StatusOr<std::shared_ptr<CudaGpu>> CudaGpu::open() {
  // The driver first: on a machine without one, that is the reason to give.
  if (absl::Status s = cuda_driver_status(); !s.ok()) return s;
  if (absl::Status s = nvrtc_status(); !s.ok()) {
    return absl::UnavailableError(fmt::format("the CUDA backend compiles kernels with NVRTC: {}", status_text(s)));
  }
  absl::StatusOr<GpuInfo> info = query_gpu(0);
  if (!info.ok()) return info.status();
  absl::StatusOr<std::string> arch = cuda_arch_for(info->cc_major, info->cc_minor);
  if (!arch.ok()) {
    return absl::UnavailableError(fmt::format("{} ({}): {}", info->name, info->arch(), status_text(arch.status())));
  }
  absl::StatusOr<int> clock = cuda::device_attribute(0, cuda::DeviceAttribute::kClockRateKhz);
  if (!clock.ok()) return clock.status();
  absl::StatusOr<int> threads = cuda::device_attribute(0, cuda::DeviceAttribute::kMaxThreadsPerSm);
  if (!threads.ok()) return threads.status();
  absl::StatusOr<cuda::Context> context = cuda::retain_primary_context(0);
  if (!context.ok()) return context.status();
  // From here the destructor releases the context, whatever fails next.
  std::shared_ptr<CudaGpu> gpu(new CudaGpu(*context, *std::move(info), *std::move(arch), *clock, *threads));
  if (absl::Status s = gpu->make_current(); !s.ok()) return s;
  return gpu;
}

CudaGpu::~CudaGpu() {
  warn_if_failed(make_current(), "making the context current");
  flush_buffer_.reset();
  if (cublas_) warn_if_failed(cublas::destroy_handle(*cublas_), "destroying the cuBLAS handle");
  warn_if_failed(cuda::release_primary_context(0), "releasing the primary context");
}

absl::Status CudaGpu::make_current() const { return cuda::set_current_context(context_); }

absl::StatusOr<cublas::Handle> CudaGpu::cublas_handle() {
  if (cublas_) return *cublas_;
  absl::StatusOr<cublas::Handle> handle = cublas::create_handle();
  if (!handle.ok()) return handle.status();
  cublas_ = *handle;
  return *handle;
}

absl::Status CudaGpu::flush_l2() {
  if (!flush_buffer_) {
    const size_t bytes = 2 * static_cast<size_t>(std::max<int64_t>(info_.l2_bytes, 1 << 20));
    absl::StatusOr<DeviceBuffer> buffer =
        DeviceBuffer::allocate(bytes, fmt::format("the L2 flush buffer ({} bytes, twice the L2)", bytes));
    if (!buffer.ok()) return buffer.status();
    flush_buffer_ = *std::move(buffer);
  }
  // A new value each time, so that no layer can skip the writes as redundant.
  ++flush_value_;
  if (absl::Status s = cuda::memset_d8(flush_buffer_->get(), flush_value_, flush_buffer_->size()); !s.ok()) return s;
  return cuda::context_synchronize();
}

}  // namespace fusejit::cuda_backend
