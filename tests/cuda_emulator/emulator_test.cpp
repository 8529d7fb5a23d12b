// The CUDA emulator itself, through its driver entry points (dlopen'ed
// here, beside whatever driver fusejit uses in this process): CUDA threads
// that meet at barriers and shuffles, and the faults a GPU would have that
// the emulator must report rather than hide.
#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/cuda_driver_abi.h"

// Under AddressSanitizer, LeakSanitizer's exit-time check walks every
// thread; after the emulator has run CUDA threads as fibers
// (makecontext/swapcontext, which ASan says it does not fully support) its
// tracer sometimes faults and fails a test that passed (seen in CI: "Tracer
// caught signal 11" after "[ PASSED ]"). Each test runs in a process of its
// own, so only the processes that loaded the emulator skip the leak check;
// ASan's checks of every access stay on. (Global scope: LSan looks the
// function up by its C name.)
#ifdef FUSEJIT_CUDA_EMULATOR_PATH
namespace {
bool emulator_loaded = false;
}  // namespace
#if defined(__SANITIZE_ADDRESS__)
extern "C" int __lsan_is_turned_off() { return emulator_loaded ? 1 : 0; }
#endif
#endif

namespace fusejit {
namespace {

#ifdef FUSEJIT_CUDA_EMULATOR_PATH

using cuda_abi::DriverApi;

constexpr int kIllegalAddress = 700;
constexpr int kLaunchFailed = 719;
constexpr int kInvalidSource = 300;
constexpr int kNotFound = 500;
constexpr int kInvalidHandle = 400;
constexpr int kInvalidContext = 201;
constexpr int kInvalidValue = 1;

class CudaEmulator : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(FUSEJIT_CUDA_EMULATOR_PATH)) {  // a test binary carried to another machine
      GTEST_SKIP() << "no CUDA emulator at " << FUSEJIT_CUDA_EMULATOR_PATH;
    }
    emulator_loaded = true;
    handle_ = dlopen(FUSEJIT_CUDA_EMULATOR_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
#define FJ_BIND(member, symbol, result, params)                                 \
  api_.member = reinterpret_cast<decltype(api_.member)>(dlsym(handle_, #symbol)); \
  ASSERT_NE(api_.member, nullptr) << #symbol;
    FUSEJIT_CUDA_DRIVER_FUNCTIONS(FJ_BIND)
#undef FJ_BIND
    ASSERT_EQ(api_.init(0), 0);
    ASSERT_EQ(api_.primary_ctx_retain(&context_, 0), 0);
    ASSERT_EQ(api_.ctx_push_current(context_), 0);
  }
  void TearDown() override {
    for (cuda_abi::DevicePtr p : allocations_) EXPECT_EQ(api_.mem_free(p), 0);
    for (cuda_abi::Module m : modules_) EXPECT_EQ(api_.module_unload(m), 0);
    cuda_abi::Context popped = nullptr;
    EXPECT_EQ(api_.ctx_pop_current(&popped), 0);
    EXPECT_EQ(popped, context_);
  }

  // Loads `source` and returns its kernel `name`; fails the test otherwise.
  cuda_abi::Function load(const std::string& source, const std::string& name) {
    cuda_abi::Module module = nullptr;
    EXPECT_EQ(api_.module_load_data_ex(&module, source.c_str(), 0, nullptr, nullptr), 0) << source;
    if (module != nullptr) modules_.push_back(module);
    cuda_abi::Function function = nullptr;
    if (module != nullptr) EXPECT_EQ(api_.module_get_function(&function, module, name.c_str()), 0);
    return function;
  }

  cuda_abi::DevicePtr alloc(size_t bytes) {
    cuda_abi::DevicePtr p = 0;
    EXPECT_EQ(api_.mem_alloc(&p, bytes), 0);
    if (p != 0) allocations_.push_back(p);
    return p;
  }

  int launch(cuda_abi::Function f, unsigned grid_x, unsigned grid_y, unsigned block_x, unsigned block_y, void** args) {
    return api_.launch_kernel(f, grid_x, grid_y, 1, block_x, block_y, 1, 0, nullptr, args, nullptr);
  }

  std::string error_text(int error) {
    const char* text = nullptr;
    api_.get_error_string(error, &text);
    return text != nullptr ? text : "";
  }

  void* handle_ = nullptr;
  DriverApi api_;
  cuda_abi::Context context_ = nullptr;  // the device's primary context, current during each test
  std::vector<cuda_abi::DevicePtr> allocations_;
  std::vector<cuda_abi::Module> modules_;
};

TEST_F(CudaEmulator, ThreadsMeetAtShufflesAndBarriers) {
  const std::string source = R"(
extern "C" __global__ void __launch_bounds__(96) block_sum(const float* in, float* out) {
  __shared__ float partial[32];
  float v = in[blockIdx.x * blockDim.x + threadIdx.x];
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0;
    for (unsigned w = 0; w < blockDim.x / 32; ++w) s += partial[w];
    out[blockIdx.x] = s;
  }
}
)";
  cuda_abi::Function f = load(source, "block_sum");
  ASSERT_NE(f, nullptr);
  constexpr int kBlocks = 5, kThreads = 96;
  std::vector<float> in(kBlocks * kThreads);
  std::mt19937 rng(7);
  for (float& v : in) v = static_cast<float>(rng() % 1000);  // integers: every order of sums is exact
  std::vector<float> want(kBlocks, 0);
  for (int i = 0; i < kBlocks * kThreads; ++i) want[i / kThreads] += in[i];
  cuda_abi::DevicePtr d_in = alloc(in.size() * 4), d_out = alloc(kBlocks * 4);
  ASSERT_EQ(api_.memcpy_htod(d_in, in.data(), in.size() * 4), 0);
  void* args[] = {&d_in, &d_out};
  ASSERT_EQ(launch(f, kBlocks, 1, kThreads, 1, args), 0);
  std::vector<float> got(kBlocks);
  ASSERT_EQ(api_.memcpy_dtoh(got.data(), d_out, kBlocks * 4), 0);
  EXPECT_EQ(got, want);
}

