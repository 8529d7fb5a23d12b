// The CUDA backend. Without a GPU: that it says why it cannot run, the
// launch arithmetic, the device description and the cuBLAS row-major
// mapping. With a GPU (suite GpuBackend, which scripts/gpu-check.sh runs):
// every example and many shapes in every dtype, fused and unfused, against
// the reference interpreter; odd and misaligned shapes; re-reading row
// kernels; dropout bit for bit; matmul through cuBLAS; timing.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fusejit.h"
#include "fusion/gelu_dropout.h"
#include "ir/messages.h"
#include "runtime/cublas_library.h"
#include "runtime/cublaslt_conformance.h"
#include "runtime/cuda_backend_launch.h"
#include "runtime/cuda_backend_matmul.h"
#include "runtime/cuda_backend_resources.h"
#include "runtime/cuda_driver.h"
#include "runtime/runtime_test_util.h"
#include "support/example_graphs.h"
#include "support/graph_variants.h"
#include "support/loaded_plan_checks.h"
#include "support/requirements.h"
#include "support/run_command.h"

namespace fusejit {
namespace {

using cuda_backend::access_for;
using cuda_backend::all_aligned;
using cuda_backend::device_spec_for;
using cuda_backend::launch_config;
using cuda_backend::LaunchConfig;
using testing::example_graph_dir;
using testing::example_graph_files;
using testing::parse_file_or_throw;
using testing::parse_or_throw;

// ---- Everywhere ----

TEST(CudaBackend, WithoutADriverSaysWhy) {
  const absl::Status driver = cuda_driver_status();
  if (driver.ok()) GTEST_SKIP() << "this machine has a CUDA driver and a GPU";
  absl::StatusOr<std::unique_ptr<Backend>> backend = make_cuda_backend();
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status(), driver);
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(status_text(backend.status()).starts_with("no CUDA")) << backend.status();
  absl::StatusOr<std::unique_ptr<Backend>> by_name = make_backend("cuda");
  ASSERT_FALSE(by_name.ok());
  EXPECT_EQ(by_name.status(), driver);
}

CudaKernelSource kernel_meta(CudaVariant variant, int64_t count, int block_threads, int rows_per_block = 1,
                             int vector_width = 1, CudaAccess access = CudaAccess::kScalar) {
  CudaKernelSource k;
  k.variant = variant;
  k.count = count;
  k.block_threads = block_threads;
  k.rows_per_block = rows_per_block;
  k.vector_width = vector_width;
  k.has_vector_path = access == CudaAccess::kVector;
  k.access = access;
  return k;
}

TEST(CudaBackendLaunch, PointwiseGridCoversVectorGroupsOrElementsUpToOneWave) {
  const CudaKernelSource k = kernel_meta(CudaVariant::kPointwise, 8 * 1000, 256, 1, 8, CudaAccess::kVector);
  LaunchConfig vec = launch_config(k, 132, 2048);
  EXPECT_EQ(vec.block.x, 256u);
  EXPECT_EQ(vec.block.y, 1u);
  EXPECT_EQ(vec.grid.x, 4u);  // 1000 groups of 8 / 256 threads
  CudaKernelSource scalar = k;
  scalar.access = CudaAccess::kScalar;
  EXPECT_EQ(launch_config(scalar, 132, 2048).grid.x, 32u);  // 8000 elements / 256
  // A big tensor: one wave of 8 blocks of 256 threads per SM, then grid-stride.
  const CudaKernelSource big =
      kernel_meta(CudaVariant::kPointwise, int64_t{1} << 33, 256, 1, 8, CudaAccess::kVector);
  EXPECT_EQ(launch_config(big, 132, 2048).grid.x, 132u * 8);
  // Never an empty grid.
  EXPECT_EQ(launch_config(kernel_meta(CudaVariant::kPointwise, 1, 256), 132, 2048).grid.x, 1u);
}

TEST(CudaBackendLaunch, RowGridsFollowTheVariant) {
  LaunchConfig warp = launch_config(kernel_meta(CudaVariant::kWarpPerRow, 37, 32, 4), 132, 2048);
  EXPECT_EQ(warp.block.x, 32u);
  EXPECT_EQ(warp.block.y, 4u);
  EXPECT_EQ(warp.grid.x, 10u);  // ceil(37 / 4)
  LaunchConfig block =
      launch_config(kernel_meta(CudaVariant::kBlockPerRow, 8192, 512, 1, 8, CudaAccess::kVector), 132, 2048);
  EXPECT_EQ(block.block.x, 512u);
  EXPECT_EQ(block.block.y, 1u);
  EXPECT_EQ(block.grid.x, 132u * 4);  // capped at one wave, then grid-stride over rows
  // Registers that fit only 2 blocks per SM make the wave 2 blocks per SM.
  EXPECT_EQ(
      launch_config(kernel_meta(CudaVariant::kBlockPerRow, 8192, 512, 1, 8, CudaAccess::kVector), 132, 2048, 2).grid.x,
      132u * 2);
  EXPECT_EQ(
      launch_config(kernel_meta(CudaVariant::kBlockPerRow, 8192, 512, 1, 8, CudaAccess::kVector), 132, 2048, 9).grid.x,
      132u * 4);  // the thread limit still holds
  LaunchConfig reread = launch_config(kernel_meta(CudaVariant::kReread, 3, 1024), 132, 2048);
  EXPECT_EQ(reread.block.x, 1024u);
  EXPECT_EQ(reread.grid.x, 3u);
}

// Replays the generated kernels' loops (src/codegen/cuda/pointwise.cpp,
// row.cpp) over the launch_config grid: every element or row is visited
// exactly once, for the kernels the emitter makes for odd and even shapes.
std::vector<int> visits(const CudaKernelSource& k, const LaunchConfig& c) {
  std::vector<int> seen(static_cast<size_t>(k.count), 0);
  for (int64_t bx = 0; bx < c.grid.x; ++bx) {
    for (int64_t ty = 0; ty < c.block.y; ++ty) {
      for (int64_t tx = 0; tx < c.block.x; ++tx) {
        if (k.variant == CudaVariant::kPointwise) {
          const int64_t stride = int64_t{c.grid.x} * c.block.x;
          const int64_t first = bx * c.block.x + tx;
          if (k.access == CudaAccess::kVector) {
            for (int64_t g = first; g < k.count / k.vector_width; g += stride) {
              for (int e = 0; e < k.vector_width; ++e) ++seen[g * k.vector_width + e];
            }
          } else {
            for (int64_t i = first; i < k.count; i += stride) ++seen[i];
          }
        } else if (tx == 0) {  // a row is handled by a warp or block; count it once
          const int64_t step = k.variant == CudaVariant::kWarpPerRow ? int64_t{c.grid.x} * c.block.y : c.grid.x;
          const int64_t first = k.variant == CudaVariant::kWarpPerRow ? bx * c.block.y + ty : bx;
          for (int64_t row = first; row < k.count; row += step) ++seen[row];
        }
      }
    }
  }
  return seen;
}

TEST(CudaBackendLaunch, EveryElementAndRowIsVisitedOnce) {
  const char* kGraphs[] = {
      "input x: bf16[37, {n}]\ninput b: bf16[{n}]\nh = add(x, b)\ny = gelu(h)\noutput y\n",
      "input x: f32[37, {n}]\ninput g: f32[{n}]\ninput b: f32[{n}]\ny = layer_norm(x, g, b)\noutput y\n",
      "input x: bf16[37, {n}]\ny = softmax(x)\noutput y\n",
  };
  for (int64_t n : {1, 3, 8, 1000, 1024, 4097, 20000}) {
    for (const char* text : kGraphs) {
      const std::string source = fmt::format(fmt::runtime(text), fmt::arg("n", n));
      const Graph g = parse_or_throw(source);
      for (const FusionPlan& plan : {make_unfused_plan(g), make_fused_plan(g)}) {
        for (CudaAccess access : {CudaAccess::kScalar, CudaAccess::kVector}) {
          for (const CudaKernelSource& k : emit_cuda(plan, access)) {
            // A small GPU, so that the grid-stride loops take several steps.
            const std::vector<int> seen = visits(k, launch_config(k, 2, 1024));
            ASSERT_TRUE(std::all_of(seen.begin(), seen.end(), [](int v) { return v == 1; }))
                << k.name << " (" << cuda_variant_name(k.variant) << ", " << cuda_access_name(k.access) << ") of\n"
                << source;
          }
        }
      }
    }
  }
}

TEST(CudaBackendLaunch, AlignmentIsOfEveryPointer) {
  EXPECT_TRUE(all_aligned({}));
  EXPECT_TRUE(all_aligned({0x7f0000000000ull, 0x7f0000000010ull}));
  EXPECT_FALSE(all_aligned({0x7f0000000000ull, 0x7f0000000004ull}));
  EXPECT_FALSE(all_aligned({0x7f0000000008ull}));
  EXPECT_EQ(access_for({0x7f0000000000ull, 0x7f0000000010ull}), CudaAccess::kVector);
  EXPECT_EQ(access_for({0x7f0000000000ull, 0x7f0000000004ull}), CudaAccess::kScalar);
}

// The two variants of a kernel with a vector path differ in their accesses
// only: distinct entry points (so a plan program holds both), the same
// arguments, and no 16-byte access at all in the scalar one.
TEST(CudaBackendKernels, ScalarVariantHasNoVectorAccesses) {
  FUSEJIT_REQUIRE_NVRTC();
  const FusionPlan plan = make_fused_plan(parse_or_throw(
      "input x: bf16[8, 64]\ninput b: bf16[64]\nh = add(x, b)\ny = layer_norm(h)\nz = gelu(h)\noutput y\noutput z\n"));
  const std::vector<CudaKernelSource> vector = emit_cuda(plan), scalar = emit_cuda(plan, CudaAccess::kScalar);
  ASSERT_EQ(vector.size(), scalar.size());
  for (size_t i = 0; i < vector.size(); ++i) {
    ASSERT_TRUE(vector[i].has_vector_path);
    EXPECT_EQ(vector[i].access, CudaAccess::kVector);
    EXPECT_EQ(scalar[i].access, CudaAccess::kScalar);
    EXPECT_EQ(scalar[i].name, vector[i].name + "_scalar");
    EXPECT_EQ(scalar[i].params.size(), vector[i].params.size());
    for (const CudaKernelSource* k : {&vector[i], &scalar[i]}) {
      absl::StatusOr<CompiledKernel> c = compile_cuda(k->name, k->source, {.arch = "sm_90"}, nullptr);
      ASSERT_TRUE(c.ok()) << c.status();
      EXPECT_TRUE(testing::contains(c->ptx, ".entry " + k->name + "(")) << k->name;
      EXPECT_EQ(testing::contains(c->ptx, ".v4."), k->access == CudaAccess::kVector) << k->name << "\n" << c->ptx;
    }
  }
  // Without a vector path (63 bf16 columns are not a whole number of 8-wide
  // groups) there is one variant, whatever is asked.
  const FusionPlan odd = make_fused_plan(parse_or_throw("input x: bf16[8, 63]\ny = gelu(x)\noutput y\n"));
  const CudaKernelSource k = emit_cuda(odd)[0];
  EXPECT_FALSE(k.has_vector_path);
  EXPECT_EQ(k.access, CudaAccess::kScalar);
  EXPECT_EQ(k.name, odd.kernels[0].name);
}

GpuInfo fake_gpu(std::string name, int cc_major, int cc_minor, int sms, double bandwidth_gbps, int64_t l2) {
  GpuInfo g;
  g.name = std::move(name);
  g.cc_major = cc_major;
  g.cc_minor = cc_minor;
  g.sm_count = sms;
  g.bandwidth_gbps = bandwidth_gbps;
  g.l2_bytes = l2;
  return g;
}

// The one line a GPU is named by (backend description, `fusejit devices`,
// the cost model's device): its number only where it is not the default GPU.
TEST(CudaBackendDevice, SummaryNamesTheGpuItsArchitectureAndSms) {
  const GpuInfo gpu = fake_gpu("NVIDIA H200", 9, 0, 132, 4800.5, 60 << 20);
  EXPECT_EQ(gpu.summary(), "NVIDIA H200 (sm_90, 132 SMs)");
  EXPECT_EQ(gpu.summary(2), "NVIDIA H200 (GPU 2, sm_90, 132 SMs)");
}

TEST(CudaBackendDevice, DatasheetGpusTakeSmsL2AndPlausibleBandwidthFromTheDriver) {
  const DeviceSpec h200 = device_spec_for(fake_gpu("NVIDIA H200", 9, 0, 132, 4800.5, 60 << 20), 1980000);
  EXPECT_EQ(h200.name, "h200");
  EXPECT_DOUBLE_EQ(h200.bandwidth_gbps, 4800.5);
  EXPECT_DOUBLE_EQ(h200.peak_f32_tflops, gpu_device("h200").peak_f32_tflops);
  EXPECT_EQ(h200.cache_bytes, 60 << 20);
  EXPECT_EQ(h200.persistent_row_limit, 16384);
  EXPECT_TRUE(testing::contains(h200.description, "NVIDIA H200 (sm_90, 132 SMs)")) << h200.description;

  // H100 PCIe: fewer SMs, slower memory than the SXM datasheet.
  const DeviceSpec pcie = device_spec_for(fake_gpu("NVIDIA H100 PCIe", 9, 0, 114, 2039, 50 << 20), 1755000);
  EXPECT_EQ(pcie.name, "h100");
  EXPECT_DOUBLE_EQ(pcie.bandwidth_gbps, 2039);
  EXPECT_EQ(pcie.compute_units, 114);
  EXPECT_NEAR(pcie.peak_f32_tflops, 67.0 * 114 / 132, 1e-9);
  EXPECT_NEAR(pcie.class_tflops[static_cast<int>(CostClass::kMatmul)], 989.0 * 114 / 132, 1e-9);
  // Instructions retire at its own SMs and clock: 114 x 128 x 1.755 GHz.
  EXPECT_NEAR(pcie.issue_tops, 114 * 128 * 1.755e9 / 1e12, 1e-9);
  EXPECT_NEAR(h200.issue_tops, gpu_device("h200").issue_tops, 1e-9);

  // A bandwidth far from the datasheet is taken as a misreported clock.
  const DeviceSpec odd = device_spec_for(fake_gpu("NVIDIA A100-SXM4-80GB", 8, 0, 108, 10, 40 << 20), 1410000);
  EXPECT_DOUBLE_EQ(odd.bandwidth_gbps, gpu_device("a100").bandwidth_gbps);
  EXPECT_TRUE(testing::contains(odd.description, "datasheet bandwidth")) << odd.description;
}

TEST(CudaBackendDevice, OtherGpusAreBuiltFromTheDriver) {
  // RTX 4090: 128 SMs x 128 lanes x 2 x 2.52 GHz = 82.6 TFLOP/s, 1008 GB/s.
  const DeviceSpec d = device_spec_for(fake_gpu("NVIDIA GeForce RTX 4090", 8, 9, 128, 1008, 72 << 20), 2520000);
  EXPECT_EQ(d.name, "cuda");
  EXPECT_NEAR(d.peak_f32_tflops, 82.58, 0.01);
  EXPECT_NEAR(d.issue_tops, 41.29, 0.01);  // 128 SMs x 128 lanes x 2.52 GHz
  EXPECT_DOUBLE_EQ(d.bandwidth_gbps, 1008);
  EXPECT_GT(d.peak_tensor_tflops, d.peak_f32_tflops);
  EXPECT_EQ(d.persistent_row_limit, 16384);
  EXPECT_EQ(d.cache_bytes, 72 << 20);
  EXPECT_EQ(d.compute_units, 128);
  EXPECT_GT(d.ridge_f32(), 0);
  EXPECT_EQ(cuda_backend::fp32_lanes_per_sm(8, 0), 64);
  EXPECT_EQ(cuda_backend::fp32_lanes_per_sm(9, 0), 128);
}

// BLAS semantics of a column-major C = op1 · op2 (no transposes), on the host.
std::vector<double> column_major_gemm(const cublas::ColumnMajorGemm& g, const std::vector<double>& first,
                                      const std::vector<double>& second) {
  std::vector<double> c(static_cast<size_t>(g.ldc) * g.n, 0.0);
  for (int j = 0; j < g.n; ++j) {
    for (int i = 0; i < g.m; ++i) {
      double acc = 0;
      for (int p = 0; p < g.k; ++p) acc += first[i + p * g.lda] * second[p + j * g.ldb];
      c[i + j * g.ldc] = acc;
    }
  }
  return c;
}

TEST(CudaCublas, RowMajorProductIsTheColumnMajorCallOnSwappedOperands) {
  const int64_t m = 5, n = 7, k = 3;
  std::vector<double> a(m * k), b(k * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<double>(i) * 0.5 - 3;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<double>(i % 5) - 1.25;
  absl::StatusOr<cublas::ColumnMajorGemm> g = cublas::row_major_gemm(m, n, k);
  ASSERT_TRUE(g.ok()) << g.status();
  // The row-major buffers as they lie in memory, B first (see cublas_library.h).
  const std::vector<double> c = column_major_gemm(*g, b, a);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t p = 0; p < k; ++p) want += a[i * k + p] * b[p * n + j];
      EXPECT_EQ(c[i * n + j], want) << i << ", " << j;  // row-major C
    }
  }
  absl::StatusOr<cublas::ColumnMajorGemm> huge = cublas::row_major_gemm(int64_t{1} << 31, 16, 16);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(testing::contains(status_text(huge.status()), "[2147483648, 16] x [16, 16]")) << huge.status();
}

