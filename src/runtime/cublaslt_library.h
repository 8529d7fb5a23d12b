// cuBLASLt, loaded with dlopen the first time a plan runs a matmul with an
// epilogue on the GPU (fusion/matmul_epilogue.h): cublasLtMatmul adds the
// bias and applies relu or the tanh GeLU to the product before it stores
// it, which plain cuBLAS cannot. As with cuBLAS (cublas_library.h), no
// toolkit header is needed: the few entry points are declared in
// cublaslt_abi.h and checked against cublasLt.h where the toolkit is.
// Internal to src/runtime/; the CUDA backend's matmul step is its user.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include "runtime/cublas_library.h"
#include "runtime/cublaslt_abi.h"
#include "runtime/cuda_driver.h"

namespace fusejit::cublaslt {

using Handle = lt_abi::Handle;

// OK when cuBLASLt loaded; otherwise NotFound naming every library tried.
absl::Status library_status();
// A cuBLASLt handle, tied to the device current when it was created: use
// and destroy it with that device's context current.
absl::StatusOr<Handle> create_handle();
absl::Status destroy_handle(Handle handle);

// The cuBLASLt epilogue for a bias (or none) and an activation.
enum class Activation : uint8_t { kNone, kRelu, kGeluTanh };
uint32_t epilogue_code(bool bias, Activation activation);

// The largest power of two up to 256 that divides `address`: what
// cuBLASLt's MIN_ALIGNMENT preferences are told, so that its heuristic
// offers only algorithms that may load from there.
uint32_t alignment_of(cuda::DevicePtr address);

// A row-major D[m, n] = activation(A[m, k] · B[k, n] + bias[n]), every
// tensor of one `type`, f32 accumulation, with its descriptors and the
// algorithm cuBLASLt's heuristic chose for these addresses, made once and
// run many times. As cublas::row_major_gemm explains, cuBLASLt computes
// the column-major transpose: Dᵀ[n, m] = Bᵀ · Aᵀ, whose rows are our
// columns, so the bias (one value per row of Dᵀ) is our [n] vector.
class EpilogueGemm {
 public:
  struct Operands {
    cuda::DevicePtr a = 0;
    cuda::DevicePtr b = 0;
    cuda::DevicePtr bias = 0;  // 0: no bias
    cuda::DevicePtr d = 0;
  };
  // Unimplemented when the heuristic offers no algorithm for this
  // problem (the caller then runs cuBLAS and a generated epilogue).
  static absl::StatusOr<EpilogueGemm> create(Handle handle, cublas::DataType type, int64_t m, int64_t n, int64_t k,
                                             Activation activation, const Operands& operands,
                                             uint64_t max_workspace_bytes);
  EpilogueGemm(EpilogueGemm&& other) noexcept;
  EpilogueGemm& operator=(EpilogueGemm&& other) noexcept;
  EpilogueGemm(const EpilogueGemm&) = delete;
  EpilogueGemm& operator=(const EpilogueGemm&) = delete;
  ~EpilogueGemm();

  // The workspace the chosen algorithm needs (at most the maximum asked for).
  uint64_t workspace_bytes() const { return workspace_bytes_; }
  // Enqueues the product on the default stream, with `workspace` of at
  // least workspace_bytes(). Errors name cuBLASLt's status and `what`.
  absl::Status run(cuda::DevicePtr workspace, std::string_view what) const;

 private:
  EpilogueGemm() = default;
  void release();

  Handle handle_ = nullptr;
  lt_abi::Descriptor op_ = nullptr;
  lt_abi::Descriptor a_layout_ = nullptr;  // cuBLASLt's A: our B
  lt_abi::Descriptor b_layout_ = nullptr;  // cuBLASLt's B: our A
  lt_abi::Descriptor d_layout_ = nullptr;
  lt_abi::Algo algo_{};
  uint64_t workspace_bytes_ = 0;
  Operands operands_;
};

}  // namespace fusejit::cublaslt
