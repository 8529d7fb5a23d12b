// The seed figures of DESIGN.md §5, worked by hand, reproduced by the model.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <absl/strings/str_split.h>

#include "support/run_command.h"

#include "cost/gpu_instructions.h"
#include "cost/machine_load.h"
#include "cost/report.h"
#include "fusejit.h"
#include "fusion/gpu_row_shape.h"
#include "support/error_of.h"
#include "support/graph_variants.h"

namespace fusejit {
namespace {

// The `cpu` device with made-up figures: `threads` threads, 100 GB/s, every
// op class at `tflops`, `launch_us` per launch.
DeviceSpec made_up_cpu(int threads, double tflops, double launch_us) {
  DeviceSpec cpu = cpu_identity();
  cpu.compute_units = threads;
  cpu.bandwidth_gbps = 100;
  cpu.class_tflops.fill(tflops);
  cpu.launch_overhead_us = launch_us;
  return cpu;
}

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

// cuBLAS takes no f16 x bf16 pair: on a GPU each 16-bit operand is widened
// into an f32 copy first (read 2 bytes, write 4, launch), then SGEMM reads
// the copies. The CPU's GEMM widens as it loads: the tensors' own bytes.
TEST(CostModel, AMixedDtypeMatmulOnAGpuPaysForWideningItsOperands) {
  Graph g;
  auto a = g.input("a", DType::kF16, {256, 512});
  auto b = g.input("b", DType::kBF16, {512, 128});
  auto c = g.input("c", DType::kF32, {128, 64});
  g.output("y", matmul(matmul(a, b), c));  // the second: f32 x f32
  const DeviceSpec h100 = gpu_device("h100");
  const FusionPlan plan = make_fused_plan(g, fusion_options_for(h100));
  ASSERT_EQ(plan.kernels.size(), 2u);
  const KernelCost mixed = estimate_kernel(plan, plan.kernels[0], h100);
  const int64_t na = 256 * 512, nb = 512 * 128;
  EXPECT_EQ(mixed.bytes_read, (na + nb) * (2 + 4));
  EXPECT_EQ(mixed.bytes_written, (na + nb) * 4 + 256 * 128 * 4);
  EXPECT_EQ(mixed.unit, "fp32");
  // The widening kernels (6 bytes an element) run before the GEMM, which
  // reads the f32 copies and writes its result.
  const double widen_us = (na + nb) * 6 / (h100.bandwidth_gbps * 1e3);
  const double gemm_memory_us = ((na + nb) * 4 + 256 * 128 * 4) / (h100.bandwidth_gbps * 1e3);
  EXPECT_NEAR(mixed.memory_us, widen_us + gemm_memory_us, 1e-9);
  EXPECT_NEAR(mixed.predicted_us, std::max(gemm_memory_us, mixed.compute_us) + widen_us + 3 * h100.launch_overhead_us,
              1e-9);
  const KernelCost same = estimate_kernel(plan, plan.kernels[1], h100);
  EXPECT_EQ(same.bytes(), (256 * 128 + 128 * 64 + 256 * 64) * 4);
  EXPECT_NEAR(same.predicted_us, std::max(same.memory_us, same.compute_us) + h100.launch_overhead_us, 1e-9);
  // A 16-bit operand with an f32 one, either way round: one widening.
  for (const bool bf16_first : {true, false}) {
    Graph one;
    auto p = one.input("p", bf16_first ? DType::kBF16 : DType::kF32, {256, 512});
    auto q = one.input("q", bf16_first ? DType::kF32 : DType::kBF16, {512, 128});
    one.output("y", matmul(p, q));
    const FusionPlan single = make_fused_plan(one, fusion_options_for(h100));
    const KernelCost c = estimate_kernel(single, single.kernels.at(0), h100);
    const int64_t widened = bf16_first ? na : nb, kept = bf16_first ? nb : na;
    EXPECT_EQ(c.bytes_read, widened * (2 + 4) + kept * 4) << bf16_first;
    EXPECT_EQ(c.bytes_written, widened * 4 + 256 * 128 * 4) << bf16_first;
    const double w_us = widened * 6 / (h100.bandwidth_gbps * 1e3);
    EXPECT_NEAR(c.predicted_us, std::max(c.memory_us - w_us, c.compute_us) + w_us + 2 * h100.launch_overhead_us, 1e-9)
        << bf16_first;
  }
  DeviceSpec cpu_like = h100;  // a device that does not model instructions: the CPU backend's GEMM
  cpu_like.issue_tops = 0;
  // C is written with ordinary stores, so read first (write-allocate).
  const KernelCost on_cpu = estimate_kernel(plan, plan.kernels[0], cpu_like);
  EXPECT_EQ(on_cpu.write_allocate_bytes, 256 * 128 * 4);
  EXPECT_EQ(on_cpu.bytes(), (na + nb) * 2 + 2 * 256 * 128 * 4);
}

// The CPU's GEMM packs all of B once per row block of each thread's rows
// (cpu_matmul_packed_elements), which the model charges at the measured
// packing rate beside the multiply-adds: a 16-row matmul pays as much
// packing as a 132-row one. Without a packing rate (not measured) only
// the multiply-adds count.
TEST(CostModel, ACpuMatmulPaysForPackingBInEachRowBlock) {
  DeviceSpec cpu = made_up_cpu(/*threads=*/2, /*tflops=*/0.2, /*launch_us=*/0);
  cpu.thread_bandwidth_gbps = 50;
  auto cost = [&](int64_t m, double pack_gelems) {
    DeviceSpec d = cpu;
    d.matmul_pack_gelems = pack_gelems;
    const Graph g = testing::parse_or_throw(
        fmt::format("input x: f32[{}, 1024]\ninput w: f32[1024, 1024]\ny = matmul(x, w)\noutput y\n", m));
    return only_kernel(g, d);
  };
  const double b = 1024.0 * 1024;
  for (int64_t m : {16, 132, 264, 400}) {
    const KernelCost without = cost(m, 0);
    const KernelCost with = cost(m, 10);
    // Each thread packs B once per block of its rows, at half of the
    // machine's rate (10e9 elements/s over two threads).
    const int threads = m < 64 ? 1 : 2;
    const double blocks_per_thread = m == 400 ? 2 : 1;
    EXPECT_EQ(with.threads, threads) << m;
    EXPECT_NEAR(with.compute_us - without.compute_us, blocks_per_thread * b / (10e9 / 2) * 1e6, 1e-6) << m;
    EXPECT_NEAR(with.predicted_us - without.predicted_us, with.compute_us - without.compute_us, 1e-6) << m;
    EXPECT_EQ(with.flops, without.flops) << m;  // packing is not FLOPs
  }
  // A GPU's matmul runs in cuBLAS: no packing, whatever the figure says.
  DeviceSpec h100 = gpu_device("h100");
  const Graph g =
      testing::parse_or_throw("input x: f32[16, 1024]\ninput w: f32[1024, 1024]\ny = matmul(x, w)\noutput y\n");
  const KernelCost plain = only_kernel(g, h100);
  h100.matmul_pack_gelems = 10;
  EXPECT_EQ(only_kernel(g, h100).predicted_us, plain.predicted_us);

  // The device says so, and the figure is checked like the others.
  cpu.matmul_pack_gelems = 12.5;
  cpu.peak_f32_tflops = 1;
  cpu.measured = true;
  EXPECT_NE(format_device(cpu).find("B packed at 12.5e9 elements/s"), std::string::npos) << format_device(cpu);
  EXPECT_EQ(device_json(cpu)["matmul_pack_gelems"], 12.5);
  EXPECT_TRUE(device_json(cpu_identity())["matmul_pack_gelems"].is_null());
  EXPECT_TRUE(plausible_measured_figures(cpu));
  for (double bad : {-1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    DeviceSpec d = cpu;
    d.matmul_pack_gelems = bad;
    EXPECT_FALSE(plausible_measured_figures(d)) << bad;
  }
  // The better of two measurements keeps the GEMM's two figures together,
  // from the one that runs a row block faster: never a packing rate from
  // one beside a rate with packing in it from the other.
  const int gemm = static_cast<int>(CostClass::kMatmul);
  DeviceSpec slower = cpu;
  slower.matmul_pack_gelems = 3;
  EXPECT_EQ(better_measured_figures(slower, cpu).matmul_pack_gelems, 12.5);
  EXPECT_EQ(better_measured_figures(cpu, slower).matmul_pack_gelems, 12.5);
  DeviceSpec together = cpu;  // no packing rate: the multiply-adds' rate has the packing in it
  together.matmul_pack_gelems = 0;
  together.class_tflops[gemm] = 0.18;  // 0.2 and packing at 12.5e9/s run a block as 0.1886 with packing in it
  for (const DeviceSpec& d : {better_measured_figures(together, cpu), better_measured_figures(cpu, together)}) {
    EXPECT_EQ(d.class_tflops[gemm], 0.2);
    EXPECT_EQ(d.matmul_pack_gelems, 12.5);
  }
  together.class_tflops[gemm] = 0.19;  // now a block runs faster so
  for (const DeviceSpec& d : {better_measured_figures(together, cpu), better_measured_figures(cpu, together)}) {
    EXPECT_EQ(d.class_tflops[gemm], 0.19);
    EXPECT_EQ(d.matmul_pack_gelems, 0) << "not 12.5 beside a rate that has the packing in it";
  }
}

// A CPU kernel of one chunk runs on the calling thread and wakes no pool
// thread, so it does not pay the launch overhead (the pool's hand-off);
// one split over threads does. A GPU kernel always pays its launch.
TEST(CostModel, OnlyACpuKernelSplitOverThreadsPaysTheLaunch) {
  DeviceSpec cpu = made_up_cpu(/*threads=*/2, /*tflops=*/0.01, /*launch_us=*/40);
  auto exp_of = [](int64_t n) {
    Graph g;
    g.output("y", exp(g.input("x", DType::kF32, {n})));
    return g;
  };
  const KernelCost small = only_kernel(exp_of(4096), cpu);  // under two grains of 16384: one chunk
  EXPECT_EQ(small.threads, 1);
  EXPECT_NEAR(small.predicted_us, small.memory_us + small.compute_us, 1e-9);
  const KernelCost large = only_kernel(exp_of(1 << 20), cpu);
  EXPECT_EQ(large.threads, 2);
  EXPECT_NEAR(large.predicted_us, large.memory_us + large.compute_us + 40, 1e-9);
  cpu.compute_units = 1;  // one thread: every kernel runs on the caller
  const KernelCost alone = only_kernel(exp_of(1 << 20), cpu);
  EXPECT_NEAR(alone.predicted_us, alone.memory_us + alone.compute_us, 1e-9);
  const DeviceSpec h100 = gpu_device("h100");
  const KernelCost gpu = only_kernel(exp_of(4096), h100);
  EXPECT_GE(gpu.predicted_us, h100.launch_overhead_us);
}

// A CPU store of an ordinary (not streaming) kind first reads the line it
// writes: an output under 16 MiB is charged again as a read; a streamed
// one of 16 MiB or more, and any output on a GPU, is not.
TEST(CostModel, ACpuOutputStoredOrdinarilyIsAlsoRead) {
  const DeviceSpec cpu = made_up_cpu(/*threads=*/2, /*tflops=*/1, /*launch_us=*/0);
  const DeviceSpec h100 = gpu_device("h100");
  auto relu_of = [](int64_t n) {
    Graph g;
    g.output("y", relu(g.input("x", DType::kF32, {n})));
    return g;
  };
  for (int64_t n : {int64_t{4194000}, int64_t{4194304}}) {
    const bool streamed = n * 4 >= kCpuStreamingStoreBytes;
    const KernelCost c = only_kernel(relu_of(n), cpu);
    EXPECT_EQ(c.write_allocate_bytes, streamed ? 0 : n * 4) << n;
    EXPECT_EQ(c.bytes_read, (streamed ? 1 : 2) * n * 4) << n;
    EXPECT_EQ(c.bytes_written, n * 4) << n;
    EXPECT_NEAR(c.memory_us, static_cast<double>(c.bytes()) / 100e3, 1e-9) << n;
    const KernelCost g = only_kernel(relu_of(n), h100);
    EXPECT_EQ(g.write_allocate_bytes, 0) << n;
    EXPECT_EQ(g.bytes(), 2 * n * 4) << n;
  }
}

// A row kernel streams a row-shaped output only in blocks that start on a
// line: rows of 1000 f32 (4000 bytes) start on one every other row, and
// each of those stores its last 8 elements ordinarily; rows of 1024 are
// all streamed. A per-row output is stored ordinarily at any size.
TEST(CostModel, ACpuRowKernelPaysWriteAllocateForRowsItCannotStream) {
  const DeviceSpec cpu = made_up_cpu(/*threads=*/2, /*tflops=*/1, /*launch_us=*/0);
  auto scaled_rows = [](int64_t n) {
    Graph g;
    auto x = g.input("x", DType::kF32, {8192, n});
    g.output("y", x * sum(x));
    return g;
  };
  EXPECT_EQ(only_kernel(scaled_rows(1000), cpu).write_allocate_bytes, 4096 * 4000 + 4096 * 8 * 4);
  EXPECT_EQ(only_kernel(scaled_rows(1008), cpu).write_allocate_bytes, 8192 * 16 * 4);  // every row aligned; tails
  EXPECT_EQ(only_kernel(scaled_rows(1024), cpu).write_allocate_bytes, 0);
  Graph sums;
  sums.output("s", sum(sums.input("x", DType::kF32, {4194304, 8})));  // 16 MiB of per-row sums
  EXPECT_EQ(only_kernel(sums, cpu).write_allocate_bytes, 4194304 * 4);
}

// A broadcast read is charged once while its next use is within the
// device's cache, and once per use where it is not: a [4096, 4096] table
// over [4, 4096, 4096] is used again 144 MiB of traffic later, beyond a
// 32 MiB cache and an H100's 50 MiB L2; a [4096] bias 4096 elements later.
TEST(CostModel, ABroadcastReadTheCacheCannotKeepIsChargedOnEachUse) {
  auto add_of = [](Shape x_shape, Shape b_shape) {
    Graph g;
    g.output("y", g.input("x", DType::kF32, x_shape) + g.input("b", DType::kF32, b_shape));
    return g;
  };
  DeviceSpec cpu = made_up_cpu(/*threads=*/2, /*tflops=*/1, /*launch_us=*/0);
  cpu.cache_bytes = int64_t{32} << 20;
  const int64_t table = int64_t{4096} * 4096 * 4;
  for (const DeviceSpec& device : {cpu, gpu_device("h100")}) {
    const KernelCost c = only_kernel(add_of({4, 4096, 4096}, {4096, 4096}), device);
    EXPECT_EQ(c.broadcast_reread_bytes, 3 * table) << device.name;
    EXPECT_EQ(c.bytes_read, 4 * table + 4 * table) << device.name;  // x, then the table 4 times
    // A larger cache keeps it: read once.
    DeviceSpec big = device;
    big.cache_bytes = int64_t{1} << 30;
    EXPECT_EQ(only_kernel(add_of({4, 4096, 4096}, {4096, 4096}), big).broadcast_reread_bytes, 0) << device.name;
    // A cache of unknown size charges nothing extra.
    DeviceSpec unknown = device;
    unknown.cache_bytes = 0;
    EXPECT_EQ(only_kernel(add_of({4, 4096, 4096}, {4096, 4096}), unknown).broadcast_reread_bytes, 0);
    // A bias along rows, a per-row scalar: next uses close by.
    EXPECT_EQ(only_kernel(add_of({16384, 4096}, {4096}), device).broadcast_reread_bytes, 0) << device.name;
    EXPECT_EQ(only_kernel(add_of({16384, 4096}, {16384, 1}), device).broadcast_reread_bytes, 0) << device.name;
  }
  // Broadcast along two dimensions, an outer one beyond the cache and an
  // inner one within it: [64, 1, 1 << 20] over [8, 64, 4, 1 << 20] is
  // used 4 times in a row, 1M elements (about 8 MiB of traffic) apart,
  // kept; and again 64 x 4 x 1M elements (2 GiB) later, beyond: read 8 times.
  const KernelCost two = only_kernel(add_of({8, 64, 4, 1 << 20}, {64, 1, 1 << 20}), cpu);
  EXPECT_EQ(two.broadcast_reread_bytes, 7 * int64_t{64} * (1 << 20) * 4);
}

// A GPU kernel's instructions issue only on the SMs its blocks occupy: a
// softmax over 4 long rows (a block each) uses 4 of an H100's 132 SMs; a
// bf16 add of 196608 elements (8 per step, 256 steps a block) 96.
TEST(CostModel, AGpuKernelOfFewBlocksIssuesOnlyOnTheSmsItOccupies) {
  const DeviceSpec h100 = gpu_device("h100");
  Graph few_rows;
  few_rows.output("y", softmax(few_rows.input("x", DType::kF32, {4, 1 << 20})));
  const KernelCost rows = only_kernel(few_rows, h100);
  EXPECT_DOUBLE_EQ(rows.active_sm_share, 4.0 / 132);
  EXPECT_NEAR(rows.compute_us, rows.instructions / (h100.issue_tops * 4.0 / 132) / 1e6, 1e-9);
  EXPECT_TRUE(rows.compute_bound);

  Graph small_add;
  small_add.output("y", small_add.input("x", DType::kBF16, {256, 768}) + small_add.input("b", DType::kBF16, {768}));
  EXPECT_DOUBLE_EQ(only_kernel(small_add, h100).active_sm_share, 96.0 / 132);

  Graph many_rows;
  many_rows.output("y", softmax(many_rows.input("x", DType::kF32, {16384, 4096})));
  const KernelCost full = only_kernel(many_rows, h100);
  EXPECT_EQ(full.active_sm_share, 1.0);
  EXPECT_NEAR(full.compute_us, full.instructions / h100.issue_tops / 1e6, 1e-9);
  EXPECT_EQ(only_kernel(many_rows, made_up_cpu(2, 1, 0)).active_sm_share, 0.0) << "not a GPU";
}

// The options of a device weigh a re-reading kernel's ops by predicted
// time. GeLU then softmax over 4 rows of 1M on an H100: fused whole, the
// GeLU is computed in each of 3 passes on the 4 SMs the rows occupy
// (predicted 0.46x the unfused plan's speed, though it moves fewer bytes);
// weighed by time it keeps a kernel of its own, over every SM.
TEST(CostModel, ADevicesFusionOptionsWeighKernelsByPredictedTime) {
  const DeviceSpec h100 = gpu_device("h100");
  Graph g;
  g.output("y", softmax(gelu(g.input("x", DType::kF32, {4, 1 << 20}))));
  const FusionOptions options = fusion_options_for(h100);
  ASSERT_TRUE(options.kernel_weight);
  const FusionPlan unfused = make_unfused_plan(g, options);

  FusionOptions by_bytes = options;
  by_bytes.kernel_weight = nullptr;
  const FusionPlan whole = make_fused_plan(g, by_bytes);
  ASSERT_EQ(whole.kernels.size(), 1u);
  EXPECT_LT(compare_plans(unfused, whole, h100).predicted_speedup, 0.5);

  const FusionPlan by_time = make_fused_plan(g, options);
  ASSERT_EQ(by_time.kernels.size(), 2u);
  EXPECT_EQ(by_time.kernels[0].user_ops, std::vector<std::string>{"gelu"});
  const PlanComparison c = compare_plans(unfused, by_time, h100);
  EXPECT_GE(c.predicted_speedup, 1.0);
  EXPECT_GT(c.fused.bytes, estimate_plan(whole, h100).bytes) << "time, not bytes, chose it";
  EXPECT_DOUBLE_EQ(options.kernel_weight(by_time, by_time.kernels[1]),
                   estimate_kernel(by_time, by_time.kernels[1], h100).predicted_us);
}

// Times under 0.01 us keep two significant digits, not "0.00 us -> 0.00
// us" beside a speedup; an intensity over 1000 prints as a number.
TEST(CostReport, TinyTimesAndLargeIntensitiesAreLegible) {
  PlanComparison c;
  c.unfused.predicted_us = 0.003;
  c.fused.predicted_us = 0.0016;
  c.predicted_speedup = 1.875;
  EXPECT_NE(format_saving(c).find("predicted speedup 1.88x (0.003 us -> 0.0016 us)"), std::string::npos)
      << format_saving(c);
  c.unfused.predicted_us = 12.5;
  c.fused.predicted_us = 0;
  EXPECT_NE(format_saving(c).find("(12.50 us -> 0.00 us)"), std::string::npos) << format_saving(c);
  EXPECT_EQ(format_saving(c).find("predicted slower"), std::string::npos) << format_saving(c);
  c.predicted_speedup = 0.46;
  EXPECT_NE(format_saving(c).find("note: the fused plan is predicted slower than the unfused one"), std::string::npos)
      << format_saving(c);

  Graph g;
  g.output("y", matmul(g.input("a", DType::kBF16, {4096, 4096}), g.input("b", DType::kBF16, {4096, 4096})));
  const FusionPlan plan = make_fused_plan(g);
  const std::string table = format_plan_table(plan, estimate_plan(plan, gpu_device("h100")));
  EXPECT_NE(table.find(" 1365 "), std::string::npos) << table;
  EXPECT_EQ(table.find("e+03"), std::string::npos) << table;
}

// A kernel of a plan of another graph names nodes this plan's graph may
// lack: an error naming the kernel, not a read past the graph's nodes. A
// kernel of the other plan of the same graph is fine.
TEST(CostModel, AKernelOfAnotherGraphIsAnErrorNotACrash) {
  Graph small;
  auto x = small.input("x", DType::kF32, {64, 32});
  small.output("y", exp(x));
  Graph large;
  auto a = large.input("a", DType::kF32, {64, 32});
  large.output("b", layer_norm(relu(a) + 1.0));
  const DeviceSpec h100 = gpu_device("h100");
  const FusionPlan small_plan = make_fused_plan(small, fusion_options_for(h100));
  const FusionPlan large_unfused = make_unfused_plan(large, fusion_options_for(h100));
  const FusionPlan large_fused = make_fused_plan(large, fusion_options_for(h100));
  const Kernel& last = large_unfused.kernels.back();
  const std::string error = testing::error_of([&] { (void)estimate_kernel(small_plan, last, h100); });
  EXPECT_TRUE(error.starts_with("estimate_kernel: the fused plan: kernel " + last.name + " names node ")) << error;
  const FusionPlan no_graph;
  EXPECT_TRUE(testing::error_of([&] {
                (void)estimate_kernel(no_graph, last, h100);
              }).starts_with("estimate_kernel: the plan has no graph"));
  // Same graph, the other plan: the same figures as from its own plan.
  EXPECT_EQ(estimate_kernel(large_fused, last, h100).bytes(), estimate_kernel(large_unfused, last, h100).bytes());
}

// Bytes saved between plans of two graphs would be a confident, meaningless
// figure; plans of equal graphs held apart (each plan copies its graph) compare.
TEST(CostModel, PlansOfDifferentGraphsAreNotCompared) {
  Graph small;
  small.output("y", exp(small.input("x", DType::kF32, {64, 32})));
  Graph large;
  large.output("b", layer_norm(relu(large.input("a", DType::kF32, {64, 32})) + 1.0));
  const DeviceSpec h100 = gpu_device("h100");
  const std::string error =
      testing::error_of([&] { (void)compare_plans(make_unfused_plan(large), make_fused_plan(small), h100); });
  EXPECT_EQ(error,
            "compare_plans: the 'unfused' and 'fused' plans are plans of different graphs; compare two plans of "
            "one graph");
  EXPECT_EQ(testing::error_of([&] { (void)compare_plans(FusionPlan{}, make_fused_plan(small), h100); }),
            "compare_plans: the first (unfused) plan has no graph (a default-constructed FusionPlan); make plans with "
            "make_unfused_plan() and make_fused_plan()");
  Graph same = large;
  const PlanComparison c = compare_plans(make_unfused_plan(large), make_fused_plan(same), h100);
  EXPECT_GT(c.bytes_saved, 0);
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

// An erf-form GeLU from which only 16-bit values are computed runs a helper
// of its own (about twice as fast on a CPU), so its FLOPs go to the
// gelu_16bit class, which a CPU measures apart; f32 and tanh-form GeLUs stay
// in erf.
TEST(CostModel, A16BitExactGeluIsACostClassOfItsOwn) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const char* approximate : {"none", "tanh"}) {
      Graph g;
      auto x = g.input("x", dtype, {64, 1024});
      g.output("y", gelu(x, approximate));
      const bool own = dtype != DType::kF32 && std::string(approximate) == "none";
      const int32_t id = g.num_nodes() - 1;
      ASSERT_EQ(g.node(id).op, Op::kGelu);
      EXPECT_EQ(g.is_16bit_gelu(id), own) << dtype_name(dtype) << " " << approximate;
      EXPECT_EQ(g.cost_class(id), own ? CostClass::kGelu16Bit : CostClass::kErf) << dtype_name(dtype) << " " << approximate;
      DeviceSpec cpu = cpu_identity();
      cpu.bandwidth_gbps = 1e6;  // compute-bound: the class rates decide
      cpu.class_tflops.fill(1.0);
      cpu.class_tflops[static_cast<int>(CostClass::kGelu16Bit)] = 2.0;
      const KernelCost c = only_kernel(g, cpu);
      const double flops = 20.0 * 64 * 1024;
      EXPECT_DOUBLE_EQ(c.class_flops[static_cast<int>(CostClass::kGelu16Bit)], own ? flops : 0.0);
      EXPECT_DOUBLE_EQ(c.class_flops[static_cast<int>(CostClass::kErf)], own ? 0.0 : flops);
    }
  }
  EXPECT_EQ(cost_class_name(CostClass::kGelu16Bit), "gelu_16bit");
}

// A CPU core overlaps a kernel's memory and compute times little
// (DeviceSpec::overlap): the `cpu` device adds them; a share of the shorter
// that is overlapped comes off; a GPU's datasheet device overlaps all (the
// roofline's max).
TEST(CostModel, TheShareOfTheShorterTimeNotOverlappedAddsToTheLonger) {
  Graph g;
  auto x = g.input("x", DType::kF32, {1024, 1024});
  g.output("y", exp(x));
  // 2 threads: 1M elements split evenly, no thread left idle (fusion/cpu_work_split.h)
  DeviceSpec cpu = made_up_cpu(/*threads=*/2, /*tflops=*/0.01, /*launch_us=*/5);
  // x read, y (4 MiB, stored ordinarily) read for ownership and written
  const double memory_us = 12.0 * 1024 * 1024 / 100e3;                // 125.8
  const double compute_us = 8.0 * 1024 * 1024 / (0.01 * 1e12) * 1e6;  // 838.9, exp weighs 8
  for (double overlap : {0.0, 0.25, 1.0}) {
    cpu.overlap = overlap;
    const KernelCost c = only_kernel(g, cpu);
    EXPECT_NEAR(c.memory_us, memory_us, 1e-9);
    EXPECT_NEAR(c.compute_us, compute_us, 1e-9);
    EXPECT_TRUE(c.compute_bound);
    EXPECT_NEAR(c.predicted_us, compute_us + (1 - overlap) * memory_us + 5, 1e-9) << overlap;
  }
  // Memory-bound the same way: the compute share adds.
  cpu.class_tflops.fill(1.0);
  cpu.overlap = 0.5;
  const KernelCost m = only_kernel(g, cpu);
  EXPECT_FALSE(m.compute_bound);
  EXPECT_NEAR(m.predicted_us, memory_us + 0.5 * compute_us / 100 + 5, 1e-9);
  for (const char* gpu : {"h100", "h200", "a100"}) EXPECT_EQ(find_device(gpu)->overlap, 1.0) << gpu;
  EXPECT_EQ(cpu_identity().overlap, 0.0);
  EXPECT_EQ(find_device("cpu")->overlap, 0.0);

  // An overlap that is no fraction is no device's.
  DeviceSpec cached = cpu;
  cached.peak_f32_tflops = 1;  // cpu_identity() measures nothing
  for (double overlap : {0.0, 0.4, 1.0}) {
    cached.overlap = overlap;
    EXPECT_TRUE(plausible_measured_figures(cached)) << overlap;
  }
  for (double overlap : {-0.1, 1.5, std::nan(""), std::numeric_limits<double>::infinity()}) {
    cached.overlap = overlap;
    EXPECT_FALSE(plausible_measured_figures(cached)) << overlap;
  }
}

// The cheaper helper's error (2^-16 relative) is far below a 16-bit
// output's tolerance but not an f32 one's: a bf16 GeLU from which an f32
// value is computed (cast, or promoted with an f32 operand), however far
// downstream, takes the f32 helper; one whose values stay 16-bit through a
// LayerNorm keeps the cheap one.
TEST(Graph, A16BitGeluFeedingAnF32ValueIsNotTreatedAs16Bit) {
  auto gelu_of = [](Graph& g) {
    for (int32_t id = 0; id < g.num_nodes(); ++id) {
      if (g.node(id).op == Op::kGelu) return id;
    }
    return -1;
  };
  {
    Graph g;
    auto x = g.input("x", DType::kBF16, {8, 64});
    auto gamma = g.input("gamma", DType::kBF16, {64});
    g.output("y", layer_norm(dropout(gelu(x), 0.1, 1), gamma));
    EXPECT_TRUE(g.is_16bit_gelu(gelu_of(g)));
    EXPECT_FALSE(g.feeds_f32(gelu_of(g)));
  }
  {
    Graph g;
    auto x = g.input("x", DType::kBF16, {8, 64});
    g.output("y", cast(gelu(x), DType::kF32) - cast(x, DType::kF32));
    EXPECT_FALSE(g.is_16bit_gelu(gelu_of(g)));
    EXPECT_TRUE(g.feeds_f32(0));  // x too
  }
  {
    Graph g;
    auto x = g.input("x", DType::kF16, {8, 64});
    auto b = g.input("b", DType::kF32, {64});
    auto h = gelu(x) * 2.0;       // still f16 here
    g.output("h", h);
    g.output("y", sum(h + b));    // promoted to f32 two ops later
    EXPECT_FALSE(g.is_16bit_gelu(gelu_of(g)));
  }
  {
    // An f32 value computed from x but not from the GeLU leaves it 16-bit.
    Graph g;
    auto x = g.input("x", DType::kBF16, {8, 64});
    g.output("y", gelu(x));
    g.output("z", cast(x, DType::kF32));
    EXPECT_TRUE(g.is_16bit_gelu(gelu_of(g)));
    // Copies keep the marks.
    const Graph copy = g;
    EXPECT_TRUE(copy.is_16bit_gelu(gelu_of(g)));
    EXPECT_TRUE(copy.feeds_f32(0));
  }
}

TEST(CostModel, AnUnknownGpuNameIsAnError) {
  EXPECT_THROW(gpu_device("xyz"), Error);  // not the H100's figures under another name
  EXPECT_FALSE(find_device("xyz").ok());
  EXPECT_EQ(gpu_device("h200").name, "h200");
}

TEST(CostModel, RidgePointsOfTheDatasheetGpus) {
  EXPECT_NEAR(gpu_device("h100").ridge_tensor(), 295.2, 0.1);  // 989 TFLOP/s / 3.35 TB/s
  EXPECT_NEAR(gpu_device("h100").ridge_f32(), 20.0, 0.1);
  EXPECT_NEAR(gpu_device("h200").ridge_tensor(), 206.0, 0.1);
  EXPECT_NEAR(gpu_device("a100").ridge_tensor(), 153.0, 0.1);
  EXPECT_FALSE(find_device("tpu").ok());
}

TEST(CostModel, GpuKernelsAreChargedByInstructionsAtTheIssueRate) {
  // SMs x FP32 lanes x clock: an H100/H200's 132 SMs of 128 lanes at 1.98
  // GHz (its issue rate), an A100's 108 of 64 at 1.41 GHz (half its issue
  // rate: an FP32 warp instruction takes two clocks). FLOP rates stay the
  // datasheet's.
  const std::pair<const char*, double> issue[] = {{"h100", 33.45}, {"h200", 33.45}, {"a100", 9.75}};
  for (const auto& [name, tops] : issue) {
    const DeviceSpec d = gpu_device(name);
    EXPECT_NEAR(d.issue_tops, tops, 0.01) << name;
    EXPECT_TRUE(d.models_instructions()) << name;
    for (int c = 0; c < kNumCostClasses; ++c) {
      const bool is_matmul =
          static_cast<CostClass>(c) == CostClass::kMatmul || static_cast<CostClass>(c) == CostClass::kMatmulBf16;
      EXPECT_DOUBLE_EQ(d.class_tflops[c], is_matmul ? d.peak_tensor_tflops : d.peak_f32_tflops) << name;
    }
    EXPECT_NE(format_device(d).find("instructions"), std::string::npos) << format_device(d);
    EXPECT_NE(format_device(d).find("SMs x FP32 lanes x clock"), std::string::npos) << format_device(d);
  }
  // An f32 matmul (SGEMM: FMAs) runs at the FP32 peak and is not counted in instructions.
  Graph g;
  auto a = g.input("a", DType::kF32, {4096, 4096});
  auto b = g.input("b", DType::kF32, {4096, 4096});
  g.output("c", matmul(a, b));
  const KernelCost c = only_kernel(g, gpu_device("h100"));
  EXPECT_NEAR(c.compute_us, c.flops / 67e12 * 1e6, 1e-6);
  EXPECT_EQ(c.instructions, 0);
}

TEST(CostModel, InstructionsOfPointwiseKernelsByHand) {
  // f32 [1024, 4096] x / z: the loop 4 per step of 4 elements (16-byte
  // accesses), two 4-byte reads and a write 0.5 each, an IEEE division's
  // fast path 10 per element.
  Graph g;
  auto x = g.input("x", DType::kF32, {1024, 4096});
  auto z = g.input("z", DType::kF32, {1024, 4096});
  g.output("y", x / z);
  const double elements = 1024.0 * 4096;
  EXPECT_DOUBLE_EQ(only_kernel(g, gpu_device("h200")).instructions, (4.0 / 4 + 3 * 0.5 + 10) * elements);
  // bf16 x + b with b a broadcast [4096]: steps of 8 elements, 2-byte
  // streams 1 each, and indexing the broadcast operand 1 more.
  Graph h;
  auto hx = h.input("x", DType::kBF16, {1024, 4096});
  auto hb = h.input("b", DType::kBF16, {4096});
  h.output("y", hx + hb);
  EXPECT_DOUBLE_EQ(only_kernel(h, gpu_device("h200")).instructions, (4.0 / 8 + 1 + (1 + 1) + 1 + 1) * elements);
}

TEST(CostModel, DropoutCostsABlockPerEightOrFourElements) {
  // A thread holding 8 elements (bf16: one 16-byte access; f32 with
  // dropout: two) draws one Philox block for them, the op table's 9.25 per
  // element; the loop's 4 per step is 0.5 per element. f32 rows of 4 times an odd number give a thread 4 elements: it
  // draws a whole block for 4, kDropoutHalfBlockInstructions more. An f16
  // read gives a kernel with an f32 output 8 elements per thread too.
  for (auto [dtype, columns] : {std::pair{DType::kBF16, 4096}, {DType::kF32, 4096}, {DType::kF32, 4100}}) {
    const double elements = 1024.0 * columns;
    Graph g;
    auto x = g.input("x", dtype, {1024, columns});
    g.output("y", dropout(x, 0.1, 7));
    const double streams = dtype == DType::kBF16 ? 2 * 1.0 : 2 * 0.5;
    const bool half_block = dtype == DType::kF32 && columns % 8 != 0;
    const double dropout_cost = 9.25 + (half_block ? kDropoutHalfBlockInstructions : 0);
    const double loop = 4.0 / (half_block ? 4 : 8);
    EXPECT_DOUBLE_EQ(only_kernel(g, gpu_device("h200")).instructions, (loop + streams + dropout_cost) * elements)
        << dtype_name(dtype) << " rows of " << columns;
  }
  const double elements = 1024.0 * 4096;
  Graph g;
  auto x = g.input("x", DType::kF16, {1024, 4096});
  g.output("y", cast(dropout(x, 0.1, 7), DType::kF32));
  // loop 4 per 8, f16 read 1, f32 write 0.5, dropout 9.25, cast 1.
  EXPECT_DOUBLE_EQ(only_kernel(g, gpu_device("h200")).instructions, (0.5 + 1 + 0.5 + 9.25 + 1) * elements);
  // Rows of 4095 have no vector variant: a thread holds one element and
  // draws a whole block for it; its loop takes 4 per element.
  Graph odd;
  odd.output("y", dropout(odd.input("x", DType::kBF16, {1024, 4095}), 0.1, 7));
  EXPECT_DOUBLE_EQ(only_kernel(odd, gpu_device("h200")).instructions,
                   (4 + 2 * 1.0 + 9.25 + kDropoutScalarInstructions) * 1024 * 4095);
}

TEST(CostModel, RowReductionsCostEveryThreadOfTheRow) {
  // sum over rows of 4096 f32: a block of 512 threads per row (about 8
  // elements each, fusion/gpu_row_shape.h), each paying 7 + 2 x log2(16
  // warps) = 15, and 1 for the barrier before the row's only reduction
  // (fj_reduce.cuh); rows of 256 get a warp, each lane paying kWarpReduce;
  // rows of 8 (two 16-byte chunks) two lanes, which shuffle once: a fifth of it.
  for (const int64_t n : {4096, 256, 8}) {
    Graph g;
    auto x = g.input("x", DType::kF32, {64, n});
    g.output("y", sum(x));
    const GpuRowShape shape = gpu_row_shape(n, RowStrategy::kPersistent, 4);
    EXPECT_EQ(shape.threads, n == 4096 ? 512 : n == 256 ? 32 : 2);
    const double per_thread = n == 4096 ? 15 + kBufferFlip : n == 256 ? kWarpReduce : kWarpReduce / 5;
    if (n == 4096) EXPECT_DOUBLE_EQ(block_reduce_instructions(512), 15);
    // loop 2, the row read 0.5, the combine 1; the [64, 1] result is per row.
    EXPECT_DOUBLE_EQ(only_kernel(g, gpu_device("h100")).instructions,
                     (2 + 0.5 + 1) * 64 * n + 64 * shape.threads * per_thread)
        << n;
  }
}

// A persistent row kernel keeps its first kGpuRowKeptVectors [N] vectors in
// registers (free per element) and loads the others in every row, where
// they cost a stream each (0.5 for f32), as the CUDA generator emits them.
TEST(CostModel, RowKernelsPayForTheVectorsTheyReloadInEveryRow) {
  const auto instructions = [](int vectors) {
    Graph g;
    Value h = g.input("x", DType::kF32, {64, 4096});
    for (int i = 0; i < vectors; ++i) h = h * g.input(fmt::format("v{}", i), DType::kF32, {4096});
    g.output("y", sum(h));
    return only_kernel(g, gpu_device("h100")).instructions;
  };
  const double elements = 64.0 * 4096;
  ASSERT_EQ(kGpuRowKeptVectors, 4);
  // One more multiply per element for each vector; a stream more past the fourth.
  EXPECT_DOUBLE_EQ(instructions(4) - instructions(3), 1.0 * elements);
  EXPECT_DOUBLE_EQ(instructions(5) - instructions(4), (1.0 + 0.5) * elements);
  EXPECT_DOUBLE_EQ(instructions(7) - instructions(5), 2 * (1.0 + 0.5) * elements);
}

TEST(CostModel, ReReadingRowKernelsPayTheLoopAndLoadsInEveryPass) {
  // y = x - sum(x) over rows of 40000 f32, past the persistent limit: pass 1
  // sums, pass 2 subtracts and writes. Per element: the loop 2 and the x
  // load 0.5 twice, y's store 0.5, the combine once, the sub once (it is
  // computed only in pass 2); per row, 1024 threads reduce (7 + 2 x 5),
  // in the half of the shared buffer the row before did not start with (the
  // row's only reduction: kBufferFlip).
  Graph g;
  auto x = g.input("x", DType::kF32, {4, 40000});
  g.output("y", x - sum(x));
  const FusionPlan plan = make_fused_plan(g, fusion_options_for(gpu_device("h100")));
  ASSERT_EQ(plan.kernels.size(), 1u);
  ASSERT_EQ(plan.kernels[0].row_strategy, RowStrategy::kReread);
  ASSERT_EQ(plan.kernels[0].row_passes, 2);
  EXPECT_DOUBLE_EQ(estimate_kernel(plan, plan.kernels[0], gpu_device("h100")).instructions,
                   (2 * 2 + 2 * 0.5 + 0.5 + 1 + 1) * 4 * 40000 + 4 * 1024 * (17 + kBufferFlip));
}

// Bytes of a re-reading kernel: its row-shaped reads in every pass, a
// broadcast [N] vector once; a single row is all row, whatever its shape.
TEST(CostModel, ReReadingRowKernelsChargeEachPassTheRowsItLoads) {
  const DeviceSpec h100 = gpu_device("h100");
  auto bytes_read = [&](int64_t rows, bool as_vector) {
    Graph g;
    auto x = as_vector ? g.input("x", DType::kBF16, {128256}) : g.input("x", DType::kBF16, {rows, 128256});
    auto w = g.input("w", DType::kBF16, {128256});
    g.output("y", log_softmax(x * w));
    // Weighed by time, the mul would leave a kernel over so few rows (ADevices
    // FusionOptionsWeighKernelsByPredictedTime); here the kernel is whole.
    FusionOptions by_bytes = fusion_options_for(h100);
    by_bytes.kernel_weight = nullptr;
    const FusionPlan plan = make_fused_plan(g, by_bytes);
    EXPECT_EQ(plan.kernels.size(), 1u);
    EXPECT_EQ(plan.kernels[0].row_strategy, RowStrategy::kReread);
    EXPECT_EQ(plan.kernels[0].row_passes, 3);  // max, sum of exp, write
    return estimate_kernel(plan, plan.kernels[0], h100).bytes_read;
  };
  const int64_t row = 128256 * 2;
  EXPECT_EQ(bytes_read(2, false), 3 * 2 * row + row);  // x in every pass, w once
  EXPECT_EQ(bytes_read(1, false), 3 * row + 3 * row);  // one row: x and w in every pass
  EXPECT_EQ(bytes_read(1, true), 3 * row + 3 * row);   // [N] x alike
}

// A kernel of one row streams its row, [1, N] or [N], as one of many rows
// does: the same instructions per element (the row's load and store were
// left out, as a per-row [N] vector would be). Its [N] vectors are loaded
// once per element; rows to come would have shared them.
TEST(CostModel, ASingleRowKernelPaysForTheRowItLoadsAndStores) {
  const DeviceSpec h100 = gpu_device("h100");
  auto per_element = [&](Shape shape, DType dtype, bool reread, bool with_gamma) {
    Graph g;
    auto x = g.input("x", dtype, shape);
    Value y = reread ? log_softmax(x) : layer_norm(x);
    if (with_gamma) y = y * g.input("gamma", dtype, {shape.last()});
    g.output("y", y);
    const FusionPlan plan = make_fused_plan(g, fusion_options_for(h100));
    EXPECT_EQ(plan.kernels.size(), 1u);
    EXPECT_EQ(plan.kernels.at(0).row_strategy == RowStrategy::kReread, reread);
    return estimate_kernel(plan, plan.kernels.at(0), h100).instructions / static_cast<double>(shape.numel());
  };
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    for (const bool reread : {false, true}) {
      const int64_t n = reread ? 128256 : 4097;
      const double many = per_element({64, n}, dtype, reread, false);
      EXPECT_NEAR(per_element({1, n}, dtype, reread, false), many, 1e-9) << fmt::format("{} reread {}", dtype, reread);
      EXPECT_NEAR(per_element({n}, dtype, reread, false), many, 1e-9) << fmt::format("{} reread {}", dtype, reread);
    }
    // A persistent kernel keeps gamma for its rows; one row loads it once.
    const double stream = dtype == DType::kF32 ? 0.5 : 1.0;
    EXPECT_NEAR(per_element({1, 4096}, dtype, false, true), per_element({64, 4096}, dtype, false, true) + stream, 1e-9)
        << fmt::format("{}", dtype);
  }
}

