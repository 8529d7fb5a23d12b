#include "runtime/cublaslt_library.h"

#include <filesystem>
#include <utility>
#include <vector>

#include <absl/strings/str_join.h>
#include <fmt/format.h>

#include "ir/error.h"
#include "runtime/shared_library.h"
#include "runtime/toolkit_library.h"

#if FUSEJIT_HAVE_CUDA
#include <cstddef>

#include <cublasLt.h>

#include "runtime/abi_check.h"

// Our Descriptor (void*) stands for each opaque descriptor pointer, and our
// Algo and HeuristicResult for cuBLASLt's structs, checked field by field below.
namespace fusejit::abi_check {
template <>
struct Abi<cublasLtMatmulDescOpaque_t*> {
  using type = void*;
};
template <>
struct Abi<cublasLtMatrixLayoutOpaque_t*> {
  using type = void*;
};
template <>
struct Abi<cublasLtMatmulPreferenceOpaque_t*> {
  using type = void*;
};
template <>
struct Abi<CUstream_st*> {
  using type = void*;
};
template <>
struct Abi<cublasLtMatmulHeuristicResult_t*> {
  using type = cublaslt::lt_abi::HeuristicResult*;
};
template <>
struct Abi<const cublasLtMatmulAlgo_t*> {
  using type = const cublaslt::lt_abi::Algo*;
};
}  // namespace fusejit::abi_check
#endif