TEST_F(CudaEmulator, EveryThreadSeesItsOwnIndices) {
  const std::string source = R"(
extern "C" __global__ void where(unsigned* out) {
  const unsigned block = blockIdx.y * gridDim.x + blockIdx.x;
  const unsigned thread = threadIdx.y * blockDim.x + threadIdx.x;
  out[block * blockDim.x * blockDim.y + thread] = blockIdx.y * 1000000 + blockIdx.x * 10000 + threadIdx.y * 100 + threadIdx.x;
}
)";
  cuda_abi::Function f = load(source, "where");
  ASSERT_NE(f, nullptr);
  const unsigned gx = 3, gy = 2, bx = 7, by = 5;
  cuda_abi::DevicePtr d_out = alloc(gx * gy * bx * by * 4);
  void* args[] = {&d_out};
  ASSERT_EQ(launch(f, gx, gy, bx, by, args), 0);
  std::vector<unsigned> got(gx * gy * bx * by);
  ASSERT_EQ(api_.memcpy_dtoh(got.data(), d_out, got.size() * 4), 0);
  for (unsigned y = 0; y < gy; ++y)
    for (unsigned x = 0; x < gx; ++x)
      for (unsigned ty = 0; ty < by; ++ty)
        for (unsigned tx = 0; tx < bx; ++tx) {
          const unsigned at = ((y * gx + x) * by + ty) * bx + tx;
          EXPECT_EQ(got[at], y * 1000000 + x * 10000 + ty * 100 + tx) << at;
        }
}

TEST_F(CudaEmulator, AWriteOutsideItsAllocationFailsTheLaunch) {
  const std::string source = R"(
extern "C" __global__ void one_too_far(float* p, int n) { p[threadIdx.x + (threadIdx.x == 0 ? n : 0)] = 1.0f; }
)";
  cuda_abi::Function f = load(source, "one_too_far");
  ASSERT_NE(f, nullptr);
  cuda_abi::DevicePtr d = alloc(40 * 4);
  int n = 40;
  void* args[] = {&d, &n};
  const int result = launch(f, 1, 1, 32, 1, args);
  EXPECT_EQ(result, kIllegalAddress);
  EXPECT_NE(error_text(result).find("1 bytes past the end of the allocation of 160 bytes"), std::string::npos)
      << error_text(result);
  EXPECT_NE(error_text(result).find("one_too_far"), std::string::npos) << error_text(result);
}

