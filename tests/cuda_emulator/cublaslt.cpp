// The CUDA emulator's cuBLASLt: the calls fusejit makes
// (runtime/cublaslt_abi.h), on the CPU. Descriptors hold what fusejit sets;
// the heuristic offers one algorithm where every alignment preference is
// 16 bytes or more, and none (CUBLAS_STATUS_NOT_SUPPORTED, as a real one
// does when it has nothing) where one is less or where
// FUSEJIT_EMULATOR_CUBLASLT_REFUSES=1 asks it to, so that tests reach
// fusejit's fallback for a refusal (its own 16-byte check comes first
// otherwise); cublasLtMatmul computes column-major
// D = epilogue(A · B) with f32 accumulation in order of k, adds the bias
// (one value per row of D) and applies relu or the tanh GeLU in f32, and
// rounds once to D's type, as cuBLASLt does.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <string_view>

#include "device_memory.h"
#include "runtime/cublaslt_abi.h"

namespace lt = fusejit::cublaslt::lt_abi;
using lt::Algo;
using lt::Descriptor;
using lt::Handle;
using lt::HeuristicResult;
using lt::Status;

extern "C" {
#define FJ_EMU_DECLARE(member, symbol, result, params) __attribute__((visibility("default"))) result symbol params;
FUSEJIT_CUBLASLT_FUNCTIONS(FJ_EMU_DECLARE)
#undef FJ_EMU_DECLARE
}

// cublas.cpp's element access, shared.
float fj_emulated_blas_load(const void* base, int type, size_t i);
void fj_emulated_blas_store(void* base, int type, size_t i, float v);
bool fj_emulated_blas_known_type(int type);
// cublas.cpp's handles (of the context current when made) and operand check.
int fj_emulated_blas_create(void** handle, const char* call);
int fj_emulated_blas_check(const void* handle, const char* call);
int fj_emulated_blas_destroy(const void* handle, const char* call);
int fj_emulated_blas_operands_owned(const char* call, std::initializer_list<const void*> operands);

namespace {

constexpr Status kNotInitialized = 1;    // CUBLAS_STATUS_NOT_INITIALIZED
constexpr Status kInvalidValue = 7;      // CUBLAS_STATUS_INVALID_VALUE
constexpr Status kExecutionFailed = 13;  // CUBLAS_STATUS_EXECUTION_FAILED

struct OpDesc {
  uint32_t epilogue = lt::kEpilogueDefault;
  const void* bias = nullptr;
};
struct Layout {
  int type = 0;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
};
struct Preference {
  std::map<int, uint64_t> values;
};

template <typename T>
Status set_attribute(T& field, const void* value, size_t size) {
  if (value == nullptr || size != sizeof(T)) return kInvalidValue;
  std::memcpy(&field, value, sizeof(T));
  return lt::kSuccess;
}

bool known_epilogue(uint32_t e) {
  return e == lt::kEpilogueDefault || e == lt::kEpilogueRelu || e == lt::kEpilogueBias || e == lt::kEpilogueGelu ||
         e == (lt::kEpilogueRelu | lt::kEpilogueBias) || e == (lt::kEpilogueGelu | lt::kEpilogueBias);
}

}  // namespace

