// fusejit CUDA helpers: Philox4x32-10 and dropout, bit for bit the mapping of
// src/ir/philox.h: key = seed, counter = (index / 8, 0, 0), bits = 16-bit number
// index % 8 of the output (little-endian), keep iff bits >= threshold
// (= ceil(p * 2^16)); result x * (keep ? scale : 0).
//
// A kernel takes the ten round keys of each dropout's seed, computed on the
// host (philox_round_keys), as one by-value parameter: fj_dropout_keys<N>,
// N the kernel's dropout ops in node order. From the seed, the kernel added
// them up itself, and ptxas, short of uniform registers, did 10 of those 18
// additions again in every row (bench/results/2026-12-03-gpu-loop-invariants.md).
struct fj_philox_keys {
  unsigned k[20];  // round r: k[2r], k[2r + 1]
};
template <int N>
struct fj_dropout_keys {
  fj_philox_keys key[N];
};

__device__ __forceinline__ uint4 fj_philox(uint4 c, const fj_philox_keys& keys) {
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const unsigned lo0 = 0xD2511F53u * c.x, hi0 = __umulhi(0xD2511F53u, c.x);
    const unsigned lo1 = 0xCD9E8D57u * c.z, hi1 = __umulhi(0xCD9E8D57u, c.z);
    c = make_uint4(hi1 ^ c.y ^ keys.k[2 * round], lo1, hi0 ^ c.w ^ keys.k[2 * round + 1], lo0);
  }
  return c;
}

// Philox's output for the group of 8 elements that holds element `index`:
// counter (index / 8, 0, 0).
__device__ __forceinline__ uint4 fj_philox_group(unsigned long long index, const fj_philox_keys& keys) {
  const unsigned long long group = index >> 3;
  return fj_philox(make_uint4((unsigned)group, (unsigned)(group >> 32), 0u, 0u), keys);
}

// The 16-bit number of element `index`: number index % 8 of its group's
// output, little-endian (the low half of word 0 first).
__device__ __forceinline__ unsigned fj_dropout_bits(unsigned long long index, const fj_philox_keys& keys) {
  const uint4 r = fj_philox_group(index, keys);
  unsigned word;
  switch ((index >> 1) & 3) {
    case 0: word = r.x; break;
    case 1: word = r.y; break;
    case 2: word = r.z; break;
    default: word = r.w; break;
  }
  return (index & 1) ? word >> 16 : word & 0xffffu;
}

__device__ __forceinline__ float fj_dropout_keep(float x, unsigned bits, unsigned threshold, float scale) {
  return x * (bits >= threshold ? scale : 0.0f);
}

__device__ __forceinline__ float fj_dropout(float x, unsigned long long index, unsigned threshold, float scale,
                                            const fj_philox_keys& keys) {
  return fj_dropout_keep(x, fj_dropout_bits(index, keys), threshold, scale);
}

// Dropout of the 2 elements whose 16-bit numbers share `word`.
__device__ __forceinline__ void fj_dropout_pair(const float* x, float* y, unsigned word, unsigned threshold,
                                                float scale) {
  y[0] = fj_dropout_keep(x[0], word & 0xffffu, threshold, scale);
  y[1] = fj_dropout_keep(x[1], word >> 16, threshold, scale);
}

// Dropout of 8 consecutive elements starting at `index` (a multiple of 8):
// one Philox call decides them all.
__device__ __forceinline__ void fj_dropout8(const float* x, float* y, unsigned long long index, unsigned threshold,
                                            float scale, const fj_philox_keys& keys) {
  const uint4 r = fj_philox_group(index, keys);
  fj_dropout_pair(x + 0, y + 0, r.x, threshold, scale);
  fj_dropout_pair(x + 2, y + 2, r.y, threshold, scale);
  fj_dropout_pair(x + 4, y + 4, r.z, threshold, scale);
  fj_dropout_pair(x + 6, y + 6, r.w, threshold, scale);
}

// dropout(gelu(x)) of 8 consecutive elements starting at `index` (a
// multiple of 8), for a 16-bit GeLU only the dropout uses: x points at the
// GeLU's operand (fj_gelu_none_16bit_dropout; offset = log2(scale) - 1).
__device__ __forceinline__ void fj_gelu_dropout8(const float* x, float* y, unsigned long long index, unsigned threshold,
                                                 float scale, float offset, const fj_philox_keys& keys) {
  const uint4 r = fj_philox_group(index, keys);
  const unsigned words[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    y[2 * k] = fj_gelu_none_16bit_dropout(x[2 * k], (words[k] & 0xffffu) >= threshold, scale, offset);
    y[2 * k + 1] = fj_gelu_none_16bit_dropout(x[2 * k + 1], (words[k] >> 16) >= threshold, scale, offset);
  }
}

// Dropout of 4 consecutive elements starting at `index` (a multiple of 4):
// half a group, so a whole Philox call of which two words are used. Kernels
// whose threads hold 8 consecutive elements call fj_dropout8 instead.
__device__ __forceinline__ void fj_dropout4(const float* x, float* y, unsigned long long index, unsigned threshold,
                                            float scale, const fj_philox_keys& keys) {
  const uint4 r = fj_philox_group(index, keys);
  const bool upper = (index & 4) != 0;
  fj_dropout_pair(x + 0, y + 0, upper ? r.z : r.x, threshold, scale);
  fj_dropout_pair(x + 2, y + 2, upper ? r.w : r.y, threshold, scale);
}
