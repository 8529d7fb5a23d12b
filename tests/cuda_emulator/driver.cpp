// libfusejit_cuda_emulator.so: the part of the CUDA driver API fusejit
// calls, implemented on the CPU, so that the GPU backend's tests run on a
// machine without a GPU:
//   FUSEJIT_CUDA_DRIVER=.../libfusejit_cuda_emulator.so fusejit_tests --gtest_filter='GpuBackend.*'
//
// What it checks: the generated kernels' indexing, tails, alignment
// variants, reductions, dropout masks and launch configurations, and the
// backend's allocation, copies and argument passing, all against the
// reference interpreter. What it cannot: NVRTC's and ptxas's code (modules
// are the CUDA source compiled for the host, with device_shim.h), timing,
// and anything cuBLAS does.
//
// One emulated device ("sm_90" or $FUSEJIT_EMULATOR_CC, 4 SMs or
// $FUSEJIT_EMULATOR_SMS, 8 GiB), or $FUSEJIT_EMULATOR_DEVICES of them
// (up to 8, read at each call; they share the host's memory, each with
// its own primary context, and device N > 0 is named "... #N").
// Device memory (device_memory.h) is host memory filled with 0xFF (NaN in
// every float type) when allocated, between inaccessible pages; a kernel
// (or GEMM) that reads or writes outside its buffers fails with
// CUDA_ERROR_ILLEGAL_ADDRESS. Launches run synchronously, one block after
// another (fibers.h; $FUSEJIT_EMULATOR_SCHEDULE=warps runs each warp ahead
// of the next). A device's context is its primary one; each thread has its
// own stack of current contexts, and a call that needs one fails with
// CUDA_ERROR_INVALID_CONTEXT unless a device's is current; a module is used
// only in the context that loaded it, and a primary context released more
// often than it was retained is an error. cuGetErrorString
// gives the detail of the last failure.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "device_memory.h"
#include "fibers.h"
#include "kernel_module.h"
#include "runtime/cuda_driver_abi.h"

using fusejit::cuda_abi::Context;
using fusejit::cuda_abi::Device;
using fusejit::cuda_abi::DevicePtr;
using fusejit::cuda_abi::Event;
using fusejit::cuda_abi::Function;
using fusejit::cuda_abi::Module;
using fusejit::cuda_abi::Result;
using fusejit::cuda_abi::Stream;

// The driver's entry points with the signatures fusejit binds: defining
// one with another signature fails to compile against these declarations.
extern "C" {
#define FJ_EMU_DECLARE(member, symbol, result, params) __attribute__((visibility("default"))) result symbol params;
FUSEJIT_CUDA_DRIVER_FUNCTIONS(FJ_EMU_DECLARE)
#undef FJ_EMU_DECLARE
// Only the emulator exports this; fusejit loads modules from source when it is there.
__attribute__((visibility("default"))) const char* fusejitCudaEmulator();
}

