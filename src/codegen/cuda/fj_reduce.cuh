// fusejit CUDA helpers: reductions across a warp and across a block.
template <typename Combine>
__device__ __forceinline__ float fj_warp_reduce(float v, Combine combine) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = combine(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
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
// alternates two buffers, so the next reduction's barrier does that. Where
// it cannot (one reduction per row, or an odd number, so that a row's first
// reduction follows the last one's buffer), kBarrierFirst adds a barrier
// before the writes. Leaving it out elsewhere halves a LayerNorm's barriers.
template <int kWarps, bool kBarrierFirst, typename Combine>
__device__ __forceinline__ float fj_block_reduce(float v, Combine combine, float* smem) {
  static_assert(kWarps >= 1 && kWarps <= 32 && (kWarps & (kWarps - 1)) == 0, "kWarps: a power of two up to 32");
  v = fj_warp_reduce(v, combine);
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  if (kBarrierFirst) __syncthreads();
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = smem[lane & (kWarps - 1)];
#pragma unroll
  for (int offset = kWarps / 2; offset > 0; offset >>= 1) v = combine(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
