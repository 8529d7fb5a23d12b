// The part of the CUDA driver API that fusejit calls, declared here instead of
// taken from the toolkit's cuda.h: libcuda is loaded with dlopen, so nothing
// else of the toolkit is needed, and the driver runs (cubins, PTX) in builds
// without one. Where the toolkit is present, cuda_driver_abi.cpp checks every
// declaration below against cuda.h at compile time.
//
// Internal to src/runtime/; the public API is cuda_driver.h.
#pragma once

#include <cstddef>

#include "runtime/cuda_driver.h"

namespace fusejit::cuda_abi {

using Result = int;  // CUresult
using Device = int;  // CUdevice
using DevicePtr = cuda::DevicePtr;
using Context = cuda::Context;
using Module = cuda::Module;
using Function = cuda::Function;
using Event = cuda::Event;
using Stream = cuda::Stream;

inline constexpr Result kSuccess = 0;                 // CUDA_SUCCESS
inline constexpr Result kErrorOutOfMemory = 2;        // CUDA_ERROR_OUT_OF_MEMORY
inline constexpr Result kErrorStubLibrary = 34;       // CUDA_ERROR_STUB_LIBRARY
inline constexpr Result kErrorNoDevice = 100;         // CUDA_ERROR_NO_DEVICE
// The errors after which, as CUDA's documentation says of each, "the
// process is in an inconsistent state and any further CUDA work will
// return the same error": a kernel's illegal or misaligned address,
// illegal instruction, stack error, timeout, launch failure.
inline constexpr Result kErrorIllegalAddress = 700;  // CUDA_ERROR_ILLEGAL_ADDRESS
inline constexpr Result kErrorLaunchTimeout = 702;   // CUDA_ERROR_LAUNCH_TIMEOUT
inline constexpr Result kErrorHardwareStack = 714;   // CUDA_ERROR_HARDWARE_STACK_ERROR
inline constexpr Result kErrorLaunchFailed = 719;    // CUDA_ERROR_LAUNCH_FAILED (714-719: faults in a kernel)
inline constexpr bool loses_context(Result r) {
  return r == kErrorIllegalAddress || r == kErrorLaunchTimeout || (r >= kErrorHardwareStack && r <= kErrorLaunchFailed);
}
inline constexpr int kJitErrorLogBuffer = 5;          // CU_JIT_ERROR_LOG_BUFFER
inline constexpr int kJitErrorLogBufferSize = 6;      // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
inline constexpr int kFuncMaxDynamicSharedBytes = 8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES

// X(member, symbol, return type, parameters). The symbol is the versioned
// name cuda.h maps the plain name to (cuMemAlloc -> cuMemAlloc_v2), which is
// what a program compiled against the header would call; except
// cuEventElapsedTime, which every driver has, where CUDA 13's header maps to
// cuEventElapsedTime_v2 (same signature) that drivers before 12.8 lack.
#define FUSEJIT_CUDA_DRIVER_FUNCTIONS(X)                                                                       \
  X(init, cuInit, Result, (unsigned flags))                                                                    \
  X(driver_get_version, cuDriverGetVersion, Result, (int* version))                                            \
  X(get_error_name, cuGetErrorName, Result, (Result error, const char** name))                                 \
  X(get_error_string, cuGetErrorString, Result, (Result error, const char** text))                             \
  X(device_get_count, cuDeviceGetCount, Result, (int* count))                                                  \
  X(device_get, cuDeviceGet, Result, (Device * device, int ordinal))                                           \
  X(device_get_name, cuDeviceGetName, Result, (char* name, int length, Device device))                         \
  X(device_get_attribute, cuDeviceGetAttribute, Result, (int* value, int attribute, Device device))            \
  X(device_total_mem, cuDeviceTotalMem_v2, Result, (size_t * bytes, Device device))                            \
  X(primary_ctx_retain, cuDevicePrimaryCtxRetain, Result, (Context * context, Device device))                  \
  X(primary_ctx_release, cuDevicePrimaryCtxRelease_v2, Result, (Device device))                                \
  X(ctx_set_current, cuCtxSetCurrent, Result, (Context context))                                               \
  X(ctx_get_current, cuCtxGetCurrent, Result, (Context * context))                                             \
  X(ctx_push_current, cuCtxPushCurrent_v2, Result, (Context context))                                          \
  X(ctx_pop_current, cuCtxPopCurrent_v2, Result, (Context * context))                                          \
  X(ctx_synchronize, cuCtxSynchronize, Result, ())                                                             \
  X(module_load_data_ex, cuModuleLoadDataEx, Result,                                                           \
    (Module * module, const void* image, unsigned num_options, int* options, void** option_values))            \
  X(module_unload, cuModuleUnload, Result, (Module module))                                                    \
  X(module_get_function, cuModuleGetFunction, Result, (Function * function, Module module, const char* name))  \
  X(func_set_attribute, cuFuncSetAttribute, Result, (Function function, int attribute, int value))             \
  X(launch_kernel, cuLaunchKernel, Result,                                                                     \
    (Function function, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x, unsigned block_y, \
     unsigned block_z, unsigned shared_bytes, Stream stream, void** params, void** extra))                     \
  X(mem_alloc, cuMemAlloc_v2, Result, (DevicePtr * ptr, size_t bytes))                                         \
  X(mem_free, cuMemFree_v2, Result, (DevicePtr ptr))                                                           \
  X(memcpy_htod, cuMemcpyHtoD_v2, Result, (DevicePtr dst, const void* src, size_t bytes))                      \
  X(memcpy_dtoh, cuMemcpyDtoH_v2, Result, (void* dst, DevicePtr src, size_t bytes))                            \
  X(memcpy_dtod, cuMemcpyDtoD_v2, Result, (DevicePtr dst, DevicePtr src, size_t bytes))                        \
  X(memset_d8, cuMemsetD8_v2, Result, (DevicePtr dst, unsigned char value, size_t count))                      \
  X(memset_d32, cuMemsetD32_v2, Result, (DevicePtr dst, unsigned value, size_t count))                         \
  X(event_create, cuEventCreate, Result, (Event * event, unsigned flags))                                      \
  X(event_destroy, cuEventDestroy_v2, Result, (Event event))                                                   \
  X(event_record, cuEventRecord, Result, (Event event, Stream stream))                                         \
  X(event_synchronize, cuEventSynchronize, Result, (Event event))                                              \
  X(event_elapsed_time, cuEventElapsedTime, Result, (float* milliseconds, Event start, Event end))             \
  X(stream_synchronize, cuStreamSynchronize, Result, (Stream stream))

struct DriverApi {
#define FUSEJIT_DECLARE_MEMBER(member, symbol, result, params) result(*member) params = nullptr;
  FUSEJIT_CUDA_DRIVER_FUNCTIONS(FUSEJIT_DECLARE_MEMBER)
#undef FUSEJIT_DECLARE_MEMBER
};

}  // namespace fusejit::cuda_abi
