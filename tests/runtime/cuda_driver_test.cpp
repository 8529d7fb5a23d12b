#include "runtime/cuda_driver.h"

#include <dlfcn.h>

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "ir/error.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/runtime_test_util.h"
#include "support/requirements.h"
#include "support/run_command.h"

namespace fusejit {
namespace {

using cuda::DevicePtr;

bool libcuda_loads() {
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle != nullptr) dlclose(handle);
  return handle != nullptr;
}

// Every wrapper, called with harmless arguments; each must fail with `expected`.
void expect_every_call_fails_with(const absl::Status& expected) {
  const std::vector<std::pair<const char*, absl::Status>> calls = {
      {"cuda_driver_status", cuda_driver_status()},
      {"query_gpu", query_gpu().status()},
      {"driver_version", cuda::driver_version().status()},
      {"device_count", cuda::device_count().status()},
      {"device_name", cuda::device_name(0).status()},
      {"device_attribute", cuda::device_attribute(0, cuda::DeviceAttribute::kSmCount).status()},
      {"device_total_memory", cuda::device_total_memory(0).status()},
      {"retain_primary_context", cuda::retain_primary_context(0).status()},
      {"release_primary_context", cuda::release_primary_context(0)},
      {"set_current_context", cuda::set_current_context(nullptr)},
      {"current_context", cuda::current_context().status()},
      {"ContextScope::enter", cuda::ContextScope::enter(nullptr).status()},
      {"context_synchronize", cuda::context_synchronize()},
      {"load_module", cuda::load_module("not a module").status()},
      {"unload_module", cuda::unload_module(nullptr)},
      {"module_function", cuda::module_function(nullptr, "k").status()},
      {"set_max_dynamic_shared_bytes", cuda::set_max_dynamic_shared_bytes(nullptr, 1 << 16)},
      {"launch_kernel", cuda::launch_kernel(nullptr, {}, {}, 0, nullptr, nullptr)},
      {"mem_alloc", cuda::mem_alloc(1024).status()},
      {"mem_free", cuda::mem_free(0)},
      {"memcpy_htod", cuda::memcpy_htod(0, nullptr, 0)},
      {"memcpy_dtoh", cuda::memcpy_dtoh(nullptr, 0, 0)},
      {"memcpy_dtod", cuda::memcpy_dtod(0, 0, 0)},
      {"memset_d8", cuda::memset_d8(0, 0, 0)},
      {"memset_d32", cuda::memset_d32(0, 0, 0)},
      {"event_create", cuda::event_create().status()},
      {"event_destroy", cuda::event_destroy(nullptr)},
      {"event_record", cuda::event_record(nullptr)},
      {"event_synchronize", cuda::event_synchronize(nullptr)},
      {"event_elapsed_ms", cuda::event_elapsed_ms(nullptr, nullptr).status()},
      {"stream_synchronize", cuda::stream_synchronize()},
  };
  for (const auto& [name, status] : calls) EXPECT_EQ(status, expected) << name;
}

TEST(CudaDriver, WithoutADriverEveryCallSaysSo) {
  if (libcuda_loads()) GTEST_SKIP() << "libcuda.so.1 is installed on this machine";
  if (const char* driver = std::getenv("FUSEJIT_CUDA_DRIVER")) GTEST_SKIP() << "FUSEJIT_CUDA_DRIVER names " << driver;
  const absl::Status status = cuda_driver_status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(status_text(status).starts_with("no CUDA driver: dlopen libcuda.so.1 failed: ")) << status;
  EXPECT_TRUE(testing::contains(status_text(status), "libcuda.so.1: cannot open shared object file")) << status;
  expect_every_call_fails_with(status);
}

// Run in a child process by StubLibraryIsRecognised, with the toolkit's stub
// library on LD_LIBRARY_PATH as libcuda.so.1; prints what the driver says.
TEST(CudaDriver, ChildReportsDriverStatus) {
  if (std::getenv("FUSEJIT_TEST_STUB_CHILD") == nullptr) GTEST_SKIP() << "run by StubLibraryIsRecognised";
  std::printf("STATUS[%s]\n", std::string(status_text(cuda_driver_status())).c_str());
  expect_every_call_fails_with(cuda_driver_status());
}

// The toolkit's stub libcuda (there to link against, not to run) is told
// apart from a driver: a clear error, not a crash or a confusing failure later.
TEST(CudaDriver, StubLibraryIsRecognised) {
  const char* cuda_home = std::getenv("CUDA_HOME");
  const std::filesystem::path stub =
      std::filesystem::path(cuda_home ? cuda_home : "/usr/local/cuda") / "lib64" / "stubs" / "libcuda.so";
  if (!std::filesystem::exists(stub)) GTEST_SKIP() << "no CUDA toolkit stub library at " << stub;
  const testing::TempDir tmp("fusejit-stub");
  const std::string& dir = tmp.path();
  std::filesystem::create_symlink(stub, dir + "/libcuda.so.1");
  const testing::CommandResult r =
      // The child must load libcuda.so.1 by soname, whatever driver this process was told to use.
      testing::run_command("env -u FUSEJIT_CUDA_DRIVER FUSEJIT_TEST_STUB_CHILD=1 LD_LIBRARY_PATH=" + dir + " /proc/" +
                           std::to_string(getpid()) + "/exe --gtest_filter=CudaDriver.ChildReportsDriverStatus");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(
      testing::contains(r.out, "STATUS[no CUDA driver: " + dir + "/libcuda.so.1 is the CUDA toolkit's stub library"))
      << r.out << r.err;
}

// --- On a machine with a GPU ---

class CudaDriverGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status s = cuda_driver_status(); !s.ok()) FUSEJIT_GPU_MISSING("no CUDA driver/GPU: " << status_text(s));
    absl::StatusOr<cuda::Context> context = cuda::retain_primary_context(0);
    ASSERT_TRUE(context.ok()) << context.status();
    ASSERT_TRUE(cuda::set_current_context(*context).ok());
  }
  void TearDown() override {
    if (cuda_driver_status().ok()) EXPECT_TRUE(cuda::release_primary_context(0).ok());
  }
};

