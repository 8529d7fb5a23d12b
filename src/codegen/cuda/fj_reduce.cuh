// fusejit CUDA helpers: reductions across a warp and across a block.

// Combines v over each aligned group of kWidth lanes (a power of two up to
// 32: a row kernel gives short rows fewer lanes than a warp); every lane of
// a group ends with the same bits. Every lane of the warp must call it.
template <int kWidth = 32, typename Combine>
__device__ __forceinline__ float fj_warp_reduce(float v, Combine combine) {
  static_assert(kWidth >= 1 && kWidth <= 32 && (kWidth & (kWidth - 1)) == 0, "kWidth: a power of two up to 32");
#pragma unroll
  for (int offset = kWidth / 2; offset > 0; offset >>= 1) v = combine(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Where a thread of a block-per-row kernel puts and gets the partial
// results of a block reduction: computed once per kernel, before the row
// loop, and kept (fj_keep). Computed inside fj_block_reduce, as it was,
// the lane and warp numbers and the shared-memory address cost the fused
// demo kernel 8 of its 302 loop instructions per 8 elements once the
// Philox round keys took the uniform registers ptxas had kept them in
// (bench/results/2026-12-03-gpu-loop-invariants.md).
struct fj_reduce_slots {
  int write;   // the warp's partial result (lane 0 writes it)
  int read;    // the partial this lane reads: lanes past kWarps repeat them
  int writer;  // 1 in lane 0 of each warp
};
template <int kWarps>
__device__ __forceinline__ fj_reduce_slots fj_make_reduce_slots() {
  fj_reduce_slots s = {(int)(threadIdx.x >> 5), (int)(threadIdx.x & (kWarps - 1)), (threadIdx.x & 31) == 0};
  fj_keep(s.write);
  fj_keep(s.read);
  fj_keep(s.writer);
  return s;
}

// Every thread of the block gets the result. kWarps = blockDim.x / 32, a
// power of two, known when the kernel is generated: the second stage reads
// the kWarps partial results into every lane (lanes past kWarps repeat
// them) and combines them in log2(kWarps) shuffles, not five, with no
// identity padding. Every lane ends with the same bits: each butterfly step
// combines the same two values in both lanes of a pair, and every combine is
// commutative.
//
// `smem` holds 32 floats. One barrier, between the writes and the reads,
// is all a reduction needs when a barrier separates its writes from the
// reads of the last reduction that used the same `smem`: the generator
// alternates two buffers, so the next reduction's barrier does that (and
// where a row holds an odd number of reductions, the rows alternate which
// buffer they start with). That halves a LayerNorm's barriers and an
// RMSNorm's.
template <int kWarps, typename Combine>
__device__ __forceinline__ float fj_block_reduce(float v, Combine combine, float* smem, fj_reduce_slots slots) {
  static_assert(kWarps >= 1 && kWarps <= 32 && (kWarps & (kWarps - 1)) == 0, "kWarps: a power of two up to 32");
  v = fj_warp_reduce(v, combine);
  if (slots.writer) smem[slots.write] = v;
  __syncthreads();
  v = smem[slots.read];
#pragma unroll
  for (int offset = kWarps / 2; offset > 0; offset >>= 1) v = combine(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