namespace {

using fusejit::emulator::BlockRunner;
using fusejit::emulator::KernelModule;

// CUresult codes (cuda.h).
constexpr Result kSuccess = 0;
constexpr Result kInvalidValue = 1;
constexpr Result kOutOfMemory = 2;
constexpr Result kInvalidDevice = 101;
constexpr Result kInvalidContext = 201;
constexpr Result kInvalidSource = 300;
constexpr Result kInvalidHandle = 400;
constexpr Result kNotFound = 500;
constexpr Result kIllegalAddress = 700;
constexpr Result kLaunchFailed = 719;

constexpr const char* kDeviceName = "fusejit CUDA emulator (CPU fibers, sm_90)";
constexpr size_t kDeviceMemory = size_t{8} << 30;
using fusejit::emulator::driver_mutex;  // one driver call at a time: launches share each module's fj_emu_state

// What cuGetErrorString says of the last failure, if it asks about that
// code. The texts are kept for the life of the process: a caller may hold
// one while another call fails.
std::mutex g_details_mutex;
std::set<std::string> g_detail_texts;
Result g_last_error = 0;
const std::string* g_last_detail = nullptr;

Result fail(Result code, std::string detail) {
  std::lock_guard lock(g_details_mutex);
  g_last_error = code;
  g_last_detail = &*g_detail_texts.insert(std::move(detail)).first;
  return code;
}

// $FUSEJIT_EMULATOR_STICKY_FAULTS=1: a kernel's fault is reported as a
// real driver reports it: its launch succeeds (the kernel runs after the
// launch returns, on a GPU), and every later call returns the fault's code,
// the context being lost for good. By default the launch itself fails and
// the emulator goes on, which names the faulting kernel at once.
Result g_sticky = 0;
Result sticky() { return g_sticky; }

const char* env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

// FUSEJIT_EMULATOR_SMS: the SM count the device reports (default 4). One
// SM makes persistent kernels give each block many rows.
int emulated_sms() {
  static const int sms = std::clamp(std::atoi(env_or("FUSEJIT_EMULATOR_SMS", "4")), 1, 1024);
  return sms;
}

Result check_range(DevicePtr ptr, size_t bytes, const char* what) {
  if (bytes == 0 || fusejit::emulator::inside_one_allocation(ptr, bytes)) return kSuccess;
  return fail(kInvalidValue, fmt::format("{}: [0x{:x}, +{}) is not inside one allocation", what, ptr, bytes));
}

struct EmulatedModule {
  std::unique_ptr<KernelModule> module;
  Context context = nullptr;  // the one current when it was loaded
};
struct EmulatedFunction {
  EmulatedModule* module;
  std::string name;
  KernelModule::Launch launch;
};
std::map<const void*, std::unique_ptr<EmulatedModule>> g_modules;
std::map<const void*, std::unique_ptr<EmulatedFunction>> g_functions;

struct EmulatedEvent {
  std::chrono::steady_clock::time_point time;
  bool recorded = false;
  Context context = nullptr;  // the one current when it was made
};
// Events the emulator made and has not destroyed: as the driver does, a call
// on any other handle (null, destroyed) fails with CUDA_ERROR_INVALID_HANDLE
// instead of touching it.
std::map<const void*, std::unique_ptr<EmulatedEvent>> g_events;

EmulatedEvent* find_event(Event event) {
  auto it = g_events.find(event);
  return it == g_events.end() ? nullptr : it->second.get();
}

constexpr int kMaxDevices = 8;
// FUSEJIT_EMULATOR_DEVICES: how many devices there are (default 1).
int emulated_devices() { return std::clamp(std::atoi(env_or("FUSEJIT_EMULATOR_DEVICES", "1")), 1, kMaxDevices); }
int g_context_tags[kMaxDevices];  // device N's primary context's handle points at element N
Context primary_context(Device device) { return reinterpret_cast<Context>(&g_context_tags[device]); }
bool is_primary_context(Context context) {
  for (Device d = 0; d < emulated_devices(); ++d) {
    if (context == primary_context(d)) return true;
  }
  return false;
}
int g_retained[kMaxDevices];  // cuDevicePrimaryCtxRetain less Release, per device (under driver_mutex)

// Each thread's stack of current contexts (cuCtxPushCurrent,
// cuCtxPopCurrent; cuCtxSetCurrent replaces the top). The emulator takes
// any non-null handle as a context, so that a test can push one of its own
// as a program's context and see that fusejit gives it back.
thread_local std::vector<Context> t_contexts;

}  // namespace

const void* fusejit::emulator::current_context() { return t_contexts.empty() ? nullptr : t_contexts.back(); }