// Rows of one element: the row's load and store are each element's, so a
// bf16 sum pays a stream (1 instruction, 0.5 for f32) for x and for y.
TEST(CostModel, RowsOfOneElementPayForTheirLoadsAndStores) {
  auto instructions = [](DType dtype) {
    Graph g;
    auto x = g.input("x", dtype, {64, 1});
    g.output("y", sum(x));
    return only_kernel(g, gpu_device("h100")).instructions;
  };
  EXPECT_DOUBLE_EQ(instructions(DType::kBF16) - instructions(DType::kF32), (1 - 0.5) * 2 * 64);
}

TEST(CostModel, FusionSavingOfTheDemoChain) {
  Graph g;
  auto x = g.input("x", DType::kBF16, {8192, 4096});
  auto b = g.input("b", DType::kBF16, {4096});
  auto gamma = g.input("gamma", DType::kBF16, {4096});
  auto beta = g.input("beta", DType::kBF16, {4096});
  g.output("y", layer_norm(dropout(gelu(x + b), 0.1, 42), gamma, beta));
  // The fused kernel's instructions, by hand: per element, the row loop 2,
  // x read and y written 1 each (b, gamma and beta are loaded once per
  // thread), add 1, GeLU 11 (its result is bf16: the degree-6 helper),
  // dropout 9.25 (a thread holds 8 bf16 elements: one Philox block) less
  // 1 for the GeLU it folds in (fusion/gelu_dropout.h), LayerNorm's mean,
  // sub, square, mean, mul, mul, add 7; per row, + eps 1 and rsqrt 4; per
  // reduction, 512 threads x 15 (two reductions: no leading barrier). That
  // is 35 per element.
  const double rows = 8192, cols = 4096;
  const double instructions = (2 + 2 + 1 + 11 + 9.25 - 1 + 7) * rows * cols + 5 * rows + 2 * rows * 512 * 15;
  for (const char* name : {"h100", "h200", "a100"}) {
    const DeviceSpec device = gpu_device(name);
    const PlanComparison c = compare_plans(make_unfused_plan(g), make_fused_plan(g), device);
    const int64_t tensor = 8192ll * 4096 * 2;
    EXPECT_EQ(c.fused.bytes, 2 * tensor + 3 * 4096 * 2) << name;
    EXPECT_EQ(c.bytes_saved, c.unfused.bytes - c.fused.bytes);
    EXPECT_EQ(c.kernels_saved, 3);
    ASSERT_EQ(c.fused.kernels.size(), 1u);
    const KernelCost& fused = c.fused.kernels[0];
    // FLOPs stay the op table's: 38 per element, and eps and rsqrt per row.
    EXPECT_DOUBLE_EQ(fused.flops, 38.0 * 8192 * 4096 + 8192 * (1 + 4)) << name;
    EXPECT_DOUBLE_EQ(fused.instructions, instructions) << name;
    // They take longer to issue than the kernel's 4 bytes per element take
    // to move on an H200 (35.1 us against 28.0) and an A100 (120 against
    // 66), not on an H100 (35.1 against 40.1): fusion saves 4x the bytes
    // but less time where it is issue-bound.
    const double issue_us = instructions / (device.issue_tops * 1e12) * 1e6;
    const double memory_us = static_cast<double>(c.fused.bytes) / (device.bandwidth_gbps * 1e9) * 1e6;
    EXPECT_EQ(fused.compute_bound, std::string(name) != "h100") << name;
    EXPECT_NEAR(fused.predicted_us, std::max(issue_us, memory_us) + 1.0, 1e-6) << name;
    // Unfused, each kernel's bytes take longer than its instructions, even
    // the GeLU kernel's 13.5 per element on an A100, whose FP32 pipes retire
    // half as many (46 us against 66 us for its bytes).
    for (const KernelCost& k : c.unfused.kernels) EXPECT_FALSE(k.compute_bound) << name << " " << k.name;
    EXPECT_GT(c.predicted_speedup, 1.5) << name;
    EXPECT_LE(c.predicted_speedup, 4.0) << name;  // at most the bytes ratio: an H100 reaches 3.9998
  }
  // H200, by hand: unfused, four memory-bound kernels of ~134 MB at 4.8 TB/s
  // (+1 us launch each): 115.85 us; fused, 1.174e9 instructions / 33.45e12
  // per s + 1 us.
  const PlanComparison h200 = compare_plans(make_unfused_plan(g), make_fused_plan(g), gpu_device("h200"));
  EXPECT_NEAR(h200.unfused.predicted_us, 115.85, 0.05);
  EXPECT_NEAR(h200.fused.predicted_us, 36.11, 0.05);
}

