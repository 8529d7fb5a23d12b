#include "runtime/cuda_backend_resources.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "ir/error.h"
#include "ir/messages.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/nvrtc_library.h"

namespace fusejit::cuda_backend {
namespace {

// Destructors cannot return a status; a failure to free is worth a warning
// (it usually means an earlier kernel corrupted the context), never a crash.
void warn_if_failed(const absl::Status& s, std::string_view what) {
  if (!s.ok()) warn(fmt::format("CUDA backend: {}: {}", what, status_text(s)));
}

// Frees an object in `context`, the one it was made in, whatever the
// destroying thread has current; a failure, or a context that cannot be
// entered, is a warning.
template <typename Free>
void free_in_context(cuda::Context context, Free free, std::string_view what) {
  absl::StatusOr<cuda::ContextScope> scope = cuda::ContextScope::enter(context);
  warn_if_failed(scope.ok() ? free() : scope.status(), what);
}

}  // namespace

absl::StatusOr<DeviceBuffer> DeviceBuffer::allocate(size_t bytes, std::string_view what) {
  absl::StatusOr<cuda::Context> context = cuda::current_context();
  if (!context.ok()) return context.status();
  absl::StatusOr<cuda::DevicePtr> ptr = cuda::mem_alloc(bytes);
  if (!ptr.ok()) {
    return absl::Status(ptr.status().code(),
                        fmt::format("cannot allocate {} on the GPU: {}", what, status_text(ptr.status())));
  }
  return DeviceBuffer(*context, *ptr, bytes);
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != 0)
    free_in_context(
        context_, [&] { return cuda::mem_free(ptr_); }, fmt::format("freeing {} bytes", bytes_));
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : context_(std::exchange(other.context_, nullptr)),
      ptr_(std::exchange(other.ptr_, 0)),
      bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    DeviceBuffer old(std::move(*this));
    context_ = std::exchange(other.context_, nullptr);
    ptr_ = std::exchange(other.ptr_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

absl::StatusOr<ModuleHandle> ModuleHandle::load(const CompiledKernel& compiled) {
  const std::string& image =
      cuda_driver_is_emulator() ? compiled.source : (compiled.cubin.empty() ? compiled.ptx : compiled.cubin);
  absl::StatusOr<cuda::Context> context = cuda::current_context();
  if (!context.ok()) return context.status();
  absl::StatusOr<cuda::Module> module = cuda::load_module(image);
  if (!module.ok()) {
    return absl::Status(module.status().code(), fmt::format("loading kernel {} onto the GPU: {}", compiled.name,
                                                            status_text(module.status())));
  }
  return ModuleHandle(*context, *module);
}

ModuleHandle::~ModuleHandle() {
  if (module_ != nullptr)
    free_in_context(
        context_, [&] { return cuda::unload_module(module_); }, "unloading a module");
}

ModuleHandle& ModuleHandle::operator=(ModuleHandle&& other) noexcept {
  if (this != &other) {
    ModuleHandle old(std::move(*this));
    context_ = std::exchange(other.context_, nullptr);
    module_ = std::exchange(other.module_, nullptr);
  }
  return *this;
}

absl::StatusOr<EventTimer> EventTimer::create() {
  EventTimer timer;
  absl::StatusOr<cuda::Context> context = cuda::current_context();
  if (!context.ok()) return context.status();
  timer.context_ = *context;
  for (cuda::Event& e : timer.events_) {
    absl::StatusOr<cuda::Event> made = cuda::event_create();
    if (!made.ok()) return made.status();
    e = *made;
  }
  return timer;
}

EventTimer::~EventTimer() {
  for (cuda::Event e : events_) {
    if (e != nullptr)
      free_in_context(
          context_, [&] { return cuda::event_destroy(e); }, "destroying an event");
  }
}

absl::Status EventTimer::record(int event) { return cuda::event_record(events_.at(event)); }

absl::Status EventTimer::synchronize(int event) { return cuda::event_synchronize(events_.at(event)); }

absl::StatusOr<double> EventTimer::elapsed_ms(int from, int to) const {
  absl::StatusOr<float> ms = cuda::event_elapsed_ms(events_.at(from), events_.at(to));
  if (!ms.ok()) return ms.status();
  return static_cast<double>(*ms);
}

absl::StatusOr<double> EventTimer::stop_ms() {
  if (absl::Status s = record(1); !s.ok()) return s;
  if (absl::Status s = synchronize(1); !s.ok()) return s;
  return elapsed_ms(0, 1);
}

namespace {

// Reads through L2 (ld.global.cg: cached in L2, not L1) so that L2 ends up
// holding clean lines of this buffer only. The buffer holds equal bytes, so
// the XOR of each 16-byte vector is 0 and the store never happens; the
// compiler cannot know that and keeps every load. Each thread has four
// independent loads in flight per step (64 KiB per SM at 4 blocks of 256
// threads), enough to keep HBM busy: a drain (time_with_write_back_us)
// that ran below the memory's bandwidth would hide the write-backs it is
// there to charge in its idle cycles.
constexpr const char* kL2FlushSource = R"(// fusejit: the L2 flush, read-only.
extern "C" __global__ void fj_l2_flush(const uint4* __restrict__ p, long long n, unsigned* sink) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  unsigned acc = 0;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = __ldcg(p + i), b = __ldcg(p + i + stride);
    const uint4 c = __ldcg(p + i + 2 * stride), d = __ldcg(p + i + 3 * stride);
    acc |= (a.x ^ a.y ^ a.z ^ a.w) | (b.x ^ b.y ^ b.z ^ b.w) | (c.x ^ c.y ^ c.z ^ c.w) | (d.x ^ d.y ^ d.z ^ d.w);
  }
  for (; i < n; i += stride) {
    const uint4 v = __ldcg(p + i);
    acc |= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9E3779B9u) *sink = acc;
}
)";

}  // namespace