TEST(CudaCublas, LoadsOrNamesTheLibrariesItTried) {
  const absl::Status s = cublas::library_status();
  if (!s.ok()) {
    EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
    for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
      EXPECT_TRUE(testing::contains(status_text(s), name)) << s;
    }
    GTEST_SKIP() << "no cuBLAS on this machine: " << s;
  }
  // Every entry point bound; the version needs no GPU.
  absl::StatusOr<std::string> version = cublas::library_version();
  ASSERT_TRUE(version.ok()) << version.status();
  std::printf("[ cublas   ] %s from %s\n", version->c_str(), cublas::library_path().c_str());
  EXPECT_FALSE(cublas::library_path().empty());
  EXPECT_EQ(cublas::data_type(DType::kBF16), cublas::DataType::kBF16);
}

// Mixed-dtype matmuls widen their 16-bit operands with these kernels.
TEST(CudaBackendMatmul, WideningKernelsCompile) {
  FUSEJIT_REQUIRE_NVRTC();
  absl::StatusOr<CompiledKernel> k =
      compile_cuda("fj_widen", std::string(cuda_backend::widen_kernels_source()), {.arch = "sm_80"}, nullptr);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_TRUE(testing::contains(k->ptx, ".entry fj_widen_bf16")) << k->ptx;
  EXPECT_TRUE(testing::contains(k->ptx, ".entry fj_widen_f16")) << k->ptx;
  EXPECT_TRUE(testing::contains(k->ptx, "cvt.f32.f16")) << k->ptx;
  EXPECT_FALSE(k->ptxas.has_spills());
}

// The L2 flush reads through L2 with 16-byte loads and keeps them (the
// store that depends on them is there), and writes nothing else.
TEST(CudaBackendFlush, FlushKernelReadsThroughL2) {
  FUSEJIT_REQUIRE_NVRTC();
  absl::StatusOr<CompiledKernel> k =
      compile_cuda("fj_l2_flush", std::string(cuda_backend::l2_flush_kernel_source()), {.arch = "sm_90"}, nullptr);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_TRUE(testing::contains(k->ptx, ".entry fj_l2_flush")) << k->ptx;
  EXPECT_TRUE(testing::contains(k->ptx, "ld.global.cg.v4.u32")) << k->ptx;
  int stores = 0;
  for (size_t at = k->ptx.find("st.global"); at != std::string::npos; at = k->ptx.find("st.global", at + 1)) ++stores;
  EXPECT_EQ(stores, 1) << k->ptx;
}

// Rows of one element ([M, 1]): a reduction's [M, 1] result has the
// iteration shape and must still be one value per row, not an array.
TEST(CudaBackendKernels, RowsOfOneElementCompile) {
  FUSEJIT_REQUIRE_NVRTC();
  for (const char* text : {"input x: f32[37, 1]\ninput g: f32[1]\ninput b: f32[1]\ny = layer_norm(x, g, b)\noutput y\n",
                           "input x: f32[37, 1]\ny = softmax(x)\noutput y\n",
                           "input x: f32[37, 1]\ninput w: f32[1]\ny = rms_norm(x, w)\noutput y\n"}) {
    for (const CudaKernelSource& k : emit_cuda(make_fused_plan(parse_or_throw(text)))) {
      absl::StatusOr<CompiledKernel> compiled = compile_cuda(k.name, k.source, {.arch = "sm_90"}, nullptr);
      EXPECT_TRUE(compiled.ok()) << text << compiled.status();
    }
  }
}

