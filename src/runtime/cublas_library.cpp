#include "runtime/cublas_library.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <vector>

#include <absl/strings/str_join.h>
#include <fmt/format.h>

#include "ir/error.h"
#include "runtime/cublas_abi.h"
#include "runtime/cuda_driver.h"
#include "runtime/shared_library.h"
#include "runtime/toolkit_library.h"

#if FUSEJIT_HAVE_CUDA
#include <cublas_v2.h>

#include "runtime/abi_check.h"
#endif

namespace fusejit::cublas {
namespace {

using namespace cublas_abi;  // NOLINT: the ABI's names, as cublas_v2.h spells them


struct CublasApi {
#define FUSEJIT_DECLARE_MEMBER(member, symbol, result, params) result(*member) params = nullptr;
  FUSEJIT_CUBLAS_FUNCTIONS(FUSEJIT_DECLARE_MEMBER)
  FUSEJIT_CUBLAS_OPTIONAL_FUNCTIONS(FUSEJIT_DECLARE_MEMBER)
#undef FUSEJIT_DECLARE_MEMBER
  std::string path;
};

#if FUSEJIT_HAVE_CUDA
using abi_check::kSameAbi;
static_assert(kSameAbi<decltype(&::cublasCreate_v2), decltype(CublasApi::create)>);
static_assert(kSameAbi<decltype(&::cublasDestroy_v2), decltype(CublasApi::destroy)>);
static_assert(kSameAbi<decltype(&::cublasGetProperty), decltype(CublasApi::get_property)>);
static_assert(kSameAbi<decltype(&::cublasGetStatusName), decltype(CublasApi::get_status_name)>);
static_assert(kSameAbi<decltype(&::cublasGetStatusString), decltype(CublasApi::get_status_string)>);
// In C++ cublas_api.h adds an inline cublasGemmEx overload taking a
// cudaDataType compute type; the cast picks (and so checks the existence of)
// the exported one, whose signature ours must match.
using HeaderGemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                        const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                                        const void*, void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
static_assert(kSameAbi<decltype(static_cast<HeaderGemmEx>(&::cublasGemmEx)), decltype(CublasApi::gemm_ex)>);
static_assert(std::is_same_v<Handle, cublasHandle_t>);
static_assert(kSuccess == CUBLAS_STATUS_SUCCESS && kOpN == CUBLAS_OP_N);
static_assert(kComputeF32 == CUBLAS_COMPUTE_32F && kGemmDefault == CUBLAS_GEMM_DEFAULT);
static_assert(kPropertyMajor == MAJOR_VERSION && kPropertyMinor == MINOR_VERSION && kPropertyPatch == PATCH_LEVEL);
static_assert(static_cast<int>(DataType::kF32) == CUDA_R_32F && static_cast<int>(DataType::kF16) == CUDA_R_16F &&
              static_cast<int>(DataType::kBF16) == CUDA_R_16BF);
#endif

// cuBLAS 13 (the toolkit fusejit is built with) or 12: the calls fusejit
// makes have the same ABI in both.
absl::StatusOr<CublasApi> load_cublas() {
  absl::StatusOr<SharedLibrary> library =
      open_toolkit_library("cuBLAS", {"libcublas.so.13", "libcublas.so.12", "libcublas.so"});
  if (!library.ok()) return library.status();
  CublasApi api;
  api.path = library->path();
  std::vector<std::string> missing;
#define FUSEJIT_BIND(member, symbol, result, params) \
  if (!library->bind(api.member, #symbol)) missing.push_back(#symbol);
  FUSEJIT_CUBLAS_FUNCTIONS(FUSEJIT_BIND)
#undef FUSEJIT_BIND
#define FUSEJIT_BIND_OPTIONAL(member, symbol, result, params) library->bind(api.member, #symbol);
  FUSEJIT_CUBLAS_OPTIONAL_FUNCTIONS(FUSEJIT_BIND_OPTIONAL)
#undef FUSEJIT_BIND_OPTIONAL
  if (!missing.empty()) {
    return absl::NotFoundError(fmt::format("cuBLAS at {} lacks {}", api.path, absl::StrJoin(missing, ", ")));
  }
  return api;
}

// Loaded once per process; C++ makes the first call's initialisation thread-safe.
const absl::StatusOr<CublasApi>& cublas() {
  static const absl::StatusOr<CublasApi> api = load_cublas();
  return api;
}

// "cublasGemmEx failed: CUBLAS_STATUS_NOT_SUPPORTED (the functionality requested is not supported)"
absl::Status check(const CublasApi& api, Status status, std::string_view call, std::string_view what = "") {
  if (status == kSuccess) return absl::OkStatus();
  const char* name = api.get_status_name != nullptr ? api.get_status_name(status) : nullptr;
  const char* text = api.get_status_string != nullptr ? api.get_status_string(status) : nullptr;
  std::string message = fmt::format("{} failed: {} ({})", call,
                                    name != nullptr ? std::string(name) : fmt::format("cublasStatus_t {}", status),
                                    text != nullptr ? text : "no description");
  if (!what.empty()) message += fmt::format(" ({})", what);
  // CUBLAS_STATUS_ALLOC_FAILED = 3: cuBLAS could not allocate its workspace.
  if (status == 3) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

}  // namespace

DataType data_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return DataType::kF32;
    case DType::kF16: return DataType::kF16;
    case DType::kBF16: return DataType::kBF16;
  }
  return DataType::kF32;
}

absl::Status library_status() { return cublas().status(); }

std::string library_path() { return cublas().ok() ? cublas()->path : std::string(); }

absl::StatusOr<std::string> library_version() {
  const absl::StatusOr<CublasApi>& api = cublas();
  if (!api.ok()) return api.status();
  int parts[3] = {};
  for (int i = 0; i < 3; ++i) {
    if (absl::Status s = check(*api, api->get_property(i, &parts[i]), "cublasGetProperty"); !s.ok()) return s;
  }
  return fmt::format("{}.{}.{}", parts[0], parts[1], parts[2]);
}

absl::StatusOr<Handle> create_handle() {
  const absl::StatusOr<CublasApi>& api = cublas();
  if (!api.ok()) return api.status();
  Handle handle = nullptr;
  if (absl::Status s = check(*api, api->create(&handle), "cublasCreate_v2"); !s.ok()) return s;
  return handle;
}

absl::Status destroy_handle(Handle handle) {
  const absl::StatusOr<CublasApi>& api = cublas();
  if (!api.ok()) return api.status();
  return check(*api, api->destroy(handle), "cublasDestroy_v2");
}

absl::StatusOr<ColumnMajorGemm> row_major_gemm(int64_t m, int64_t n, int64_t k) {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (m < 1 || n < 1 || k < 1 || m > kMax || n > kMax || k > kMax) {
    return absl::InvalidArgumentError(
        fmt::format("matmul of [{}, {}] x [{}, {}]: cublasGemmEx takes extents from 1 to {}", m, k, k, n, kMax));
  }
  ColumnMajorGemm g;
  g.m = static_cast<int>(n);
  g.n = static_cast<int>(m);
  g.k = static_cast<int>(k);
  g.lda = static_cast<int>(n);
  g.ldb = static_cast<int>(k);
  g.ldc = static_cast<int>(n);
  return g;
}

absl::Status gemm_row_major(Handle handle, DataType type, DataType c_type, int64_t m, int64_t n, int64_t k,
                            cuda::DevicePtr a, cuda::DevicePtr b, cuda::DevicePtr c, std::string_view what) {
  const absl::StatusOr<CublasApi>& api = cublas();
  if (!api.ok()) return api.status();
  absl::StatusOr<ColumnMajorGemm> g = row_major_gemm(m, n, k);
  if (!g.ok()) return g.status();
  // alpha and beta are float for every CUBLAS_COMPUTE_32F call, whatever the matrix type.
  const float alpha = 1.0f;
  const float beta = 0.0f;
  const int t = static_cast<int>(type);
  const auto* pa = reinterpret_cast<const void*>(static_cast<uintptr_t>(a));
  const auto* pb = reinterpret_cast<const void*>(static_cast<uintptr_t>(b));
  auto* pc = reinterpret_cast<void*>(static_cast<uintptr_t>(c));
  return check(*api,
               api->gemm_ex(handle, kOpN, kOpN, g->m, g->n, g->k, &alpha, pb, t, g->lda, pa, t, g->ldb, &beta, pc,
                            static_cast<int>(c_type), g->ldc, kComputeF32, kGemmDefault),
               "cublasGemmEx", what);
}

}  // namespace fusejit::cublas