// Threads that find no cached figures take turns: the later one reads
// what the first one measured and cached.
TEST(CostModel, CpuDeviceMeasurementsTakeTurns) {
  const std::string dir = testing::make_temp_dir("fusejit-cost-cache");
  setenv("FUSEJIT_CACHE_DIR", dir.c_str(), 1);
  DeviceSpec a, b;
  std::thread first([&] { a = cpu_device(); });
  std::thread second([&] { b = cpu_device(); });
  first.join();
  second.join();
  // The later one reads what the earlier one measured, unless other
  // programs took the CPUs while it measured: then the later one measures
  // again (machine_load.h), and the busy share says so (under `ctest -j2`
  // the first measured with 36% taken, and the two differed 2x).
  if (std::max(a.others_busy_share, b.others_busy_share) <= kBusyShare) {
    EXPECT_EQ(a.bandwidth_gbps, b.bandwidth_gbps);
    EXPECT_EQ(a.peak_f32_tflops, b.peak_f32_tflops);
    EXPECT_EQ(a.class_tflops, b.class_tflops);
  } else if (a.bandwidth_gbps != b.bandwidth_gbps) {
    EXPECT_NE(a.others_busy_share, b.others_busy_share) << "measured again, at another moment";
  }
  unsetenv("FUSEJIT_CACHE_DIR");
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
  // One thread copying alone: some of the machine's bandwidth, not more
  // than a little above all of it (a noisy VM).
  EXPECT_GT(first.thread_bandwidth_gbps, 0.05);
  EXPECT_LT(first.thread_bandwidth_gbps, 1.5 * first.bandwidth_gbps);
  const DeviceSpec second = cpu_device();  // from the cache: the same figures
  EXPECT_EQ(second.bandwidth_gbps, first.bandwidth_gbps);
  EXPECT_EQ(second.thread_bandwidth_gbps, first.thread_bandwidth_gbps);
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

// A CPU kernel split over fewer threads than the machine has (one row of a
// softmax: one thread) takes as long as its largest chunk: that share of
// the FLOPs at one thread's share of the compute rate, and of the bytes at
// what one thread gets of the bandwidth, min(its copy alone, bandwidth /
// threads copying). An even split keeps the whole machine's figures.
TEST(CostModel, ACpuKernelOnFewerThreadsThanTheMachinePaysForTheIdleOnes) {
  DeviceSpec cpu = made_up_cpu(/*threads=*/cpu_identity().compute_units, /*tflops=*/0.01, /*launch_us=*/0);
  cpu.thread_bandwidth_gbps = 40;
  auto softmax_of = [](int64_t rows) {
    Graph g;
    g.output("y", softmax(g.input("x", DType::kF32, {rows, 16384})));
    return g;
  };
  auto cost = [&](int64_t rows, int threads, double thread_gbps) {
    DeviceSpec d = cpu;
    d.compute_units = threads;
    d.thread_bandwidth_gbps = thread_gbps;
    return only_kernel(softmax_of(rows), d);
  };
  struct Case {
    int64_t rows;
    double thread_gbps;
    int threads_used;
    double memory_scale, compute_scale;
  };
  for (const Case& c : std::vector<Case>{
           {1, 40, 1, 100.0 / 40, 4},  // one thread, at its own copy rate
           {1, 0, 1, 4, 4},            // unmeasured: a quarter of the bandwidth
           {1, 200, 1, 1, 4},          // a thread that could copy more gets no more than there is
           {64, 40, 4, 1, 1},          // 16 rows each: the whole machine
           {64, 10, 4, 1, 1},          // a low one-thread figure never slows an even split
           {6, 40, 3, 1, 4.0 / 3},     // 2 + 2 + 2 rows: a third of the bytes at a third of the bandwidth
       }) {
    const KernelCost one = cost(c.rows, 1, c.thread_gbps);
    const KernelCost four = cost(c.rows, 4, c.thread_gbps);
    EXPECT_EQ(one.threads, 1);
    EXPECT_EQ(four.threads, c.threads_used) << c.rows;
    EXPECT_NEAR(four.memory_us, one.memory_us * c.memory_scale, 1e-9 * one.memory_us) << c.rows << " " << c.thread_gbps;
    EXPECT_NEAR(four.compute_us, one.compute_us * c.compute_scale, 1e-9 * one.compute_us) << c.rows;
    EXPECT_NEAR(four.predicted_us, four.memory_us + four.compute_us, 1e-9 * four.predicted_us);
  }
  // A GPU's kernels are charged by blocks and instructions, not threads.
  const KernelCost gpu = only_kernel(softmax_of(1), gpu_device("h100"));
  EXPECT_EQ(gpu.threads, 0);
  EXPECT_NEAR(gpu.memory_us, 2.0 * 16384 * 4 / (gpu_device("h100").bandwidth_gbps * 1e3), 1e-9);

  // The device says what the split is charged at.
  cpu.compute_units = 4;
  EXPECT_NE(format_device(cpu).find("4 threads: one copying alone gets 40 GB/s"), std::string::npos)
      << format_device(cpu);
  DeviceSpec b = cpu;
  b.peak_f32_tflops = 1;
  EXPECT_TRUE(plausible_measured_figures(b));
  b.thread_bandwidth_gbps = 0;  // unmeasured
  EXPECT_TRUE(plausible_measured_figures(b));
  for (double bad : {-1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    b.thread_bandwidth_gbps = bad;
    EXPECT_FALSE(plausible_measured_figures(b)) << bad;
  }
}

// plan names the kernels that run on fewer threads than the machine has,
// the first six of each plan by name: a 20,000-kernel plan once made one
// line of 330,000 characters.
TEST(CostModel, TheNoteOnKernelsWithIdleThreadsNamesAFew) {
  DeviceSpec cpu = cpu_identity();
  cpu.compute_units = 4;
  PlanComparison c;
  auto kernel = [](std::string name, int threads) {
    KernelCost k;
    k.name = std::move(name);
    k.threads = threads;
    return k;
  };
  EXPECT_EQ(format_idle_threads(c, cpu), "") << "no kernels";
  c.fused.kernels = {kernel("k0_softmax", 1), kernel("k1_relu", 4)};
  EXPECT_EQ(format_idle_threads(c, cpu),
            "too little work to split over all 4 threads: fused k0_softmax on 1; each is predicted at the time of its "
            "largest share\n");
  for (int i = 0; i < 20000; ++i) c.unfused.kernels.push_back(kernel(fmt::format("k{}_neg", i), 2));
  const std::string note = format_idle_threads(c, cpu);
  EXPECT_LT(note.size(), 400u) << note;
  EXPECT_NE(note.find("unfused k0_neg on 2, k1_neg on 2, k2_neg on 2, k3_neg on 2, k4_neg on 2, k5_neg on 2, and "
                      "19994 more (--json says which); fused k0_softmax on 1;"),
            std::string::npos)
      << note;
}

// Figures read back from a cache file are checked: what no machine has is
// measured again, and so is a cache file that is not a small regular file
// (a link to /dev/zero would otherwise be read forever).
TEST(CostModel, ImplausibleOrSpecialCacheFilesAreMeasuredAgain) {
  DeviceSpec d = gpu_device("h100");
  EXPECT_TRUE(plausible_measured_figures(d));
  // Tiny positive figures too: a bandwidth of 5e-324 GB/s printed "ridge
  // inf" and a speedup of "-nanx".
  for (double bad :
       {0.0, -1.0, 5e-324, 1e-300, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    DeviceSpec b = d;
    b.bandwidth_gbps = bad;
    EXPECT_FALSE(plausible_measured_figures(b)) << bad;
    b = d;
    b.class_tflops[static_cast<int>(CostClass::kErf)] = bad;
    EXPECT_FALSE(plausible_measured_figures(b)) << bad;
  }
  DeviceSpec b = d;
  b.launch_overhead_us = -1.0;
  EXPECT_FALSE(plausible_measured_figures(b));
  b.launch_overhead_us = 1e308;
  EXPECT_FALSE(plausible_measured_figures(b));
  b.launch_overhead_us = 0.0;
  EXPECT_TRUE(plausible_measured_figures(b));
  for (double busy : {-0.1, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    b.others_busy_share = busy;
    EXPECT_FALSE(plausible_measured_figures(b)) << busy;
  }
  b.others_busy_share = 1.0;
  EXPECT_TRUE(plausible_measured_figures(b));
  b.bandwidth_gbps = 1e-3;  // a slow machine's, not a damaged file's
  b.class_tflops.fill(1e-6);
  EXPECT_TRUE(plausible_measured_figures(b));

  const std::string dir = testing::make_temp_dir("fusejit-cost-cache");
  setenv("FUSEJIT_CACHE_DIR", dir.c_str(), 1);
  std::filesystem::create_symlink("/dev/zero", cpu_device_cache_path());
  EXPECT_FALSE(is_small_regular_file(cpu_device_cache_path(), kDeviceCacheFileMaxBytes));
  const DeviceSpec measured = cpu_device();
  EXPECT_TRUE(plausible_measured_figures(measured));
  unsetenv("FUSEJIT_CACHE_DIR");
}

}  // namespace
}  // namespace fusejit

namespace fusejit {
namespace {

// The plan table's ops column holds what fits in its 34 characters, then
// "+N more": a long chain's kernel stays one readable line.
TEST(PlanTable, LongKernelsListTheOpsThatFitThenHowManyMore) {
  Graph g;
  Value v = g.input("x", DType::kF32, {64, 64});
  for (int i = 0; i < 200; ++i) v = i % 2 == 0 ? exp(v) : neg(v);
  g.output("y", v);
  const FusionPlan fused = make_fused_plan(g);
  ASSERT_EQ(fused.kernels.size(), 1u);
  const std::string table = format_plan_table(fused, estimate_plan(fused, gpu_device("h100")));
  // Lines: the plan's title, the column heads, the kernel, the total.
  std::vector<std::string> lines = absl::StrSplit(table, '\n');
  ASSERT_GE(lines.size(), 3u) << table;
  const std::string& line = lines[2];
  EXPECT_LT(line.size(), 200u) << line;
  EXPECT_NE(line.find("exp,neg,exp,neg,exp,neg,+194 more "), std::string::npos) << line;
  // A short kernel lists every op.
  Graph h;
  h.output("y", gelu(h.input("x", DType::kF32, {64, 64}) + 1.0));
  const FusionPlan short_plan = make_fused_plan(h);
  EXPECT_NE(format_plan_table(short_plan, estimate_plan(short_plan, gpu_device("h100"))).find(" add,gelu "),
            std::string::npos);
}

// A kernel name longer than the kernel column widens it, for every row:
// the kind column starts at one place in the head and in each kernel's row.
TEST(PlanTable, ALongKernelNameWidensItsColumn) {
  Graph g;
  Value v = g.input("x", DType::kF32, {64, 64});
  for (int i = 0; i < 16; ++i) v = reciprocal(v);
  g.output("y", matmul(v, g.input("w", DType::kF32, {64, 64})) + 1.0);
  const FusionPlan fused = make_fused_plan(g);
  ASSERT_EQ(fused.kernels.size(), 3u);
  ASSERT_GT(fused.kernels[0].name.size(), 34u) << fused.kernels[0].name;
  const std::string table = format_plan_table(fused, estimate_plan(fused, gpu_device("h100")));
  const std::vector<std::string> lines = absl::StrSplit(table, '\n');
  ASSERT_GE(lines.size(), 5u) << table;
  const size_t kind = lines[1].find("kind");
  ASSERT_NE(kind, std::string::npos) << table;
  for (size_t i = 0; i < fused.kernels.size(); ++i) {
    const std::string& row = lines[2 + i];
    EXPECT_EQ(row.find(fused.kernels[i].name), 2u) << row;
    EXPECT_EQ(row.substr(kind, kernel_kind_name(fused.kernels[i].kind).size()), kernel_kind_name(fused.kernels[i].kind))
        << table;
    EXPECT_EQ(row[kind - 1], ' ') << table;
  }
}

}  // namespace
}  // namespace fusejit