// The kernels of a graph too wide for one kernel's parameters (fusion splits
// it at FusionOptions::max_kernel_tensors; 5000 pointers would overflow
// even the 32 KiB parameter space of sm_70+), of a chain of dropouts too
// long for them (each takes its 80 bytes of Philox round keys), dropout of
// single values, and of a per-row GeLU (which does not fold into its
// dropout: fusion/gelu_dropout.h). Every kernel's parameters fit in 4 KiB.
TEST(CudaBackendKernels, WideGraphsAndDropoutOfSingleValuesCompile) {
  FUSEJIT_REQUIRE_NVRTC();
  std::string wide;
  for (int i = 0; i < 300; ++i) wide += fmt::format("input x{}: f32[3, 5]\n", i);
  wide += "s1 = add(x0, x1)\n";
  for (int i = 2; i < 300; ++i) wide += fmt::format("s{} = add(s{}, x{})\n", i, i - 1, i);
  wide += "output s299\n";
  std::string dropouts = "input x: bf16[8, 64]\nd0 = dropout(x, p=0.1, seed=1)\n";
  for (int i = 1; i < 60; ++i) dropouts += fmt::format("d{} = dropout(d{}, p=0.1, seed={})\n", i, i - 1, i + 1);
  dropouts += "output d59\n";
  for (const std::string& text :
       {wide, dropouts, std::string("input x: f16[1]\ny = dropout(x, p=0.1, seed=94)\noutput y\n"),
        std::string("input x: bf16[2, 5, 17]\ns = sum(x)\ny = dropout(s, p=0.1, seed=54)\noutput y\n"),
        std::string("input x: bf16[64, 4096]\nm = mean(x)\ng = gelu(m)\nd = dropout(g, p=0.1, seed=5)\n"
                    "y = sub(x, d)\noutput y\n")}) {
    const FusionPlan plan = make_fused_plan(parse_or_throw(text));
    for (const CudaKernelSource& k : emit_cuda(plan)) {
      int64_t param_bytes = 8;  // the element or row count
      for (const KernelParam& p : k.params) param_bytes += p.kind == ParamKind::kTensor ? 8 : 80 * p.dropouts;
      EXPECT_LE(param_bytes, 4096) << k.name << "\n" << describe(plan);
      absl::StatusOr<CompiledKernel> compiled = compile_cuda(k.name, k.source, {.arch = "sm_90"}, nullptr);
      EXPECT_TRUE(compiled.ok()) << describe(plan) << compiled.status();
    }
  }
}

// A whole plan as one NVRTC program (what `fusejit fuzz --cuda-compile`
// checks): the helpers once, every kernel under its own name.
TEST(CudaBackendKernels, PlanProgramHoldsEveryKernelOnce) {
  FUSEJIT_REQUIRE_NVRTC();
  const FusionPlan plan = make_unfused_plan(parse_or_throw(
      "input x: bf16[8, 64]\ninput b: bf16[64]\nh = add(x, b)\ng = gelu(h)\nd = dropout(g, p=0.1, seed=42)\n"
      "y = layer_norm(d)\noutput y\n"));
  const std::vector<CudaKernelSource> kernels = emit_cuda(plan);
  const std::string program = cuda_plan_program(kernels);
  ASSERT_GE(kernels.size(), 4u);
  for (const CudaKernelSource& k : kernels) {
    EXPECT_NE(program.find(")\n" + k.name + "("), std::string::npos) << k.name;  // after __launch_bounds__(N)
  }
  EXPECT_EQ(program.find(kCudaHelpersBegin), program.rfind(kCudaHelpersBegin)) << "helpers more than once";
  absl::StatusOr<CompiledKernel> compiled = compile_cuda("plan", program, {.arch = "sm_90"}, nullptr);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
}

// ---- On a machine with a GPU ----

class GpuBackend : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<Backend>> b = make_cuda_backend();
    if (b.ok()) {
      backend_ = b->release();
      std::printf("[ gpu      ] %s\n[ device   ] %s\n", backend_->description().c_str(),
                  backend_->device().description.c_str());
    } else {
      why_ = std::string(status_text(b.status()));
    }
  }
  static void TearDownTestSuite() {
    delete backend_;
    backend_ = nullptr;
  }
  void SetUp() override {
    if (backend_ == nullptr) FUSEJIT_GPU_MISSING(why_);
  }

  static Backend& backend() { return *backend_; }
  static FusionOptions fusion_options() { return fusion_options_for(backend_->device()); }

  // Loads and runs `plan` on random inputs (outputs poisoned first, so an
  // element no kernel writes is NaN) and compares every output with the
  // reference result of the same plan.
  static void expect_matches_reference(const FusionPlan& plan, const std::string& label,
                                       const LoadOptions& options = {}, uint64_t seed = 1) {
    SCOPED_TRACE(label + ", " + plan.label + " plan");
    const auto context = [&] { return fmt::format("{}\n{}", print_graph(*plan.graph), describe(plan)); };
    const TensorMap inputs = random_inputs(*plan.graph, seed);
    absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = backend().load(plan, options);
    ASSERT_TRUE(loaded.ok()) << loaded.status() << "\n" << context();
    ASSERT_EQ((*loaded)->kernels().size(), plan.kernels.size());
    ASSERT_TRUE((*loaded)->set_inputs(inputs).ok());
    ASSERT_TRUE((*loaded)->poison_outputs().ok());
    absl::Status ran = (*loaded)->run();
    ASSERT_TRUE(ran.ok()) << ran << "\n" << context();
    absl::StatusOr<TensorMap> out = (*loaded)->outputs();
    ASSERT_TRUE(out.ok()) << out.status();
    absl::StatusOr<TensorMap> ref = interpret_plan(plan, inputs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_EQ(out->size(), ref->size());
    for (const auto& [name, want] : *ref) {
      const HostTensor& got = out->at(name);
      const Comparison c = compare_tensors(got, want);
      EXPECT_TRUE(c.within(want.dtype)) << fmt::format("output {} ({}{}): relative error {} > {}; {}\n", name,
                                                       want.dtype, want.shape, c.relative_error, tolerance(want.dtype),
                                                       c.mismatch)
                                        << context();
    }
  }

  static void expect_both_plans_match(const Graph& g, const std::string& label, const LoadOptions& options = {}) {
    expect_matches_reference(make_unfused_plan(g, fusion_options()), label, options);
    expect_matches_reference(make_fused_plan(g, fusion_options()), label, options);
  }

  static inline Backend* backend_ = nullptr;
  static inline std::string why_;
};

// Every distinct extent above 64 mapped to 64, 96, 128, ...: multiples of 8,
// so the 16-byte vector paths run (shrink() gives odd extents: scalar paths).
Graph shrink_even(const Graph& g) {
  std::set<int64_t> extents;
  for (int32_t id : g.inputs()) {
    for (int d = 0; d < g.node(id).shape.rank(); ++d) extents.insert(g.node(id).shape[d]);
  }
  std::map<int64_t, int64_t> resize;
  int64_t next = 64;
  for (int64_t e : extents) {
    if (e > 64) resize[e] = (next += 32);
  }
  return testing::resize_extents(g, resize);
}

constexpr DType kDtypes[] = {DType::kF32, DType::kF16, DType::kBF16};

TEST_F(GpuBackend, EveryExampleInEveryDtypeMatchesTheReference) {
  for (const auto& file : example_graph_files()) {
    const Graph g = parse_file_or_throw(file);
    for (DType dtype : kDtypes) {
      const Graph typed = testing::with_input_dtype(g, dtype);
      const std::string label = fmt::format("{} in {}", file.filename().string(), dtype);  // NOLINT
      expect_both_plans_match(testing::shrink(typed), label + ", odd extents");
      expect_both_plans_match(shrink_even(typed), label + ", even extents");
    }
  }
}

TEST_F(GpuBackend, DemoExampleAtItsRealSize) {
  if (cuda_driver_is_emulator()) GTEST_SKIP() << "33.5M elements would take the CUDA emulator tens of minutes";
  const Graph g = parse_file_or_throw(example_graph_dir() / "bias_gelu_dropout_layernorm.fj");
  expect_both_plans_match(g, "bias_gelu_dropout_layernorm.fj, [8192, 4096] bf16");
}

TEST_F(GpuBackend, VariedGraphsMatchTheReference) {
  for (const std::string& text : testing::varied_graph_texts()) {
    expect_both_plans_match(parse_or_throw(text), text);
  }
}

TEST_F(GpuBackend, OddColumnCounts) {
  const char* kGraphs[] = {
      "input x: {t}[37, {n}]\ninput b: {t}[{n}]\nh = add(x, b)\ny = gelu(h)\noutput y\n",
      "input x: {t}[37, {n}]\ninput g: {t}[{n}]\ninput b: {t}[{n}]\ny = layer_norm(x, g, b)\noutput y\n",
      "input x: {t}[37, {n}]\ny = softmax(x)\noutput y\n",
      "input x: {t}[37, {n}]\ninput w: {t}[{n}]\ny = rms_norm(x, w)\noutput y\n",
  };
  for (int64_t n : {1, 3, 1000, 4097}) {
    for (const char* t : {"f32", "f16", "bf16"}) {
      for (const char* text : kGraphs) {
        const std::string source = fmt::format(fmt::runtime(text), fmt::arg("n", n), fmt::arg("t", t));
        expect_both_plans_match(parse_or_throw(source), source);
      }
    }
  }
}

// Rows shorter than 32 chunks share a warp (fusion/gpu_row_shape.h): the
// warp runs while its first row exists, so row counts that leave a warp
// partly past the last row are the case to get right (the emulator reports
// a lane that skips a shuffle as a deadlock). Per-row reads ([M, 1]) and
// per-row outputs take the same guards.
TEST_F(GpuBackend, ShortRowsShareAWarp) {
  const char* kGraphs[] = {
      "input x: {t}[{m}, {n}]\ny = softmax(x)\noutput y\n",
      "input x: {t}[{m}, {n}]\ninput g: {t}[{n}]\ninput b: {t}[{n}]\ninput s: {t}[{m}, 1]\n"
      "h = mul(x, s)\ny = layer_norm(h, g, b)\nm = max(h)\noutput y, m\n",
  };
  for (int64_t n : {2, 8, 16, 24, 64}) {
    for (int64_t m : {1, 37, 130}) {
      for (const char* t : {"f32", "f16", "bf16"}) {
        for (const char* text : kGraphs) {
          const std::string source =
              fmt::format(fmt::runtime(text), fmt::arg("n", n), fmt::arg("m", m), fmt::arg("t", t));
          const Graph g = parse_or_throw(source);
          const FusionPlan plan = make_fused_plan(g);
          ASSERT_EQ(plan.kernels.size(), 1u) << describe(plan);
          const CudaKernelSource k = emit_cuda_kernel(plan, 0, CudaAccess::kVector);
          ASSERT_EQ(k.variant, CudaVariant::kWarpPerRow) << source;
          EXPECT_LT(k.block_threads, 32) << source;
          expect_both_plans_match(g, source);
          expect_matches_reference(plan, source + " (misaligned)", {.misalign_bytes = 4});
        }
      }
    }
  }
}

