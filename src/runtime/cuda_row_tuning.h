// Choosing a GPU row kernel's launch shape by timing it. How many threads
// share a row, and whether a block loads its next row before reducing the
// current one, trade registers (occupancy) against instructions per element
// and loads in flight; which side wins depends on the GPU and the kernel,
// and a static count cannot say (bench/results/2026-12-03-gpu-loop-
// invariants.md). So the CUDA backend compiles the candidates of
// codegen/cuda/cuda_emitter.h's cuda_row_shape_candidates beside the
// default, times each on the kernel's own buffers on its first run (before
// anything is timed or checked), and launches the fastest from then on.
// The pure decisions live here, so that they are tested without a GPU.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/backend.h"

namespace fusejit {

// Below this many elements (16M: 64 MiB of bf16 in and out, about 14 us on
// an H200) a kernel runs too briefly for CUDA events (about 0.5 us apart)
// to rank shapes reliably, and the extra compiles cost more than they
// could save.
inline constexpr int64_t kAutotuneMinElements = int64_t{1} << 24;

// Timed launches of each shape: one untimed first, then this many, of which
// the fastest counts (each after the L2 is flushed, as bench times them).
inline constexpr int kAutotuneLaunches = 3;

// Another shape replaces the default only when it is faster by more than
// this fraction and by more than kAutotuneMarginUs: two shapes within timing
// noise keep the default, so that runs of the same program rarely flip
// between them. (Shapes reduce a row in different orders, so two processes
// that pick different shapes can differ in the last bits of a result:
// FUSEJIT_AUTOTUNE=0 makes the default shape, and the bits, fixed.)
inline constexpr double kAutotuneMargin = 0.02;
inline constexpr double kAutotuneMarginUs = 1.0;

// Whether a kernel of `elements` (its iteration space) with `candidates`
// launch shapes (the default included) is timed, under `mode` and the
// FUSEJIT_AUTOTUNE environment variable ("0": never, "1": always; it
// decides for Autotune::kAuto only).
bool should_autotune(Autotune mode, int64_t elements, size_t candidates);

// The shape to keep: the index of the fastest of `best_us` (per candidate;
// nullopt for one that was not timed), where index 0 is the default and
// wins unless another beats it by the margins above.
size_t pick_launch_shape(const std::vector<std::optional<double>>& best_us);

// What was timed, for LoadedKernelInfo::tuning: "fastest of 5 launch shapes
// timed on its first run: 31.0 us (default 512 threads per row: 36.0 us)".
std::string describe_tuning(const std::vector<std::string>& shapes, const std::vector<std::optional<double>>& best_us,
                            size_t picked);

}  // namespace fusejit
