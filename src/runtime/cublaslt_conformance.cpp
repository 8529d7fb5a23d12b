#include "runtime/cublaslt_conformance.h"

#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "ir/compare.h"
#include "ir/error.h"
#include "ir/host_tensor.h"
#include "ir/op_table.h"
#include "runtime/cuda_backend_resources.h"
#include "runtime/tensor_storage.h"

namespace fusejit::cuda_backend {
namespace {

constexpr int64_t kExtent = 64;  // m = n = k: a shape every cuBLASLt algorithm family takes

// The activation's inputs, one per column of the product (cycled): the
// values where implementations differ, and finite ones on both sides of 0,
// all exact in every dtype.
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::array<double, 16> kProbeValues = {std::numeric_limits<double>::quiet_NaN(),
                                                 kInf,
                                                 -kInf,
                                                 -5,
                                                 -3,
                                                 -1.5,
                                                 -0.75,
                                                 -0.25,
                                                 -0.0625,
                                                 0.0625,
                                                 0.25,
                                                 0.5,
                                                 0.75,
                                                 1.5,
                                                 3,
                                                 5};

std::string_view activation_name(cublaslt::Activation activation) {
  switch (activation) {
    case cublaslt::Activation::kRelu: return "relu";
    case cublaslt::Activation::kGeluTanh: return "gelu (tanh)";
    case cublaslt::Activation::kNone: break;
  }
  return "identity";
}

double fusejit_activation(cublaslt::Activation activation, double x) {
  switch (activation) {
    case cublaslt::Activation::kRelu: return reference::relu(x);
    case cublaslt::Activation::kGeluTanh: return reference::gelu(x, "tanh");
    case cublaslt::Activation::kNone: break;
  }
  return x;
}

std::string value_text(double v) { return std::isnan(v) ? "NaN" : fmt::format("{}", v); }

// Whether `got` (a dtype value) is what fusejit gives for `expected`.
bool agrees(double got, double expected, DType dtype) {
  if (std::isnan(expected) || std::isnan(got)) return std::isnan(expected) && std::isnan(got);
  if (std::isinf(expected) || std::isinf(got)) return got == expected;
  return std::abs(got - expected) <= tolerance(dtype) * std::max(1.0, std::abs(expected));
}

absl::StatusOr<DeviceBuffer> upload(const HostTensor& t, std::string_view what) {
  std::vector<unsigned char> bytes(static_cast<size_t>(storage_bytes(t.dtype, t.shape)));
  encode_storage(t, bytes.data());
  absl::StatusOr<DeviceBuffer> buffer = DeviceBuffer::allocate(bytes.size(), what);
  if (!buffer.ok()) return buffer.status();
  if (absl::Status s = cuda::memcpy_htod(buffer->get(), bytes.data(), bytes.size()); !s.ok()) return s;
  return buffer;
}

absl::StatusOr<std::string> probe(CudaGpu& gpu, DType dtype, cublaslt::Activation activation) {
  // A is zero and B one, so that every product is exactly 0 and the
  // activation sees the bias alone (an exact 0 + x), whatever order or
  // precision cuBLASLt sums in.
  HostTensor a{dtype, Shape{kExtent, kExtent}, std::vector<double>(kExtent * kExtent, 0.0)};
  HostTensor b{dtype, Shape{kExtent, kExtent}, std::vector<double>(kExtent * kExtent, 1.0)};
  HostTensor bias{dtype, Shape{kExtent}, {}};
  for (int64_t j = 0; j < kExtent; ++j) bias.values.push_back(kProbeValues[j % kProbeValues.size()]);
  const Shape d_shape{kExtent, kExtent};
  absl::StatusOr<DeviceBuffer> a_buffer = upload(a, "the cuBLASLt epilogue probe's A");
  if (!a_buffer.ok()) return a_buffer.status();
  absl::StatusOr<DeviceBuffer> b_buffer = upload(b, "the cuBLASLt epilogue probe's B");
  if (!b_buffer.ok()) return b_buffer.status();
  absl::StatusOr<DeviceBuffer> bias_buffer = upload(bias, "the cuBLASLt epilogue probe's bias");
  if (!bias_buffer.ok()) return bias_buffer.status();
  const size_t d_bytes = static_cast<size_t>(storage_bytes(dtype, d_shape));
  absl::StatusOr<DeviceBuffer> d_buffer = DeviceBuffer::allocate(d_bytes, "the cuBLASLt epilogue probe's result");
  if (!d_buffer.ok()) return d_buffer.status();

  absl::StatusOr<cublaslt::Handle> lt = gpu.cublaslt_handle();
  if (!lt.ok()) return lt.status();
  const cublaslt::EpilogueGemm::Operands operands{
      .a = a_buffer->get(), .b = b_buffer->get(), .bias = bias_buffer->get(), .d = d_buffer->get()};
  absl::StatusOr<cublaslt::EpilogueGemm> gemm = cublaslt::EpilogueGemm::create(
      *lt, cublas::data_type(dtype), kExtent, kExtent, kExtent, activation, operands, CudaGpu::kLtWorkspaceBytes);
  if (!gemm.ok()) return gemm.status();
  cuda::DevicePtr workspace = 0;
  if (gemm->workspace_bytes() > 0) {
    absl::StatusOr<cuda::DevicePtr> shared = gpu.lt_workspace();
    if (!shared.ok()) return shared.status();
    workspace = *shared;
  }
  if (absl::Status s = gemm->run(workspace, "the cuBLASLt epilogue probe"); !s.ok()) return s;
  std::vector<unsigned char> bytes(d_bytes);
  if (absl::Status s = cuda::memcpy_dtoh(bytes.data(), d_buffer->get(), d_bytes); !s.ok()) return s;
  const HostTensor d = decode_storage(dtype, d_shape, bytes.data());

  for (int64_t i = 0; i < kExtent; ++i) {
    for (int64_t j = 0; j < kExtent; ++j) {
      const double x = bias.values[j];
      const double got = d.values[i * kExtent + j];
      const double expected = fusejit_activation(activation, x);
      if (agrees(got, expected, dtype)) continue;
      return fmt::format("cuBLASLt's {} epilogue gives {} for {} in {}, fusejit's {} {}", activation_name(activation),
                         value_text(got), value_text(x), dtype, activation_name(activation), value_text(expected));
    }
  }
  return std::string();
}

}  // namespace

absl::StatusOr<std::string> lt_activation_difference(CudaGpu& gpu, DType dtype, cublaslt::Activation activation) {
  return gpu.lt_activation_difference(dtype, activation, [&] { return probe(gpu, dtype, activation); });
}

}  // namespace fusejit::cuda_backend