TEST_F(GpuBackend, RawInputsAndOutputsGiveTheHostTensorResults) {
  testing::expect_raw_io_matches_host_tensors(backend());
}

TEST_F(GpuBackend, ANewDropoutSeedDrawsThatSeedsMask) {
  testing::expect_new_dropout_seed_draws_that_seeds_mask(backend());
}

TEST_F(GpuBackend, MisalignedPointersTakeTheScalarPath) {
  for (const auto& file : example_graph_files()) {
    const Graph g = parse_file_or_throw(file);
    for (DType dtype : kAllDTypes) {
      const Graph even = shrink_even(testing::with_input_dtype(g, dtype));
      const std::string label = fmt::format("{} in {}, misaligned by 4 bytes", file.filename().string(), dtype);
      expect_both_plans_match(even, label, {.misalign_bytes = 4});
    }
  }
  // An offset that would misalign an element is refused, not run.
  const Graph g = parse_or_throw("input x: f32[4, 8]\ny = neg(x)\noutput y\n");
  absl::StatusOr<std::unique_ptr<LoadedPlan>> bad = backend().load(make_fused_plan(g), {.misalign_bytes = 2});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(GpuBackend, RowsBeyondThePersistentLimitAreReRead) {
  const FusionOptions limit{.persistent_row_limit = 1024};
  const char* kGraphs[] = {
      "input x: {t}[9, {n}]\ninput g: {t}[{n}]\ninput b: {t}[{n}]\ny = layer_norm(x, g, b)\noutput y\n",
      "input x: {t}[9, {n}]\ny = softmax(x)\noutput y\n",
      "input x: {t}[9, {n}]\ninput w: {t}[{n}]\ny = rms_norm(x, w)\noutput y\n",
      "input x: {t}[9, {n}]\ninput b: {t}[{n}]\nh = add(x, b)\nd = dropout(h, p=0.25, seed=3)\ny = "
      "layer_norm(d)\noutput y\n",
      // Five passes, each loading only what it needs (row_pass_needs): h
      // from the third, g from the third, the output r in the last.
      "input x: {t}[9, {n}]\ninput h: {t}[9, {n}]\ninput g: {t}[{n}]\nn1 = layer_norm(x, g)\nr = add(n1, h)\n"
      "y = layer_norm(r)\noutput r, y\n",
      // Fused whole, the adds' inputs would be loaded in all 7 passes: the
      // planner leaves them to a pointwise kernel of their own.
      "input x: {t}[9, {n}]\ninput h1: {t}[9, {n}]\ninput h2: {t}[9, {n}]\ns = add(x, h1)\nt = add(s, h2)\n"
      "a = layer_norm(t)\nb = layer_norm(a)\ny = layer_norm(b)\noutput y\n",
  };
  for (int64_t n : {4097, 2048}) {
    for (const char* t : {"f32", "f16", "bf16"}) {
      for (const char* text : kGraphs) {
        const std::string source = fmt::format(fmt::runtime(text), fmt::arg("n", n), fmt::arg("t", t));
        const Graph g = parse_or_throw(source);
        for (const FusionPlan& plan : {make_unfused_plan(g, limit), make_fused_plan(g, limit)}) {
          bool reread = false;
          for (const CudaKernelSource& k : emit_cuda(plan)) reread = reread || k.variant == CudaVariant::kReread;
          EXPECT_TRUE(reread) << describe(plan);
          expect_matches_reference(plan, source);
          expect_matches_reference(plan, source + " (misaligned)", {.misalign_bytes = 4});
        }
      }
    }
  }
}

TEST_F(GpuBackend, PoisonMakesUnwrittenElementsFail) {
  const Graph g = parse_or_throw("input x: bf16[16, 40]\ny = gelu(x)\noutput y\n");
  const FusionPlan plan = make_fused_plan(g);
  const TensorMap inputs = random_inputs(g, 3);
  absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = backend().load(plan);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE((*loaded)->set_inputs(inputs).ok());
  ASSERT_TRUE((*loaded)->run().ok());
  ASSERT_TRUE((*loaded)->poison_outputs().ok());
  absl::StatusOr<TensorMap> unrun = (*loaded)->outputs();  // nothing ran since: every element is the poison
  ASSERT_TRUE(unrun.ok()) << unrun.status();
  for (double v : unrun->at("y").values) ASSERT_TRUE(std::isnan(v));
  absl::StatusOr<TensorMap> ref = interpret_plan(plan, inputs);
  ASSERT_TRUE(ref.ok());
  EXPECT_FALSE(compare_tensors(unrun->at("y"), ref->at("y")).within(DType::kBF16));
}

TEST_F(GpuBackend, DropoutMaskEqualsTheReferenceBitForBit) {
  // 8 to a thread (rows a multiple of 8), 4 (of 4), 1 (neither).
  for (const char* shape : {"[129, 1000]", "[64, 1024]", "[33, 1004]", "[3, 5, 7]", "[4099]"}) {
    const Graph g = parse_or_throw(fmt::format("input x: f32{}\ny = dropout(x, p=0.5, seed=1234)\noutput y\n", shape));
    for (const LoadOptions& options : {LoadOptions{}, LoadOptions{.misalign_bytes = 4}}) {
      const FusionPlan plan = make_fused_plan(g);
      const TensorMap inputs = random_inputs(g, 11);
      absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = backend().load(plan, options);
      ASSERT_TRUE(loaded.ok()) << loaded.status();
      ASSERT_TRUE((*loaded)->set_inputs(inputs).ok());
      ASSERT_TRUE((*loaded)->poison_outputs().ok());
      ASSERT_TRUE((*loaded)->run().ok());
      absl::StatusOr<TensorMap> out = (*loaded)->outputs();
      ASSERT_TRUE(out.ok()) << out.status();
      absl::StatusOr<TensorMap> ref = interpret_plan(plan, inputs);
      ASSERT_TRUE(ref.ok());
      const std::vector<double>& x = inputs.at("x").values;
      const std::vector<double>& got = out->at("y").values;
      const std::vector<double>& want = ref->at("y").values;
      int64_t dropped = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_NE(x[i], 0.0);  // random inputs are never zero, so a zero means dropped
        ASSERT_EQ(got[i] == 0.0, want[i] == 0.0) << shape << " element " << i << " misalign " << options.misalign_bytes;
        if (got[i] != 0.0) ASSERT_EQ(got[i], x[i] * 2) << shape << " element " << i;
        dropped += got[i] == 0.0;
      }
      EXPECT_GT(dropped, static_cast<int64_t>(x.size()) / 3) << shape;
      EXPECT_LT(dropped, static_cast<int64_t>(x.size()) * 2 / 3) << shape;
    }
  }
}

// dropout(gelu(x)) computed in one helper (fusion/gelu_dropout.h) in a
// pointwise kernel, a row kernel and a re-reading one, 8 to a thread,
// misaligned (the scalar path: GeLU, then dropout), with the GeLU also
// written out (no fold) and with the dropout written out (its scale then
// compared directly): each against the reference, the mask included (a
// wrong mask is off in about a third of the elements). The fold is only
// for 16-bit GeLUs: f32 is the control, and so is the GeLU written out.
TEST_F(GpuBackend, GeluFoldedIntoDropoutMatchesTheReference) {
  const char* kGraphs[] = {
      "input x: {t}[37, {n}]\ninput b: {t}[{n}]\nh = add(x, b)\ng = gelu(h)\ny = dropout(g, p=0.3, seed=7)\n"
      "output y{also}\n",
      "input x: {t}[37, {n}]\ng = gelu(x)\nd = dropout(g, p=0.3, seed=7)\nm = max(d)\ny = sub(d, m)\noutput y{also}\n",
      "input x: {t}[37, {n}]\ng = gelu(x)\nd = dropout(g, p=0.3, seed=7)\ny = layer_norm(d)\noutput y{also}\n",
  };
  for (const char* t : {"bf16", "f16", "f32"}) {
    for (const char* text : kGraphs) {
      for (const char* also : {"", ", g", ", d"}) {
        if (std::string_view(also) == ", d" && std::string_view(text).find("\nd = ") == std::string_view::npos) {
          continue;  // there the dropout is the output already
        }
        for (int64_t n : {4096, 1000}) {
          const std::string source =
              fmt::format(fmt::runtime(text), fmt::arg("n", n), fmt::arg("t", t), fmt::arg("also", also));
          const Graph g = parse_or_throw(source);
          const FusionPlan fused = make_fused_plan(g, fusion_options());
          bool folded = false;
          for (const Kernel& k : fused.kernels) folded |= !gelus_folded_into_dropouts(*fused.graph, k).empty();
          EXPECT_EQ(folded, std::string_view(t) != "f32" && std::string_view(also) != ", g") << source;
          expect_both_plans_match(g, source);
          expect_both_plans_match(g, source + " (misaligned)", {.misalign_bytes = 4});
          const FusionOptions limit{.persistent_row_limit = 1024};
          if (n > 1024) expect_matches_reference(make_fused_plan(g, limit), source + " (re-read)");
        }
      }
    }
  }
}

// A block-per-row kernel timed in each of its launch shapes
// (runtime/cuda_row_tuning.h) keeps one, says which, and computes the
// reference's result with it; every shape it could keep computes it too.
TEST_F(GpuBackend, RowKernelsTimeTheirLaunchShapesAndEveryShapeMatches) {
  const std::string source =
      "input x: bf16[6, 4096]\ninput b: bf16[4096]\ninput gamma: bf16[4096]\ninput beta: bf16[4096]\n"
      "h = add(x, b)\ng = gelu(h)\nd = dropout(g, p=0.1, seed=42)\ny = layer_norm(d, gamma, beta)\noutput y\n";
  const Graph g = parse_or_throw(source);
  const FusionPlan plan = make_fused_plan(g, fusion_options());
  ASSERT_EQ(plan.kernels.size(), 1u);
  const std::vector<CudaRowShape> shapes = cuda_row_shape_candidates(plan, 0, CudaAccess::kVector);
  ASSERT_EQ(shapes.size(), 5u);
  for (const CudaRowShape& shape : shapes) {
    testing::ScopedEnv t("FUSEJIT_ROW_BLOCK_THREADS",
                         shape.block_threads > 0 ? std::optional(std::to_string(shape.block_threads)) : std::nullopt);
    testing::ScopedEnv p("FUSEJIT_ROW_PREFETCH",
                         shape.prefetch_rows > 0 ? std::optional(std::to_string(shape.prefetch_rows)) : std::nullopt);
    expect_matches_reference(plan, cuda_launch_shape(emit_cuda_kernel(plan, 0, CudaAccess::kVector, shape)));
  }

  absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = backend().load(plan, {.autotune = Autotune::kAlways});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->kernels()[0].tuning, "5 launch shapes compiled, to be timed on its first run");
  EXPECT_EQ((*loaded)->kernels()[0].launch_shape, "512 threads per row");
  const TensorMap inputs = random_inputs(g, 3);
  ASSERT_TRUE((*loaded)->set_inputs(inputs).ok());
  ASSERT_TRUE((*loaded)->poison_outputs().ok());
  ASSERT_TRUE((*loaded)->run().ok());
  const LoadedKernelInfo& info = (*loaded)->kernels()[0];
  EXPECT_TRUE(info.tuning.starts_with("fastest of 5 launch shapes") || info.tuning.starts_with("default kept"))
      << info.tuning;
  EXPECT_EQ(info.tuning.starts_with("default kept"), info.launch_shape == "512 threads per row") << info.tuning;
  absl::StatusOr<TensorMap> out = (*loaded)->outputs();
  ASSERT_TRUE(out.ok()) << out.status();
  absl::StatusOr<TensorMap> ref = interpret_plan(plan, inputs);
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_TRUE(compare_tensors(out->at("y"), ref->at("y")).within(DType::kBF16)) << info.launch_shape;

  // Turned off, or below the size it pays at, nothing extra is compiled.
  for (const Autotune mode : {Autotune::kOff, Autotune::kAuto}) {
    testing::ScopedEnv unset("FUSEJIT_AUTOTUNE", std::nullopt);
    absl::StatusOr<std::unique_ptr<LoadedPlan>> plain = backend().load(plan, {.autotune = mode});
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_EQ((*plain)->kernels()[0].tuning, "");
    EXPECT_EQ((*plain)->kernels()[0].launch_shape, "512 threads per row");
  }
}

