#include "cost/streaming_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <immintrin.h>

namespace fusejit {
namespace {

// Keeps the compiler from reordering the stores around it. Write-combining
// buffers fill best when a line's stores come in order and one line after
// the other: GCC interleaved the four 32-byte stores of two lines
// (second half of line 1, first of line 2, first of line 1, ...), and this
// copy measured 31 GB/s on an Intel Xeon VM where the same stores in order
// measured 38-39 (bench/results/2026-12-01-cpu-intel.md).
inline void keep_store_order() { asm volatile("" ::: "memory"); }

// The library is built for any x86-64; these loops only run where the CPU
// reports the extension.
__attribute__((target("avx"))) void streaming_copy_avx(char* dst, const char* src, size_t bytes) {
  const size_t head = std::min(bytes, (32 - reinterpret_cast<uintptr_t>(dst) % 32) % 32);
  std::memcpy(dst, src, head);
  size_t i = head;
  for (; i + 64 <= bytes; i += 64) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 32));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i), a);
    keep_store_order();
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 32), b);
    keep_store_order();
  }
  std::memcpy(dst + i, src + i, bytes - i);
  // Streaming stores are weakly ordered: make them visible before whoever
  // waits for this thread reads dst.
  _mm_sfence();
}

// One store per 64-byte line where the CPU has AVX-512.
__attribute__((target("avx512f"))) void streaming_copy_avx512(char* dst, const char* src, size_t bytes) {
  const size_t head = std::min(bytes, (64 - reinterpret_cast<uintptr_t>(dst) % 64) % 64);
  std::memcpy(dst, src, head);
  size_t i = head;
  for (; i + 64 <= bytes; i += 64) {
    const __m512i a = _mm512_loadu_si512(src + i);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i), a);
    keep_store_order();
  }
  std::memcpy(dst + i, src + i, bytes - i);
  _mm_sfence();
}

bool has_avx() { return __builtin_cpu_supports("avx"); }
bool has_avx512() { return __builtin_cpu_supports("avx512f"); }

}  // namespace

const char* streaming_copy_method() {
  return has_avx512() ? "64-byte streaming stores" : has_avx() ? "32-byte streaming stores" : "memcpy";
}

void streaming_copy(void* dst, const void* src, size_t bytes) {
  if (has_avx512()) {
    streaming_copy_avx512(static_cast<char*>(dst), static_cast<const char*>(src), bytes);
  } else if (has_avx()) {
    streaming_copy_avx(static_cast<char*>(dst), static_cast<const char*>(src), bytes);
  } else {
    std::memcpy(dst, src, bytes);
  }
}

}  // namespace fusejit