// Reads past the last 256-byte granule, or before the start, reach an
// inaccessible page: the launch fails with the access described, and the
// next launch neither faults nor inherits the report.
TEST_F(CudaEmulator, AReadOutsideItsAllocationFailsTheLaunch) {
  const std::string source = R"(
extern "C" __global__ void gather(const float* in, float* out, int at) { out[threadIdx.x] = in[at + (int)threadIdx.x]; }
)";
  cuda_abi::Function f = load(source, "gather");
  ASSERT_NE(f, nullptr);
  constexpr int kFloats = 1024;  // 4096 bytes: whole granules, whole pages
  cuda_abi::DevicePtr in = alloc(kFloats * 4), out = alloc(32 * 4);
  std::vector<float> host(kFloats, 2.5f);
  ASSERT_EQ(api_.memcpy_htod(in, host.data(), host.size() * 4), 0);
  auto gather = [&](int at) {
    void* args[] = {&in, &out, &at};
    return launch(f, 1, 1, 32, 1, args);
  };
  EXPECT_EQ(gather(kFloats - 32), 0);  // the last 32 floats: inside
  EXPECT_EQ(gather(kFloats - 31), kIllegalAddress);
  EXPECT_NE(error_text(kIllegalAddress).find("kernel gather made a read 1 bytes past the end of the allocation of "
                                             "4096 bytes"),
            std::string::npos)
      << error_text(kIllegalAddress);
  EXPECT_EQ(gather(0), 0);
  EXPECT_EQ(gather(-1), kIllegalAddress);
  EXPECT_NE(error_text(kIllegalAddress).find("a read 4 bytes before the allocation of 4096 bytes"), std::string::npos)
      << error_text(kIllegalAddress);
  EXPECT_EQ(gather(kFloats + 900), kIllegalAddress);  // 3600 bytes past the end: still the guard page
  std::vector<float> got(32);
  EXPECT_EQ(gather(kFloats - 32), 0);
  ASSERT_EQ(api_.memcpy_dtoh(got.data(), out, got.size() * 4), 0);
  EXPECT_EQ(got, std::vector<float>(32, 2.5f));
}

TEST_F(CudaEmulator, AWriteIntoTheGuardPageFailsTheLaunch) {
  const std::string source = R"(
extern "C" __global__ void poke(float* p, int at) { if (threadIdx.x == 0) p[at] = 1.0f; }
)";
  cuda_abi::Function f = load(source, "poke");
  ASSERT_NE(f, nullptr);
  cuda_abi::DevicePtr d = alloc(64 * 4);  // one granule: the guard page starts right after it
  int at = 64 + 100;
  void* args[] = {&d, &at};
  EXPECT_EQ(launch(f, 1, 1, 32, 1, args), kIllegalAddress);
  EXPECT_NE(error_text(kIllegalAddress).find("a write 401 bytes past the end of the allocation of 256 bytes"),
            std::string::npos)
      << error_text(kIllegalAddress);
  at = 63;
  EXPECT_EQ(launch(f, 1, 1, 32, 1, args), 0);
}

// Shared memory starts each block as NaN: a block that reads what it never
// wrote sees neither zeros nor the previous block's values.
TEST_F(CudaEmulator, EachBlockFindsItsSharedMemoryPoisoned) {
  const std::string source = R"(
extern "C" __global__ void unwritten(float* out) {
  __shared__ float s[32];
  if (blockIdx.x == 0) s[threadIdx.x] = 1.0f;
  __syncthreads();
  out[blockIdx.x * 32 + threadIdx.x] = s[threadIdx.x];
}
)";
  cuda_abi::Function f = load(source, "unwritten");
  ASSERT_NE(f, nullptr);
  cuda_abi::DevicePtr d = alloc(2 * 32 * 4);
  void* args[] = {&d};
  ASSERT_EQ(launch(f, 2, 1, 32, 1, args), 0);
  std::vector<float> got(64);
  ASSERT_EQ(api_.memcpy_dtoh(got.data(), d, got.size() * 4), 0);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(got[i], 1.0f) << i;
  for (int i = 32; i < 64; ++i) EXPECT_TRUE(std::isnan(got[i])) << i << ": " << got[i];
}

TEST_F(CudaEmulator, AThreadThatSkipsABarrierIsADeadlock) {
  const std::string source = R"(
extern "C" __global__ void early_exit(float* p) {
  if (threadIdx.x == 5) return;
  __syncthreads();
  p[threadIdx.x] = 1.0f;
}
)";
  cuda_abi::Function f = load(source, "early_exit");
  ASSERT_NE(f, nullptr);
  cuda_abi::DevicePtr d = alloc(64 * 4);
  void* args[] = {&d};
  const int result = launch(f, 2, 1, 64, 1, args);
  EXPECT_EQ(result, kLaunchFailed);
  EXPECT_NE(error_text(result).find("deadlock in a block of 64 threads: 63 wait at __syncthreads, 0 at a warp "
                                    "shuffle, 1 have exited"),
            std::string::npos)
      << error_text(result);
}