TEST_F(GpuBackend, LayersRunTheFirstLayersCodeWithTheirOwnSeeds) {
  const Graph g = parse_or_throw(testing::stacked_layers_text(3));
  const FusionPlan plan = make_fused_plan(g, fusion_options());
  ASSERT_EQ(plan.kernels.size(), 6u);  // a matmul (cuBLAS) and a row kernel per layer
  // Every layer's dropout result is an output: a mask drawn with another
  // layer's seed would differ from the reference in about half its elements.
  expect_matches_reference(plan, "stacked layers");
  expect_matches_reference(plan, "stacked layers, misaligned", {.misalign_bytes = 4});
  absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = backend().load(plan);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::vector<LoadedKernelInfo>& kernels = (*loaded)->kernels();
  ASSERT_EQ(kernels.size(), 6u);
  for (size_t k = 1; k < kernels.size(); k += 2) {
    SCOPED_TRACE(kernels[k].name);
    EXPECT_EQ(kernels[k].name, plan.kernels[k].name);
    EXPECT_EQ(kernels[k].executed_by, "jit");
    EXPECT_EQ(kernels[k].shares_code_with, k == 1 ? "" : plan.kernels[1].name);
    if (k > 1) EXPECT_EQ(kernels[k].compile_ms, 0.0);
  }
}

// Kernels of different sizes can be the same code (the count is an
// argument): each runs its own count. Found by a new user's probe: both
// were launched with the first one's, which left rows of the larger
// unwritten, and with the larger first read past the smaller's buffers.
TEST_F(GpuBackend, KernelsSharingCodeRunTheirOwnSizes) {
  for (const char* text :
       {"input x: f32[1, 16]\ninput u: f32[3, 16]\nex = exp(x)\neu = exp(u)\ny = add(ex, eu)\noutput y\n",
        "input x: f32[3, 1000]\ninput u: f32[1, 1000]\nax = abs(x)\nau = abs(u)\ny = add(ax, au)\noutput y\n",
        "input x: f32[5, 64]\ninput u: f32[2, 64]\nsx = softmax(x)\nsu = softmax(u)\noutput sx, su\n"}) {
    const FusionPlan plan = make_unfused_plan(parse_or_throw(text), fusion_options());
    absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = backend().load(plan);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ((*loaded)->kernels()[1].shares_code_with, plan.kernels[0].name) << text;
    expect_matches_reference(plan, text);
    expect_matches_reference(plan, std::string(text) + " (misaligned)", {.misalign_bytes = 4});
  }
}

TEST_F(GpuBackend, MatmulRunsOnCublas) {
  for (const char* types : {"bf16 bf16", "f16 f16", "f32 f32", "bf16 f32", "f16 bf16"}) {
    const std::string a_type(types, std::string_view(types).find(' '));
    const std::string b_type(std::string_view(types).substr(a_type.size() + 1));
    const Graph g = parse_or_throw(
        fmt::format("input a: {}[2, 48, 96]\ninput w: {}[96, 136]\nm = matmul(a, w)\noutput m\n", a_type, b_type));
    const FusionPlan plan = make_fused_plan(g);
    absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = backend().load(plan);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    ASSERT_EQ((*loaded)->kernels().size(), 1u);
    EXPECT_EQ((*loaded)->kernels()[0].executed_by, "cublas");
    expect_matches_reference(plan, types);
    expect_matches_reference(plan, std::string(types) + " (misaligned)", {.misalign_bytes = 4});
  }
}

// A matmul with an epilogue (fusion/matmul_epilogue.h) is one
// cublasLtMatmul where every tensor is 16-byte aligned, and cublasGemmEx
// then a generated epilogue kernel where one is not; both match the
// reference in every dtype. At [5, 7] x [7, 3] rows of A and B are not
// 16-byte multiples: a real cuBLASLt may offer no algorithm there (then the
// fallback runs); the emulator's does.
TEST_F(GpuBackend, MatmulEpiloguesRunOnCublasLtOrAGeneratedKernel) {
  const char* epilogues[] = {"s = add(h, b)\noutput s\n", "y = relu(h)\noutput y\n",
                             "s = add(b, h)\ny = relu(s)\noutput y\n",
                             "s = add(h, b)\ny = gelu(s, approximate=tanh)\noutput y\n"};
  const char* shapes[] = {"x: {0}[2, 24, 40]\ninput w: {0}[40, 72]\ninput b: {0}[72]",
                          "x: {0}[5, 7]\ninput w: {0}[7, 3]\ninput b: {0}[3]"};
  for (const char* shape : shapes) {
    for (const char* dtype : {"f32", "bf16", "f16"}) {
      for (const char* epilogue : epilogues) {
        const std::string label = fmt::format("{}: {}", fmt::format(fmt::runtime(shape), dtype), epilogue);
        const Graph g = parse_or_throw(
            fmt::format("input {}\nh = matmul(x, w)\n{}", fmt::format(fmt::runtime(shape), dtype), epilogue));
        const FusionPlan plan = make_fused_plan(g, fusion_options());
        ASSERT_GE(plan.kernels[0].nodes.size(), 2u) << describe(plan);  // f32's GeLU is a kernel of its own
        for (int misalign : {0, 4}) {
          absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = backend().load(plan, {.misalign_bytes = misalign});
          ASSERT_TRUE(loaded.ok()) << loaded.status();
          const std::string& by = (*loaded)->kernels()[0].executed_by;
          const std::string& call = (*loaded)->kernels()[0].library_call;
          if (misalign != 0) {
            EXPECT_EQ(by, "cublas+jit") << label;
          } else if (!cuda_driver_is_emulator() && testing::contains(call, "epilogue gives")) {
            // This GPU's cuBLASLt computes the activation otherwise than
            // fusejit (ACublasLtEpilogueThatDiffersRunsAsAGeneratedKernel).
            EXPECT_EQ(by, "cublas+jit") << label;
            std::printf("[ cublasLt ] %s\n", call.c_str());
          } else if (cuda_driver_is_emulator() || shape == shapes[0]) {
            EXPECT_EQ(by, "cublasLt") << label << ": " << call;
          } else {
            EXPECT_TRUE(by == "cublasLt" || by == "cublas+jit") << label << ": " << by;
          }
          expect_matches_reference(plan, fmt::format("{}, misaligned by {}", label, misalign),
                                   {.misalign_bytes = misalign});
        }
      }
    }
  }
}

// What this GPU's cuBLASLt does with NaN and infinities in its activation
// epilogues, and whether its finite values are within fusejit's tolerance
// (printed: the first GPU run says; an fmax-style relu gives 0 for NaN).
// On the emulator, whose epilogues follow fusejit's ops, none differs, and
// one told to play an fmax-style relu is found out in every dtype.
TEST_F(GpuBackend, TheCublasLtEpilogueProbeFindsWhatDiffersFromFusejit) {
  for (bool fmax_relu : {false, true}) {
    if (fmax_relu && !cuda_driver_is_emulator()) break;
    std::optional<testing::ScopedEnv> relu;
    if (fmax_relu) relu.emplace("FUSEJIT_EMULATOR_CUBLASLT_RELU", std::string("fmax"));
    absl::StatusOr<std::shared_ptr<cuda_backend::CudaGpu>> gpu = cuda_backend::CudaGpu::open();
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    std::map<std::string, std::string> found;
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (cublaslt::Activation activation : {cublaslt::Activation::kRelu, cublaslt::Activation::kGeluTanh}) {
        for (bool bias : {true, false}) {
          const std::string label =
              fmt::format("{} {}{}", dtype, activation == cublaslt::Activation::kRelu ? "relu" : "gelu (tanh)",
                          bias ? " with a bias" : "");
          absl::StatusOr<std::string> difference =
              cuda_backend::lt_activation_difference(**gpu, dtype, activation, bias);
          ASSERT_TRUE(difference.ok()) << label << ": " << difference.status();
          std::printf("[ cublasLt ] %s: %s\n", label.c_str(), difference->empty() ? "as fusejit" : difference->c_str());
          found[label] = *difference;
          if (!cuda_driver_is_emulator()) continue;
          if (fmax_relu && activation == cublaslt::Activation::kRelu) {
            EXPECT_EQ(*difference, fmt::format("cuBLASLt's relu epilogue{} gives 0 for NaN in {}, fusejit's relu NaN",
                                               bias ? " with a bias" : "", dtype));
          } else {
            EXPECT_EQ(*difference, "") << label;
          }
        }
      }
    }
    if (!fmax_relu) continue;
    // The answers are kept: the emulator's relu keeps NaN again, and
    // asking the same CudaGpu again still gives what its probe found.
    relu.reset();
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      const std::string label = fmt::format("{} relu with a bias", dtype);
      EXPECT_EQ(cuda_backend::lt_activation_difference(**gpu, dtype, cublaslt::Activation::kRelu, true).value_or("?"),
                found[label])
          << label;
    }
  }
}

