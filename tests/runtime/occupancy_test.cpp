// Theoretical occupancy by the occupancy calculator's rules, on cases whose
// answer is worked out by hand in each comment.
#include "runtime/occupancy.h"

#include <gtest/gtest.h>

namespace fusejit {
namespace {

TEST(Occupancy, RegistersLimitTheFusedDemoKernel) {
  // 56 registers x 32 lanes = 1,792 per warp (a multiple of 256); 65,536 /
  // 1,792 = 36 warps; a block of 512 threads is 16 warps: 2 blocks.
  const Occupancy o = theoretical_occupancy(sm_limits(9, 0), 512, 56, 128);
  EXPECT_EQ(o.blocks_per_sm, 2);
  EXPECT_EQ(o.threads_per_sm, 1024);
  EXPECT_DOUBLE_EQ(o.fraction, 0.5);
  EXPECT_EQ(o.limited_by, "registers");
}

TEST(Occupancy, RegistersAreAllocatedPerWarpInUnitsOf256) {
  // 41 registers: 1,312 per warp, rounded up to 1,536; 65,536 / 1,536 = 42
  // warps; blocks of 4 warps: 10 (without the rounding it would be 12).
  EXPECT_EQ(theoretical_occupancy(sm_limits(9, 0), 128, 41, 0).blocks_per_sm, 10);
}

TEST(Occupancy, ThreadsBlocksAndSharedMemoryLimitToo) {
  const SmLimits hopper = sm_limits(9, 0);
  const Occupancy threads = theoretical_occupancy(hopper, 256, 32, 0);  // 2,048 / 256
  EXPECT_EQ(threads.blocks_per_sm, 8);
  EXPECT_EQ(threads.limited_by, "threads");
  EXPECT_DOUBLE_EQ(threads.fraction, 1.0);
  const Occupancy blocks = theoretical_occupancy(hopper, 32, 16, 0);  // 64 by threads, but at most 32 blocks
  EXPECT_EQ(blocks.blocks_per_sm, 32);
  EXPECT_EQ(blocks.limited_by, "blocks");
  EXPECT_DOUBLE_EQ(blocks.fraction, 0.5);
  // 100 KiB of shared memory + 1 KiB reserved per block, 228 KiB per SM: 2.
  const Occupancy shared = theoretical_occupancy(hopper, 128, 32, 100 * 1024);
  EXPECT_EQ(shared.blocks_per_sm, 2);
  EXPECT_EQ(shared.limited_by, "shared memory");
  // 255 registers x 1,024 threads cannot fit once.
  const Occupancy none = theoretical_occupancy(hopper, 1024, 255, 0);
  EXPECT_EQ(none.blocks_per_sm, 0);
  EXPECT_EQ(none.limited_by, "registers");
}

TEST(Occupancy, LimitsFollowTheComputeCapability) {
  EXPECT_EQ(sm_limits(7, 5).max_threads, 1024);  // Turing
  EXPECT_EQ(sm_limits(8, 6).max_threads, 1536);  // consumer Ampere
  EXPECT_EQ(sm_limits(8, 0).shared_bytes, 164 * 1024);
  EXPECT_EQ(sm_limits(9, 0).shared_bytes, 228 * 1024);
  // 256 threads of 32 registers: Turing holds 4 such blocks, Hopper 8.
  EXPECT_EQ(theoretical_occupancy(sm_limits(7, 5), 256, 32, 0).blocks_per_sm, 4);
  EXPECT_EQ(theoretical_occupancy(sm_limits(9, 0), 256, 32, 0).blocks_per_sm, 8);
  // Newer than the table: the data-centre limits.
  EXPECT_EQ(sm_limits(11, 0).max_threads, 2048);
}

}  // namespace
}  // namespace fusejit