namespace fusejit::cublaslt {
namespace {

using namespace lt_abi;  // NOLINT: the ABI's names

struct LtApi {
#define FUSEJIT_DECLARE_MEMBER(member, symbol, result, params) result(*member) params = nullptr;
  FUSEJIT_CUBLASLT_FUNCTIONS(FUSEJIT_DECLARE_MEMBER)
#undef FUSEJIT_DECLARE_MEMBER
  std::string path;
};

#if FUSEJIT_HAVE_CUDA
using abi_check::kSameAbi;
#define FUSEJIT_CHECK_ABI(member, symbol, result, params) \
  static_assert(kSameAbi<decltype(&::symbol), decltype(LtApi::member)>, #symbol " differs from cublasLt.h");
FUSEJIT_CUBLASLT_FUNCTIONS(FUSEJIT_CHECK_ABI)
#undef FUSEJIT_CHECK_ABI
static_assert(std::is_same_v<Handle, cublasLtHandle_t>);
static_assert(sizeof(Algo) == sizeof(cublasLtMatmulAlgo_t));
static_assert(sizeof(HeuristicResult) == sizeof(cublasLtMatmulHeuristicResult_t) &&
              offsetof(HeuristicResult, workspace_size) == offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize) &&
              offsetof(HeuristicResult, state) == offsetof(cublasLtMatmulHeuristicResult_t, state));
static_assert(kSuccess == CUBLAS_STATUS_SUCCESS && kNotSupported == CUBLAS_STATUS_NOT_SUPPORTED);
static_assert(kComputeF32 == CUBLAS_COMPUTE_32F && kScaleF32 == CUDA_R_32F);
static_assert(kDescEpilogue == CUBLASLT_MATMUL_DESC_EPILOGUE && kDescBiasPointer == CUBLASLT_MATMUL_DESC_BIAS_POINTER);
static_assert(kPrefMaxWorkspace == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES &&
              kPrefAlignmentA == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES &&
              kPrefAlignmentB == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES &&
              kPrefAlignmentC == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES &&
              kPrefAlignmentD == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES);
static_assert(kEpilogueDefault == CUBLASLT_EPILOGUE_DEFAULT && kEpilogueRelu == CUBLASLT_EPILOGUE_RELU &&
              kEpilogueBias == CUBLASLT_EPILOGUE_BIAS && kEpilogueGelu == CUBLASLT_EPILOGUE_GELU &&
              (kEpilogueRelu | kEpilogueBias) == CUBLASLT_EPILOGUE_RELU_BIAS &&
              (kEpilogueGelu | kEpilogueBias) == CUBLASLT_EPILOGUE_GELU_BIAS);
#endif

// cuBLASLt 13 (the toolkit fusejit is built with) or 12: the calls fusejit
// makes have the same ABI in both.
absl::StatusOr<LtApi> load_cublaslt() {
  absl::StatusOr<SharedLibrary> library =
      open_toolkit_library("cuBLASLt", {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"});
  if (!library.ok()) return library.status();
  LtApi api;
  api.path = library->path();
  std::vector<std::string> missing;
#define FUSEJIT_BIND(member, symbol, result, params) \
  if (!library->bind(api.member, #symbol)) missing.push_back(#symbol);
  FUSEJIT_CUBLASLT_FUNCTIONS(FUSEJIT_BIND)
#undef FUSEJIT_BIND
  if (!missing.empty()) {
    return absl::NotFoundError(fmt::format("cuBLASLt at {} lacks {}", api.path, absl::StrJoin(missing, ", ")));
  }
  return api;
}

const absl::StatusOr<LtApi>& cublaslt() {
  static const absl::StatusOr<LtApi> api = load_cublaslt();
  return api;
}

absl::Status check(const LtApi& api, Status status, std::string_view call, std::string_view what = "") {
  if (status == kSuccess) return absl::OkStatus();
  const char* name = api.get_status_name(status);
  const char* text = api.get_status_string(status);
  std::string message =
      fmt::format("{} failed: {} ({})", call, name != nullptr ? std::string(name) : fmt::format("status {}", status),
                  text != nullptr ? text : "no description");
  if (!what.empty()) message += fmt::format(" ({})", what);
  if (status == 3) return absl::ResourceExhaustedError(message);  // CUBLAS_STATUS_ALLOC_FAILED
  return absl::InternalError(message);
}

void* as_pointer(cuda::DevicePtr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

}  // namespace

absl::Status library_status() { return cublaslt().status(); }

absl::StatusOr<Handle> create_handle() {
  const absl::StatusOr<LtApi>& api = cublaslt();
  if (!api.ok()) return api.status();
  Handle handle = nullptr;
  if (absl::Status s = check(*api, api->create(&handle), "cublasLtCreate"); !s.ok()) return s;
  return handle;
}

absl::Status destroy_handle(Handle handle) {
  const absl::StatusOr<LtApi>& api = cublaslt();
  if (!api.ok()) return api.status();
  return check(*api, api->destroy(handle), "cublasLtDestroy");
}

uint32_t epilogue_code(bool bias, Activation activation) {
  uint32_t code = 0;
  if (activation == Activation::kRelu) code = kEpilogueRelu;
  if (activation == Activation::kGeluTanh) code = kEpilogueGelu;
  if (bias) code |= kEpilogueBias;
  return code == 0 ? kEpilogueDefault : code;
}

uint32_t alignment_of(cuda::DevicePtr address) {
  uint32_t a = 256;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
}

absl::StatusOr<EpilogueGemm> EpilogueGemm::create(Handle handle, cublas::DataType type, int64_t m, int64_t n, int64_t k,
                                                  Activation activation, const Operands& operands,
                                                  uint64_t max_workspace_bytes) {
  const absl::StatusOr<LtApi>& api = cublaslt();
  if (!api.ok()) return api.status();
  if (m < 1 || n < 1 || k < 1) {
    return absl::InvalidArgumentError(
        fmt::format("matmul of [{}, {}] x [{}, {}]: cuBLASLt takes extents of 1 or more", m, k, k, n));
  }
  EpilogueGemm gemm;
  gemm.handle_ = handle;
  gemm.operands_ = operands;
  const int t = static_cast<int>(type);
  const auto u = [](int64_t x) { return static_cast<uint64_t>(x); };
  if (absl::Status s = check(*api, api->desc_create(&gemm.op_, kComputeF32, kScaleF32), "cublasLtMatmulDescCreate");
      !s.ok()) {
    return s;
  }
  const uint32_t epilogue = epilogue_code(operands.bias != 0, activation);
  const void* bias = as_pointer(operands.bias);
  for (const auto& [attribute, value, size] :
       {std::tuple{kDescEpilogue, static_cast<const void*>(&epilogue), sizeof epilogue},
        std::tuple{kDescBiasPointer, static_cast<const void*>(&bias), sizeof bias}}) {
    if (attribute == kDescBiasPointer && operands.bias == 0) continue;
    if (absl::Status s = check(*api, api->desc_set(gemm.op_, attribute, value, size), "cublasLtMatmulDescSetAttribute");
        !s.ok()) {
      return s;
    }
  }
  // Column-major: cuBLASLt's A is our B (n x k, leading dimension n), its B
  // our A (k x m, leading dimension k), D is n x m.
  for (const auto& [layout, rows, cols] :
       {std::tuple{&gemm.a_layout_, n, k}, std::tuple{&gemm.b_layout_, k, m}, std::tuple{&gemm.d_layout_, n, m}}) {
    if (absl::Status s =
            check(*api, api->layout_create(layout, t, u(rows), u(cols), rows), "cublasLtMatrixLayoutCreate");
        !s.ok()) {
      return s;
    }
  }
  Descriptor pref = nullptr;
  if (absl::Status s = check(*api, api->pref_create(&pref), "cublasLtMatmulPreferenceCreate"); !s.ok()) return s;
  const uint32_t align_a = alignment_of(operands.b), align_b = alignment_of(operands.a),
                 align_d = alignment_of(operands.d);
  absl::Status set = absl::OkStatus();
  for (const auto& [attribute, value, size] :
       {std::tuple{kPrefMaxWorkspace, static_cast<const void*>(&max_workspace_bytes), sizeof max_workspace_bytes},
        std::tuple{kPrefAlignmentA, static_cast<const void*>(&align_a), sizeof align_a},
        std::tuple{kPrefAlignmentB, static_cast<const void*>(&align_b), sizeof align_b},
        std::tuple{kPrefAlignmentC, static_cast<const void*>(&align_d), sizeof align_d},
        std::tuple{kPrefAlignmentD, static_cast<const void*>(&align_d), sizeof align_d}}) {
    if (set.ok()) {
      set = check(*api, api->pref_set(pref, attribute, value, size), "cublasLtMatmulPreferenceSetAttribute");
    }
  }
  HeuristicResult result{};
  int found = 0;
  Status searched = kSuccess;
  if (set.ok()) {
    searched = api->heuristic(handle, gemm.op_, gemm.a_layout_, gemm.b_layout_, gemm.d_layout_, gemm.d_layout_, pref, 1,
                              &result, &found);
  }
  (void)api->pref_destroy(pref);
  if (!set.ok()) return set;
  // NOT_SUPPORTED from the heuristic means it found no algorithm.
  if (searched == kNotSupported || (searched == kSuccess && (found < 1 || result.state != kSuccess))) {
    return absl::UnimplementedError(
        fmt::format("cuBLASLt has no algorithm for [{}, {}] x [{}, {}] with epilogue {} at these alignments", m, k, k,
                    n, epilogue));
  }
  if (absl::Status s = check(*api, searched, "cublasLtMatmulAlgoGetHeuristic"); !s.ok()) return s;
  gemm.algo_ = result.algo;
  gemm.workspace_bytes_ = result.workspace_size;
  return gemm;
}

EpilogueGemm::EpilogueGemm(EpilogueGemm&& other) noexcept { *this = std::move(other); }

EpilogueGemm& EpilogueGemm::operator=(EpilogueGemm&& other) noexcept {
  if (this != &other) {
    release();
    handle_ = std::exchange(other.handle_, nullptr);
    op_ = std::exchange(other.op_, nullptr);
    a_layout_ = std::exchange(other.a_layout_, nullptr);
    b_layout_ = std::exchange(other.b_layout_, nullptr);
    d_layout_ = std::exchange(other.d_layout_, nullptr);
    algo_ = other.algo_;
    workspace_bytes_ = other.workspace_bytes_;
    operands_ = other.operands_;
  }
  return *this;
}

EpilogueGemm::~EpilogueGemm() { release(); }

void EpilogueGemm::release() {
  const absl::StatusOr<LtApi>& api = cublaslt();
  if (!api.ok()) return;
  for (Descriptor* layout : {&a_layout_, &b_layout_, &d_layout_}) {
    if (*layout != nullptr) (void)api->layout_destroy(std::exchange(*layout, nullptr));
  }
  if (op_ != nullptr) (void)api->desc_destroy(std::exchange(op_, nullptr));
}

absl::Status EpilogueGemm::run(cuda::DevicePtr workspace, std::string_view what) const {
  const absl::StatusOr<LtApi>& api = cublaslt();
  if (!api.ok()) return api.status();
  // alpha and beta are float for a 32F compute; beta 0: C (given as D) is not read.
  const float alpha = 1.0f;
  const float beta = 0.0f;
  return check(*api,
               api->matmul(handle_, op_, &alpha, as_pointer(operands_.b), a_layout_, as_pointer(operands_.a), b_layout_,
                           &beta, as_pointer(operands_.d), d_layout_, as_pointer(operands_.d), d_layout_, &algo_,
                           as_pointer(workspace), workspace_bytes_, nullptr),
               "cublasLtMatmul", what);
}

}  // namespace fusejit::cublaslt