std::string_view l2_flush_kernel_source() { return kL2FlushSource; }

absl::StatusOr<std::shared_ptr<CudaGpu>> CudaGpu::open(int device) {
  // The driver first: on a machine without one, that is the reason to give.
  if (absl::Status s = cuda_driver_status(); !s.ok()) return s;
  if (absl::Status s = nvrtc_status(); !s.ok()) {
    return absl::UnavailableError(fmt::format("the CUDA backend compiles kernels with NVRTC: {}", status_text(s)));
  }
  // A driver of an older CUDA major version than NVRTC's refuses its PTX
  // and CUBINs, and the same toolkit's cuBLAS: say so before anything fails
  // on a module load. Minor versions of one major are compatible.
  absl::StatusOr<int> driver = cuda::driver_version();
  if (!driver.ok()) return driver.status();
  if (absl::StatusOr<std::pair<int, int>> nvrtc = nvrtc_library_version();
      nvrtc.ok() && *driver / 1000 < nvrtc->first) {
    return absl::UnavailableError(fmt::format(
        "the CUDA driver supports CUDA {}.{}, older than the CUDA {}.{} toolkit whose NVRTC fusejit uses: the driver "
        "would refuse its kernels; install a driver for CUDA {} or newer, or build fusejit with a CUDA {} toolkit",
        *driver / 1000, *driver % 1000 / 10, nvrtc->first, nvrtc->second, nvrtc->first, *driver / 1000));
  }
  absl::StatusOr<int> count = cuda::device_count();
  if (!count.ok()) return count.status();
  if (device < 0 || device >= *count) {
    return absl::NotFoundError(
        fmt::format("there is no CUDA device {}: this machine has {} ({})", device,
                    *count == 1 ? "one, device 0" : fmt::format("{}", *count),
                    *count == 1 ? "CUDA_VISIBLE_DEVICES may hide others" : fmt::format("devices 0 to {}", *count - 1)));
  }
  absl::StatusOr<GpuInfo> info = query_gpu(device);
  if (!info.ok()) return info.status();
  absl::StatusOr<std::string> arch = cuda_arch_for(info->cc_major, info->cc_minor);
  if (!arch.ok()) {
    return absl::UnavailableError(fmt::format("{} ({}): {}", info->name, info->arch(), status_text(arch.status())));
  }
  absl::StatusOr<int> clock = cuda::device_attribute(device, cuda::DeviceAttribute::kClockRateKhz);
  if (!clock.ok()) return clock.status();
  absl::StatusOr<int> threads = cuda::device_attribute(device, cuda::DeviceAttribute::kMaxThreadsPerSm);
  if (!threads.ok()) return threads.status();
  absl::StatusOr<cuda::Context> context = cuda::retain_primary_context(device);
  if (!context.ok()) return context.status();
  // From here the destructor releases the context, whatever fails next.
  return std::shared_ptr<CudaGpu>(new CudaGpu(device, *context, *std::move(info), *std::move(arch), *clock, *threads));
}

CudaGpu::~CudaGpu() {
  flush_buffer_.reset();  // each frees itself in the context
  lt_workspace_.reset();
  flush_module_ = ModuleHandle();
  // cuBLAS frees its handles' device memory in the current context.
  // Outside the context they would free another GPU's memory, or set a
  // context current on the thread: where it cannot be entered, they are
  // left (the context goes with its last reference below).
  if (cublas_)
    free_in_context(
        context_, [&] { return cublas::destroy_handle(*cublas_); }, "destroying the cuBLAS handle");
  if (cublaslt_) {
    free_in_context(
        context_, [&] { return cublaslt::destroy_handle(*cublaslt_); }, "destroying the cuBLASLt handle");
  }
  // Not in a scope: the context may be destroyed with its last reference.
  warn_if_failed(cuda::release_primary_context(device_), "releasing the primary context");
}

absl::StatusOr<cuda::ContextScope> CudaGpu::enter() const { return cuda::ContextScope::enter(context_); }

absl::StatusOr<cublas::Handle> CudaGpu::cublas_handle() {
  const std::lock_guard lock(lazy_mutex_);
  if (cublas_) return *cublas_;
  absl::StatusOr<cublas::Handle> handle = cublas::create_handle();
  if (!handle.ok()) return handle.status();
  cublas_ = *handle;
  return *handle;
}

