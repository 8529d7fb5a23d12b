// What the CUDA backend owns on the GPU, each as a move-only handle that
// frees its object on destruction (RAII): device buffers, modules, events,
// and the GPU itself (its retained primary context, the cuBLAS handle and
// the L2 flush buffer), shared by the backend and every plan it loaded so
// that a loaded plan may outlive its backend. Internal to src/runtime/.
//
// Every entry point of the backend makes the GPU's context current for
// the call only (CudaGpu::enter()), and each handle remembers the context it
// was made in and frees its object there, whichever thread destroys it and
// whatever context that thread has current.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include "ir/dtype.h"
#include "runtime/cublas_library.h"
#include "runtime/cublaslt_library.h"
#include "runtime/cuda_driver.h"
#include "runtime/nvrtc_compiler.h"

namespace fusejit::cuda_backend {

// Device memory from cuMemAlloc. An allocation that fails says what it was for.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // `what` names the allocation in errors: "tensor x (bf16[8192, 4096], 67,108,864 bytes)".
  static absl::StatusOr<DeviceBuffer> allocate(size_t bytes, std::string_view what);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  cuda::DevicePtr get() const { return ptr_; }
  size_t size() const { return bytes_; }

 private:
  DeviceBuffer(cuda::Context context, cuda::DevicePtr ptr, size_t bytes)
      : context_(context), ptr_(ptr), bytes_(bytes) {}
  cuda::Context context_ = nullptr;
  cuda::DevicePtr ptr_ = 0;
  size_t bytes_ = 0;
};

// A loaded CUBIN or PTX module.
class ModuleHandle {
 public:
  ModuleHandle() = default;
  // Loads the CUBIN of `compiled`, its PTX where there is no CUBIN (a GPU
  // newer than NVRTC), or its CUDA source on the emulator, which compiles
  // it for the host.
  static absl::StatusOr<ModuleHandle> load(const CompiledKernel& compiled);
  ~ModuleHandle();
  ModuleHandle(ModuleHandle&& other) noexcept
      : context_(std::exchange(other.context_, nullptr)), module_(std::exchange(other.module_, nullptr)) {}
  ModuleHandle& operator=(ModuleHandle&& other) noexcept;
  ModuleHandle(const ModuleHandle&) = delete;
  ModuleHandle& operator=(const ModuleHandle&) = delete;

  cuda::Module get() const { return module_; }

 private:
  ModuleHandle(cuda::Context context, cuda::Module module) : context_(context), module_(module) {}
  cuda::Context context_ = nullptr;
  cuda::Module module_ = nullptr;
};

// Events for timing work on the default stream: start() and stop_ms() time
// one interval; record(), synchronize() and elapsed_ms() several, as
// time_with_write_back_us does.
class EventTimer {
 public:
  static constexpr int kEvents = 4;
  EventTimer() = default;
  static absl::StatusOr<EventTimer> create();
  ~EventTimer();
  EventTimer(EventTimer&& other) noexcept
      : context_(std::exchange(other.context_, nullptr)), events_(std::exchange(other.events_, {})) {}
  EventTimer& operator=(EventTimer&&) = delete;
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  absl::Status start() { return record(0); }
  // Records the stop event, waits for it and returns the milliseconds since start().
  absl::StatusOr<double> stop_ms();

  absl::Status record(int event);  // 0 <= event < kEvents
  absl::Status synchronize(int event);
  // Between two recorded events, once the later one has completed.
  absl::StatusOr<double> elapsed_ms(int from, int to) const;

 private:
  cuda::Context context_ = nullptr;
  std::array<cuda::Event, kEvents> events_{};
};

// The L2 flush kernel (fj_l2_flush), for compile tests without a GPU.
std::string_view l2_flush_kernel_source();

// A GPU as the backend uses it: its primary context (retained while this
// lives), what the driver says about it, and resources made on first use.
class CudaGpu {
 public:
  // GPU `device` (0 the first; CUDA_VISIBLE_DEVICES numbers them as for the
  // CUDA runtime). Unavailable with the reason when the driver, the device
  // or NVRTC is missing, or NVRTC cannot compile for this GPU.
  static absl::StatusOr<std::shared_ptr<CudaGpu>> open(int device = 0);
  ~CudaGpu();
  CudaGpu(const CudaGpu&) = delete;
  CudaGpu& operator=(const CudaGpu&) = delete;

  // Makes the context current on the calling thread until the scope ends,
  // then restores the thread's own; every entry point of the backend holds
  // one, so any thread may call the backend, and a program's own current
  // context is left as it was.
  absl::StatusOr<cuda::ContextScope> enter() const;