namespace {

// A module works in the context that loaded it only.
Result need_module_context(const EmulatedModule& module, std::string_view call) {
  if (!t_contexts.empty() && t_contexts.back() == module.context) return kSuccess;
  return fail(kInvalidContext, fmt::format("{} of a module loaded in another context than the current one", call));
}

// A call that works in the current context: where none is current the
// driver fails with CUDA_ERROR_INVALID_CONTEXT, and where another is, it
// works in that one, on the wrong device or the wrong memory. The emulator
// fails a call in any context but a device's primary one (a program's own,
// which a test pushes, has no device behind it).
Result need_context(std::string_view call) {
  if (!t_contexts.empty() && is_primary_context(t_contexts.back())) return kSuccess;
  return fail(kInvalidContext, fmt::format("{} with {} current on this thread, not the emulated device's", call,
                                           t_contexts.empty() ? "no context" : "another context"));
}

// Device memory is used in the context that allocated it (with a context
// of another device current, a GPU's access would fault, or go to that
// device's memory at the same address).
Result need_own_memory(DevicePtr ptr, size_t bytes, std::string_view what) {
  if (bytes == 0 || fusejit::emulator::owner_of(ptr) == t_contexts.back()) return kSuccess;
  return fail(kInvalidContext, fmt::format("{}: 0x{:x} is memory of another context than the current one", what, ptr));
}

// An event works in the context that made it.
Result need_own_event(const EmulatedEvent& event, std::string_view call) {
  if (event.context == t_contexts.back()) return kSuccess;
  return fail(kInvalidHandle, fmt::format("{} of an event made in another context than the current one", call));
}

double elapsed_ms(const EmulatedEvent& start, const EmulatedEvent& end) {
  return std::chrono::duration<double, std::milli>(end.time - start.time).count();
}

}  // namespace