absl::StatusOr<cublaslt::Handle> CudaGpu::cublaslt_handle() {
  const std::lock_guard lock(lazy_mutex_);
  if (cublaslt_) return *cublaslt_;
  absl::StatusOr<cublaslt::Handle> handle = cublaslt::create_handle();
  if (!handle.ok()) return handle.status();
  cublaslt_ = *handle;
  return *handle;
}

absl::StatusOr<cuda::DevicePtr> CudaGpu::lt_workspace() {
  const std::lock_guard lock(lazy_mutex_);
  if (!lt_workspace_) {
    absl::StatusOr<DeviceBuffer> buffer =
        DeviceBuffer::allocate(kLtWorkspaceBytes, fmt::format("cuBLASLt's workspace ({} bytes)", kLtWorkspaceBytes));
    if (!buffer.ok()) return buffer.status();
    lt_workspace_ = *std::move(buffer);
  }
  return lt_workspace_->get();
}

absl::StatusOr<std::string> CudaGpu::lt_activation_difference(
    DType dtype, cublaslt::Activation activation, bool bias,
    const std::function<absl::StatusOr<std::string>()>& probe) {
  const std::tuple key{dtype, activation, bias};
  {
    const std::lock_guard lock(lt_differences_mutex_);
    if (auto it = lt_differences_.find(key); it != lt_differences_.end()) return it->second;
  }
  absl::StatusOr<std::string> difference = probe();
  // Out of memory is the moment's; anything else (no algorithm, a library
  // that refuses) would be met again.
  if (difference.status().code() == absl::StatusCode::kResourceExhausted) return difference;
  const std::lock_guard lock(lt_differences_mutex_);
  lt_differences_.emplace(key, difference);
  return difference;
}

absl::Status CudaGpu::flush_l2() {
  if (absl::Status s = queue_l2_flush(); !s.ok()) return s;
  return cuda::context_synchronize();
}

absl::Status CudaGpu::queue_l2_flush() {
  const size_t bytes = 2 * static_cast<size_t>(std::max<int64_t>(info_.l2_bytes, 1 << 20));
  const std::lock_guard lock(lazy_mutex_);
  if (!flush_buffer_) {
    absl::StatusOr<CompiledKernel> compiled =
        compile_cuda("fj_l2_flush", kL2FlushSource, {.arch = arch_}, &KernelCache::global());
    if (!compiled.ok()) return compiled.status();
    absl::StatusOr<ModuleHandle> module = ModuleHandle::load(*compiled);
    if (!module.ok()) return module.status();
    absl::StatusOr<cuda::Function> function = cuda::module_function(module->get(), "fj_l2_flush");
    if (!function.ok()) return function.status();
    absl::StatusOr<DeviceBuffer> buffer =
        DeviceBuffer::allocate(bytes, fmt::format("the L2 flush buffer ({} bytes, twice the L2)", bytes));
    if (!buffer.ok()) return buffer.status();
    // Equal bytes, which the kernel relies on; the dirty lines this leaves
    // are written back during the first flush's reads.
    if (absl::Status s = cuda::memset_d8(buffer->get(), 0, bytes); !s.ok()) return s;
    flush_module_ = *std::move(module);
    flush_function_ = *function;
    flush_buffer_ = *std::move(buffer);
  }
  cuda::DevicePtr data = flush_buffer_->get();
  long long vectors = static_cast<long long>(bytes / 16);
  cuda::DevicePtr sink = data;  // never written
  void* args[] = {&data, &vectors, &sink};
  const cuda::Dim3 grid{static_cast<unsigned>(std::max(1, info_.sm_count) * 4)};
  const cuda::Dim3 block{256};
  return cuda::launch_kernel(flush_function_, grid, block, 0, nullptr, args);
}

absl::StatusOr<double> time_with_write_back_us(CudaGpu& gpu, EventTimer& timer,
                                               const std::function<absl::Status()>& work) {
  if (absl::Status s = timer.record(0); !s.ok()) return s;
  if (absl::Status s = work(); !s.ok()) return s;
  if (absl::Status s = timer.record(1); !s.ok()) return s;
  if (absl::Status s = gpu.queue_l2_flush(); !s.ok()) return s;  // the drain
  if (absl::Status s = timer.record(2); !s.ok()) return s;
  if (absl::Status s = gpu.queue_l2_flush(); !s.ok()) return s;  // the drain alone
  if (absl::Status s = timer.record(3); !s.ok()) return s;
  if (absl::Status s = timer.synchronize(3); !s.ok()) return s;
  absl::StatusOr<double> work_ms = timer.elapsed_ms(0, 1);
  if (!work_ms.ok()) return work_ms.status();
  absl::StatusOr<double> drained_ms = timer.elapsed_ms(0, 2);
  if (!drained_ms.ok()) return drained_ms.status();
  absl::StatusOr<double> drain_ms = timer.elapsed_ms(2, 3);
  if (!drain_ms.ok()) return drain_ms.status();
  // The floor adds E[max(0, noise)] to a kernel that writes next to
  // nothing, a fraction of a microsecond against a drain of tens.
  return std::max(*work_ms, *drained_ms - *drain_ms) * 1e3;
}

}  // namespace fusejit::cuda_backend
