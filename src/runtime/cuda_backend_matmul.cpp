#include "runtime/cuda_backend_matmul.h"

#include <algorithm>

#include <fmt/format.h>

#include "ir/error.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/tensor_storage.h"

namespace fusejit::cuda_backend {
namespace {

// 16-bit floats to f32, exactly: bf16 is the top half of an f32; f16 goes
// through the PTX conversion, so that no toolkit header is needed.
constexpr const char* kWidenSource = R"(// fusejit: operands of a mixed-dtype matmul, widened to f32 for cuBLAS.
extern "C" __global__ void fj_widen_bf16(const unsigned short* __restrict__ in, float* __restrict__ out, long long n) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    out[i] = __uint_as_float((unsigned)in[i] << 16);
}
extern "C" __global__ void fj_widen_f16(const unsigned short* __restrict__ in, float* __restrict__ out, long long n) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    float f;
#ifdef __CUDA_ARCH__
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(in[i]));
#else  // the tests' CUDA emulator
    _Float16 half;
    __builtin_memcpy(&half, &in[i], 2);
    f = half;
#endif
    out[i] = f;
  }
}
)";

constexpr int kWidenThreads = 256;

std::string operand_text(const Node& n) { return fmt::format("{}{}", n.dtype, n.shape); }

}  // namespace

std::string_view widen_kernels_source() { return kWidenSource; }

absl::StatusOr<MatmulStep> MatmulStep::prepare(CudaGpu& gpu, const FusionPlan& plan, const Kernel& kernel,
                                               const std::function<cuda::DevicePtr(int32_t)>& buffer) {
  const Graph& g = *plan.graph;
  if (kernel.nodes.size() != 1 || g.node(kernel.nodes[0]).op != Op::kMatmul) {
    return absl::InternalError(fmt::format("matmul kernel {} must hold exactly one matmul node", kernel.name));
  }
  const Node& node = g.node(kernel.nodes[0]);
  const Node& a = g.node(node.operands[0].node);
  const Node& b = g.node(node.operands[1].node);
  MatmulStep step;
  step.name_ = kernel.name;
  step.k_ = a.shape.last();
  step.m_ = a.shape.numel() / step.k_;  // [..., M, K]: the leading extents are rows too
  step.n_ = b.shape[1];
  step.type_ = cublas::data_type(node.dtype);
  step.a_ = buffer(node.operands[0].node);
  step.b_ = buffer(node.operands[1].node);
  step.c_ = buffer(kernel.nodes[0]);
  step.summary_ = fmt::format("{} x {} -> {} (cublasGemmEx)", operand_text(a), operand_text(b), node.dtype);
  // Checked here, so that run time finds no extent cuBLAS cannot take.
  if (absl::StatusOr<cublas::ColumnMajorGemm> shape = cublas::row_major_gemm(step.m_, step.n_, step.k_); !shape.ok()) {
    return absl::InvalidArgumentError(fmt::format("kernel {}: {}", kernel.name, status_text(shape.status())));
  }
  if (absl::StatusOr<cublas::Handle> handle = gpu.cublas_handle(); !handle.ok()) {
    return absl::Status(handle.status().code(), fmt::format("kernel {} ({}) runs on cuBLAS: {}", kernel.name,
                                                            step.summary_, status_text(handle.status())));
  }
  if (a.dtype == node.dtype && b.dtype == node.dtype) return step;

  // Mixed operand dtypes: the result is f32 (the promotion of two different
  // float types), and each 16-bit operand is widened into a scratch buffer.
  if (node.dtype != DType::kF32) {
    return absl::InternalError(fmt::format("kernel {}: operands {} and {} give {}, expected f32", kernel.name,
                                           operand_text(a), operand_text(b), node.dtype));
  }
  absl::StatusOr<CompiledKernel> compiled =
      compile_cuda("fj_widen", kWidenSource, {.arch = gpu.arch()}, &KernelCache::global());
  if (!compiled.ok()) return compiled.status();
  absl::StatusOr<ModuleHandle> module = ModuleHandle::load(*compiled);
  if (!module.ok()) return module.status();
  step.widen_module_ = *std::move(module);
  for (const auto& [operand, target, widened] :
       {std::tuple{&a, &step.a_, &step.widen_a_}, std::tuple{&b, &step.b_, &step.widen_b_}}) {
    if (operand->dtype == DType::kF32) continue;
    const std::string function = operand->dtype == DType::kBF16 ? "fj_widen_bf16" : "fj_widen_f16";
    absl::StatusOr<cuda::Function> f = cuda::module_function(step.widen_module_.get(), function);
    if (!f.ok()) return f.status();
    const int64_t bytes = storage_bytes(DType::kF32, operand->shape);
    absl::StatusOr<DeviceBuffer> scratch =
        DeviceBuffer::allocate(bytes, fmt::format("{} widened to f32 for kernel {} (f32{}, {} bytes)", operand->name,
                                                  kernel.name, operand->shape, bytes));
    if (!scratch.ok()) return scratch.status();
    Widening w;
    w.function = *f;
    w.source = *target;
    w.count = operand->shape.numel();
    *target = scratch->get();
    w.widened = *std::move(scratch);
    *widened = std::move(w);
  }
  return step;
}

absl::Status MatmulStep::widen(CudaGpu& gpu, Widening& w) {
  cuda::DevicePtr out = w.widened.get();
  void* args[] = {&w.source, &out, &w.count};
  const int64_t blocks =
      std::clamp<int64_t>((w.count + kWidenThreads - 1) / kWidenThreads, 1, int64_t{gpu.info().sm_count} * 8);
  return cuda::launch_kernel(w.function, {.x = static_cast<unsigned>(blocks)}, {.x = kWidenThreads}, 0, nullptr, args);
}

absl::Status MatmulStep::launch(CudaGpu& gpu) {
  for (std::optional<Widening>* w : {&widen_a_, &widen_b_}) {
    if (!w->has_value()) continue;
    if (absl::Status s = widen(gpu, **w); !s.ok()) return s;
  }
  absl::StatusOr<cublas::Handle> handle = gpu.cublas_handle();
  if (!handle.ok()) return handle.status();
  return cublas::gemm_row_major(*handle, type_, m_, n_, k_, a_, b_, c_, summary_);
}

}  // namespace fusejit::cuda_backend