TEST_F(CudaDriverGpu, QueryGpuDescribesTheDevice) {
  absl::StatusOr<GpuInfo> gpu = query_gpu(0);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  std::printf("[ gpu      ] %s: %s, %d SMs, %.0f GB/s, L2 %lld MiB, %lld GiB\n", gpu->name.c_str(), gpu->arch().c_str(),
              gpu->sm_count, gpu->bandwidth_gbps, static_cast<long long>(gpu->l2_bytes >> 20),
              static_cast<long long>(gpu->memory_bytes >> 30));
  EXPECT_FALSE(gpu->name.empty());
  EXPECT_GT(gpu->sm_count, 0);
  EXPECT_GE(gpu->cc_major, 3);
  EXPECT_GT(gpu->bandwidth_gbps, 50);
  EXPECT_GT(gpu->l2_bytes, 0);
  EXPECT_GT(gpu->memory_bytes, int64_t{1} << 30);
}

TEST_F(CudaDriverGpu, ErrorsNameTheFailingCall) {
  absl::StatusOr<DevicePtr> huge = cuda::mem_alloc(size_t{1} << 60);
  ASSERT_FALSE(huge.ok());
  EXPECT_TRUE(testing::contains(status_text(huge.status()), "cuMemAlloc_v2 failed: CUDA_ERROR_")) << huge.status();
  EXPECT_TRUE(testing::contains(status_text(huge.status()), "(allocating 1152921504606846976 bytes)")) << huge.status();
  absl::StatusOr<cuda::Module> bad = cuda::load_module(".version 99.0\n.target sm_90\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(testing::contains(status_text(bad.status()), "cuModuleLoadDataEx failed")) << bad.status();
}

// y = a * x + b over n floats, on the GPU from a CUBIN and from PTX.
constexpr const char* kAxpb = R"(extern "C" __global__ void axpb(const float* x, float* y, float a, float b, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + b;
}
)";

