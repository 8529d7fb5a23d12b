#include "cost/streaming_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <immintrin.h>

namespace fusejit {
namespace {

// The library is built for any x86-64; this loop only runs where the CPU
// reports AVX.
__attribute__((target("avx"))) void streaming_copy_avx(char* dst, const char* src, size_t bytes) {
  const size_t head = std::min(bytes, (32 - reinterpret_cast<uintptr_t>(dst) % 32) % 32);
  std::memcpy(dst, src, head);
  size_t i = head;
  for (; i + 128 <= bytes; i += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 64));
    const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 96), d);
  }
  std::memcpy(dst + i, src + i, bytes - i);
  // Streaming stores are weakly ordered: make them visible before whoever
  // waits for this thread reads dst.
  _mm_sfence();
}

bool has_avx() { return __builtin_cpu_supports("avx"); }

}  // namespace

const char* streaming_copy_method() { return has_avx() ? "streaming stores" : "memcpy"; }

void streaming_copy(void* dst, const void* src, size_t bytes) {
  if (has_avx()) {
    streaming_copy_avx(static_cast<char*>(dst), static_cast<const char*>(src), bytes);
  } else {
    std::memcpy(dst, src, bytes);
  }
}

}  // namespace fusejit
