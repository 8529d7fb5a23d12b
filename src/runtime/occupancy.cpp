#include "runtime/occupancy.h"

#include <algorithm>

namespace fusejit {

SmLimits sm_limits(int cc_major, int cc_minor) {
  const int cc = cc_major * 10 + cc_minor;
  SmLimits s;  // sm_90 and sm_100: 2048 threads, 32 blocks, 228 KiB shared of which 227 for blocks
  switch (cc) {
    case 70: s = {2048, 32, 65536, 96 * 1024, 0}; break;
    case 75: s = {1024, 16, 65536, 64 * 1024, 0}; break;
    case 80: s = {2048, 32, 65536, 164 * 1024, 1024}; break;
    case 86: s = {1536, 16, 65536, 100 * 1024, 1024}; break;
    case 87: s = {2048, 16, 65536, 164 * 1024, 1024}; break;
    case 89: s = {1536, 24, 65536, 100 * 1024, 1024}; break;
    case 120: s = {1536, 32, 65536, 100 * 1024, 1024}; break;
    default: break;
  }
  return s;
}

Occupancy theoretical_occupancy(const SmLimits& sm, int threads_per_block, int registers_per_thread,
                                int64_t shared_bytes_per_block) {
  Occupancy o;
  if (threads_per_block <= 0) return o;
  constexpr int kWarp = 32, kRegisterUnit = 256;
  const int warps_per_block = (threads_per_block + kWarp - 1) / kWarp;
  int blocks = sm.max_threads / (warps_per_block * kWarp);
  o.limited_by = "threads";
  if (sm.max_blocks < blocks) {
    blocks = sm.max_blocks;
    o.limited_by = "blocks";
  }
  if (registers_per_thread > 0) {
    const int per_warp = (registers_per_thread * kWarp + kRegisterUnit - 1) / kRegisterUnit * kRegisterUnit;
    const int by_registers = (sm.registers / per_warp) / warps_per_block;
    if (by_registers < blocks) {
      blocks = by_registers;
      o.limited_by = "registers";
    }
  }
  const int64_t shared = shared_bytes_per_block + sm.reserved_shared_per_block;
  if (shared > 0) {
    const int by_shared = static_cast<int>(sm.shared_bytes / shared);
    if (by_shared < blocks) {
      blocks = by_shared;
      o.limited_by = "shared memory";
    }
  }
  o.blocks_per_sm = std::max(0, blocks);
  o.threads_per_sm = o.blocks_per_sm * threads_per_block;
  o.fraction = static_cast<double>(o.threads_per_sm) / sm.max_threads;
  return o;
}

}  // namespace fusejit
