#include "runtime/cuda_backend_matmul.h"

#include <algorithm>

#include <fmt/format.h>

#include "codegen/cuda/cuda_emitter.h"
#include "codegen/kernel_names.h"
#include "fusion/matmul_epilogue.h"
#include "ir/error.h"
#include "runtime/cublaslt_conformance.h"
#include "runtime/cuda_backend_launch.h"
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
  if (kernel.nodes.empty() || g.node(kernel.nodes[0]).op != Op::kMatmul) {
    return absl::InternalError(fmt::format("matmul kernel {} must start with a matmul node", kernel.name));
  }
  const MatmulEpilogue epilogue = matmul_epilogue(g, kernel);
  if (epilogue.empty() != (kernel.nodes.size() == 1)) {
    return absl::InternalError(fmt::format("matmul kernel {} holds nodes that are not an epilogue", kernel.name));
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
  step.summary_ = fmt::format("{} x {} -> {} (cublasGemmEx)", operand_text(a), operand_text(b), node.dtype);
  // Checked here, so that run time finds no extent cuBLAS cannot take.
  if (absl::StatusOr<cublas::ColumnMajorGemm> shape = cublas::row_major_gemm(step.m_, step.n_, step.k_); !shape.ok()) {
    return absl::InvalidArgumentError(fmt::format("kernel {}: {}", kernel.name, status_text(shape.status())));
  }
  if (absl::StatusOr<cublas::Handle> handle = gpu.cublas_handle(); !handle.ok()) {
    return absl::Status(handle.status().code(), fmt::format("kernel {} ({}) runs on cuBLAS: {}", kernel.name,
                                                            step.summary_, status_text(handle.status())));
  }
  if (!epilogue.empty()) {
    // The fusion pass gives an epilogue only to a matmul of one dtype.
    if (a.dtype != node.dtype || b.dtype != node.dtype) {
      return absl::InternalError(fmt::format("kernel {}: an epilogue on a matmul of {} and {}", kernel.name,
                                             operand_text(a), operand_text(b)));
    }
    const std::string what = describe_epilogue(g, epilogue);
    const cublaslt::EpilogueGemm::Operands operands{.a = step.a_,
                                                    .b = step.b_,
                                                    .bias = epilogue.bias >= 0 ? buffer(epilogue.bias) : 0,
                                                    .d = buffer(kernel.nodes.back())};
    // Why cuBLASLt does not run it, if it does not.
    std::string apart;
    const cublaslt::Activation activation = epilogue.activation == MatmulActivation::kRelu ? cublaslt::Activation::kRelu
                                            : epilogue.activation == MatmulActivation::kGeluTanh
                                                ? cublaslt::Activation::kGeluTanh
                                                : cublaslt::Activation::kNone;
    absl::StatusOr<cublaslt::Handle> lt = gpu.cublaslt_handle();
    const bool aligned = all_aligned({operands.a, operands.b, operands.d, operands.bias});
    // The probe only where its answer decides (cuBLASLt there, aligned).
    absl::StatusOr<std::string> differs = std::string();
    if (lt.ok() && aligned && activation != cublaslt::Activation::kNone) {
      differs = lt_activation_difference(gpu, node.dtype, activation, operands.bias != 0);
      // Out of memory is the GPU's state, and the fallback would meet it too.
      if (differs.status().code() == absl::StatusCode::kResourceExhausted) {
        return absl::Status(differs.status().code(), fmt::format("kernel {}: probing cuBLASLt's epilogue: {}",
                                                                 kernel.name, status_text(differs.status())));
      }
    }
    if (!lt.ok()) {
      apart = status_text(lt.status());
    } else if (!aligned) {
      apart = "a tensor is not 16-byte aligned";
    } else if (!differs.ok()) {
      apart = fmt::format("probing its epilogue failed: {}", status_text(differs.status()));
    } else if (!differs->empty()) {
      apart = *differs;
    } else {
      absl::StatusOr<cublaslt::EpilogueGemm> gemm = cublaslt::EpilogueGemm::create(
          *lt, step.type_, step.m_, step.n_, step.k_, activation, operands, CudaGpu::kLtWorkspaceBytes);
      if (gemm.ok() && gemm->workspace_bytes() > 0) {
        absl::StatusOr<cuda::DevicePtr> workspace = gpu.lt_workspace();
        if (workspace.ok()) {
          step.lt_workspace_ = *workspace;
        } else {  // no memory for the workspace: an algorithm that needs none
          gemm = cublaslt::EpilogueGemm::create(*lt, step.type_, step.m_, step.n_, step.k_, activation, operands, 0);
        }
      }
      if (gemm.ok()) {
        step.lt_.emplace(*std::move(gemm));
        step.executed_by_ = "cublasLt";
        step.summary_ = fmt::format("{} x {} -> {}, epilogue {} (cublasLtMatmul)", operand_text(a), operand_text(b),
                                    node.dtype, what);
        return step;
      }
      // Out of memory is the GPU's state, and the fallback would meet it
      // too; anything else cuBLASLt says (no algorithm; a value an older
      // cuBLASLt does not take) leaves the fallback, which needs only cuBLAS.
      if (gemm.status().code() == absl::StatusCode::kResourceExhausted) {
        return absl::Status(gemm.status().code(),
                            fmt::format("kernel {}: {}", kernel.name, status_text(gemm.status())));
      }
      apart = status_text(gemm.status());
    }
    if (absl::Status s = step.prepare_epilogue_kernel(gpu, plan, kernel, buffer); !s.ok()) return s;
    step.c_ = step.epilogue_->product.get();
    step.c_type_ = cublas::DataType::kF32;
    step.executed_by_ = "cublas+jit";
    step.summary_ = fmt::format(
        "{} x {} -> f32 (cublasGemmEx), then epilogue {} as generated kernel {}_epilogue, "
        "as cuBLASLt cannot run it here: {}",
        operand_text(a), operand_text(b), what, kernel.name, apart);
    return step;
  }
  step.c_ = buffer(kernel.nodes.front());
  step.c_type_ = step.type_;
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

absl::Status MatmulStep::prepare_epilogue_kernel(CudaGpu& gpu, const FusionPlan& plan, const Kernel& kernel,
                                                 const std::function<cuda::DevicePtr(int32_t)>& buffer) {
  const std::ptrdiff_t index = &kernel - plan.kernels.data();
  if (index < 0 || index >= std::ssize(plan.kernels)) {
    return absl::InternalError(fmt::format("matmul kernel {} is not a kernel of the {} plan", kernel.name, plan.label));
  }
  const Node& mm = plan.graph->node(kernel.nodes.front());
  EpilogueKernel e;
  const int64_t bytes = storage_bytes(DType::kF32, mm.shape);
  absl::StatusOr<DeviceBuffer> product = DeviceBuffer::allocate(
      static_cast<size_t>(bytes),
      fmt::format("the f32 product of kernel {} (f32{}, {} bytes)", kernel.name, mm.shape, bytes));
  if (!product.ok()) return product.status();
  e.product = *std::move(product);
  CudaMatmulEpilogue code = emit_cuda_matmul_epilogue(plan, static_cast<int>(index), CudaAccess::kVector);
  for (int32_t id : code.tensors) e.pointers.push_back(id == kernel.nodes.front() ? e.product.get() : buffer(id));
  // The variant for these buffers, as for the plan's own kernels.
  if (access_for(e.pointers) == CudaAccess::kScalar) {
    code = emit_cuda_matmul_epilogue(plan, static_cast<int>(index), CudaAccess::kScalar);
  }
  const CudaKernelSource& source = code.source;
  absl::StatusOr<CompiledKernel> compiled =
      compile_cuda(source.name, source.source, {.arch = gpu.arch()}, &KernelCache::global());
  if (!compiled.ok()) return compiled.status();
  absl::StatusOr<ModuleHandle> module = ModuleHandle::load(*compiled);
  if (!module.ok()) return module.status();
  e.module = *std::move(module);
  absl::StatusOr<cuda::Function> f = cuda::module_function(e.module.get(), source.name);
  if (!f.ok()) return f.status();
  e.function = *f;
  e.count = source.count;
  const LaunchConfig config = launch_config(source, gpu.info().sm_count, gpu.max_threads_per_sm());
  e.grid = config.grid;
  e.block = config.block;
  epilogue_ = std::move(e);
  return absl::OkStatus();
}

absl::Status MatmulStep::widen(CudaGpu& gpu, Widening& w) {
  cuda::DevicePtr out = w.widened.get();
  void* args[] = {&w.source, &out, &w.count};
  const int64_t blocks =
      std::clamp<int64_t>((w.count + kWidenThreads - 1) / kWidenThreads, 1, int64_t{gpu.info().sm_count} * 8);
  return cuda::launch_kernel(w.function, {.x = static_cast<unsigned>(blocks)}, {.x = kWidenThreads}, 0, nullptr, args);
}

absl::Status MatmulStep::launch(CudaGpu& gpu) {
  if (lt_) return lt_->run(lt_workspace_, summary_);
  for (std::optional<Widening>* w : {&widen_a_, &widen_b_}) {
    if (!w->has_value()) continue;
    if (absl::Status s = widen(gpu, **w); !s.ok()) return s;
  }
  absl::StatusOr<cublas::Handle> handle = gpu.cublas_handle();
  if (!handle.ok()) return handle.status();
  if (absl::Status s = cublas::gemm_row_major(*handle, type_, c_type_, m_, n_, k_, a_, b_, c_, summary_); !s.ok()) {
    return s;
  }
  if (!epilogue_) return absl::OkStatus();
  std::vector<void*> args;
  for (cuda::DevicePtr& p : epilogue_->pointers) args.push_back(&p);
  args.push_back(&epilogue_->count);
  return cuda::launch_kernel(epilogue_->function, epilogue_->grid, epilogue_->block, 0, nullptr, args.data());
}

}  // namespace fusejit::cuda_backend
