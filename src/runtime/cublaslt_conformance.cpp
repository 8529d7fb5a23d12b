#include "runtime/cublaslt_conformance.h"

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "ir/compare.h"
#include "ir/host_tensor.h"
#include "ir/op_table.h"
#include "runtime/cuda_backend_resources.h"
#include "runtime/tensor_storage.h"

namespace fusejit::cuda_backend {
namespace {

constexpr int64_t kExtent = 64;  // m = n = k: a shape every cuBLASLt algorithm family takes

// The activation's inputs: the values where implementations differ (NaN,
// infinities; finite values whose cube, in the tanh form of GeLU,
// overflows float32, where a tanh built from exp gives inf / inf), and
// finite ones on both sides of 0. Each is rounded to the dtype first.
std::vector<double> probe_values(DType dtype) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> v = {std::numeric_limits<double>::quiet_NaN(),
                           inf,
                           -inf,
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
  const std::vector<double> large =
      dtype == DType::kF16 ? std::vector<double>{60000, -60000} : std::vector<double>{1e20, -1e20, 3e38, -3e38};
  v.insert(v.end(), large.begin(), large.end());
  for (double& x : v) x = round_to_dtype(x, dtype);
  return v;
}

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

absl::StatusOr<std::string> probe(CudaGpu& gpu, DType dtype, cublaslt::Activation activation, bool bias) {
  absl::StatusOr<cuda::ContextScope> context = gpu.enter();
  if (!context.ok()) return context.status();
  // Every product is exact, whatever order or precision cuBLASLt sums in:
  // with a bias, A is zero and B one, so that the activation sees 0 + the
  // bias of its column; without, A's first column holds the values (the
  // rest is zero) and B is one, so that row i's products sum to A[i, 0]
  // (inf x 1 and NaN x 1 included).
  const std::vector<double> values = probe_values(dtype);
  const auto value_of = [&](int64_t i) { return values[static_cast<size_t>(i) % values.size()]; };
  HostTensor a{dtype, Shape{kExtent, kExtent}, std::vector<double>(kExtent * kExtent, 0.0)};
  HostTensor b{dtype, Shape{kExtent, kExtent}, std::vector<double>(kExtent * kExtent, 1.0)};
  HostTensor bias_values{dtype, Shape{kExtent}, {}};
  for (int64_t i = 0; i < kExtent; ++i) {
    if (bias) {
      bias_values.values.push_back(value_of(i));
    } else {
      a.values[i * kExtent] = value_of(i);
    }
  }
  const auto input_of = [&](int64_t row, int64_t column) { return bias ? value_of(column) : value_of(row); };
  const Shape d_shape{kExtent, kExtent};
  absl::StatusOr<DeviceBuffer> a_buffer = upload(a, "the cuBLASLt epilogue probe's A");
  if (!a_buffer.ok()) return a_buffer.status();
  absl::StatusOr<DeviceBuffer> b_buffer = upload(b, "the cuBLASLt epilogue probe's B");
  if (!b_buffer.ok()) return b_buffer.status();
  std::optional<DeviceBuffer> bias_buffer;
  if (bias) {
    absl::StatusOr<DeviceBuffer> uploaded = upload(bias_values, "the cuBLASLt epilogue probe's bias");
    if (!uploaded.ok()) return uploaded.status();
    bias_buffer = *std::move(uploaded);
  }
  const size_t d_bytes = static_cast<size_t>(storage_bytes(dtype, d_shape));
  absl::StatusOr<DeviceBuffer> d_buffer = DeviceBuffer::allocate(d_bytes, "the cuBLASLt epilogue probe's result");
  if (!d_buffer.ok()) return d_buffer.status();

  absl::StatusOr<cublaslt::Handle> lt = gpu.cublaslt_handle();
  if (!lt.ok()) return lt.status();
  const cublaslt::EpilogueGemm::Operands operands{
      .a = a_buffer->get(), .b = b_buffer->get(), .bias = bias_buffer ? bias_buffer->get() : 0, .d = d_buffer->get()};
  // No workspace: the probe should not be what allocates the shared one.
  absl::StatusOr<cublaslt::EpilogueGemm> gemm =
      cublaslt::EpilogueGemm::create(*lt, cublas::data_type(dtype), kExtent, kExtent, kExtent, activation, operands, 0);
  if (!gemm.ok()) return gemm.status();
  if (absl::Status s = gemm->run(0, "the cuBLASLt epilogue probe"); !s.ok()) return s;
  std::vector<unsigned char> bytes(d_bytes);
  if (absl::Status s = cuda::memcpy_dtoh(bytes.data(), d_buffer->get(), d_bytes); !s.ok()) return s;
  const HostTensor d = decode_storage(dtype, d_shape, bytes.data());

  for (int64_t i = 0; i < kExtent; ++i) {
    for (int64_t j = 0; j < kExtent; ++j) {
      const double x = input_of(i, j);
      const double got = d.values[i * kExtent + j];
      const double expected = fusejit_activation(activation, x);
      if (agrees(got, expected, dtype)) continue;
      return fmt::format("cuBLASLt's {} epilogue{} gives {} for {} in {}, fusejit's {} {}", activation_name(activation),
                         bias ? " with a bias" : "", value_text(got), value_text(x), dtype, activation_name(activation),
                         value_text(expected));
    }
  }
  return std::string();
}

}  // namespace

absl::StatusOr<std::string> lt_activation_difference(CudaGpu& gpu, DType dtype, cublaslt::Activation activation,
                                                     bool bias) {
  return gpu.lt_activation_difference(dtype, activation, bias, [&] { return probe(gpu, dtype, activation, bias); });
}

}  // namespace fusejit::cuda_backend