// A relu epilogue that would lose a NaN is not given to cuBLASLt: cuBLAS
// and a generated epilogue run the matmul, the kernel says why, and the
// NaN of the bias reaches the output as the reference says.
TEST_F(GpuBackend, ACublasLtEpilogueThatDiffersRunsAsAGeneratedKernel) {
  if (!cuda_driver_is_emulator()) GTEST_SKIP() << "only the CUDA emulator plays an fmax-style relu on request";
  testing::ScopedEnv relu("FUSEJIT_EMULATOR_CUBLASLT_RELU", std::string("fmax"));
  absl::StatusOr<std::unique_ptr<Backend>> gpu = make_cuda_backend();  // its own probes
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const FusionPlan plan = make_fused_plan(parse_or_throw("input x: bf16[8, 32]\ninput w: bf16[32, 64]\n"
                                                         "input b: bf16[64]\nh = matmul(x, w)\n"
                                                         "s = add(h, b)\ny = relu(s)\noutput y\n"),
                                          fusion_options());
  ASSERT_EQ(plan.kernels.size(), 1u) << describe(plan);
  absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = (*gpu)->load(plan);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const LoadedKernelInfo& k = (*loaded)->kernels()[0];
  EXPECT_EQ(k.executed_by, "cublas+jit");
  EXPECT_TRUE(testing::contains(k.library_call,
                                "cuBLASLt cannot run it here: cuBLASLt's relu epilogue with a bias gives 0 for NaN "
                                "in bf16"))
      << k.library_call;
  TensorMap inputs = random_inputs(*plan.graph, 9);
  inputs.at("b").values[3] = std::numeric_limits<double>::quiet_NaN();
  ASSERT_TRUE((*loaded)->set_inputs(inputs).ok());
  ASSERT_TRUE((*loaded)->run().ok());
  absl::StatusOr<TensorMap> out = (*loaded)->outputs();
  ASSERT_TRUE(out.ok()) << out.status();
  absl::StatusOr<std::string> wrong = first_wrong_output(plan, inputs, *out);
  ASSERT_TRUE(wrong.ok()) << wrong.status();
  EXPECT_EQ(*wrong, "");
  for (int64_t i = 0; i < 8; ++i) EXPECT_TRUE(std::isnan(out->at("y").values[i * 64 + 3])) << i;
  // bench says which library runs the matmul, and why not cuBLASLt alone.
  absl::StatusOr<BenchResult> bench = run_benchmark(**gpu, *plan.graph, {.reps = 1, .read_counters = false});
  ASSERT_TRUE(bench.ok()) << bench.status();
  const std::string text = format_bench(*bench);
  EXPECT_TRUE(testing::contains(text, "library kernels:\n  unfused k0_matmul: ")) << text;
  EXPECT_TRUE(testing::contains(text, "\n  fused k0_matmul_add_relu: ")) << text;
  EXPECT_TRUE(testing::contains(text, "cache flushed before every kernel and the writes it left in L2 drained"))
      << text;
  EXPECT_TRUE(testing::contains(text, "cuBLASLt's relu epilogue with a bias gives 0 for NaN in bf16")) << text;
  const nlohmann::json j = bench_json(*bench);
  EXPECT_TRUE(testing::contains(j["fused"]["kernels"][0]["library_call"].get<std::string>(), "cublasGemmEx")) << j;

  // The gelu epilogue, which this cuBLASLt computes as fusejit does, still runs there.
  const FusionPlan gelu = make_fused_plan(parse_or_throw("input x: bf16[8, 32]\ninput w: bf16[32, 64]\n"
                                                         "input b: bf16[64]\nh = matmul(x, w)\n"
                                                         "s = add(h, b)\ny = gelu(s, approximate=tanh)\noutput y\n"),
                                          fusion_options());
  absl::StatusOr<std::unique_ptr<LoadedPlan>> on_lt = (*gpu)->load(gelu);
  ASSERT_TRUE(on_lt.ok()) << on_lt.status();
  EXPECT_EQ((*on_lt)->kernels()[0].executed_by, "cublasLt") << (*on_lt)->kernels()[0].library_call;
}

// Where cuBLASLt's heuristic offers no algorithm (the emulator refuses on
// request), cuBLAS and the generated epilogue run it, aligned or not.
TEST_F(GpuBackend, AMatmulEpilogueCuBlasLtRefusesRunsAsAGeneratedKernel) {
  if (!cuda_driver_is_emulator()) GTEST_SKIP() << "only the CUDA emulator's cuBLASLt refuses on request";
  testing::ScopedEnv refuse("FUSEJIT_EMULATOR_CUBLASLT_REFUSES", std::string("1"));
  const FusionPlan plan = make_fused_plan(
      parse_or_throw("input x: bf16[24, 40]\ninput w: bf16[40, 72]\ninput b: bf16[72]\nh = matmul(x, w)\n"
                     "s = add(h, b)\ny = gelu(s, approximate=tanh)\noutput y\n"),
      fusion_options());
  absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = backend().load(plan);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->kernels()[0].executed_by, "cublas+jit");
  expect_matches_reference(plan, "cuBLASLt refusing");
  // The fallback keeps the product in f32, as cuBLASLt does: 16 x 5000 is
  // 80000, past f16's 65504, and the bias brings it back to 50000 (49984 in
  // f16). Rounded to f16 before the bias, it was infinity (found by a probe).
  const FusionPlan f16 =
      make_fused_plan(parse_or_throw("input x: f16[8, 16]\ninput w: f16[16, 8]\ninput b: f16[8]\nh = matmul(x, w)\n"
                                     "s = add(h, b)\ny = relu(s)\noutput y\n"),
                      fusion_options());
  TensorMap inputs = random_inputs(*f16.graph, 1);
  std::fill(inputs.at("x").values.begin(), inputs.at("x").values.end(), 1.0);
  std::fill(inputs.at("w").values.begin(), inputs.at("w").values.end(), 5000.0);
  std::fill(inputs.at("b").values.begin(), inputs.at("b").values.end(), -30000.0);
  absl::StatusOr<std::unique_ptr<LoadedPlan>> big = backend().load(f16);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ((*big)->kernels()[0].executed_by, "cublas+jit");
  ASSERT_TRUE((*big)->set_inputs(inputs).ok());
  ASSERT_TRUE((*big)->run().ok());
  absl::StatusOr<TensorMap> out = (*big)->outputs();
  ASSERT_TRUE(out.ok()) << out.status();
  for (double v : out->at("y").values) ASSERT_EQ(v, 49984.0);
}

// NaN and infinity in the bias reach their columns through the epilogue's
// add and relu as in the reference (relu(NaN) is NaN there, as in PyTorch):
// on cuBLASLt and on the generated epilogue.
TEST_F(GpuBackend, MatmulEpiloguePropagatesNanAndInfinityFromTheBias) {
  const FusionPlan plan =
      make_fused_plan(parse_or_throw("input x: f32[9, 40]\ninput w: f32[40, 64]\ninput b: f32[64]\nh = matmul(x, w)\n"
                                     "s = add(h, b)\ny = relu(s)\noutput y\n"),
                      fusion_options());
  TensorMap inputs = random_inputs(*plan.graph, 3);
  inputs.at("b").values[3] = std::numeric_limits<double>::quiet_NaN();
  inputs.at("b").values[60] = std::numeric_limits<double>::infinity();
  inputs.at("b").values[61] = -std::numeric_limits<double>::infinity();
  for (int misalign : {0, 4}) {
    absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = backend().load(plan, {.misalign_bytes = misalign});
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    SCOPED_TRACE((*loaded)->kernels()[0].executed_by);
    ASSERT_TRUE((*loaded)->set_inputs(inputs).ok());
    ASSERT_TRUE((*loaded)->run().ok());
    absl::StatusOr<TensorMap> out = (*loaded)->outputs();
    ASSERT_TRUE(out.ok()) << out.status();
    for (int64_t i = 0; i < 9; ++i) {
      for (int64_t j = 0; j < 64; ++j) {
        const double v = out->at("y").values[i * 64 + j];
        ASSERT_EQ(std::isnan(v), j == 3) << i << ", " << j << ": " << v;
        ASSERT_EQ(std::isinf(v), j == 60) << i << ", " << j << ": " << v;
        if (j == 61) ASSERT_EQ(v, 0.0) << i;
      }
    }
  }
}

// Every generated kernel reports how it compiled: registers from the
// ptxas report, no spills, and a compile time unless it came from the cache;
// the library calls of mlp_block (cuBLAS or cuBLASLt) are listed beside them.
TEST_F(GpuBackend, KernelsReportCompileAndRegisters) {
  int generated = 0;
  for (const char* example : {"bias_gelu_dropout_layernorm.fj", "softmax.fj", "mlp_block.fj"}) {
    const Graph g = testing::shrink(parse_file_or_throw(example_graph_dir() / example));
    for (const FusionPlan& plan : {make_fused_plan(g, fusion_options()), make_unfused_plan(g, fusion_options())}) {
      absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = backend().load(plan);
      ASSERT_TRUE(loaded.ok()) << example << ": " << loaded.status();
      for (const LoadedKernelInfo& k : (*loaded)->kernels()) {
        std::printf("[ kernel   ] %-40s %-10s %7.1f ms %s %3d registers %d spill bytes\n", k.name.c_str(),
                    k.executed_by.c_str(), k.compile_ms,
                    k.executed_by != "jit" ? "-   "
                    : k.cache_hit          ? "hit "
                                           : "miss",
                    k.registers, k.spill_bytes);
        if (k.executed_by != "jit") continue;  // a library call: nothing compiled
        ++generated;
        EXPECT_GT(k.registers, 0) << k.name;
        EXPECT_EQ(k.spill_bytes, 0) << k.name;
        EXPECT_TRUE(k.cache_hit || k.compile_ms > 0) << k.name << ": compiled in no time";
      }
    }
  }
  EXPECT_GE(generated, 4) << "the demo's and softmax's plans are generated kernels";
}

TEST_F(GpuBackend, TimingAndCopyBandwidthArePositive) {
  const Graph g = testing::shrink(parse_file_or_throw(example_graph_dir() / "bias_gelu_dropout_layernorm.fj"));
  absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = backend().load(make_fused_plan(g));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE((*loaded)->set_inputs(random_inputs(g, 5)).ok());
  ASSERT_TRUE(backend().flush_cache().ok());
  absl::StatusOr<double> us = (*loaded)->time_kernel(0);
  ASSERT_TRUE(us.ok()) << us.status();
  EXPECT_GT(*us, 0);
  EXPECT_FALSE((*loaded)->run_kernel(99).ok());
  absl::StatusOr<double> gbps = backend().measure_copy_gbps(int64_t{64} << 20);
  ASSERT_TRUE(gbps.ok()) << gbps.status();
  std::printf("[ copy     ] %.0f GB/s (device bandwidth %.0f GB/s)\n", *gbps, backend().device().bandwidth_gbps);
  EXPECT_GT(*gbps, 0);
  EXPECT_GT(backend().device().bandwidth_gbps, 0);
  EXPECT_EQ(backend().name(), "cuda");
}

