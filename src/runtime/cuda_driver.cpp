#include "runtime/cuda_driver.h"

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include <absl/strings/str_join.h>
#include <fmt/format.h>

#include "ir/error.h"
#include "ir/messages.h"
#include "runtime/cuda_driver_abi.h"
#include "runtime/shared_library.h"

namespace fusejit {
namespace {

using cuda_abi::DriverApi;
using cuda_abi::Result;

constexpr const char* kDriverLibrary = "libcuda.so.1";
// Names another driver library to load instead (tests set it to the CUDA
// emulator, tests/cuda_emulator/, to run the GPU tests on a machine without one).
constexpr const char* kDriverOverride = "FUSEJIT_CUDA_DRIVER";
// The symbol only the emulator exports; a real driver never has it.
constexpr const char* kEmulatorSymbol = "fusejitCudaEmulator";

struct Driver {
  DriverApi api;
  bool emulated = false;
  std::string path;  // the file loaded
};

// The symbol name of each DriverApi member, for error messages.
template <auto Member>
constexpr const char* kSymbol = nullptr;
#define FUSEJIT_SYMBOL_NAME(member, symbol, result, params) \
  template <>                                               \
  constexpr const char* kSymbol<&DriverApi::member> = #symbol;
FUSEJIT_CUDA_DRIVER_FUNCTIONS(FUSEJIT_SYMBOL_NAME)
#undef FUSEJIT_SYMBOL_NAME

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)"
std::string describe(const DriverApi& api, Result result) {
  const char* name = nullptr;
  const char* text = nullptr;
  api.get_error_name(result, &name);
  api.get_error_string(result, &text);
  return fmt::format("{} ({})", name != nullptr ? name : fmt::format("CUresult {}", result),
                     text != nullptr ? text : "no description");
}

std::string driver_library_name() {
  const char* override_name = std::getenv(kDriverOverride);
  return override_name != nullptr && *override_name != '\0' ? override_name : kDriverLibrary;
}

absl::StatusOr<Driver> load_driver() {
  const std::string name = driver_library_name();
  absl::StatusOr<SharedLibrary> library = SharedLibrary::open({name});
  if (!library.ok()) {
    return absl::UnavailableError(fmt::format("no CUDA driver: dlopen {} failed: {}{}", name,
                                              status_text(library.status()),
                                              name == kDriverLibrary ? "" : fmt::format(" (from ${})", kDriverOverride)));
  }
  Driver driver;
  DriverApi& api = driver.api;
  const char* (*emulator)() = nullptr;
  driver.emulated = library->bind(emulator, kEmulatorSymbol);
  driver.path = library->path();
  std::vector<std::string> missing;
#define FUSEJIT_BIND(member, symbol, result, params) \
  if (!library->bind(api.member, #symbol)) missing.push_back(#symbol);
  FUSEJIT_CUDA_DRIVER_FUNCTIONS(FUSEJIT_BIND)
#undef FUSEJIT_BIND
  if (!missing.empty()) {
    return absl::UnavailableError(fmt::format("no usable CUDA driver: {} lacks {} (a driver older than CUDA 11?)",
                                              library->path(), absl::StrJoin(missing, ", ")));
  }
  const Result init = api.init(0);
  if (init == cuda_abi::kErrorNoDevice) {
    return absl::UnavailableError(fmt::format("no CUDA device: cuInit failed: {}", describe(api, init)));
  }
  if (init == cuda_abi::kErrorStubLibrary) {
    return absl::UnavailableError(
        fmt::format("no CUDA driver: {} is the CUDA toolkit's stub library, not a driver (check LD_LIBRARY_PATH)",
                    library->path()));
  }
  if (init != cuda_abi::kSuccess) {
    return absl::UnavailableError(fmt::format("no CUDA driver: cuInit failed: {}", describe(api, init)));
  }
  return driver;
}

// Loaded and initialised once per process; C++ makes the first call's
// initialisation thread-safe.
const absl::StatusOr<Driver>& driver() {
  static const absl::StatusOr<Driver> loaded = load_driver();
  return loaded;
}

// The first failure that lost the context (cuda_abi::loses_context), or "".
std::mutex lost_mutex;
std::string lost_at;

// A kernel fault is reported by whichever call next waits for the GPU (a
// synchronization, a copy), not by the kernel's launch, which returned
// before the kernel ran, and it breaks the context for good: the first such
// failure says both, and every later one names it, rather than leaving a
// stream of unrelated calls failing with CUDA_ERROR_ILLEGAL_ADDRESS.
std::string with_lost_context(Result result, std::string message) {
  std::lock_guard lock(lost_mutex);
  if (!lost_at.empty()) {
    return fmt::format(
        "{}; the GPU context was lost earlier ({}), and every CUDA call in this process fails: restart it", message,
        lost_at);
  }
  if (!cuda_abi::loses_context(result)) return message;
  lost_at = message;
  return fmt::format(
      "{}; a kernel fault, which leaves the GPU context unusable: every later CUDA call in this process fails (the "
      "faulting kernel may be one launched before this call; CUDA_LAUNCH_BLOCKING=1 makes each launch wait for its "
      "kernel, so that its own launch reports the fault)",
      message);
}

// Calls one driver function; a failure names it, and ends with context
// when there is one: "cuMemAlloc_v2 failed: ... (allocating 1024 bytes)".
template <auto Member, typename... Args>
absl::Status call_about(std::string_view context, Args... args) {
  const absl::StatusOr<Driver>& loaded = driver();
  if (!loaded.ok()) return loaded.status();
  const Result result = (loaded->api.*Member)(args...);
  if (result == cuda_abi::kSuccess) return absl::OkStatus();
  std::string message = fmt::format("{} failed: {}", kSymbol<Member>, describe(loaded->api, result));
  if (!context.empty()) message += fmt::format(" ({})", context);
  message = with_lost_context(result, std::move(message));
  if (result == cuda_abi::kErrorOutOfMemory) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

template <auto Member, typename... Args>
absl::Status call(Args... args) {
  return call_about<Member>("", args...);
}

absl::StatusOr<cuda_abi::Device> device_handle(int ordinal) {
  cuda_abi::Device device = 0;
  if (absl::Status s = call<&DriverApi::device_get>(&device, ordinal); !s.ok()) return s;
  return device;
}

}  // namespace

absl::Status cuda_driver_status() {
  absl::StatusOr<int> count = cuda::device_count();
  if (!count.ok()) return count.status();
  if (*count == 0) return absl::UnavailableError("no CUDA device: the driver reports 0 devices");
  return absl::OkStatus();
}

bool cuda_driver_is_emulator() { return !cuda_emulator_path().empty(); }

std::string cuda_emulator_path() {
  const absl::StatusOr<Driver>& loaded = driver();
  return loaded.ok() && loaded->emulated ? loaded->path : "";
}

std::string GpuInfo::arch() const { return fmt::format("sm_{}{}", cc_major, cc_minor); }

std::string GpuInfo::summary(int device) const {
  const std::string number = device == 0 ? "" : fmt::format("GPU {}, ", device);
  return fmt::format("{} ({}{}, {} SMs)", name, number, arch(), sm_count);
}

absl::StatusOr<GpuInfo> query_gpu(int device) {
  GpuInfo info;
  absl::StatusOr<std::string> name = cuda::device_name(device);
  if (!name.ok()) return name.status();
  info.name = *name;
  using cuda::DeviceAttribute;
  const std::pair<DeviceAttribute, int*> attributes[] = {
      {DeviceAttribute::kSmCount, &info.sm_count},
      {DeviceAttribute::kComputeCapabilityMajor, &info.cc_major},
      {DeviceAttribute::kComputeCapabilityMinor, &info.cc_minor},
      {DeviceAttribute::kMemoryClockKhz, &info.memory_clock_khz},
      {DeviceAttribute::kMemoryBusWidthBits, &info.memory_bus_width_bits},
  };
  for (const auto& [attribute, value] : attributes) {
    absl::StatusOr<int> v = cuda::device_attribute(device, attribute);
    if (!v.ok()) return v.status();
    *value = *v;
  }
  absl::StatusOr<int> l2 = cuda::device_attribute(device, DeviceAttribute::kL2CacheBytes);
  if (!l2.ok()) return l2.status();
  info.l2_bytes = *l2;
  absl::StatusOr<int64_t> memory = cuda::device_total_memory(device);
  if (!memory.ok()) return memory.status();
  info.memory_bytes = *memory;
  // Double data rate: two transfers per clock, bus width in bits.
  info.bandwidth_gbps = 2.0 * info.memory_clock_khz * 1e3 * info.memory_bus_width_bits / 8 / 1e9;
  return info;
}

namespace cuda {

absl::StatusOr<int> driver_version() {
  int version = 0;
  if (absl::Status s = call<&DriverApi::driver_get_version>(&version); !s.ok()) return s;
  return version;
}

bool context_lost() {
  std::lock_guard lock(lost_mutex);
  return !lost_at.empty();
}

absl::StatusOr<int> device_count() {
  int count = 0;
  if (absl::Status s = call<&DriverApi::device_get_count>(&count); !s.ok()) return s;
  return count;
}

absl::StatusOr<std::string> device_name(int device) {
  absl::StatusOr<cuda_abi::Device> handle = device_handle(device);
  if (!handle.ok()) return handle.status();
  char name[256] = {};
  if (absl::Status s = call<&DriverApi::device_get_name>(name, static_cast<int>(sizeof name), *handle); !s.ok()) {
    return s;
  }
  return std::string(name);
}

absl::StatusOr<int> device_attribute(int device, DeviceAttribute attribute) {
  absl::StatusOr<cuda_abi::Device> handle = device_handle(device);
  if (!handle.ok()) return handle.status();
  int value = 0;
  if (absl::Status s = call<&DriverApi::device_get_attribute>(&value, static_cast<int>(attribute), *handle); !s.ok()) {
    return s;
  }
  return value;
}

absl::StatusOr<int64_t> device_total_memory(int device) {
  absl::StatusOr<cuda_abi::Device> handle = device_handle(device);
  if (!handle.ok()) return handle.status();
  size_t bytes = 0;
  if (absl::Status s = call<&DriverApi::device_total_mem>(&bytes, *handle); !s.ok()) return s;
  return static_cast<int64_t>(bytes);
}

absl::StatusOr<Context> retain_primary_context(int device) {
  absl::StatusOr<cuda_abi::Device> handle = device_handle(device);
  if (!handle.ok()) return handle.status();
  Context context = nullptr;
  if (absl::Status s = call<&DriverApi::primary_ctx_retain>(&context, *handle); !s.ok()) return s;
  return context;
}

absl::Status release_primary_context(int device) {
  absl::StatusOr<cuda_abi::Device> handle = device_handle(device);
  if (!handle.ok()) return handle.status();
  return call<&DriverApi::primary_ctx_release>(*handle);
}

absl::Status set_current_context(Context context) { return call<&DriverApi::ctx_set_current>(context); }

absl::StatusOr<Context> current_context() {
  Context context = nullptr;
  if (absl::Status s = call<&DriverApi::ctx_get_current>(&context); !s.ok()) return s;
  return context;
}

namespace {

// cuCtxPushCurrent and cuCtxPopCurrent, like most driver calls, may return
// the error of an earlier asynchronous launch (cuda.h) and still have done
// their work: after a failure, `ours` is taken off the thread's stack where
// it is still on top. (It was not on top before the push: enter() pushes
// only a context that is not current.)
void pop_if_on_top(Context ours) {
  absl::StatusOr<Context> now = current_context();
  Context popped = nullptr;
  if (now.ok() && *now == ours) (void)call<&DriverApi::ctx_pop_current>(&popped);
}

}  // namespace

absl::StatusOr<ContextScope> ContextScope::enter(Context context) {
  absl::StatusOr<Context> current = current_context();
  if (!current.ok()) return current.status();
  if (*current == context) return ContextScope(nullptr);
  if (absl::Status s = call<&DriverApi::ctx_push_current>(context); !s.ok()) {
    pop_if_on_top(context);
    return s;
  }
  return ContextScope(context);
}

ContextScope::~ContextScope() {
  if (pushed_ == nullptr) return;
  Context popped = nullptr;
  // A destructor cannot return a failure; where the thread's contexts are
  // not what its program set, that is worth saying.
  if (absl::Status s = call<&DriverApi::ctx_pop_current>(&popped); !s.ok()) {
    pop_if_on_top(pushed_);
    warn(fmt::format("CUDA backend: giving the thread back its own context: {}", status_text(s)));
  } else if (popped != pushed_) {
    warn(
        "CUDA backend: giving the thread back its own context: the context on top of the thread's stack was not the "
        "GPU's, which fusejit had made current; the thread's contexts are not what the program set");
  }
}

absl::Status context_synchronize() { return call<&DriverApi::ctx_synchronize>(); }

absl::StatusOr<Module> load_module(const std::string& image) {
  // The driver writes PTX JIT errors (e.g. a PTX version newer than the
  // driver) into this buffer; without it a failure says only "invalid PTX".
  std::string error_log(16 << 10, '\0');
  int options[] = {cuda_abi::kJitErrorLogBuffer, cuda_abi::kJitErrorLogBufferSize};
  void* values[] = {error_log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(error_log.size()))};
  Module module = nullptr;
  // c_str(): PTX must be NUL-terminated; a CUBIN carries its own size.
  absl::Status s =
      call<&DriverApi::module_load_data_ex>(&module, static_cast<const void*>(image.c_str()), 2u, options, values);
  if (s.ok()) return module;
  error_log.resize(error_log.find('\0'));
  if (error_log.empty()) return s;
  return absl::Status(s.code(), fmt::format("{}\n{}", status_text(s), error_log));
}

absl::Status unload_module(Module module) { return call<&DriverApi::module_unload>(module); }

absl::StatusOr<Function> module_function(Module module, const std::string& name) {
  Function function = nullptr;
  const std::string context = fmt::format("kernel '{}'", name);
  if (absl::Status s = call_about<&DriverApi::module_get_function>(context, &function, module, name.c_str()); !s.ok()) {
    return s;
  }
  return function;
}

absl::Status set_max_dynamic_shared_bytes(Function function, int bytes) {
  return call<&DriverApi::func_set_attribute>(function, cuda_abi::kFuncMaxDynamicSharedBytes, bytes);
}

absl::Status launch_kernel(Function function, Dim3 grid, Dim3 block, unsigned shared_bytes, Stream stream,
                           void** args) {
  return call<&DriverApi::launch_kernel>(function, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes,
                                         stream, args, static_cast<void**>(nullptr));
}

absl::StatusOr<DevicePtr> mem_alloc(size_t bytes) {
  DevicePtr ptr = 0;
  const std::string context = fmt::format("allocating {} bytes", bytes);
  if (absl::Status s = call_about<&DriverApi::mem_alloc>(context, &ptr, bytes); !s.ok()) return s;
  return ptr;
}

absl::Status mem_free(DevicePtr ptr) { return call<&DriverApi::mem_free>(ptr); }

absl::Status memcpy_htod(DevicePtr dst, const void* src, size_t bytes) {
  return call<&DriverApi::memcpy_htod>(dst, src, bytes);
}

absl::Status memcpy_dtoh(void* dst, DevicePtr src, size_t bytes) {
  return call<&DriverApi::memcpy_dtoh>(dst, src, bytes);
}

absl::Status memcpy_dtod(DevicePtr dst, DevicePtr src, size_t bytes) {
  return call<&DriverApi::memcpy_dtod>(dst, src, bytes);
}

absl::Status memset_d8(DevicePtr dst, uint8_t value, size_t count) {
  return call<&DriverApi::memset_d8>(dst, static_cast<unsigned char>(value), count);
}

absl::Status memset_d32(DevicePtr dst, uint32_t value, size_t count) {
  return call<&DriverApi::memset_d32>(dst, static_cast<unsigned>(value), count);
}

absl::StatusOr<Event> event_create() {
  Event event = nullptr;
  if (absl::Status s = call<&DriverApi::event_create>(&event, 0u); !s.ok()) return s;
  return event;
}

absl::Status event_destroy(Event event) { return call<&DriverApi::event_destroy>(event); }

absl::Status event_record(Event event, Stream stream) { return call<&DriverApi::event_record>(event, stream); }

absl::Status event_synchronize(Event event) { return call<&DriverApi::event_synchronize>(event); }

absl::StatusOr<float> event_elapsed_ms(Event start, Event end) {
  float ms = 0;
  if (absl::Status s = call<&DriverApi::event_elapsed_time>(&ms, start, end); !s.ok()) return s;
  return ms;
}

absl::Status stream_synchronize(Stream stream) { return call<&DriverApi::stream_synchronize>(stream); }

}  // namespace cuda
}  // namespace fusejit