TEST_F(CudaEmulator, CompileErrorsReachTheJitLogAndUnknownKernelsAreNotFound) {
  std::string log(4096, '\0');
  int options[] = {cuda_abi::kJitErrorLogBuffer, cuda_abi::kJitErrorLogBufferSize};
  void* values[] = {log.data(), reinterpret_cast<void*>(uintptr_t{4096})};
  cuda_abi::Module module = nullptr;
  const char* bad = "extern \"C\" __global__ void broken(float* p) { p[0] = undeclared_name; }\n";
  EXPECT_EQ(api_.module_load_data_ex(&module, bad, 2, options, values), kInvalidSource);
  EXPECT_NE(log.find("undeclared_name"), std::string::npos) << log;

  ASSERT_EQ(api_.module_load_data_ex(&module, "extern \"C\" __global__ void k(float* p) { p[0] = 1; }\n", 0,
                                     nullptr, nullptr),
            0);
  cuda_abi::Function f = nullptr;
  EXPECT_EQ(api_.module_get_function(&f, module, "not_there"), kNotFound);
  EXPECT_EQ(api_.module_unload(module), 0);
}

TEST_F(CudaEmulator, EventsItNeverMadeAreInvalidHandlesNotCrashes) {
  cuda_abi::Event start = nullptr, end = nullptr;
  ASSERT_EQ(api_.event_create(&start, 0), 0);
  ASSERT_EQ(api_.event_create(&end, 0), 0);
  float ms = -1;
  EXPECT_EQ(api_.event_elapsed_time(&ms, start, end), kInvalidHandle);  // neither recorded yet
  ASSERT_EQ(api_.event_record(start, nullptr), 0);
  ASSERT_EQ(api_.event_record(end, nullptr), 0);
  ASSERT_EQ(api_.event_synchronize(end), 0);
  ASSERT_EQ(api_.event_elapsed_time(&ms, start, end), 0);
  EXPECT_GE(ms, 0.0f);

  EXPECT_EQ(api_.event_record(nullptr, nullptr), kInvalidHandle);
  EXPECT_EQ(api_.event_synchronize(nullptr), kInvalidHandle);
  EXPECT_EQ(api_.event_elapsed_time(&ms, nullptr, end), kInvalidHandle);
  EXPECT_EQ(api_.event_destroy(nullptr), kInvalidHandle);
  ASSERT_EQ(api_.event_destroy(start), 0);
  EXPECT_EQ(api_.event_record(start, nullptr), kInvalidHandle);  // destroyed
  EXPECT_EQ(api_.event_destroy(start), kInvalidHandle);
  EXPECT_EQ(api_.event_destroy(end), 0);
}

// As on a GPU, memory, modules, launches and events work in the context
// current on the calling thread; fusejit's backend relies on the emulator to
// fail a call made outside the device's context, as a real driver would make
// it in the wrong one (or fail it where none is current).
TEST_F(CudaEmulator, CallsOutsideTheDevicesContextFailAndTheContextStackIsPerThread) {
  cuda_abi::Context current = nullptr;
  ASSERT_EQ(api_.ctx_get_current(&current), 0);
  EXPECT_EQ(current, context_);
  cuda_abi::DevicePtr p = 0;

  int programs_own = 0;  // any handle stands for a program's own context
  auto* own = reinterpret_cast<cuda_abi::Context>(&programs_own);
  ASSERT_EQ(api_.ctx_push_current(own), 0);
  EXPECT_EQ(api_.mem_alloc(&p, 64), kInvalidContext);
  cuda_abi::Event event = nullptr;
  EXPECT_EQ(api_.event_create(&event, 0), kInvalidContext);
  EXPECT_EQ(api_.ctx_synchronize(), kInvalidContext);
  const char* text = nullptr;
  ASSERT_EQ(api_.get_error_string(kInvalidContext, &text), 0);
  EXPECT_NE(std::string(text).find("another context current"), std::string::npos) << text;

  ASSERT_EQ(api_.ctx_push_current(context_), 0);  // nested, as fusejit's scopes push
  ASSERT_EQ(api_.mem_alloc(&p, 64), 0);
  cuda_abi::Context popped = nullptr;
  ASSERT_EQ(api_.ctx_pop_current(&popped), 0);
  EXPECT_EQ(popped, context_);
  ASSERT_EQ(api_.ctx_get_current(&current), 0);
  EXPECT_EQ(current, own);
  EXPECT_EQ(api_.mem_free(p), kInvalidContext);

  std::thread([&] {  // a new thread starts with no context
    cuda_abi::Context none = own;
    EXPECT_EQ(api_.ctx_get_current(&none), 0);
    EXPECT_EQ(none, nullptr);
    cuda_abi::DevicePtr q = 0;
    EXPECT_EQ(api_.mem_alloc(&q, 64), kInvalidContext);
    cuda_abi::Context nothing = nullptr;
    EXPECT_EQ(api_.ctx_pop_current(&nothing), kInvalidContext);
    EXPECT_EQ(api_.ctx_set_current(context_), 0);  // set on an empty stack pushes
    EXPECT_EQ(api_.mem_alloc(&q, 64), 0);
    EXPECT_EQ(api_.mem_free(q), 0);
    EXPECT_EQ(api_.ctx_set_current(nullptr), 0);  // and null pops
    EXPECT_EQ(api_.ctx_get_current(&none), 0);
    EXPECT_EQ(none, nullptr);
  })
      .join();

  ASSERT_EQ(api_.ctx_pop_current(&popped), 0);
  EXPECT_EQ(popped, own);
  EXPECT_EQ(api_.mem_free(p), 0);
}

