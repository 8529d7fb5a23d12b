// The instructions a GPU issues for a generated kernel: what its compute
// time is charged in (cost_model.h). Memory-bound ops are cheap in FLOPs
// but not in instructions: a bf16 element at an H200's 4.8 TB/s leaves
// time to issue only about 28 (132 SMs x 4 schedulers x 32 lanes x 1.98
// GHz / 1.2e12 elements/s), and a fused bias-GeLU-dropout-LayerNorm row
// needs about twice that.
//
// Thread-instructions of a kernel, summed over its elements:
//   each op:   its ops.def `gpu instructions` per element it computes (a
//              reduction per input element; dropout in a kernel of f32
//              data whose rows are not a multiple of 8 long
//              kDropoutHalfBlockInstructions more, in one without a
//              vector variant kDropoutScalarInstructions), times the passes that
//              compute it (a re-reading row kernel recomputes elementwise
//              work; it combines each reduction once);
//   a value the kernel stores in 16 bits and also uses (rounds_in_kernel,
//              fusion/plan.h): kRoundInKernel per element more, to round it
//              where it is computed;
//   the loop:  kLoopPointwiseStep per step of a pointwise kernel's
//              thread (a step holds its vector width of elements, or 1
//              without a vector variant), kLoopRow per element of a row
//              kernel (a re-reading one: kLoopRow per pass);
//   each tensor a thread streams (read or written at the iteration's
//              shape; every operand of a pointwise kernel, with
//              kBroadcastIndex more for one it indexes by broadcasting):
//              kStream4Byte or kStream2Byte per element (load or store,
//              conversion, address); a persistent row kernel's per-row
//              values and the [N] vectors it keeps (gpu_row_vectors) are
//              loaded once per row or thread, so free (except in a kernel
//              of one row, or of rows of one element, where they are the
//              row: is_streamed_along_row), the [N] vectors it
//              reloads in every row are streamed, and a re-reading kernel
//              loads every read that varies along the row in every pass;
//   each reduction: every thread of a row shuffles and synchronises:
//              kWarpReduce (warp per row; less for rows that share a
//              warp, which shuffle fewer times), or kBlockReduceBase +
//              kBlockReducePerShuffle x log2(warps) (block per row; the
//              second stage shuffles once per halving of the warp count),
//              per thread and row, and kBufferFlip more per thread and row
//              when a block-per-row kernel has an odd number of
//              reductions (codegen/cuda/fj_reduce.cuh: two alternating
//              buffers spare each reduction a leading barrier; with an odd
//              count the rows alternate which one they start with: the
//              RMSNorm example's loop went from 160 SASS instructions, a
//              barrier among them, to 167 without it); with the threads per row of
//              fusion/gpu_row_shape.h (FUSEJIT_ROW_BLOCK_THREADS, an
//              experiment's override, is not seen here).
// The constants are fitted to SASS counts of fusejit's kernels (sm_90,
// CUDA 13's ptxas, the one NVRTC 13 runs); bench/results/
// 2026-12-03-gpu-loop-invariants.md compares the estimate with the count
// for every example kernel (2026-12-01-gpu-instructions.md: the first
// fit, to CUDA 11.8's ptxas). Re-reading kernels are not in that
// comparison (bench/sass_count.py cannot find their per-element loop), so
// their estimate is the formula's alone.
#pragma once

#include "fusion/plan.h"

namespace fusejit {

inline constexpr double kLoopPointwiseStep = 4.0;
inline constexpr double kLoopRow = 2.0;
inline constexpr double kStream4Byte = 0.5;
inline constexpr double kStream2Byte = 1.0;
inline constexpr double kBroadcastIndex = 1.0;
inline constexpr double kRoundInKernel = 2.0;
inline constexpr double kBlockReduceBase = 7.0;
inline constexpr double kBufferFlip = 8.0;
inline constexpr double kBlockReducePerShuffle = 2.0;
inline constexpr double kWarpReduce = 10.0;
// The op table's dropout weight is a thread's share of one Philox block per
// 8 elements (16-bit data: 8 per 16-byte access; f32 kernels with dropout
// take two 16-byte accesses where rows are a multiple of 8 long). A thread
// that holds 4 (f32 otherwise) draws a whole block for 4 and uses half:
// this much more per element
// (single-op kernels, bench/sass_count.py: f32 18.2 less 2 for loads,
// stores and loop, against the table's 9.25).
inline constexpr double kDropoutHalfBlockInstructions = 7.0;
// And a thread of a kernel without a vector variant (innermost extent not a
// multiple of the vector width) draws a whole block per element: single-op
// kernels of [4096, 4095] count 75 (f32) and 78 (bf16) per element.
inline constexpr double kDropoutScalarInstructions = 58;

// Per thread and row, a warp reduction over `threads` lanes (kWarpReduce
// for a whole warp's five shuffles, a fifth of it per shuffle), and a block
// reduction over `threads` threads.
double warp_reduce_instructions(int threads);
double block_reduce_instructions(int threads);
// Thread-instructions of a pointwise or row kernel (0 for a matmul, which a
// library runs).
double gpu_instructions(const FusionPlan& plan, const Kernel& kernel);

}  // namespace fusejit
