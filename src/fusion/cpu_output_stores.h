// How a CPU kernel stores each output: what the CPU generator emits
// (codegen/cpu/element_loops.cpp, row.cpp), for the cost model to price
// the conversions of (cost/cpu_conversions.cpp).
#pragma once

#include <cstdint>
#include <numeric>

#include "fusion/plan.h"
#include "ir/graph.h"

namespace fusejit {

// Outputs of at least this many bytes are written with streaming stores
// (codegen/cpu/fj_kernel.h: fj_stream_span): far beyond a core's L2 and a
// large share of a server L3, so no later kernel finds them in the cache,
// and a normal store would first read every line it writes.
inline constexpr int64_t kCpuStreamingStoreBytes = int64_t{16} << 20;

inline bool cpu_streams_output(const Node& n) { return n.shape.numel() * dtype_size(n.dtype) >= kCpuStreamingStoreBytes; }

// A CPU row kernel streams a row-shaped output a block of this many
// elements at a time (fj_stream_block; codegen/cpu/cpu_emitter.h's
// kCpuReduceLanes, which cpu_emitter.cpp asserts equal), and only a block
// that starts on a line of this many bytes (the AVX-512 vector; 32 with
// AVX2 alone): a row that starts elsewhere is stored ordinarily, and so is
// each row's last partial block.
inline constexpr int64_t kCpuStreamBlockElements = 32;
inline constexpr int64_t kCpuStreamAlignBytes = 64;

// The bytes of `kernel`'s outputs that are written with ordinary stores:
// the core reads every line such a store writes before writing it
// (write-allocate, a "read for ownership"), from memory when the line is
// not in the cache, as after `fusejit bench`'s flush before each kernel.
// That read is traffic the cost model charges on a CPU. Streamed outputs
// skip it; a matmul stores C ordinarily (fj_store_span) at any size. A
// relu of 4194000 f32 elements (just under 16 MiB) ran 1.27-1.35x its
// prediction where the one of 4194304, streamed, ran 0.88-0.99x.
// A row kernel stores per-row values (and everything, in rows of one
// element) ordinarily; of a streamed row-shaped output, the rows that do
// not start on a line and each streamed row's tail (rows of 1000 f32:
// every other row, and 8 elements of the rest, ran 1.33-1.44x their
// prediction before these were charged).
inline int64_t cpu_write_allocated_bytes(const Graph& graph, const Kernel& kernel) {
  int64_t bytes = 0;
  for (int32_t id : kernel.writes) {
    const Node& n = graph.node(id);
    const int64_t size = dtype_size(n.dtype);
    const int64_t total = n.shape.numel() * size;
    if (kernel.kind == KernelKind::kMatmul || !cpu_streams_output(n)) {
      bytes += total;
      continue;
    }
    if (kernel.kind != KernelKind::kRow) continue;  // fj_stream_span aligns each span itself
    const int64_t row = kernel.iteration.last();
    if (row == 1 || !(n.shape == kernel.iteration)) {
      bytes += total;
      continue;
    }
    const int64_t rows = n.shape.numel() / row;
    const int64_t row_bytes = row * size;
    // Row r starts at r * row_bytes from an aligned base: on a line every
    // `period` rows.
    const int64_t period = kCpuStreamAlignBytes / std::gcd(row_bytes, kCpuStreamAlignBytes);
    const int64_t aligned_rows = (rows + period - 1) / period;
    const int64_t tail_bytes = (row % kCpuStreamBlockElements) * size;
    bytes += (rows - aligned_rows) * row_bytes + aligned_rows * tail_bytes;
  }
  return bytes;
}

// Whether output `id` of `kernel` is stored from an f32 array by a span
// helper (fj_stream_span, fj_store_span), which rounds a bf16 or f16 one
// a vector at a time with vcvtneps2bf16 (AVX512-BF16) or vcvtps2ph (F16C)
// where the CPU has them:
// outputs computed per element of the loops (every node of a pointwise
// kernel; a row kernel's row-shaped values, not its per-row ones nor any
// of a kernel over rows of 1) that are streamed or are dropout results,
// which are computed outside the element loops. Every other output is
// stored in the loop, or per row, by the portable conversion; matmuls
// store C through the span too, but their conversions are not priced.
// tests/codegen/cpu_output_stores_test.cpp checks this against the
// generated source.
inline bool cpu_stores_from_array(const Kernel& kernel, const Node& n) {
  bool per_element = false;
  switch (kernel.kind) {
    case KernelKind::kPointwise: per_element = true; break;
    case KernelKind::kRow: per_element = kernel.iteration.last() > 1 && n.shape == kernel.iteration; break;
    case KernelKind::kMatmul: return false;
  }
  return per_element && (cpu_streams_output(n) || n.op == Op::kDropout);
}

}  // namespace fusejit