void run_axpb(const std::string& image) {
  absl::StatusOr<cuda::Module> module = cuda::load_module(image);
  ASSERT_TRUE(module.ok()) << module.status();
  absl::StatusOr<cuda::Function> function = cuda::module_function(*module, "axpb");
  ASSERT_TRUE(function.ok()) << function.status();
  EXPECT_FALSE(cuda::module_function(*module, "no_such_kernel").ok());

  int n = 1000;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = std::sin(0.1f * i) * 100;
  absl::StatusOr<DevicePtr> dx = cuda::mem_alloc(n * sizeof(float));
  absl::StatusOr<DevicePtr> dy = cuda::mem_alloc(n * sizeof(float));
  absl::StatusOr<DevicePtr> dz = cuda::mem_alloc(n * sizeof(float));
  ASSERT_TRUE(dx.ok() && dy.ok() && dz.ok());
  ASSERT_TRUE(cuda::memcpy_htod(*dx, x.data(), n * sizeof(float)).ok());
  ASSERT_TRUE(cuda::memset_d32(*dy, 0x7fc00000u, n).ok());  // NaN: every element must be overwritten

  absl::StatusOr<cuda::Event> start = cuda::event_create();
  absl::StatusOr<cuda::Event> stop = cuda::event_create();
  ASSERT_TRUE(start.ok() && stop.ok());
  float a = 2.0f;
  float b = 0.5f;
  void* args[] = {&*dx, &*dy, &a, &b, &n};
  ASSERT_TRUE(cuda::event_record(*start).ok());
  absl::Status launched =
      cuda::launch_kernel(*function, {.x = static_cast<unsigned>((n + 255) / 256)}, {.x = 256}, 0, nullptr, args);
  ASSERT_TRUE(launched.ok()) << launched;
  ASSERT_TRUE(cuda::event_record(*stop).ok());
  ASSERT_TRUE(cuda::event_synchronize(*stop).ok());
  absl::StatusOr<float> ms = cuda::event_elapsed_ms(*start, *stop);
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_GE(*ms, 0);
  ASSERT_TRUE(cuda::stream_synchronize().ok());

  // Through a device-to-device copy, to test that too.
  ASSERT_TRUE(cuda::memcpy_dtod(*dz, *dy, n * sizeof(float)).ok());
  std::vector<float> y(n);
  ASSERT_TRUE(cuda::memcpy_dtoh(y.data(), *dz, n * sizeof(float)).ok());
  for (int i = 0; i < n; ++i) ASSERT_EQ(y[i], std::fma(a, x[i], b)) << i;  // the GPU contracts a*x+b into one FMA

  ASSERT_TRUE(cuda::memset_d8(*dz, 0, n * sizeof(float)).ok());
  ASSERT_TRUE(cuda::memcpy_dtoh(y.data(), *dz, n * sizeof(float)).ok());
  EXPECT_EQ(y[n - 1], 0.0f);
  for (DevicePtr p : {*dx, *dy, *dz}) EXPECT_TRUE(cuda::mem_free(p).ok());
  EXPECT_TRUE(cuda::event_destroy(*start).ok());
  EXPECT_TRUE(cuda::event_destroy(*stop).ok());
  EXPECT_TRUE(cuda::context_synchronize().ok());
  EXPECT_TRUE(cuda::unload_module(*module).ok());
}

// The architecture NVRTC compiles for on GPU 0.
absl::StatusOr<std::string> device_arch() {
  absl::StatusOr<GpuInfo> gpu = query_gpu(0);
  if (!gpu.ok()) return gpu.status();
  return cuda_arch_for(gpu->cc_major, gpu->cc_minor);
}

TEST_F(CudaDriverGpu, RunsANvrtcCompiledKernelFromCubinAndFromPtx) {
  FUSEJIT_REQUIRE_NVRTC();
  if (cuda_driver_is_emulator()) GTEST_SKIP() << "the CUDA emulator loads CUDA source, not CUBIN or PTX";
  absl::StatusOr<std::string> arch = device_arch();
  ASSERT_TRUE(arch.ok()) << arch.status();
  absl::StatusOr<CompiledKernel> k = compile_cuda("axpb", kAxpb, {.arch = *arch}, nullptr);
  ASSERT_TRUE(k.ok()) << k.status();
  run_axpb(k->cubin.empty() ? k->ptx : k->cubin);
  // PTX for the device's architecture, compiled by the driver at load time.
  absl::StatusOr<CompiledKernel> ptx_only =
      compile_cuda("axpb", kAxpb, {.arch = "compute_" + arch->substr(arch->find('_') + 1)}, nullptr);
  ASSERT_TRUE(ptx_only.ok()) << ptx_only.status();
  run_axpb(ptx_only->ptx);
}

// A kernel that writes p[offset]: past its buffer, a fault.
constexpr const char* kPoke = R"(extern "C" __global__ void poke(int* p, long long offset) { p[offset] = 1; }
)";