extern "C" {

const char* fusejitCudaEmulator() { return kDeviceName; }

Result cuInit(unsigned) { return kSuccess; }
// CUDA 13.0, or $FUSEJIT_EMULATOR_DRIVER_VERSION (12040: a CUDA 12.4
// driver, older than the toolkit fusejit was built with).
Result cuDriverGetVersion(int* version) {
  *version = std::atoi(env_or("FUSEJIT_EMULATOR_DRIVER_VERSION", "13000"));
  return kSuccess;
}

Result cuGetErrorName(Result error, const char** name) {
  static const std::map<Result, const char*> kNames = {
      {kSuccess, "CUDA_SUCCESS"},
      {kInvalidValue, "CUDA_ERROR_INVALID_VALUE"},
      {kOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY"},
      {kInvalidDevice, "CUDA_ERROR_INVALID_DEVICE"},
      {kInvalidContext, "CUDA_ERROR_INVALID_CONTEXT"},
      {kInvalidSource, "CUDA_ERROR_INVALID_SOURCE"},
      {kInvalidHandle, "CUDA_ERROR_INVALID_HANDLE"},
      {kNotFound, "CUDA_ERROR_NOT_FOUND"},
      {kIllegalAddress, "CUDA_ERROR_ILLEGAL_ADDRESS"},
      {kLaunchFailed, "CUDA_ERROR_LAUNCH_FAILED"},
  };
  auto it = kNames.find(error);
  *name = it != kNames.end() ? it->second : nullptr;
  return it != kNames.end() ? kSuccess : kInvalidValue;
}

Result cuGetErrorString(Result error, const char** text) {
  const char* name = nullptr;
  if (cuGetErrorName(error, &name) != kSuccess) {
    *text = nullptr;
    return kInvalidValue;
  }
  std::lock_guard lock(g_details_mutex);
  *text = error == g_last_error && g_last_detail != nullptr ? g_last_detail->c_str() : name;
  return kSuccess;
}

Result cuDeviceGetCount(int* count) {
  *count = emulated_devices();
  return kSuccess;
}

Result cuDeviceGet(Device* device, int ordinal) {
  if (ordinal < 0 || ordinal >= emulated_devices()) {
    return fail(kInvalidDevice, fmt::format("the emulator has {} devices, not {}", emulated_devices(), ordinal + 1));
  }
  *device = ordinal;
  return kSuccess;
}

Result cuDeviceGetName(char* name, int length, Device device) {
  if (length <= 0) return kInvalidValue;
  const std::string text = device == 0 ? kDeviceName : fmt::format("{} #{}", kDeviceName, device);
  std::snprintf(name, static_cast<size_t>(length), "%s", text.c_str());
  return kSuccess;
}

Result cuDeviceGetAttribute(int* value, int attribute, Device) {
  // CU_DEVICE_ATTRIBUTE_* codes: a small sm_90, 64 GB/s.
  static const std::map<int, int> kAttributes = {
      {13, 1'000'000},  // clock rate, kHz
      {36, 1'000'000},  // memory clock, kHz
      {37, 256},        // memory bus width, bits
      {38, 512 << 10},  // L2 bytes
      {39, 2048},       // threads per SM
      {97, 232448},     // shared memory per block, opt-in
  };
  if (attribute == 16) {  // SMs
    *value = emulated_sms();
    return kSuccess;
  }
  if (attribute == 75 || attribute == 76) {
    // Compute capability: 9.0, or $FUSEJIT_EMULATOR_CC ("75": a Turing
    // GPU, for the refusals of what needs a newer one), read at each call.
    const int cc = std::clamp(std::atoi(env_or("FUSEJIT_EMULATOR_CC", "90")), 10, 999);
    *value = attribute == 75 ? cc / 10 : cc % 10;
    return kSuccess;
  }
  auto it = kAttributes.find(attribute);
  if (it == kAttributes.end()) return fail(kInvalidValue, fmt::format("device attribute {} is not emulated", attribute));
  *value = it->second;
  return kSuccess;
}

Result cuDeviceTotalMem_v2(size_t* bytes, Device) {
  *bytes = kDeviceMemory;
  return kSuccess;
}

Result cuDevicePrimaryCtxRetain(Context* context, Device device) {
  if (device < 0 || device >= emulated_devices()) return fail(kInvalidDevice, "cuDevicePrimaryCtxRetain of no device");
  std::lock_guard lock(driver_mutex());
  ++g_retained[device];
  *context = primary_context(device);
  return kSuccess;
}
Result cuDevicePrimaryCtxRelease_v2(Device device) {
  if (device < 0 || device >= emulated_devices()) return fail(kInvalidDevice, "cuDevicePrimaryCtxRelease of no device");
  std::lock_guard lock(driver_mutex());
  if (g_retained[device] == 0) {
    return fail(kInvalidContext, fmt::format("cuDevicePrimaryCtxRelease of device {}, whose primary context is not "
                                             "retained",
                                             device));
  }
  if (--g_retained[device] == 0) {
    // The last reference resets the context: what was made in it is gone.
    const Context context = primary_context(device);
    fusejit::emulator::release_all_of(context);
    for (auto m = g_modules.begin(); m != g_modules.end();) {
      if (m->second->context != context) {
        ++m;
        continue;
      }
      for (auto f = g_functions.begin(); f != g_functions.end();) {
        f = f->second->module == m->second.get() ? g_functions.erase(f) : std::next(f);
      }
      m = g_modules.erase(m);
    }
    std::erase_if(g_events, [&](const auto& e) { return e.second->context == context; });
  }
  return kSuccess;
}
Result cuCtxSetCurrent(Context context) {
  if (context == nullptr) {
    if (!t_contexts.empty()) t_contexts.pop_back();
  } else if (t_contexts.empty()) {
    t_contexts.push_back(context);
  } else {
    t_contexts.back() = context;
  }
  return kSuccess;
}
Result cuCtxGetCurrent(Context* context) {
  *context = t_contexts.empty() ? nullptr : t_contexts.back();
  return kSuccess;
}
// Both return a sticky fault after doing their work, as a driver may
// report an earlier launch's error from any call (cuda.h).
Result cuCtxPushCurrent_v2(Context context) {
  if (context == nullptr) return fail(kInvalidContext, "cuCtxPushCurrent of a null context");
  t_contexts.push_back(context);
  std::lock_guard lock(driver_mutex());
  return sticky();
}
Result cuCtxPopCurrent_v2(Context* context) {
  if (t_contexts.empty()) return fail(kInvalidContext, "cuCtxPopCurrent with no context current on this thread");
  if (context != nullptr) *context = t_contexts.back();
  t_contexts.pop_back();
  std::lock_guard lock(driver_mutex());
  return sticky();
}
Result cuCtxSynchronize() {  // every call completes before it returns
  if (Result r = need_context("cuCtxSynchronize"); r != kSuccess) return r;
  std::lock_guard lock(driver_mutex());
  return sticky();
}

Result cuModuleLoadDataEx(Module* module, const void* image, unsigned num_options, int* options,
                          void** option_values) {
  if (Result r = need_context("cuModuleLoadDataEx"); r != kSuccess) return r;
  std::string error;
  std::unique_ptr<KernelModule> loaded = KernelModule::load(static_cast<const char*>(image), &error);
  std::lock_guard lock(driver_mutex());
  if (sticky() != kSuccess) return sticky();
  if (!loaded) {
    for (unsigned i = 0; i < num_options; ++i) {  // CU_JIT_ERROR_LOG_BUFFER, as the driver fills it
      if (options[i] != fusejit::cuda_abi::kJitErrorLogBuffer) continue;
      size_t size = 0;
      for (unsigned j = 0; j < num_options; ++j) {
        if (options[j] == fusejit::cuda_abi::kJitErrorLogBufferSize) {
          size = static_cast<size_t>(reinterpret_cast<uintptr_t>(option_values[j]));
        }
      }
      if (size > 0) std::snprintf(static_cast<char*>(option_values[i]), size, "%s", error.c_str());
    }
    return fail(kInvalidSource, "the emulator could not compile the module's CUDA source for the host");
  }
  auto emulated = std::make_unique<EmulatedModule>();
  emulated->module = std::move(loaded);
  emulated->context = t_contexts.back();  // need_context() saw one
  emulated->module->state().syncthreads = &BlockRunner::sync_block;
  emulated->module->state().shfl_xor = &BlockRunner::shuffle_xor;
  *module = reinterpret_cast<Module>(emulated.get());
  g_modules[emulated.get()] = std::move(emulated);
  return kSuccess;
}

Result cuModuleUnload(Module module) {
  if (Result r = need_context("cuModuleUnload"); r != kSuccess) return r;
  std::lock_guard lock(driver_mutex());
  if (sticky() != kSuccess) return sticky();
  auto it = g_modules.find(module);
  if (it == g_modules.end()) return fail(kInvalidHandle, "cuModuleUnload of a module the emulator never loaded");
  if (Result r = need_module_context(*it->second, "cuModuleUnload"); r != kSuccess) return r;
  for (auto f = g_functions.begin(); f != g_functions.end();) {
    f = f->second->module == it->second.get() ? g_functions.erase(f) : std::next(f);
  }
  g_modules.erase(it);
  return kSuccess;
}

Result cuModuleGetFunction(Function* function, Module module, const char* name) {
  if (Result r = need_context("cuModuleGetFunction"); r != kSuccess) return r;
  std::lock_guard lock(driver_mutex());
  if (sticky() != kSuccess) return sticky();
  auto it = g_modules.find(module);
  if (it == g_modules.end()) return fail(kInvalidHandle, "cuModuleGetFunction on a module the emulator never loaded");
  if (Result r = need_module_context(*it->second, "cuModuleGetFunction"); r != kSuccess) return r;
  KernelModule::Launch launch = it->second->module->kernel(name);
  if (launch == nullptr) return fail(kNotFound, fmt::format("the module has no kernel {}", name));
  auto f = std::make_unique<EmulatedFunction>(EmulatedFunction{it->second.get(), name, launch});
  *function = reinterpret_cast<Function>(f.get());
  g_functions[f.get()] = std::move(f);
  return kSuccess;
}

Result cuFuncSetAttribute(Function, int, int) { return kSuccess; }

Result cuLaunchKernel(Function function, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
                      unsigned block_y, unsigned block_z, unsigned shared_bytes, Stream, void** params, void** extra) {
  if (Result r = need_context("cuLaunchKernel"); r != kSuccess) return r;
  std::lock_guard lock(driver_mutex());
  if (sticky() != kSuccess) return sticky();
  auto it = g_functions.find(function);
  if (it == g_functions.end()) return fail(kInvalidHandle, "cuLaunchKernel of a function the emulator never made");
  const EmulatedFunction& f = *it->second;
  if (Result r = need_module_context(*f.module, "cuLaunchKernel"); r != kSuccess) return r;
  const uint64_t threads = uint64_t{block_x} * block_y * block_z;
  if (grid_x == 0 || grid_y == 0 || grid_z == 0 || threads == 0 || threads > 1024 || grid_y > 65535 ||
      grid_z > 65535 || extra != nullptr || shared_bytes != 0) {
    return fail(kInvalidValue,
                fmt::format("launch of {}: grid ({}, {}, {}), block ({}, {}, {}), {} bytes of dynamic shared memory "
                            "(the emulator takes blocks of 1 to 1024 threads, no dynamic shared memory, no `extra`)",
                            f.name, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes));
  }
  FjEmuState& state = f.module->module->state();
  state.grid_dim = {grid_x, grid_y, grid_z};
  state.block_dim = {block_x, block_y, block_z};
  const std::function<void()> body = [&] { f.launch(params); };
  const std::function<void(int)> enter = [&](int t) {
    const unsigned thread = static_cast<unsigned>(t);
    state.thread_idx = {thread % block_x, thread / block_x % block_y, thread / (block_x * block_y)};
  };
  static BlockRunner runner;  // keeps its fiber stacks between launches
  static const bool scheduled = [] {
    // FUSEJIT_EMULATOR_SCHEDULE=warps: see BlockRunner::Schedule.
    if (std::string_view(env_or("FUSEJIT_EMULATOR_SCHEDULE", "threads")) == "warps") {
      runner.set_schedule(BlockRunner::Schedule::kWarps);
    }
    return true;
  }();
  (void)scheduled;
  std::string launch_error;
  const std::string bad_access = fusejit::emulator::run_watched([&] {
    for (unsigned z = 0; z < grid_z; ++z) {
      for (unsigned y = 0; y < grid_y; ++y) {
        for (unsigned x = 0; x < grid_x; ++x) {
          state.block_idx = {x, y, z};
          f.module->module->poison_shared_memory();
          if (std::string error = runner.run(static_cast<int>(threads), body, enter); !error.empty()) {
            launch_error = fmt::format("kernel {}, block ({}, {}, {}): {}", f.name, x, y, z, error);
            return;
          }
        }
      }
    }
  });
  Result fault = kSuccess;
  if (!launch_error.empty()) fault = fail(kLaunchFailed, launch_error);
  if (!bad_access.empty()) fault = fail(kIllegalAddress, fmt::format("kernel {} made {}", f.name, bad_access));
  static const bool sticky_faults = std::string_view(env_or("FUSEJIT_EMULATOR_STICKY_FAULTS", "0")) == "1";
  if (fault != kSuccess && sticky_faults) {
    g_sticky = fault;
    return kSuccess;
  }
  return fault;
}

Result cuMemAlloc_v2(DevicePtr* ptr, size_t bytes) {
  if (Result r = need_context("cuMemAlloc_v2"); r != kSuccess) return r;
  std::lock_guard lock(driver_mutex());
  if (sticky() != kSuccess) return sticky();
  if (bytes == 0) return fail(kInvalidValue, "cuMemAlloc of 0 bytes");
  const size_t allocated = fusejit::emulator::allocated_bytes();
  if (bytes > kDeviceMemory - allocated) {
    return fail(kOutOfMemory,
                fmt::format("{} bytes asked, {} of the emulated {} free", bytes, kDeviceMemory - allocated, kDeviceMemory));
  }
  const uintptr_t data = fusejit::emulator::allocate(bytes, t_contexts.back());
  if (data == 0) return fail(kOutOfMemory, fmt::format("the host would not map {} bytes for the emulated device", bytes));
  *ptr = data;
  return kSuccess;
}

Result cuMemFree_v2(DevicePtr ptr) {
  if (Result r = need_context("cuMemFree_v2"); r != kSuccess) return r;
  std::lock_guard lock(driver_mutex());
  if (sticky() != kSuccess) return sticky();
  if (fusejit::emulator::owner_of(ptr) != nullptr) {
    if (Result r = need_own_memory(ptr, 1, "cuMemFree"); r != kSuccess) return r;
  }
  if (!fusejit::emulator::release(ptr)) {
    return fail(kInvalidValue, fmt::format("cuMemFree of 0x{:x}, not an allocation", ptr));
  }
  return kSuccess;
}

Result cuMemcpyHtoD_v2(DevicePtr dst, const void* src, size_t bytes) {
  if (Result r = need_context("cuMemcpyHtoD_v2"); r != kSuccess) return r;
  std::lock_guard lock(driver_mutex());
  if (sticky() != kSuccess) return sticky();
  if (Result r = check_range(dst, bytes, "cuMemcpyHtoD destination"); r != kSuccess) return r;
  if (Result r = need_own_memory(dst, bytes, "cuMemcpyHtoD destination"); r != kSuccess) return r;
  std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  return kSuccess;
}

Result cuMemcpyDtoH_v2(void* dst, DevicePtr src, size_t bytes) {
  if (Result r = need_context("cuMemcpyDtoH_v2"); r != kSuccess) return r;
  std::lock_guard lock(driver_mutex());
  if (sticky() != kSuccess) return sticky();
  if (Result r = check_range(src, bytes, "cuMemcpyDtoH source"); r != kSuccess) return r;
  if (Result r = need_own_memory(src, bytes, "cuMemcpyDtoH source"); r != kSuccess) return r;
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return kSuccess;
}

Result cuMemcpyDtoD_v2(DevicePtr dst, DevicePtr src, size_t bytes) {
  if (Result r = need_context("cuMemcpyDtoD_v2"); r != kSuccess) return r;
  std::lock_guard lock(driver_mutex());
  if (sticky() != kSuccess) return sticky();
  if (Result r = check_range(dst, bytes, "cuMemcpyDtoD destination"); r != kSuccess) return r;
  if (Result r = check_range(src, bytes, "cuMemcpyDtoD source"); r != kSuccess) return r;
  if (Result r = need_own_memory(dst, bytes, "cuMemcpyDtoD destination"); r != kSuccess) return r;
  if (Result r = need_own_memory(src, bytes, "cuMemcpyDtoD source"); r != kSuccess) return r;
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  return kSuccess;
}

Result cuMemsetD8_v2(DevicePtr dst, unsigned char value, size_t count) {
  if (Result r = need_context("cuMemsetD8_v2"); r != kSuccess) return r;
  std::lock_guard lock(driver_mutex());
  if (sticky() != kSuccess) return sticky();
  if (Result r = check_range(dst, count, "cuMemsetD8"); r != kSuccess) return r;
  if (Result r = need_own_memory(dst, count, "cuMemsetD8"); r != kSuccess) return r;
  std::memset(reinterpret_cast<void*>(dst), value, count);
  return kSuccess;
}

Result cuMemsetD32_v2(DevicePtr dst, unsigned value, size_t count) {
  if (Result r = need_context("cuMemsetD32_v2"); r != kSuccess) return r;
  std::lock_guard lock(driver_mutex());
  if (sticky() != kSuccess) return sticky();
  if (dst % 4 != 0) return fail(kInvalidValue, fmt::format("cuMemsetD32 at 0x{:x}, not 4-byte aligned", dst));
  if (Result r = check_range(dst, count * 4, "cuMemsetD32"); r != kSuccess) return r;
  if (Result r = need_own_memory(dst, count * 4, "cuMemsetD32"); r != kSuccess) return r;
  auto* words = reinterpret_cast<unsigned*>(dst);
  std::fill(words, words + count, value);
  return kSuccess;
}

Result cuEventCreate(Event* event, unsigned) {
  if (Result r = need_context("cuEventCreate"); r != kSuccess) return r;
  std::lock_guard lock(driver_mutex());
  if (sticky() != kSuccess) return sticky();
  auto made = std::make_unique<EmulatedEvent>();
  made->context = t_contexts.back();
  *event = reinterpret_cast<Event>(made.get());
  g_events[made.get()] = std::move(made);
  return kSuccess;
}

Result cuEventDestroy_v2(Event event) {
  if (Result r = need_context("cuEventDestroy_v2"); r != kSuccess) return r;
  std::lock_guard lock(driver_mutex());
  if (sticky() != kSuccess) return sticky();
  EmulatedEvent* e = find_event(event);
  if (e == nullptr) return fail(kInvalidHandle, "cuEventDestroy of an event the emulator never made");
  if (Result r = need_own_event(*e, "cuEventDestroy"); r != kSuccess) return r;
  g_events.erase(event);
  return kSuccess;
}

Result cuEventRecord(Event event, Stream) {
  if (Result r = need_context("cuEventRecord"); r != kSuccess) return r;
  std::lock_guard lock(driver_mutex());
  if (sticky() != kSuccess) return sticky();
  EmulatedEvent* e = find_event(event);
  if (e == nullptr) return fail(kInvalidHandle, "cuEventRecord of an event the emulator never made");
  if (Result r = need_own_event(*e, "cuEventRecord"); r != kSuccess) return r;
  e->time = std::chrono::steady_clock::now();
  e->recorded = true;
  return kSuccess;
}

Result cuEventSynchronize(Event event) {
  if (Result r = need_context("cuEventSynchronize"); r != kSuccess) return r;
  std::lock_guard lock(driver_mutex());
  if (sticky() != kSuccess) return sticky();
  const EmulatedEvent* e = find_event(event);
  if (e == nullptr) return fail(kInvalidHandle, "cuEventSynchronize of an event the emulator never made");
  if (Result r = need_own_event(*e, "cuEventSynchronize"); r != kSuccess) return r;
  return kSuccess;
}

Result cuEventElapsedTime(float* milliseconds, Event start, Event end) {
  if (Result r = need_context("cuEventElapsedTime"); r != kSuccess) return r;
  std::lock_guard lock(driver_mutex());
  if (sticky() != kSuccess) return sticky();
  const EmulatedEvent* a = find_event(start);
  const EmulatedEvent* b = find_event(end);
  if (a == nullptr || b == nullptr)
    return fail(kInvalidHandle, "cuEventElapsedTime of an event the emulator never made");
  if (Result r = need_own_event(*a, "cuEventElapsedTime"); r != kSuccess) return r;
  if (Result r = need_own_event(*b, "cuEventElapsedTime"); r != kSuccess) return r;
  if (!a->recorded || !b->recorded) return fail(kInvalidHandle, "cuEventElapsedTime of an event never recorded");
  *milliseconds = static_cast<float>(elapsed_ms(*a, *b));
  return kSuccess;
}

Result cuStreamSynchronize(Stream) { return need_context("cuStreamSynchronize"); }

}  // extern "C"
