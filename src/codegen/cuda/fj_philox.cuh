// fusejit CUDA helpers: Philox4x32-10 and dropout, bit for bit the mapping of
// src/ir/philox.h: key = seed, counter = (index / 4, 0, 0), word = output[index % 4],
// keep iff (word >> 8) >= threshold (= ceil(p * 2^24)); result x * (keep ? scale : 0).
__device__ __forceinline__ uint4 fj_philox(uint4 c, unsigned k0, unsigned k1) {
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const unsigned lo0 = 0xD2511F53u * c.x, hi0 = __umulhi(0xD2511F53u, c.x);
    const unsigned lo1 = 0xCD9E8D57u * c.z, hi1 = __umulhi(0xCD9E8D57u, c.z);
    c = make_uint4(hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0);
  }
  return c;
}

__device__ __forceinline__ unsigned fj_philox_word(unsigned long long index, unsigned k0, unsigned k1) {
  const unsigned long long group = index >> 2;
  const uint4 r = fj_philox(make_uint4((unsigned)group, (unsigned)(group >> 32), 0u, 0u), k0, k1);
  switch (index & 3) {
    case 0: return r.x;
    case 1: return r.y;
    case 2: return r.z;
    default: return r.w;
  }
}

__device__ __forceinline__ float fj_dropout(float x, unsigned long long index, unsigned threshold, float scale,
                                            unsigned k0, unsigned k1) {
  const bool keep = (fj_philox_word(index, k0, k1) >> 8) >= threshold;
  return x * (keep ? scale : 0.0f);
}

// Dropout of 4 consecutive elements starting at `index` (a multiple of 4):
// they share one Philox call, whose four words decide them in order.
__device__ __forceinline__ void fj_dropout4(const float* x, float* y, unsigned long long index, unsigned threshold,
                                            float scale, unsigned k0, unsigned k1) {
  const unsigned long long group = index >> 2;
  const uint4 r = fj_philox(make_uint4((unsigned)group, (unsigned)(group >> 32), 0u, 0u), k0, k1);
  y[0] = x[0] * ((r.x >> 8) >= threshold ? scale : 0.0f);
  y[1] = x[1] * ((r.y >> 8) >= threshold ? scale : 0.0f);
  y[2] = x[2] * ((r.z >> 8) >= threshold ? scale : 0.0f);
  y[3] = x[3] * ((r.w >> 8) >= threshold ? scale : 0.0f);
}
