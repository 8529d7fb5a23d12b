// How a CPU kernel stores each output: the CPU generator emits these stores
// (codegen/cpu/element_loops.cpp) and the cost model prices their
// conversions (cost/cpu_conversions.cpp), so the two agree.
#pragma once

#include <cstdint>

#include "ir/graph.h"

namespace fusejit {

// Outputs of at least this many bytes are written with streaming stores
// (codegen/cpu/fj_kernel.h: fj_stream_span): far beyond a core's L2 and a
// large share of a server L3, so no later kernel finds them in the cache,
// and a normal store would first read every line it writes.
inline constexpr int64_t kCpuStreamingStoreBytes = int64_t{16} << 20;

inline bool cpu_streams_output(const Node& n) { return n.shape.numel() * dtype_size(n.dtype) >= kCpuStreamingStoreBytes; }

// Whether an output is stored from an f32 array by a span helper
// (fj_stream_span, fj_store_span), which narrows a bf16 one 16 elements at
// a time with vcvtneps2bf16 where the CPU has AVX512-BF16: streamed
// outputs, and dropout results, which are computed outside the element
// loops. Every other output is stored element by element in the loop that
// computes it.
inline bool cpu_stores_from_array(const Node& n) { return cpu_streams_output(n) || n.op == Op::kDropout; }

}  // namespace fusejit
