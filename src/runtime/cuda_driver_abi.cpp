// Checks cuda_driver_abi.h against the toolkit's cuda.h, at compile time.
#if FUSEJIT_HAVE_CUDA

#include <cuda.h>

#include <type_traits>

#include "runtime/abi_check.h"
#include "runtime/cuda_driver_abi.h"

namespace fusejit::cuda_abi {
namespace {

using abi_check::kSameAbi;

#define FUSEJIT_CHECK_FUNCTION(member, symbol, result, params) \
  static_assert(kSameAbi<decltype(&::symbol), decltype(DriverApi::member)>, #symbol " differs from cuda.h");
FUSEJIT_CUDA_DRIVER_FUNCTIONS(FUSEJIT_CHECK_FUNCTION)
#undef FUSEJIT_CHECK_FUNCTION

static_assert(std::is_same_v<DevicePtr, CUdeviceptr>);
static_assert(std::is_same_v<Context, CUcontext> && std::is_same_v<Module, CUmodule>);
static_assert(std::is_same_v<Function, CUfunction> && std::is_same_v<Event, CUevent>);
static_assert(std::is_same_v<Stream, CUstream> && std::is_same_v<Device, CUdevice>);
static_assert(kSuccess == CUDA_SUCCESS && kErrorOutOfMemory == CUDA_ERROR_OUT_OF_MEMORY);
static_assert(kErrorStubLibrary == CUDA_ERROR_STUB_LIBRARY && kErrorNoDevice == CUDA_ERROR_NO_DEVICE);
static_assert(kJitErrorLogBuffer == CU_JIT_ERROR_LOG_BUFFER &&
              kJitErrorLogBufferSize == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
static_assert(kFuncMaxDynamicSharedBytes == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
static_assert(static_cast<int>(cuda::DeviceAttribute::kClockRateKhz) == CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
static_assert(static_cast<int>(cuda::DeviceAttribute::kSmCount) == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
static_assert(static_cast<int>(cuda::DeviceAttribute::kMemoryClockKhz) == CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
static_assert(static_cast<int>(cuda::DeviceAttribute::kMemoryBusWidthBits) ==
              CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
static_assert(static_cast<int>(cuda::DeviceAttribute::kL2CacheBytes) == CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
static_assert(static_cast<int>(cuda::DeviceAttribute::kMaxThreadsPerSm) ==
              CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
static_assert(static_cast<int>(cuda::DeviceAttribute::kComputeCapabilityMajor) ==
              CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
static_assert(static_cast<int>(cuda::DeviceAttribute::kComputeCapabilityMinor) ==
              CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
static_assert(static_cast<int>(cuda::DeviceAttribute::kMaxSharedBytesPerBlockOptin) ==
              CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);

}  // namespace
}  // namespace fusejit::cuda_abi

#endif  // FUSEJIT_HAVE_CUDA
