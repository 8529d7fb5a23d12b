// The state an emulated kernel module shares with the emulator: each
// module's copy (fj_emu_state, found with dlsym) is set before a CUDA
// thread's fiber resumes. Plain C layout: the module and the emulator are
// compiled separately.
#pragma once

struct uint3 {
  unsigned x, y, z;
};

struct FjEmuState {
  uint3 thread_idx, block_idx, block_dim, grid_dim;
  void (*syncthreads)();
  unsigned (*shfl_xor)(unsigned value, int lane_mask);
};
