// Theoretical occupancy of a compiled kernel: how many of its blocks fit on
// one SM at once, by the rules of NVIDIA's occupancy calculator, from what
// ptxas reports (registers, shared memory) and the block size. No GPU is
// needed, so `fusejit emit` shows it on any machine: a memory-bound kernel
// keeps only as many loads in flight as it has resident threads, and too few
// of them is a likely reason for missing the memory roofline.
#pragma once

#include <cstdint>
#include <string>

namespace fusejit {

// Per-SM limits of one compute capability (CUDA C++ Programming Guide,
// "Technical Specifications per Compute Capability").
struct SmLimits {
  int max_threads = 2048;
  int max_blocks = 32;
  int registers = 65536;
  int64_t shared_bytes = 233472;  // usable by blocks, per SM
  int64_t reserved_shared_per_block = 1024;
};

// Limits for sm_XY; a capability newer than the table gets the newest
// data-centre part's (sm_100).
SmLimits sm_limits(int cc_major, int cc_minor);

struct Occupancy {
  int blocks_per_sm = 0;
  int threads_per_sm = 0;
  double fraction = 0;     // threads_per_sm / max_threads
  std::string limited_by;  // "threads", "blocks", "registers" or "shared memory"
};

// Registers are allocated per warp in units of 256; 0 blocks (limited_by
// says which) when even one block does not fit.
Occupancy theoretical_occupancy(const SmLimits& sm, int threads_per_block, int registers_per_thread,
                                int64_t shared_bytes_per_block);

}  // namespace fusejit