// The GPU's own count of HBM traffic (CUPTI range profiler) for kernels
// whose traffic is known: 512 MiB read and written (ten times the L2), and
// 4 MiB (less than the L2, so its output is still in L2 when it ends and
// only the drain after it makes the writes count).
TEST_F(GpuBackend, MeasuredBytesMatchAStreamingKernel) {
  if (cuda_driver_is_emulator()) GTEST_SKIP() << "the CUDA emulator has no DRAM counters";
  const Graph g = parse_or_throw("input x: f32[16384, 8192]\ny = neg(x)\noutput y\n");
  absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = backend().load(make_fused_plan(g));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE((*loaded)->set_inputs(random_inputs(g, 5)).ok());
  ASSERT_TRUE(backend().flush_cache().ok());
  absl::StatusOr<double> bytes = (*loaded)->measure_kernel_bytes(0);
  // Counters the profiler cannot read here skip the test; a call-order
  // error (also FailedPrecondition) would be a bug, and fails it.
  const bool call_order_error = testing::contains(status_text(bytes.status()), "before set_inputs()") ||
                                testing::contains(status_text(bytes.status()), "before kernel");
  if (!bytes.ok() && !call_order_error &&
      (bytes.status().code() == absl::StatusCode::kFailedPrecondition ||
       bytes.status().code() == absl::StatusCode::kUnavailable)) {
    std::printf("[ counters ] not readable here: %s\n", std::string(status_text(bytes.status())).c_str());
    GTEST_SKIP() << "GPU counters cannot be read here: " << bytes.status();
  }
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  const double expected = 2.0 * 16384 * 8192 * 4;
  std::printf("[ counters ] %.0f bytes measured, %.0f moved by the kernel (%.3fx)\n", *bytes, expected,
              *bytes / expected);
  EXPECT_GT(*bytes, 0.9 * expected);
  EXPECT_LT(*bytes, 1.15 * expected);
  // Measuring again gives the same count, and the kernel still computes y.
  absl::StatusOr<double> again = (*loaded)->measure_kernel_bytes(0);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_NEAR(*again / *bytes, 1.0, 0.1);
  EXPECT_FALSE((*loaded)->measure_kernel_bytes(1).ok());

  const Graph small = parse_or_throw("input x: f32[1024, 1024]\ny = neg(x)\noutput y\n");
  absl::StatusOr<std::unique_ptr<LoadedPlan>> small_plan = backend().load(make_fused_plan(small));
  ASSERT_TRUE(small_plan.ok()) << small_plan.status();
  ASSERT_TRUE((*small_plan)->set_inputs(random_inputs(small, 6)).ok());
  absl::StatusOr<double> small_bytes = (*small_plan)->measure_kernel_bytes(0);
  ASSERT_TRUE(small_bytes.ok()) << small_bytes.status();
  const double small_expected = 2.0 * 1024 * 1024 * 4;
  std::printf("[ counters ] %.0f bytes measured, %.0f moved by the kernel (%.3fx)\n", *small_bytes, small_expected,
              *small_bytes / small_expected);
  EXPECT_GT(*small_bytes, 0.9 * small_expected);
  EXPECT_LT(*small_bytes, 1.2 * small_expected);
}

// NVIDIA's L2 is write-back: a kernel whose output fits in it ends with
// that output still in L2, and a timing that stopped at the kernel's end
// would show it moving its bytes faster than a copy can (reads paid, writes
// free). Timed with its write-backs (time_with_write_back_us), a streaming
// kernel of 16 MiB in and 16 MiB out (less than an H100's 50 MB L2) and
// one of 512 MiB each way should stay near the copy ceiling measured beside
// them. Timings are not asserted in tests (they vary with the GPU's load):
// each `[ timing ]` line says what it should show, and scripts/gpu-check.sh
// puts them in its report; the test checks that every timing runs.
TEST_F(GpuBackend, KernelTimesIncludeTheWritesLeftInL2) {
  if (cuda_driver_is_emulator()) GTEST_SKIP() << "the CUDA emulator has no L2 and no GPU timing";
  absl::StatusOr<double> ceiling = backend().measure_copy_gbps(int64_t{512} << 20);
  ASSERT_TRUE(ceiling.ok()) << ceiling.status();
  // The median of 11 timings of one kernel (or of the drain alone), each
  // after a flush, and its bandwidth for `bytes`, printed.
  const auto median_gbps = [&](const std::string& what, double bytes, const std::string& expected,
                               const std::function<absl::StatusOr<double>()>& time) {
    std::vector<double> times;
    for (int rep = 0; rep < 11; ++rep) {
      EXPECT_TRUE(backend().flush_cache().ok());
      absl::StatusOr<double> us = time();
      if (!us.ok()) {
        ADD_FAILURE() << what << ": " << us.status();
        return 0.0;
      }
      times.push_back(*us);
    }
    std::nth_element(times.begin(), times.begin() + 5, times.end());
    const double gbps = bytes / (times[5] * 1e3);
    EXPECT_GT(times[5], 0) << what;
    std::printf("[ timing   ] %s: %.1f us, %.0f GB/s, %.2fx the copy ceiling of %.0f GB/s (%s)\n", what.c_str(),
                times[5], gbps, gbps / *ceiling, *ceiling, expected.c_str());
    return gbps;
  };
  const auto kernel_gbps = [&](const std::string& text, const std::string& what, double bytes,
                               const std::string& expected) {
    const Graph g = parse_or_throw(text);
    absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = backend().load(make_fused_plan(g));
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    if (!loaded.ok()) return 0.0;
    if (absl::Status s = (*loaded)->set_inputs(random_inputs(g, 7)); !s.ok()) {
      ADD_FAILURE() << what << ": " << s;
      return 0.0;
    }
    return median_gbps(what, bytes, expected, [&] { return (*loaded)->time_kernel(0); });
  };
  for (const auto& [shape, elements] : {std::pair{"[4096, 1024]", 4096.0 * 1024}, {"[16384, 8192]", 16384.0 * 8192}}) {
    kernel_gbps(fmt::format("input x: f32{}\ny = neg(x)\noutput y\n", shape),
                fmt::format("neg(f32{}), reads and writes", shape), 2 * elements * 4,
                "should be under 1.25x: over it, writes left in L2 go uncounted");
  }
  // The drain must run at about the memory's bandwidth: a slower one would
  // hide the write-backs in its idle cycles.
  absl::StatusOr<std::shared_ptr<cuda_backend::CudaGpu>> gpu = cuda_backend::CudaGpu::open();
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  absl::StatusOr<cuda::ContextScope> context = (*gpu)->enter();
  ASSERT_TRUE(context.ok()) << context.status();
  absl::StatusOr<cuda_backend::EventTimer> timer = cuda_backend::EventTimer::create();
  ASSERT_TRUE(timer.ok()) << timer.status();
  median_gbps("the drain (a read of twice the L2)", 2.0 * static_cast<double>((*gpu)->info().l2_bytes),
              "should be over 0.6x: a slower drain hides write-backs in its idle cycles",
              [&]() -> absl::StatusOr<double> {
                if (absl::Status s = (*gpu)->queue_l2_flush(); !s.ok()) return s;
                if (absl::Status s = timer->start(); !s.ok()) return s;
                if (absl::Status s = (*gpu)->queue_l2_flush(); !s.ok()) return s;
                absl::StatusOr<double> ms = timer->stop_ms();
                if (!ms.ok()) return ms.status();
                return *ms * 1e3;
              });
  // And a kernel that only reads is not charged for its footprint in L2
  // (lines of the flush before it that the drain alone finds again).
  kernel_gbps("input x: f32[4096, 1024]\ny = sum(x)\noutput y\n", "sum(f32[4096, 1024]), reads", 4096.0 * 1024 * 4,
              "should be over 0.5x: under it, a kernel pays for the L2 lines the drain finds again");
}

TEST_F(GpuBackend, OutOfMemoryNamesTheTensor) {
  const Graph g = parse_or_throw("input huge: f32[1048576, 1048576]\ny = neg(huge)\noutput y\n");  // 4 TiB
  absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = backend().load(make_fused_plan(g));
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kResourceExhausted) << loaded.status();
  EXPECT_TRUE(testing::contains(status_text(loaded.status()), "huge: f32[1048576, 1048576]")) << loaded.status();
  // The backend still works afterwards.
  expect_matches_reference(make_fused_plan(parse_or_throw("input x: f32[4, 8]\ny = neg(x)\noutput y\n")), "after OOM");
}

// A GPU older than compute capability 8.0 has no bf16 arithmetic, which
// the kernels' helpers use: loading a bf16 plan names the tensor and the
// GPU, and an f32 plan still runs. The emulator plays a Turing GPU (sm_75).
TEST_F(GpuBackend, AnOlderGpuRefusesBf16AndNamesTheTensor) {
  if (!cuda_driver_is_emulator()) GTEST_SKIP() << "needs the emulator, which can play an sm_75 GPU";
  testing::ScopedEnv cc("FUSEJIT_EMULATOR_CC", "75");
  absl::StatusOr<std::unique_ptr<Backend>> turing = make_cuda_backend();
  ASSERT_TRUE(turing.ok()) << turing.status();
  const Graph g =
      parse_or_throw("input x: f32[4, 40]\ninput b: bf16[40]\nc = cast(b, dtype=f32)\ny = add(x, c)\noutput y\n");
  absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = (*turing)->load(make_fused_plan(g));
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kFailedPrecondition) << loaded.status();
  const std::string message(status_text(loaded.status()));
  EXPECT_TRUE(testing::contains(message, "(sm_75) cannot run bf16 kernels, which need compute capability 8.0"))
      << message;
  EXPECT_TRUE(testing::contains(message, "b: bf16[40] is bf16")) << message;
  const Graph f32 = parse_or_throw("input x: f32[4, 40]\ny = softmax(x)\noutput y\n");
  loaded = (*turing)->load(make_fused_plan(f32));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const TensorMap inputs = random_inputs(f32, 2);
  ASSERT_TRUE((*loaded)->set_inputs(inputs).ok());
  ASSERT_TRUE((*loaded)->run().ok());
  absl::StatusOr<TensorMap> out = (*loaded)->outputs();
  ASSERT_TRUE(out.ok()) << out.status();
  absl::StatusOr<TensorMap> ref = interpret_plan(make_fused_plan(f32), inputs);
  ASSERT_TRUE(ref.ok());
  EXPECT_TRUE(compare_tensors(out->at("y"), ref->at("y")).within(DType::kF32));
}

