// fusejit CUDA helpers: reductions across a warp and across a block.
struct FjSum {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct FjMax {
  __device__ __forceinline__ float operator()(float a, float b) const { return fj_maximum(a, b); }
};

template <typename Combine>
__device__ __forceinline__ float fj_warp_reduce(float v, Combine combine) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = combine(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Every thread of the block gets the result. `smem` holds 32 floats; the
// leading barrier lets consecutive reductions reuse it.
template <typename Combine>
__device__ __forceinline__ float fj_block_reduce(float v, Combine combine, float identity, float* smem) {
  v = fj_warp_reduce(v, combine);
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? smem[lane] : identity;
  return fj_warp_reduce(v, combine);
}
