// What a CPU kernel spends converting between its tensors' 16-bit storage
// and the f32 it computes in: the op table's FLOPs leave it out, and on
// the CPU it is not small. A bf16 store is about eleven vector operations
// (round to nearest even, keep NaN quiet, pack), more than most ops of a
// chain.
#pragma once

#include "cost/device.h"
#include "fusion/plan.h"

namespace fusejit {

// Vector operations per element, counted in the helpers the CPU kernels
// use (codegen/cpu/fj_types.h): widening a 16-bit value to f32 and
// narrowing an f32 to 16 bits.
inline constexpr double kCpuWidenBf16 = 2;   // zero-extend, shift
inline constexpr double kCpuWidenF16 = 14;   // rebias, and infinity/NaN and subnormal selects
inline constexpr double kCpuNarrowBf16 = 11; // round to nearest even, NaN select, pack
inline constexpr double kCpuNarrowF16 = 24;  // rebias and round, subnormal and overflow selects, pack
// A bf16 output stored from its array on a CPU with AVX512-BF16
// (DeviceSpec::native_bf16_stores): vcvtneps2bf16 and the subnormal check
// (vfpclassps, kmovw, a branch). Timed rather than counted: 0.057 ns per
// element on one Xeon thread against the portable code's 0.146, so 11 x
// 0.39 = 4.3 operations (bench/results/2026-12-02-cpu-bf16-narrowing.md).
inline constexpr double kCpuNarrowBf16Native = 4;
// An f16 output stored from its array with F16C (DeviceSpec::
// native_f16_stores): vcvtps2ph and the NaN check. 0.039 ns per element
// against the portable code's 0.35, so 24 x 0.11 = 2.7 operations.
inline constexpr double kCpuNarrowF16Native = 3;

// Conversion operations of one run of `kernel` in a CPU kernel: each
// 16-bit read widened (per element of the loop for a read that varies
// along it, as pointwise tiles and row kernels read them), each 16-bit
// write narrowed (one stored from an array with one instruction per vector
// where `device` says so: fusion/cpu_output_stores.h), and a written value
// the kernel also uses (rounds_in_kernel) widened again from its stored
// bits. Values that stay inside the kernel stay f32 and cost nothing. 0
// for a matmul.
double cpu_conversion_ops(const FusionPlan& plan, const Kernel& kernel, const DeviceSpec& device);

}  // namespace fusejit