extern "C" {

Status cublasLtCreate(Handle* handle) {
  void* made = nullptr;
  const Status s = fj_emulated_blas_create(&made, "cublasLtCreate");
  *handle = static_cast<Handle>(made);
  return s;
}

Status cublasLtDestroy(Handle handle) { return fj_emulated_blas_destroy(handle, "cublasLtDestroy"); }

Status cublasLtMatmulDescCreate(Descriptor* desc, int compute_type, int scale_type) {
  if (compute_type != lt::kComputeF32 || scale_type != lt::kScaleF32) return lt::kNotSupported;
  *desc = new OpDesc;
  return lt::kSuccess;
}

Status cublasLtMatmulDescDestroy(Descriptor desc) {
  delete static_cast<OpDesc*>(desc);
  return lt::kSuccess;
}

Status cublasLtMatmulDescSetAttribute(Descriptor desc, int attribute, const void* value, size_t size) {
  auto* d = static_cast<OpDesc*>(desc);
  if (attribute == lt::kDescEpilogue) return set_attribute(d->epilogue, value, size);
  if (attribute == lt::kDescBiasPointer) return set_attribute(d->bias, value, size);
  return lt::kNotSupported;  // fusejit sets nothing else
}

Status cublasLtMatrixLayoutCreate(Descriptor* layout, int type, uint64_t rows, uint64_t cols, int64_t ld) {
  if (!fj_emulated_blas_known_type(type)) return lt::kNotSupported;
  if (ld < static_cast<int64_t>(rows)) return kInvalidValue;
  *layout = new Layout{type, rows, cols, ld};
  return lt::kSuccess;
}

Status cublasLtMatrixLayoutDestroy(Descriptor layout) {
  delete static_cast<Layout*>(layout);
  return lt::kSuccess;
}

Status cublasLtMatmulPreferenceCreate(Descriptor* pref) {
  *pref = new Preference;
  return lt::kSuccess;
}

Status cublasLtMatmulPreferenceDestroy(Descriptor pref) {
  delete static_cast<Preference*>(pref);
  return lt::kSuccess;
}

Status cublasLtMatmulPreferenceSetAttribute(Descriptor pref, int attribute, const void* value, size_t size) {
  uint64_t v = 0;
  if (attribute == lt::kPrefMaxWorkspace) {
    if (Status s = set_attribute(v, value, size); s != lt::kSuccess) return s;
  } else if (attribute >= lt::kPrefAlignmentA && attribute <= lt::kPrefAlignmentD) {
    uint32_t a = 0;
    if (Status s = set_attribute(a, value, size); s != lt::kSuccess) return s;
    v = a;
  } else {
    return lt::kNotSupported;
  }
  static_cast<Preference*>(pref)->values[attribute] = v;
  return lt::kSuccess;
}

Status cublasLtMatmulAlgoGetHeuristic(Handle handle, Descriptor op, Descriptor a, Descriptor b, Descriptor c,
                                      Descriptor d, Descriptor pref, int requested, lt::HeuristicResult* results,
                                      int* returned) {
  if (Status s = fj_emulated_blas_check(handle, "cublasLtMatmulAlgoGetHeuristic"); s != lt::kSuccess) return s;
  if (op == nullptr || a == nullptr || b == nullptr || c == nullptr || d == nullptr || pref == nullptr ||
      requested < 1 || results == nullptr || returned == nullptr) {
    return kInvalidValue;
  }
  *returned = 0;
  if (const char* refuse = std::getenv("FUSEJIT_EMULATOR_CUBLASLT_REFUSES"); refuse != nullptr && refuse[0] == '1') {
    return lt::kNotSupported;
  }
  const auto* p = static_cast<const Preference*>(pref);
  for (int attribute = lt::kPrefAlignmentA; attribute <= lt::kPrefAlignmentD; ++attribute) {
    const auto it = p->values.find(attribute);
    if (it != p->values.end() && it->second < 16) return lt::kNotSupported;  // no algorithm
  }
  if (!known_epilogue(static_cast<const OpDesc*>(op)->epilogue)) return lt::kNotSupported;
  results[0] = {};
  results[0].algo.data[0] = 1;
  results[0].state = lt::kSuccess;
  results[0].waves_count = 1;
  *returned = 1;
  return lt::kSuccess;
}

Status cublasLtMatmul(Handle handle, Descriptor op, const void* alpha, const void* a, Descriptor a_layout,
                      const void* b, Descriptor b_layout, const void* beta, const void* c, Descriptor c_layout, void* d,
                      Descriptor d_layout, const lt::Algo* algo, void* workspace, size_t workspace_size, void* stream) {
  (void)workspace;
  (void)workspace_size;
  if (Status s = fj_emulated_blas_check(handle, "cublasLtMatmul"); s != lt::kSuccess) return s;
  if (algo == nullptr || algo->data[0] != 1 || stream != nullptr) return lt::kNotSupported;
  const auto& o = *static_cast<const OpDesc*>(op);
  const auto& la = *static_cast<const Layout*>(a_layout);
  const auto& lb = *static_cast<const Layout*>(b_layout);
  const auto& lc = *static_cast<const Layout*>(c_layout);
  const auto& ld = *static_cast<const Layout*>(d_layout);
  const uint64_t m = la.rows, k = la.cols, n = lb.cols;
  if (lb.rows != k || ld.rows != m || ld.cols != n || lc.rows != m || lc.cols != n) return kInvalidValue;
  const float alpha_f = *static_cast<const float*>(alpha);
  if (*static_cast<const float*>(beta) != 0 || c != d) return lt::kNotSupported;  // fusejit asks no more
  const bool bias = (o.epilogue & lt::kEpilogueBias) != 0;
  if (bias && o.bias == nullptr) return kInvalidValue;
  // FUSEJIT_EMULATOR_CUBLASLT_RELU=fmax: a relu that turns NaN into 0, as
  // an fmax-style max(x, 0) on a GPU may, so that the tests can show
  // fusejit's probe (runtime/cublaslt_conformance.h) noticing it.
  const char* relu_env = std::getenv("FUSEJIT_EMULATOR_CUBLASLT_RELU");
  const bool fmax_relu = relu_env != nullptr && std::string_view(relu_env) == "fmax";
  std::lock_guard lock(fusejit::emulator::driver_mutex());
  if (Status s = fj_emulated_blas_operands_owned("cublasLtMatmul", {a, b, d, bias ? o.bias : d}); s != lt::kSuccess) {
    return s;
  }
  const std::string bad = fusejit::emulator::run_watched([&] {
    for (uint64_t j = 0; j < n; ++j) {
      for (uint64_t i = 0; i < m; ++i) {
        float acc = 0;
        for (uint64_t p = 0; p < k; ++p) {
          acc += fj_emulated_blas_load(a, la.type, i + p * la.ld) * fj_emulated_blas_load(b, lb.type, p + j * lb.ld);
        }
        float v = alpha_f * acc;
        if (bias) v += fj_emulated_blas_load(o.bias, ld.type, i);
        if (o.epilogue & lt::kEpilogueRelu) v = v > 0 ? v : (v == v || fmax_relu ? 0.0f : v);
        if (o.epilogue & lt::kEpilogueGelu) {
          v = 0.5f * v * (1.0f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
        }
        fj_emulated_blas_store(d, ld.type, i + j * ld.ld, v);
      }
    }
  });
  if (!bad.empty()) {
    std::fprintf(stderr, "fusejit CUDA emulator: cublasLtMatmul made %s\n", bad.c_str());
    return kExecutionFailed;
  }
  return lt::kSuccess;
}

const char* cublasLtGetStatusName(Status status) {
  switch (status) {
    case lt::kSuccess: return "CUBLAS_STATUS_SUCCESS";
    case kNotInitialized: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case kInvalidValue: return "CUBLAS_STATUS_INVALID_VALUE";
    case lt::kNotSupported: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case kExecutionFailed: return "CUBLAS_STATUS_EXECUTION_FAILED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasLtGetStatusString(Status status) {
  if (status == lt::kNotSupported) return "the CUDA emulator's cuBLASLt takes only what fusejit asks for";
  if (status == kExecutionFailed) return "a write outside an allocation (described on stderr)";
  return "emulated cuBLASLt";
}

}  // extern "C"