// A driver of an older CUDA major version than the toolkit's NVRTC would
// refuse every kernel: the backend says so when it opens. The emulator
// plays a CUDA 12.4 driver.
TEST_F(GpuBackend, ADriverOlderThanNvrtcIsRefusedWithAReason) {
  if (!cuda_driver_is_emulator()) GTEST_SKIP() << "needs the emulator, which can play an older driver";
  testing::ScopedEnv version("FUSEJIT_EMULATOR_DRIVER_VERSION", "12040");
  absl::StatusOr<std::unique_ptr<Backend>> old = make_cuda_backend();
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.status().code(), absl::StatusCode::kUnavailable) << old.status();
  EXPECT_TRUE(
      testing::contains(status_text(old.status()), "the CUDA driver supports CUDA 12.4, older than the CUDA 13"))
      << old.status();
}

// A plan of a cuBLAS matmul and a generated row kernel, small enough for
// the emulator, its random inputs and their reference result.
struct SmallPlan {
  FusionPlan plan;
  TensorMap inputs;
  TensorMap expected;
};
SmallPlan small_plan(uint64_t seed) {
  const Graph g =
      parse_or_throw("input x: f32[8, 24]\ninput w: f32[24, 16]\nm = matmul(x, w)\ny = softmax(m)\noutput y\n");
  SmallPlan p{make_fused_plan(g), random_inputs(g, seed), {}};
  p.expected = *interpret_plan(p.plan, p.inputs);
  return p;
}

// A program's own CUDA context (the CUDA runtime's device after
// cudaSetDevice, or none on a new thread) is the same after each call into
// the backend as before it, and a plan loaded on one thread runs and is
// freed on others without a warning. On the emulator any handle stands for
// a program's own context, and a call made outside the device's context
// fails, as on a GPU it would go to the wrong one.
TEST_F(GpuBackend, EachCallGivesTheThreadBackItsOwnContext) {
  const SmallPlan small = small_plan(3);
  const FusionPlan& plan = small.plan;
  const TensorMap& inputs = small.inputs;
  const TensorMap& expected = small.expected;
  const ScopedWarningSink warnings;
  const auto expect_current = [](cuda::Context expected_context, const char* after) {
    absl::StatusOr<cuda::Context> current = cuda::current_context();
    ASSERT_TRUE(current.ok()) << current.status();
    EXPECT_EQ(*current, expected_context) << "after " << after;
  };
  // Every entry point of a loaded plan and of the backend, then the results.
  const auto use = [&](LoadedPlan& plan_on_gpu, cuda::Context own) {
    ASSERT_TRUE(plan_on_gpu.set_inputs(inputs).ok());
    expect_current(own, "set_inputs");
    ASSERT_TRUE(plan_on_gpu.poison_outputs().ok());
    expect_current(own, "poison_outputs");
    ASSERT_TRUE(plan_on_gpu.run().ok());
    expect_current(own, "run");
    for (size_t k = 0; k < plan_on_gpu.kernels().size(); ++k) {
      ASSERT_TRUE(backend().flush_cache().ok());
      expect_current(own, "flush_cache");
      absl::StatusOr<double> us = plan_on_gpu.time_kernel(k);
      ASSERT_TRUE(us.ok()) << us.status();
      expect_current(own, "time_kernel");
    }
    absl::StatusOr<TensorMap> out = plan_on_gpu.outputs();
    ASSERT_TRUE(out.ok()) << out.status();
    expect_current(own, "outputs");
    EXPECT_TRUE(compare_tensors(out->at("y"), expected.at("y")).within(DType::kF32));
    absl::StatusOr<std::unique_ptr<CopyTimer>> copy = backend().prepare_copy(1 << 16);
    ASSERT_TRUE(copy.ok()) << copy.status();
    expect_current(own, "prepare_copy");
    ASSERT_TRUE((*copy)->time_us().ok());
    expect_current(own, "a copy");
    copy->reset();
    expect_current(own, "destroying a copy");
  };

  std::unique_ptr<LoadedPlan> loaded;
  std::thread([&] {  // a new thread has no context current
    absl::StatusOr<std::unique_ptr<LoadedPlan>> l = backend().load(plan);
    ASSERT_TRUE(l.ok()) << l.status();
    loaded = *std::move(l);
    expect_current(nullptr, "load");
    use(*loaded, nullptr);
  })
      .join();
  ASSERT_NE(loaded, nullptr);
  if (cuda_driver_is_emulator()) {  // a real driver would take a made-up handle for a context and crash
    std::thread([&] {
      int programs_own = 0;
      auto* own = reinterpret_cast<cuda::Context>(&programs_own);
      absl::StatusOr<cuda::ContextScope> scope = cuda::ContextScope::enter(own);
      ASSERT_TRUE(scope.ok()) << scope.status();
      use(*loaded, own);
      absl::StatusOr<std::unique_ptr<LoadedPlan>> second = backend().load(plan);
      ASSERT_TRUE(second.ok()) << second.status();
      expect_current(own, "load");
      second->reset();
      expect_current(own, "destroying a plan");
    }).join();
  }
  std::thread([&] {
    loaded.reset();
    expect_current(nullptr, "destroying a plan");
  }).join();
  EXPECT_TRUE(warnings.messages().empty()) << warnings.text();
}

// cuda:N runs on GPU N, in its own primary context, retained while the
// backend lives and released after it, and plans match the reference there
// as on GPU 0 in the same process. A number the machine lacks is refused
// with the count. On the emulator two devices for this test: a module used
// in the other device's context, or a context released more often than
// retained, is an error there, as on a GPU.
TEST_F(GpuBackend, CudaColonNRunsOnGpuN) {
  std::optional<testing::ScopedEnv> two;
  if (cuda_driver_is_emulator()) two.emplace("FUSEJIT_EMULATOR_DEVICES", "2");
  absl::StatusOr<int> count = cuda::device_count();
  ASSERT_TRUE(count.ok()) << count.status();
  absl::StatusOr<std::unique_ptr<Backend>> missing = make_backend(fmt::format("cuda:{}", *count));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_TRUE(testing::contains(status_text(missing.status()),
                                fmt::format("there is no CUDA device {}: this machine has", *count)))
      << missing.status();
  for (const char* bad : {"cuda:", "cuda:-1", "cuda:x", "cuda:12345", "cuda1"}) {
    EXPECT_EQ(make_backend(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  if (*count < 2) GTEST_SKIP() << "one GPU: cuda:1 is refused (checked); running on a second needs two";

  const int last = *count - 1;
  absl::StatusOr<GpuInfo> info = query_gpu(last);
  ASSERT_TRUE(info.ok()) << info.status();
  const SmallPlan small = small_plan(5);
  const ScopedWarningSink warnings;
  {  // its own primary context, the one the CUDA runtime would use on it
    absl::StatusOr<std::shared_ptr<cuda_backend::CudaGpu>> gpu = cuda_backend::CudaGpu::open(last);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    EXPECT_EQ((*gpu)->device(), last);
    absl::StatusOr<cuda::Context> primary = cuda::retain_primary_context(last);
    ASSERT_TRUE(primary.ok()) << primary.status();
    EXPECT_EQ((*gpu)->context(), *primary);
    EXPECT_TRUE(cuda::release_primary_context(last).ok());
  }
  for (int round = 0; round < 2; ++round) {  // a second round finds the first's releases balanced
    absl::StatusOr<std::unique_ptr<Backend>> gpu_n = make_backend(fmt::format("cuda:{}", last));
    ASSERT_TRUE(gpu_n.ok()) << gpu_n.status();
    const std::string description = (*gpu_n)->description();
    EXPECT_TRUE(testing::contains(description, info->name + " (GPU " + std::to_string(last) + ", ")) << description;
    for (Backend* b : {gpu_n->get(), &backend()}) {
      absl::StatusOr<TensorMap> out = run_plan(*b, small.plan, small.inputs);
      ASSERT_TRUE(out.ok()) << b->description() << ": " << out.status();
      EXPECT_TRUE(compare_tensors(out->at("y"), small.expected.at("y")).within(DType::kF32)) << b->description();
    }
  }
  EXPECT_TRUE(warnings.messages().empty()) << warnings.text();
}

// `fusejit devices` names every GPU: GPU 0, which --backend auto takes, and
// a line for each other one, which --backend cuda:N runs on. Two on the
// emulator; on a GPU machine, as many as it has.
TEST_F(GpuBackend, DevicesNamesEveryGpu) {
  const std::string two = cuda_driver_is_emulator() ? "env FUSEJIT_EMULATOR_DEVICES=2 " : "";
  const testing::CommandResult text = testing::run_command(two + FUSEJIT_CLI_PATH + " devices");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const testing::CommandResult json = testing::run_command(two + FUSEJIT_CLI_PATH + " devices --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json parsed = nlohmann::json::parse(json.out);
  EXPECT_EQ(parsed["gpu"]["usable"], true) << json.out;
  absl::StatusOr<int> count = cuda::device_count();
  ASSERT_TRUE(count.ok()) << count.status();
  const int gpus = cuda_driver_is_emulator() ? 2 : *count;
  ASSERT_EQ(parsed["other_gpus"].size(), static_cast<size_t>(gpus - 1)) << json.out;
  for (int n = 1; n < gpus; ++n) {
    const std::string backend = fmt::format("cuda:{}", n);
    EXPECT_EQ(parsed["other_gpus"][n - 1]["backend"], backend) << json.out;
    EXPECT_TRUE(testing::contains(text.out, "  and --backend " + backend + ": ")) << text.out;
  }
  EXPECT_TRUE(testing::contains(
      text.out, gpus > 1 ? "--backend auto runs on it (--backend cuda:0)" : "--backend auto runs on it\n"))
      << text.out;
  if (cuda_driver_is_emulator()) {
    EXPECT_TRUE(testing::contains(text.out, "cuda:1: fusejit CUDA emulator (CPU fibers, sm_90) #1 (sm_90, 4 SMs)"))
        << text.out;
  }
}

TEST_F(GpuBackend, LoadedPlanOutlivesItsBackend) {
  const Graph g = parse_or_throw("input x: bf16[8, 24]\ny = softmax(x)\noutput y\n");
  const FusionPlan plan = make_fused_plan(g);
  std::unique_ptr<LoadedPlan> loaded;
  {
    absl::StatusOr<std::unique_ptr<Backend>> second = make_cuda_backend();
    ASSERT_TRUE(second.ok()) << second.status();
    absl::StatusOr<std::unique_ptr<LoadedPlan>> l = (*second)->load(plan);
    ASSERT_TRUE(l.ok()) << l.status();
    loaded = *std::move(l);
  }
  const TensorMap inputs = random_inputs(g, 9);
  ASSERT_TRUE(loaded->set_inputs(inputs).ok());
  ASSERT_TRUE(loaded->run().ok());
  absl::StatusOr<TensorMap> out = loaded->outputs();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(compare_tensors(out->at("y"), interpret_plan(plan, inputs)->at("y")).within(DType::kBF16));
}

}  // namespace
}  // namespace fusejit
