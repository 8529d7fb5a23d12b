// The CPU cost model's 16-bit conversions: what each kernel shape widens,
// narrows and rounds, and that they count on the CPU only.
#include "cost/cpu_conversions.h"

#include <gtest/gtest.h>

#include "cost/cost_model.h"
#include "fusejit.h"
#include "fusion/cpu_output_stores.h"
#include "support/graph_variants.h"

namespace fusejit {
namespace {

using testing::parse_or_throw;

double only_kernel_conversions(const Graph& g) {
  const FusionPlan plan = make_fused_plan(g);
  EXPECT_EQ(plan.kernels.size(), 1u) << describe(plan);
  return cpu_conversion_ops(plan, plan.kernels[0], DeviceSpec{});  // portable conversions
}

constexpr double kElements = 64.0 * 1000;

TEST(CpuConversions, Float32KernelsConvertNothing) {
  EXPECT_EQ(only_kernel_conversions(parse_or_throw(
                "input x: f32[64, 1000]\ninput b: f32[1000]\nh = add(x, b)\ny = layer_norm(h)\noutput h, y")),
            0);
}

// A pointwise tile widens every element it uses, the broadcast bias's
// included, and narrows what it stores.
TEST(CpuConversions, PointwiseWidensEveryOperandElementAndNarrowsTheOutput) {
  EXPECT_EQ(only_kernel_conversions(parse_or_throw("input x: bf16[64, 1000]\ninput b: bf16[1000]\ny = add(x, b)\noutput y")),
            kElements * (2 * kCpuWidenBf16 + kCpuNarrowBf16));
  EXPECT_EQ(only_kernel_conversions(parse_or_throw("input x: f16[64, 1000]\ny = neg(x)\noutput y")),
            kElements * (kCpuWidenF16 + kCpuNarrowF16));
  // A mixed kernel converts only its 16-bit tensors.
  EXPECT_EQ(only_kernel_conversions(parse_or_throw("input x: f32[64, 1000]\ny = cast(x, dtype=bf16)\noutput y")),
            kElements * kCpuNarrowBf16);
}

// A row kernel widens a row-shaped read per element and an [N] vector
// once. A bf16 value that stays inside the kernel stays f32; one that is
// stored and also used is used as stored: narrowed once, widened again.
TEST(CpuConversions, RowKernelsConvertRowsOnceAndKeepIntermediatesInF32) {
  EXPECT_EQ(only_kernel_conversions(
                parse_or_throw("input x: bf16[64, 1000]\ninput g: bf16[1000]\ny = layer_norm(x, g)\noutput y")),
            kElements * (kCpuWidenBf16 + kCpuNarrowBf16) + 1000 * kCpuWidenBf16);
  const double kept_inside = only_kernel_conversions(
      parse_or_throw("input x: bf16[64, 1000]\ninput r: bf16[64, 1000]\nh = add(x, r)\ny = layer_norm(h)\noutput y"));
  EXPECT_EQ(kept_inside, kElements * (2 * kCpuWidenBf16 + kCpuNarrowBf16));
  const double rounded_and_stored = only_kernel_conversions(
      parse_or_throw("input x: bf16[64, 1000]\ninput r: bf16[64, 1000]\nh = add(x, r)\ny = layer_norm(h)\noutput h, y"));
  EXPECT_EQ(rounded_and_stored, kElements * (2 * kCpuWidenBf16 + 2 * kCpuNarrowBf16 + kCpuWidenBf16));
}

// With AVX512-BF16 (F16C) a bf16 (f16) output stored from an array
// (streamed, or a dropout result) is narrowed by one instruction per
// vector; one stored in its loop by the portable code.
TEST(CpuConversions, NativeNarrowingPricesOnlyTheStoresThatUseIt) {
  auto ops = [](const std::string& text, bool bf16, bool f16) {
    const FusionPlan plan = make_fused_plan(parse_or_throw(text));
    EXPECT_EQ(plan.kernels.size(), 1u) << describe(plan);
    DeviceSpec cpu;
    cpu.native_bf16_stores = bf16;
    cpu.native_f16_stores = f16;
    return cpu_conversion_ops(plan, plan.kernels[0], cpu);
  };
  constexpr double kStreamed = 4096.0 * 2048;  // 16 MiB of bf16: streamed
  static_assert(kStreamed * 2 == kCpuStreamingStoreBytes);
  const std::string streamed = "input x: bf16[4096, 2048]\ny = neg(x)\noutput y";
  EXPECT_EQ(ops(streamed, true, false), kStreamed * (kCpuWidenBf16 + kCpuNarrowBf16Native));
  EXPECT_EQ(ops(streamed, false, true), kStreamed * (kCpuWidenBf16 + kCpuNarrowBf16));
  const std::string f16 = "input x: f16[4096, 2048]\ny = neg(x)\noutput y";
  EXPECT_EQ(ops(f16, false, true), kStreamed * (kCpuWidenF16 + kCpuNarrowF16Native));
  EXPECT_EQ(ops(f16, true, false), kStreamed * (kCpuWidenF16 + kCpuNarrowF16));
  const std::string in_loop = "input x: bf16[64, 1000]\ny = neg(x)\noutput y";
  EXPECT_EQ(ops(in_loop, true, true), ops(in_loop, false, false));
  EXPECT_EQ(ops("input x: bf16[64, 1000]\ny = dropout(x, p=0.1)\noutput y", true, false),
            kElements * (kCpuWidenBf16 + kCpuNarrowBf16Native));
  // A streamed value also used: rounded in its loop, widened, and narrowed
  // again by its store.
  EXPECT_EQ(ops("input x: bf16[4096, 2048]\nh = neg(x)\ny = layer_norm(h)\noutput h, y", true, false),
            kStreamed * (kCpuWidenBf16 + kCpuNarrowBf16 + kCpuWidenBf16 + 2 * kCpuNarrowBf16Native));
}

TEST(CpuConversions, MatmulsAreLeftToTheirFlops) {
  EXPECT_EQ(only_kernel_conversions(parse_or_throw("input a: bf16[64, 128]\ninput b: bf16[128, 32]\n"
                                                   "c = matmul(a, b)\noutput c")),
            0);
}

// On the CPU the conversions add to the compute time at the simple class's
// rate; a GPU's instruction model counts its own and is left alone.
TEST(CpuConversions, CountOnTheCpuOnly) {
  const Graph g = parse_or_throw("input x: bf16[64, 1000]\ninput b: bf16[1000]\nh = add(x, b)\ny = gelu(h)\noutput y");
  const FusionPlan plan = make_fused_plan(g);
  ASSERT_EQ(plan.kernels.size(), 1u);
  DeviceSpec cpu = cpu_identity();
  cpu.compute_units = 1;  // no thread left idle on any machine (fusion/cpu_work_split.h)
  cpu.bandwidth_gbps = 50;
  cpu.peak_f32_tflops = 0.2;
  cpu.launch_overhead_us = 0;
  cpu.class_tflops.fill(0.1);
  const KernelCost with = estimate_kernel(plan, plan.kernels[0], cpu);
  const double ops = cpu_conversion_ops(plan, plan.kernels[0], cpu);
  EXPECT_GT(ops, 0);
  EXPECT_EQ(with.conversion_ops, ops);
  EXPECT_NEAR(with.compute_us, (with.flops + ops) / 0.1e12 * 1e6, 1e-9);
  EXPECT_EQ(with.flops, estimate_kernel(plan, plan.kernels[0], gpu_device("h100")).flops) << "conversions are no FLOPs";
  EXPECT_EQ(estimate_kernel(plan, plan.kernels[0], gpu_device("h100")).conversion_ops, 0);
}

}  // namespace
}  // namespace fusejit
