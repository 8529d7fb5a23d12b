// The seed figures of DESIGN.md §5, worked by hand, reproduced by the model.
#include <gtest/gtest.h>

#include "support/run_command.h"

#include "fusejit.h"

namespace fusejit {
namespace {

KernelCost only_kernel(const Graph& g, const DeviceSpec& device) {
  const FusionPlan plan = make_fused_plan(g, fusion_options_for(device));
  EXPECT_EQ(plan.kernels.size(), 1u) << describe(plan);
  return estimate_kernel(plan, plan.kernels[0], device);
}

TEST(CostModel, SquareBf16MatmulIsComputeBoundOnTensorCores) {
  Graph g;
  auto a = g.input("a", DType::kBF16, {4096, 4096});
  auto b = g.input("b", DType::kBF16, {4096, 4096});
  g.output("c", matmul(a, b));
  const KernelCost c = only_kernel(g, gpu_device("h100"));
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 4096 * 4096 * 4096);        // 1.37e11
  EXPECT_EQ(c.bytes(), 3ll * 4096 * 4096 * 2);                // 1.0e8
  EXPECT_NEAR(c.intensity, 1365.33, 0.01);
  EXPECT_EQ(c.unit, "tensor");
  EXPECT_TRUE(c.compute_bound);
  EXPECT_NEAR(c.predicted_us, 140.0, 2.0);  // 1.37e11 / 989e12 = 139 us, plus launch
}

TEST(CostModel, Bf16AddIsOneSixthOfAFlopPerByte) {
  Graph g;
  auto a = g.input("a", DType::kBF16, {4096, 4096});
  auto b = g.input("b", DType::kBF16, {4096, 4096});
  g.output("c", a + b);
  const KernelCost c = only_kernel(g, gpu_device("h100"));
  EXPECT_NEAR(c.intensity, 1.0 / 6.0, 1e-9);
  EXPECT_FALSE(c.compute_bound);
  EXPECT_EQ(c.unit, "fp32");
}

TEST(CostModel, SkinnyMatmulIntensityIsAbout16) {
  Graph g;
  auto a = g.input("a", DType::kBF16, {4096, 4096});
  auto b = g.input("b", DType::kBF16, {4096, 16});
  g.output("c", matmul(a, b));
  const KernelCost c = only_kernel(g, gpu_device("h100"));
  EXPECT_NEAR(c.intensity, 15.9, 0.1);
  EXPECT_FALSE(c.compute_bound);  // far below the tensor ridge of ~295
}

TEST(CostModel, BatchOneDecodeOfAn8BModelTakesAbout4point8ms) {
  // One token through 8e9 bf16 weights: a [1, 4096] x [4096, 1953125] GEMV.
  Graph g;
  auto x = g.input("x", DType::kBF16, {1, 4096});
  auto w = g.input("w", DType::kBF16, {4096, 1953125});
  g.output("y", matmul(x, w));
  const KernelCost c = only_kernel(g, gpu_device("h100"));
  EXPECT_NEAR(c.intensity, 1.0, 0.01);
  EXPECT_NEAR(c.predicted_us / 1000.0, 4.78, 0.05);  // 16 GB / 3.35 TB/s
}

TEST(CostModel, LayerNormIntensityIsAbout2) {
  Graph g;
  auto x = g.input("x", DType::kBF16, {8192, 4096});
  auto gamma = g.input("gamma", DType::kBF16, {4096});
  auto beta = g.input("beta", DType::kBF16, {4096});
  g.output("y", layer_norm(x, gamma, beta));
  const KernelCost c = only_kernel(g, gpu_device("h100"));
  EXPECT_GT(c.intensity, 1.5);
  EXPECT_LT(c.intensity, 2.5);
  EXPECT_FALSE(c.compute_bound);
}

TEST(CostModel, RidgePointsOfTheDatasheetGpus) {
  EXPECT_NEAR(gpu_device("h100").ridge_tensor(), 295.2, 0.1);  // 989 TFLOP/s / 3.35 TB/s
  EXPECT_NEAR(gpu_device("h100").ridge_f32(), 20.0, 0.1);
  EXPECT_NEAR(gpu_device("h200").ridge_tensor(), 206.0, 0.1);
  EXPECT_NEAR(gpu_device("a100").ridge_tensor(), 153.0, 0.1);
  EXPECT_FALSE(find_device("tpu").ok());
}

TEST(CostModel, GpuOpsRetireAtTheFp32InstructionRate) {
  // An op-table FLOP is one instruction, charged at the issue rate: on an
  // H100/H200 half the datasheet FLOP/s (which counts an FMA as 2).
  for (const char* name : {"h100", "h200", "a100"}) {
    const DeviceSpec d = gpu_device(name);
    for (int c = 0; c < kNumCostClasses; ++c) {
      const bool is_matmul = static_cast<CostClass>(c) == CostClass::kMatmul;
      const double want = is_matmul ? d.peak_tensor_tflops : d.peak_f32_tflops / 2;
      EXPECT_DOUBLE_EQ(d.class_tflops[c], want) << name << " " << cost_class_name(static_cast<CostClass>(c));
    }
    EXPECT_TRUE(d.ops_at_issue_rate()) << name;
    EXPECT_NE(format_device(d).find("elementwise and row ops"), std::string::npos) << format_device(d);
  }
  // An f32 matmul (SGEMM: FMAs) still runs at the full FP32 peak.
  Graph g;
  auto a = g.input("a", DType::kF32, {4096, 4096});
  auto b = g.input("b", DType::kF32, {4096, 4096});
  g.output("c", matmul(a, b));
  const KernelCost c = only_kernel(g, gpu_device("h100"));
  EXPECT_NEAR(c.compute_us, c.flops / 67e12 * 1e6, 1e-6);
}

TEST(CostModel, FusionSavingOfTheDemoChain) {
  Graph g;
  auto x = g.input("x", DType::kBF16, {8192, 4096});
  auto b = g.input("b", DType::kBF16, {4096});
  auto gamma = g.input("gamma", DType::kBF16, {4096});
  auto beta = g.input("beta", DType::kBF16, {4096});
  g.output("y", layer_norm(dropout(gelu(x + b), 0.1, 42), gamma, beta));
  for (const char* name : {"h100", "h200", "a100"}) {
    const DeviceSpec device = gpu_device(name);
    const PlanComparison c = compare_plans(make_unfused_plan(g), make_fused_plan(g), device);
    const int64_t tensor = 8192ll * 4096 * 2;
    EXPECT_EQ(c.fused.bytes, 2 * tensor + 3 * 4096 * 2) << name;
    EXPECT_EQ(c.bytes_saved, c.unfused.bytes - c.fused.bytes);
    EXPECT_EQ(c.kernels_saved, 3);
    // The fused kernel's 46 ops per element (GeLU 20, dropout 18, LayerNorm
    // 7, add 1) take longer to issue than its 4 bytes per element take to
    // move, on each of these GPUs: fusion saves 4x the bytes but less time.
    ASSERT_EQ(c.fused.kernels.size(), 1u);
    const KernelCost& fused = c.fused.kernels[0];
    // Per row, adding eps weighs 1 and rsqrt 4.
    EXPECT_DOUBLE_EQ(fused.flops, 46.0 * 8192 * 4096 + 8192 * (1 + 4)) << name;
    EXPECT_TRUE(fused.compute_bound) << name;
    EXPECT_NEAR(fused.predicted_us, fused.flops / (device.peak_f32_tflops / 2 * 1e12) * 1e6 + 1.0, 1e-6) << name;
    EXPECT_GT(c.predicted_speedup, 1.5) << name;
    EXPECT_LT(c.predicted_speedup, 4.0) << name;
  }
  // H200, by hand: unfused, four memory-bound kernels of ~134 MB at 4.8 TB/s
  // (+1 us launch each): 115.85 us; fused, 1.544e9 ops / 33.5e12 per s + 1 us.
  const PlanComparison h200 = compare_plans(make_unfused_plan(g), make_fused_plan(g), gpu_device("h200"));
  EXPECT_NEAR(h200.unfused.predicted_us, 115.85, 0.05);
  EXPECT_NEAR(h200.fused.predicted_us, 47.08, 0.05);
}

TEST(CostModel, CpuDeviceIsMeasuredAndCached) {
  const std::string dir = testing::make_temp_dir("fusejit-cost-cache");  // fresh: measured, not read
  setenv("FUSEJIT_CACHE_DIR", dir.c_str(), 1);
  const DeviceSpec first = cpu_device();
  EXPECT_TRUE(first.measured);
  EXPECT_GT(first.bandwidth_gbps, 0.1);
  EXPECT_GT(first.peak_f32_tflops, 1e-3);
  // Philox and erf run far below the FMA peak on a CPU: this is what makes
  // the demo chain compute-bound there.
  EXPECT_LT(first.class_tflops[static_cast<int>(CostClass::kPhilox)], first.peak_f32_tflops);
  EXPECT_LT(first.class_tflops[static_cast<int>(CostClass::kErf)], first.peak_f32_tflops);
  const DeviceSpec second = cpu_device();  // from the cache: the same figures
  EXPECT_EQ(second.bandwidth_gbps, first.bandwidth_gbps);
  EXPECT_EQ(second.class_tflops, first.class_tflops);
  // CPU row kernels read a row once however long it is: no plan for the CPU
  // re-reads rows (and so predicts re-read bytes or recomputed FLOPs).
  EXPECT_EQ(first.persistent_row_limit, kAnyRowLength);
  Graph g;
  auto x = g.input("x", DType::kF16, {16, 40000});
  g.output("y", layer_norm(gelu(x)));
  const FusionPlan fused = make_fused_plan(g, fusion_options_for(first));
  ASSERT_EQ(fused.kernels.size(), 1u);
  EXPECT_EQ(fused.kernels[0].row_strategy, RowStrategy::kPersistent);
  const PlanComparison c = compare_plans(make_unfused_plan(g, fusion_options_for(first)), fused, first);
  EXPECT_GT(c.predicted_speedup, 1.0);
  EXPECT_NE(format_device(first).find("rows of any length read once"), std::string::npos) << format_device(first);
  unsetenv("FUSEJIT_CACHE_DIR");
}

}  // namespace
}  // namespace fusejit
