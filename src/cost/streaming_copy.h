// The copy that measures a CPU's memory ceiling.
#pragma once

#include <cstddef>

namespace fusejit {

// Copies `bytes` from src to dst the way CPU kernels write large outputs
// (fj_stream_span): with non-temporal stores where the CPU has AVX, which
// write whole lines without first reading them. A memcpy that stores
// normally also reads every destination line (read-for-ownership), so a
// ceiling it measured was a quarter low: on the development VM, memcpy
// 70-79 GB/s, this copy 100-104 GB/s, and an f32 add kernel with
// streaming stores 105% of the memcpy "ceiling".
void streaming_copy(void* dst, const void* src, size_t bytes);

}  // namespace fusejit