// Memory, events and cuBLAS handles work in the context that made them
// only, and go with it when its last reference is released; a cuBLAS
// handle needs a context current (a real cuBLAS would make device 0's
// current on the thread). Two devices for this test.
TEST_F(CudaEmulator, WhatAContextMadeWorksInItOnlyAndGoesWithIt) {
  setenv("FUSEJIT_EMULATOR_DEVICES", "2", 1);
  struct Unset {
    ~Unset() { unsetenv("FUSEJIT_EMULATOR_DEVICES"); }
  } unset;
  using BlasCreate = int (*)(void**);
  using BlasDestroy = int (*)(void*);
  auto blas_create = reinterpret_cast<BlasCreate>(dlsym(handle_, "cublasCreate_v2"));
  auto blas_destroy = reinterpret_cast<BlasDestroy>(dlsym(handle_, "cublasDestroy_v2"));
  ASSERT_NE(blas_create, nullptr);
  ASSERT_NE(blas_destroy, nullptr);
  constexpr int kBlasNotInitialized = 1;

  cuda_abi::DevicePtr first_memory = alloc(64);  // device 0's, current from SetUp
  cuda_abi::Event first_event = nullptr;
  ASSERT_EQ(api_.event_create(&first_event, 0), 0);
  void* first_blas = nullptr;
  ASSERT_EQ(blas_create(&first_blas), 0);

  cuda_abi::Context second = nullptr;
  ASSERT_EQ(api_.primary_ctx_retain(&second, 1), 0);
  ASSERT_NE(second, context_);
  ASSERT_EQ(api_.ctx_push_current(second), 0);
  cuda_abi::DevicePtr second_memory = 0;
  ASSERT_EQ(api_.mem_alloc(&second_memory, 64), 0);
  EXPECT_EQ(api_.memset_d8(first_memory, 0, 64), kInvalidContext);
  EXPECT_EQ(api_.memcpy_dtod(second_memory, first_memory, 64), kInvalidContext);
  EXPECT_EQ(api_.mem_free(first_memory), kInvalidContext);
  EXPECT_EQ(api_.event_record(first_event, nullptr), kInvalidHandle);
  EXPECT_EQ(blas_destroy(first_blas), kBlasNotInitialized);
  cuda_abi::Context popped = nullptr;
  ASSERT_EQ(api_.ctx_pop_current(&popped), 0);

  EXPECT_EQ(blas_destroy(first_blas), 0);
  EXPECT_EQ(api_.event_destroy(first_event), 0);
  // The last reference resets the second device's context: its memory is gone.
  ASSERT_EQ(api_.primary_ctx_release(1), 0);
  EXPECT_EQ(api_.primary_ctx_release(1), kInvalidContext);  // more releases than retains
  ASSERT_EQ(api_.ctx_push_current(second), 0);
  EXPECT_EQ(api_.mem_free(second_memory), kInvalidValue);
  ASSERT_EQ(api_.ctx_pop_current(&popped), 0);

  std::thread([&] {  // no context current
    void* none = nullptr;
    EXPECT_EQ(blas_create(&none), kBlasNotInitialized);
  })
      .join();
}

#else

TEST(CudaEmulator, NeedsTheCudaToolkit) { GTEST_SKIP() << "built without the CUDA toolkit: no emulator"; }

#endif

}  // namespace
}  // namespace fusejit
