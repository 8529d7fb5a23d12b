// The CUDA driver API, loaded with dlopen("libcuda.so.1") on first use.
//
// Every call returns absl::Status or StatusOr and never crashes: on a machine
// without a driver each one says "no CUDA driver: dlopen libcuda.so.1
// failed: ..."; with a driver but no GPU, "no CUDA device: ..."; a failing
// call is named in its message with the driver's error name and text
// ("cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)").
// The wrappers are thin: one driver call each, in the current context; who
// creates what destroys it. Only libcuda.so.1 is loaded, never the toolkit's
// stub libcuda.so, which would only fail later. $FUSEJIT_CUDA_DRIVER names
// another library to load instead (the tests' CUDA emulator).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <absl/status/status.h>
#include <absl/status/statusor.h>

// The driver's own handle types (cuda.h names them the same way), so that a
// user of this header needs no toolkit headers.
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUevent_st;
struct CUstream_st;

namespace fusejit {

// OK when libcuda.so.1 loads, cuInit succeeds and there is at least one
// device; otherwise Unavailable with the reason.
absl::Status cuda_driver_status();

// True when the loaded driver is fusejit's CUDA emulator
// (FUSEJIT_CUDA_DRIVER=.../libfusejit_cuda_emulator.so): modules are then
// loaded from CUDA source, which it compiles for the host, not from CUBIN.
bool cuda_driver_is_emulator();
// The emulator's file, which also stands in for cuBLAS; "" for a real driver.
std::string cuda_emulator_path();

struct GpuInfo {
  std::string name;  // "NVIDIA H100 80GB HBM3"
  int sm_count = 0;
  int cc_major = 0;
  int cc_minor = 0;
  int memory_clock_khz = 0;
  int memory_bus_width_bits = 0;
  double bandwidth_gbps = 0;  // 2 x memory clock x bus width / 8 (double data rate), 1e9 bytes/s
  int64_t l2_bytes = 0;
  int64_t memory_bytes = 0;

  std::string arch() const;  // "sm_90"
  // "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)"; `device` >= 1 adds "GPU N, "
  // before the architecture (GPU 0 is the one --backend cuda takes).
  std::string summary(int device = 0) const;
};

absl::StatusOr<GpuInfo> query_gpu(int device = 0);

namespace cuda {

using Context = CUctx_st*;
using Module = CUmod_st*;
using Function = CUfunc_st*;
using Event = CUevent_st*;
using Stream = CUstream_st*;           // nullptr is the default stream
using DevicePtr = unsigned long long;  // CUdeviceptr

// The values are the driver's CU_DEVICE_ATTRIBUTE_* codes.
enum class DeviceAttribute : int {
  kClockRateKhz = 13,  // the SM clock, for an FP32 peak estimate
  kSmCount = 16,
  kMemoryClockKhz = 36,
  kMemoryBusWidthBits = 37,
  kL2CacheBytes = 38,
  kMaxThreadsPerSm = 39,
  kComputeCapabilityMajor = 75,
  kComputeCapabilityMinor = 76,
  kMaxSharedBytesPerBlockOptin = 97,
};

struct Dim3 {
  unsigned x = 1;
  unsigned y = 1;
  unsigned z = 1;
};

absl::StatusOr<int> driver_version();  // 12080 for CUDA 12.8
// Whether a kernel fault (an illegal address, say) has made the context
// unusable, as the driver reports it; every later call fails, and each
// failure's message says so and names the first.
bool context_lost();
absl::StatusOr<int> device_count();
absl::StatusOr<std::string> device_name(int device);
absl::StatusOr<int> device_attribute(int device, DeviceAttribute attribute);
absl::StatusOr<int64_t> device_total_memory(int device);

// The device's primary context (the one the CUDA runtime uses too), made
// current on the calling thread by a ContextScope (or set_current_context()).
absl::StatusOr<Context> retain_primary_context(int device);
absl::Status release_primary_context(int device);
absl::Status set_current_context(Context context);
// The context current on the calling thread; nullptr where none is.
absl::StatusOr<Context> current_context();

// Makes a context current on the calling thread while it lives, and then
// gives the thread back the context that was current before it
// (cuCtxPushCurrent, cuCtxPopCurrent): a program's own current context,
// the CUDA runtime's device after cudaSetDevice(1) say, is the same after a
// call into fusejit as before it, and any thread may call fusejit. Scopes
// nest; where the context is already current, entering costs one query.
class ContextScope {
 public:
  static absl::StatusOr<ContextScope> enter(Context context);
  ~ContextScope();
  ContextScope(ContextScope&& other) noexcept : pushed_(other.pushed_) { other.pushed_ = nullptr; }
  ContextScope& operator=(ContextScope&&) = delete;
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  explicit ContextScope(Context pushed) : pushed_(pushed) {}
  Context pushed_ = nullptr;  // the context the destructor pops; nullptr where none was pushed
};
absl::Status context_synchronize();

// image: a CUBIN, or PTX text that the driver compiles for the current
// device. A failure quotes the driver's JIT error log.
absl::StatusOr<Module> load_module(const std::string& image);
absl::Status unload_module(Module module);
absl::StatusOr<Function> module_function(Module module, const std::string& name);
// Lets a kernel use more than 48 KiB of dynamic shared memory.
absl::Status set_max_dynamic_shared_bytes(Function function, int bytes);
// args: one pointer per kernel parameter, pointing at its value.
absl::Status launch_kernel(Function function, Dim3 grid, Dim3 block, unsigned shared_bytes, Stream stream, void** args);

absl::StatusOr<DevicePtr> mem_alloc(size_t bytes);
absl::Status mem_free(DevicePtr ptr);
absl::Status memcpy_htod(DevicePtr dst, const void* src, size_t bytes);
absl::Status memcpy_dtoh(void* dst, DevicePtr src, size_t bytes);
absl::Status memcpy_dtod(DevicePtr dst, DevicePtr src, size_t bytes);
absl::Status memset_d8(DevicePtr dst, uint8_t value, size_t count);
absl::Status memset_d32(DevicePtr dst, uint32_t value, size_t count);  // count 32-bit words

absl::StatusOr<Event> event_create();
absl::Status event_destroy(Event event);
absl::Status event_record(Event event, Stream stream = nullptr);
absl::Status event_synchronize(Event event);
absl::StatusOr<float> event_elapsed_ms(Event start, Event end);
absl::Status stream_synchronize(Stream stream = nullptr);

}  // namespace cuda
}  // namespace fusejit
