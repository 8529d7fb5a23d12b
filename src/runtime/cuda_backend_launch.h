// How the CUDA backend launches a generated kernel and describes its GPU to
// the cost model: pure functions of what the emitter and the driver report,
// so that they are tested on machines without a GPU. Internal to src/runtime/.
//
// The launch contract (src/codegen/cuda/pointwise.cpp, row.cpp): every
// generated kernel is grid-stride, so any grid of at least one block is
// correct and the grid size is a performance choice only.
//   pointwise:      blockDim (block_threads); the loop runs over vector
//                   groups of vector_width elements in the kVector variant,
//                   over elements in the kScalar one.
//   warp per row:   blockDim (block_threads, rows_per_block), 32 threads
//                   a row or fewer for short rows (several rows to a warp);
//                   row = blockIdx.x * blockDim.y + threadIdx.y, striding
//                   gridDim.x * blockDim.y.
//   block per row,
//   re-read:        blockDim (block_threads); row = blockIdx.x, striding gridDim.x.
// A row kernel's blockDim.x is its kThreads: its
// kExact constant folds the column guards on that promise.
// Kernel arguments: the pointers in params order, then `long long count`.
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/kernel_source.h"
#include "cost/device.h"
#include "runtime/cuda_driver.h"

namespace fusejit::cuda_backend {

struct LaunchConfig {
  cuda::Dim3 grid;
  cuda::Dim3 block;
};

// Whether every pointer is 16-byte aligned: the kernels' vector variant needs it.
bool all_aligned(const std::vector<cuda::DevicePtr>& pointers);
// The variant to compile for a kernel whose buffers are `pointers`.
CudaAccess access_for(const std::vector<cuda::DevicePtr>& pointers);

// The grid covers the work once (a block per 256 elements or vector groups,
// per rows_per_block rows, per row), capped at one full wave of resident
// blocks that then strides: SMs × the blocks that fit on one, which is
// max_threads_per_sm / threads per block, or `blocks_per_sm` where it is
// known and smaller (registers limit it: the demo kernel's 50 registers fit
// 2 blocks of 512 threads, not 4). A grid past the wave would leave blocks
// waiting for others to exit, each with its own rows: a persistent kernel's
// next-row prefetch would not overlap anything for them.
// `count` is the kernel's element or row count (-1: kernel.count): kernels
// of different sizes may share one compiled source (codegen/shared_code.h),
// whose count is then its first member's.
LaunchConfig launch_config(const CudaKernelSource& kernel, int sm_count, int max_threads_per_sm, int blocks_per_sm = 0,
                           int64_t count = -1);

// The device for the cost model. A GPU whose name says H100, H200 or A100
// starts from that datasheet; SM count, L2 size and (when plausible) the
// bandwidth come from the driver, the peaks scale with the SM count. Any
// other GPU is built from the driver: bandwidth from the memory clock and
// bus width, FP32 peak = SMs × FP32 lanes per SM × 2 × clock, and a rough
// tensor-core peak (said so in the description).
DeviceSpec device_spec_for(const GpuInfo& gpu, int clock_khz);

// FP32 lanes per SM for a compute capability (CUDA C++ Programming Guide,
// "Arithmetic Instructions"; 128 for architectures newer than it lists).
int fp32_lanes_per_sm(int cc_major, int cc_minor);
// The instructions a GPU retires per second, 1e12 (DeviceSpec::issue_tops):
// its SMs x FP32 lanes per SM x clock.
double issue_tops_for(const GpuInfo& gpu, int clock_khz);

}  // namespace fusejit::cuda_backend
