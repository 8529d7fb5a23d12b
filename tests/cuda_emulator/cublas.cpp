// The CUDA emulator's cuBLAS: the calls fusejit makes (runtime/cublas_abi.h),
// on the CPU. fusejit loads them from the emulator's library when the
// emulator is its driver. cublasGemmEx is column-major, untransposed, f32
// accumulation (what fusejit asks for and nothing else), one dot product
// per element in order of k; results are rounded to the output type to
// nearest even, as cuBLAS does.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "device_memory.h"
#include "runtime/cublas_abi.h"

using fusejit::cublas::Handle;
using fusejit::cublas::cublas_abi::Status;

extern "C" {
#define FJ_EMU_DECLARE(member, symbol, result, params) __attribute__((visibility("default"))) result symbol params;
FUSEJIT_CUBLAS_FUNCTIONS(FJ_EMU_DECLARE)
FUSEJIT_CUBLAS_OPTIONAL_FUNCTIONS(FJ_EMU_DECLARE)
#undef FJ_EMU_DECLARE
}

namespace {

namespace blas = fusejit::cublas::cublas_abi;
using fusejit::cublas::DataType;

constexpr Status kNotInitialized = 1;  // CUBLAS_STATUS_NOT_INITIALIZED
constexpr Status kInvalidValue = 7;    // CUBLAS_STATUS_INVALID_VALUE
constexpr Status kNotSupported = 15;   // CUBLAS_STATUS_NOT_SUPPORTED
constexpr Status kExecutionFailed = 13;  // CUBLAS_STATUS_EXECUTION_FAILED

// A handle belongs to the context current when cublasCreate made it, and
// works only while that one is current: cuBLAS ties a handle to its
// device. What a refusal was goes to stderr (cuBLAS statuses carry no detail).
struct EmulatedHandle {
  const void* context;
};
std::map<const void*, std::unique_ptr<EmulatedHandle>> g_handles;  // under driver_mutex()

Status refused(const std::string& why, Status status = kNotInitialized) {
  std::fprintf(stderr, "fusejit CUDA emulator: %s\n", why.c_str());
  return status;
}

Status check_handle(const void* handle, const char* call) {
  auto it = g_handles.find(handle);
  if (it == g_handles.end()) return refused(fmt::format("{} of a handle cublasCreate did not make", call));
  if (it->second->context != fusejit::emulator::current_context()) {
    return refused(fmt::format("{} with a handle of another context than the current one", call));
  }
  return blas::kSuccess;
}

float load(const void* base, int type, size_t i) {
  switch (static_cast<DataType>(type)) {
    case DataType::kF32:
      return static_cast<const float*>(base)[i];
    case DataType::kF16: {
      _Float16 h;
      std::memcpy(&h, static_cast<const char*>(base) + 2 * i, 2);
      return h;
    }
    case DataType::kBF16: {
      const uint32_t bits = uint32_t{static_cast<const uint16_t*>(base)[i]} << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
  }
  return 0;
}

void store(void* base, int type, size_t i, float v) {
  switch (static_cast<DataType>(type)) {
    case DataType::kF32:
      static_cast<float*>(base)[i] = v;
      return;
    case DataType::kF16: {
      const _Float16 h = static_cast<_Float16>(v);
      std::memcpy(static_cast<char*>(base) + 2 * i, &h, 2);
      return;
    }
    case DataType::kBF16: {
      uint32_t u;
      std::memcpy(&u, &v, 4);
      const uint16_t bits = (u & 0x7fffffffu) > 0x7f800000u ? static_cast<uint16_t>((u >> 16) | 0x40u)
                                                            : static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
      static_cast<uint16_t*>(base)[i] = bits;
      return;
    }
  }
}

bool known_type(int type) {
  return type == static_cast<int>(DataType::kF32) || type == static_cast<int>(DataType::kF16) ||
         type == static_cast<int>(DataType::kBF16);
}

}  // namespace

// Handles of cuBLAS and cuBLASLt alike: made in the current context (none
// current is refused), then checked and destroyed in it.
Status fj_emulated_blas_create(void** handle, const char* call) {
  const void* context = fusejit::emulator::current_context();
  // With no context current, a real cuBLAS has the CUDA runtime make
  // device 0's primary context current on the thread, and leave it there.
  if (context == nullptr) return refused(fmt::format("{} with no context current", call));
  std::lock_guard lock(fusejit::emulator::driver_mutex());
  auto made = std::make_unique<EmulatedHandle>(EmulatedHandle{context});
  *handle = made.get();
  g_handles[made.get()] = std::move(made);
  return blas::kSuccess;
}
Status fj_emulated_blas_check(const void* handle, const char* call) {
  std::lock_guard lock(fusejit::emulator::driver_mutex());
  return check_handle(handle, call);
}
Status fj_emulated_blas_destroy(const void* handle, const char* call) {
  std::lock_guard lock(fusejit::emulator::driver_mutex());
  if (Status s = check_handle(handle, call); s != blas::kSuccess) return s;
  g_handles.erase(handle);
  return blas::kSuccess;
}

// Whether each operand of a GEMM is memory of the current context, as on a
// GPU, where another device's memory (without peer access) faults. Under
// driver_mutex().
Status fj_emulated_blas_operands_owned(const char* call, std::initializer_list<const void*> operands) {
  for (const void* p : operands) {
    if (fusejit::emulator::owner_of(reinterpret_cast<uintptr_t>(p)) != fusejit::emulator::current_context()) {
      return refused(fmt::format("{}: operand {} is memory of another context than the current one", call, p),
                     kExecutionFailed);
    }
  }
  return blas::kSuccess;
}

// Shared with cublaslt.cpp.
float fj_emulated_blas_load(const void* base, int type, size_t i) { return load(base, type, i); }
void fj_emulated_blas_store(void* base, int type, size_t i, float v) { store(base, type, i, v); }
bool fj_emulated_blas_known_type(int type) { return known_type(type); }

extern "C" {

Status cublasCreate_v2(Handle* handle) {
  void* made = nullptr;
  const Status s = fj_emulated_blas_create(&made, "cublasCreate");
  *handle = static_cast<Handle>(made);
  return s;
}

Status cublasDestroy_v2(Handle handle) { return fj_emulated_blas_destroy(handle, "cublasDestroy"); }

Status cublasGetProperty(int type, int* value) {
  static const std::map<int, int> kVersion = {{blas::kPropertyMajor, 13}, {blas::kPropertyMinor, 0}, {blas::kPropertyPatch, 0}};
  auto it = kVersion.find(type);
  if (it == kVersion.end()) return kInvalidValue;
  *value = it->second;
  return blas::kSuccess;
}

Status cublasGemmEx(Handle handle, int transa, int transb, int m, int n, int k, const void* alpha, const void* a,
                    int a_type, int lda, const void* b, int b_type, int ldb, const void* beta, void* c, int c_type,
                    int ldc, int compute_type, int algo) {
  if (Status s = fj_emulated_blas_check(handle, "cublasGemmEx"); s != blas::kSuccess) return s;
  if (transa != blas::kOpN || transb != blas::kOpN || compute_type != blas::kComputeF32 || algo != blas::kGemmDefault ||
      !known_type(a_type) || !known_type(b_type) || !known_type(c_type)) {
    return kNotSupported;
  }
  if (m < 0 || n < 0 || k < 0 || lda < std::max(1, m) || ldb < std::max(1, k) || ldc < std::max(1, m)) {
    return kInvalidValue;
  }
  std::lock_guard lock(fusejit::emulator::driver_mutex());
  if (Status s = fj_emulated_blas_operands_owned("cublasGemmEx", {a, b, c}); s != blas::kSuccess) return s;
  const float alpha_f = *static_cast<const float*>(alpha);
  const float beta_f = *static_cast<const float*>(beta);
  const std::string bad = fusejit::emulator::run_watched([&] {
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < m; ++i) {
        float acc = 0;
        for (int p = 0; p < k; ++p) {
          acc += load(a, a_type, size_t(i) + size_t(p) * lda) * load(b, b_type, size_t(p) + size_t(j) * ldb);
        }
        const size_t at = size_t(i) + size_t(j) * ldc;
        const float old = beta_f == 0 ? 0.0f : beta_f * load(c, c_type, at);
        store(c, c_type, at, alpha_f * acc + old);
      }
    }
  });
  // cuBLAS statuses carry no detail: what went wrong goes to stderr.
  if (!bad.empty()) {
    std::fprintf(stderr, "fusejit CUDA emulator: cublasGemmEx made %s\n", bad.c_str());
    return kExecutionFailed;
  }
  return blas::kSuccess;
}

const char* cublasGetStatusName(Status status) {
  switch (status) {
    case blas::kSuccess:
      return "CUBLAS_STATUS_SUCCESS";
    case kNotInitialized:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case kInvalidValue:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case kNotSupported:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case kExecutionFailed:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(Status status) {
  if (status == kNotSupported) return "the CUDA emulator's cublasGemmEx takes only what fusejit asks for";
  if (status == kExecutionFailed) return "a write outside an allocation (described on stderr)";
  return "emulated cuBLAS";
}

}  // extern "C"
