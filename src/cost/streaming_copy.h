// The copy that measures a CPU's memory ceiling.
#pragma once

#include <cstddef>

namespace fusejit {

// Copies `bytes` from src to dst with non-temporal (streaming) stores where
// the CPU has AVX, line after line and each line's stores in order: they
// write whole lines without first reading them, as CPU kernels write their
// outputs of 16 MiB and more (fj_stream_span). A
// copy that stores normally also reads every line it writes
// (read-for-ownership): glibc's memcpy does so below its non-temporal
// threshold (127 MiB per call on the AMD development VM), and bench's
// ceiling, copied in chunks below it, measured 70-79 GB/s there where this
// copy reaches 100-104; an f32 add with streaming stores ran at 105% of that
// "ceiling". Without AVX it is memcpy.
void streaming_copy(void* dst, const void* src, size_t bytes);

// How streaming_copy copies on this CPU: "64-byte streaming stores" (a whole
// line per store, with AVX-512), "32-byte streaming stores" or "memcpy".
const char* streaming_copy_method();

}  // namespace fusejit