// Run in a child process by AKernelFaultLosesTheContextAndSaysSo: a kernel
// faults, and what the calls after its launch report is printed.
TEST_F(CudaDriverGpu, FaultingChild) {
  if (std::getenv("FUSEJIT_TEST_FAULT_CHILD") == nullptr) GTEST_SKIP() << "run by AKernelFaultLosesTheContextAndSaysSo";
  std::string image = kPoke;  // the emulator loads CUDA source
  if (!cuda_driver_is_emulator()) {
    absl::StatusOr<std::string> arch = device_arch();
    ASSERT_TRUE(arch.ok()) << arch.status();
    absl::StatusOr<CompiledKernel> k = compile_cuda("poke", kPoke, {.arch = *arch}, nullptr);
    ASSERT_TRUE(k.ok()) << k.status();
    image = k->cubin.empty() ? k->ptx : k->cubin;
  }
  absl::StatusOr<cuda::Module> module = cuda::load_module(image);
  ASSERT_TRUE(module.ok()) << module.status();
  absl::StatusOr<cuda::Function> poke = cuda::module_function(*module, "poke");
  ASSERT_TRUE(poke.ok()) << poke.status();
  absl::StatusOr<DevicePtr> buffer = cuda::mem_alloc(1024);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  // On a GPU the null pointer faults for certain; the emulator watches its
  // allocations' guard pages: the page after this one's 1024 bytes (int 300 is byte 1200).
  DevicePtr p = cuda_driver_is_emulator() ? *buffer : 0;
  long long offset = cuda_driver_is_emulator() ? 300 : 0;
  void* args[] = {&p, &offset};
  std::printf("LAUNCH[%s]\n",
              std::string(status_text(cuda::launch_kernel(*poke, {.x = 1}, {.x = 1}, 0, nullptr, args))).c_str());
  std::printf("SYNC[%s]\n", std::string(status_text(cuda::context_synchronize())).c_str());
  std::printf("LATER[%s]\n", std::string(status_text(cuda::mem_alloc(16).status())).c_str());
  std::printf("LOST[%d]\n", cuda::context_lost() ? 1 : 0);
  // Entering the context from a thread with none current: the push may
  // report the fault and still have pushed (the emulator's does); the
  // scope then takes the context off again, and the thread has none.
  absl::StatusOr<cuda::Context> primary = cuda::current_context();
  ASSERT_TRUE(cuda::set_current_context(nullptr).ok());
  if (primary.ok()) {
    std::printf("ENTER[%s]\n", std::string(status_text(cuda::ContextScope::enter(*primary).status())).c_str());
  }
  absl::StatusOr<cuda::Context> after = cuda::current_context();
  std::printf("RESTORED[%s]\n", !after.ok() ? "unknown" : *after == nullptr ? "1" : "0");
}

// A kernel fault is reported by a later call (on a GPU the launch returns
// before the kernel runs) and breaks the context for good: the first
// failure says so and how to find the kernel, and every later one names the
// first. The emulator reports faults as a GPU does when asked to
// (FUSEJIT_EMULATOR_STICKY_FAULTS=1).
TEST_F(CudaDriverGpu, AKernelFaultLosesTheContextAndSaysSo) {
  const testing::CommandResult r =
      testing::run_command("env FUSEJIT_TEST_FAULT_CHILD=1 FUSEJIT_EMULATOR_STICKY_FAULTS=1 /proc/" +
                           std::to_string(getpid()) + "/exe --gtest_filter=CudaDriverGpu.FaultingChild");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(testing::contains(r.out, "LAUNCH[]")) << r.out;  // the launch itself succeeds
  EXPECT_TRUE(testing::contains(r.out, "SYNC[cuCtxSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS")) << r.out;
  EXPECT_TRUE(testing::contains(r.out, "a kernel fault, which leaves the GPU context unusable")) << r.out;
  EXPECT_TRUE(testing::contains(r.out, "CUDA_LAUNCH_BLOCKING=1")) << r.out;
  EXPECT_TRUE(testing::contains(r.out, "LATER[cuMemAlloc_v2 failed: CUDA_ERROR_ILLEGAL_ADDRESS")) << r.out;
  EXPECT_TRUE(
      testing::contains(r.out, "the GPU context was lost earlier (cuCtxSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS"))
      << r.out;
  EXPECT_TRUE(testing::contains(r.out, "LOST[1]")) << r.out;
  EXPECT_FALSE(testing::contains(r.out, "RESTORED[0]")) << r.out;
  if (cuda_driver_is_emulator()) {
    EXPECT_TRUE(testing::contains(r.out, "ENTER[cuCtxPushCurrent_v2 failed: CUDA_ERROR_ILLEGAL_ADDRESS")) << r.out;
    EXPECT_TRUE(testing::contains(r.out, "RESTORED[1]")) << r.out;
  }
}

}  // namespace
}  // namespace fusejit