  int device() const { return device_; }
  cuda::Context context() const { return context_; }  // the device's primary context
  const GpuInfo& info() const { return info_; }
  const std::string& arch() const { return arch_; }  // for NVRTC: sm_XX, or compute_XX for a GPU newer than NVRTC
  int clock_khz() const { return clock_khz_; }
  int max_threads_per_sm() const { return max_threads_per_sm_; }

  // The cuBLAS handle, created (and cuBLAS loaded) on first use.
  absl::StatusOr<cublas::Handle> cublas_handle();
  // The cuBLASLt handle, likewise.
  absl::StatusOr<cublaslt::Handle> cublaslt_handle();
  // cuBLASLt's workspace, kLtWorkspaceBytes allocated on first use and
  // shared by every cublasLtMatmul of the process's plans: they all run on
  // the default stream, one after another. 32 MiB is what NVIDIA advises
  // for Hopper (cuBLAS documentation, cublasSetWorkspace).
  static constexpr uint64_t kLtWorkspaceBytes = uint64_t{32} << 20;
  absl::StatusOr<cuda::DevicePtr> lt_workspace();
  // What cuBLASLt's `activation` epilogue in `dtype` does differently from
  // fusejit's op (cublaslt_conformance.h): `probe` finds it on the first
  // call for each triple, and the answer is kept (an error too, except out
  // of memory, which may pass). Several threads may probe the same triple at
  // once; the answers are the same.
  absl::StatusOr<std::string> lt_activation_difference(DType dtype, cublaslt::Activation activation, bool bias,
                                                       const std::function<absl::StatusOr<std::string>()>& probe);
  // Reads a buffer twice the L2 size through L2 (buffer and kernel made on
  // first use), so that the next kernel finds none of its data in L2 and
  // L2 holds no dirty line: neither the next kernel's time nor its counted
  // DRAM writes include writing back someone else's data. Waits for it.
  absl::Status flush_l2();
  // The same flush, queued on the default stream and not waited for: the
  // next launch runs after it, but the host's work for that launch (and the
  // timer's start event) is done while the flush runs, so a kernel's timed
  // interval holds the kernel and not the host's launch cost. A flush that
  // fails shows at the next synchronization.
  absl::Status queue_l2_flush();

 private:
  CudaGpu(int device, cuda::Context context, GpuInfo info, std::string arch, int clock_khz, int max_threads_per_sm)
      : device_(device),
        context_(context),
        info_(std::move(info)),
        arch_(std::move(arch)),
        clock_khz_(clock_khz),
        max_threads_per_sm_(max_threads_per_sm) {}

  int device_;
  cuda::Context context_;
  GpuInfo info_;
  std::string arch_;
  int clock_khz_;
  int max_threads_per_sm_;
  // Guards the objects made on first use below: plans of one backend may
  // run on several threads at once.
  std::mutex lazy_mutex_;
  std::optional<cublas::Handle> cublas_;
  std::optional<cublaslt::Handle> cublaslt_;
  std::optional<DeviceBuffer> lt_workspace_;
  std::mutex lt_differences_mutex_;  // apart from lazy_mutex_, which a probe takes
  std::map<std::tuple<DType, cublaslt::Activation, bool>, absl::StatusOr<std::string>> lt_differences_;
  std::optional<DeviceBuffer> flush_buffer_;
  ModuleHandle flush_module_;  // holds flush_function_
  cuda::Function flush_function_ = nullptr;
};

// The time of `work` (launches queued on the default stream) as bench
// reports it, in microseconds, from an L2 flush the caller has queued
// before it (so the GPU is busy when the start event is recorded, and the
// host's submit work falls outside the interval) until the dirty lines
// `work` left in L2 are written back to memory.
//
// NVIDIA's L2 is write-back: a kernel ends with its last writes (all of
// them, for outputs that fit in the L2) still dirty there, and its stop
// event does not wait for them. Timed alone, a kernel writing less than the
// L2 would seem to write for free (its write-backs fall in the next flush,
// untimed), as would the last L2's worth of a larger one, while the model
// predicts every byte. So `work` is followed by a drain (a flush, whose
// reads evict those lines), then by a second drain, from an L2 with no
// dirty line; the time is (work + drain) - (drain alone): the work and the
// write-backs it owes. Never less than the work's own interval, which the
// difference of two timings can be, by noise.
absl::StatusOr<double> time_with_write_back_us(CudaGpu& gpu, EventTimer& timer,
                                               const std::function<absl::Status()>& work);

}  // namespace fusejit::cuda_backend
