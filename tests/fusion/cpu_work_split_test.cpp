// How a CPU kernel's work is handed to threads: what the generator emits,
// how the pool cuts it, and what the cost model charges for threads left
// idle, all from fusion/cpu_work_split.h.
#include "fusion/cpu_work_split.h"

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "codegen/cpu/cpu_emitter.h"
#include "fusion/plan.h"
#include "runtime/thread_pool.h"
#include "support/graph_variants.h"

namespace fusejit {
namespace {

TEST(CpuWorkSplit, ChunksAreOnePerThreadOfAtLeastTheGrain) {
  struct Case {
    int64_t count, grain;
    int threads;
    int64_t chunk, chunks;
  };
  for (const Case& c : std::vector<Case>{
           {10, 1, 4, 3, 4},      // 3 + 3 + 3 + 1
           {8, 1, 4, 2, 4},       // even
           {1, 1, 16, 1, 1},      // one row: one thread
           {100, 64, 4, 100, 1},  // less than two grains: one chunk
           {128, 64, 4, 64, 2},   // two grains: two threads of four
           {1 << 20, 16384, 2, 1 << 19, 2},
           {0, 1, 4, 0, 0},  // nothing to do
           {5, 0, 0, 5, 1},  // grain and threads below 1 count as 1
       }) {
    const CpuChunks got = cpu_chunks(c.count, c.grain, c.threads);
    EXPECT_EQ(got.chunk, c.chunk) << c.count << " " << c.grain << " " << c.threads;
    EXPECT_EQ(got.chunks, c.chunks) << c.count << " " << c.grain << " " << c.threads;
  }
}

// The pool hands out exactly the ranges cpu_chunks describes.
TEST(CpuWorkSplit, ThePoolRunsTheChunksItDescribes) {
  ThreadPool pool(4);
  for (const auto& [count, grain] : std::vector<std::pair<int64_t, int64_t>>{{10, 1}, {100, 64}, {128, 64}, {7, 2}}) {
    std::mutex m;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    pool.parallel_for(count, grain, [&](int64_t begin, int64_t end) {
      std::lock_guard lock(m);
      ranges.emplace_back(begin, end);
    });
    std::sort(ranges.begin(), ranges.end());
    const CpuChunks c = cpu_chunks(count, grain, pool.size());
    ASSERT_EQ(static_cast<int64_t>(ranges.size()), c.chunks) << count << " " << grain;
    for (int64_t i = 0; i < c.chunks; ++i) {
      EXPECT_EQ(ranges[i].first, i * c.chunk);
      EXPECT_EQ(ranges[i].second, std::min(count, (i + 1) * c.chunk));
    }
  }
}

// The generated kernels' count and grain are the split's: elements for a
// pointwise kernel, rows for a row kernel and a matmul.
TEST(CpuWorkSplit, TheGeneratorEmitsTheSplit) {
  const Graph g = testing::parse_or_throw(
      "input x: f32[6, 3000]\ninput w: f32[3000, 8]\n"
      "a = exp(x)\nb = softmax(a)\nc = matmul(b, w)\noutput a\noutput c\n");
  const FusionPlan plan = make_unfused_plan(g);
  const std::vector<CpuKernelSource> sources = emit_cpu(plan);
  ASSERT_EQ(sources.size(), plan.kernels.size());
  std::vector<int64_t> counts;
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    const CpuWorkSplit split = cpu_work_split(*plan.graph, plan.kernels[k]);
    EXPECT_EQ(sources[k].count, split.count) << plan.kernels[k].name;
    EXPECT_EQ(sources[k].grain, split.grain) << plan.kernels[k].name;
    counts.push_back(split.count);
  }
  // exp over 18000 elements; softmax's rows; the matmul's rows of C.
  EXPECT_EQ(counts.front(), 18000);
  EXPECT_EQ(counts.back(), 6);
  EXPECT_EQ(cpu_work_split(*plan.graph, plan.kernels.back()).grain, 32);
}

// The GEMM packs all of B for each block of kCpuMatmulRowBlock rows of each
// thread's chunk: what the cost model charges a matmul for packing.
TEST(CpuWorkSplit, AMatmulPacksBOncePerRowBlockOfEachChunk) {
  auto packed = [](int64_t m, int threads) {
    const Graph g = testing::parse_or_throw(
        fmt::format("input x: f32[{}, 64]\ninput w: f32[64, 10]\ny = matmul(x, w)\noutput y\n", m));
    const FusionPlan plan = make_fused_plan(g);
    return cpu_matmul_packed_elements(*plan.graph, plan.kernels.at(0), threads);
  };
  const int64_t b = 64 * 10;
  ASSERT_EQ(kCpuMatmulRowBlock, 132);
  EXPECT_EQ(packed(16, 1), b);        // one block
  EXPECT_EQ(packed(16, 2), b);        // under two grains of 32 rows: one thread
  EXPECT_EQ(packed(132, 1), b);       // exactly one block
  EXPECT_EQ(packed(133, 1), 2 * b);   // one row more: a second block
  EXPECT_EQ(packed(264, 2), 2 * b);   // 132 rows per thread
  EXPECT_EQ(packed(400, 2), 4 * b);   // 200 + 200 rows: two blocks each
  EXPECT_EQ(packed(401, 2), 4 * b);   // 201 + 200
  EXPECT_EQ(packed(600, 4), 8 * b);   // 150 rows each: two blocks each
  EXPECT_EQ(packed(1000, 3), 9 * b);  // 334 + 334 + 332: three blocks each

  // A matmul nothing uses does nothing; other kernels pack nothing.
  const Graph unused =
      testing::parse_or_throw("input x: f32[3, 64]\ninput w: f32[64, 4]\nm = matmul(x, w)\ny = sigmoid(x)\noutput y\n");
  const FusionPlan plan = make_fused_plan(unused);
  for (const Kernel& k : plan.kernels) EXPECT_EQ(cpu_matmul_packed_elements(*plan.graph, k, 2), 0) << k.name;

  // The generator blocks the rows as the model counts them.
  const Graph g = testing::parse_or_throw("input x: f32[8, 64]\ninput w: f32[64, 10]\ny = matmul(x, w)\noutput y\n");
  const std::vector<CpuKernelSource> sources = emit_cpu(make_fused_plan(g));
  ASSERT_EQ(sources.size(), 1u);
  EXPECT_NE(sources[0].source.find(fmt::format("kMB = {},", kCpuMatmulRowBlock)), std::string::npos);
}

}  // namespace
}  // namespace fusejit
