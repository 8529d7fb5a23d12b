// Working memory of CPU kernels (row kernels' arrays, matmul's blocks),
// one buffer per thread, kept from call to call.
//
// A kernel used to allocate its arrays on every call and free them after:
// for rows of a million floats that is 20 MB a call, which the allocator
// hands back to the system and the next call faults in again, page by page
// (on the development VM the faults cost 50 ms per call against a 1 ms
// kernel). A thread's buffer only grows: it holds the most any kernel run on
// that thread asked for, until the thread ends.
#pragma once

#include <cstdint>

namespace fusejit {

// At least `floats` floats, 64-byte aligned, for the calling thread alone;
// the same memory on the next call unless more is asked for (contents are
// not kept when it grows). nullptr when the memory cannot be had.
float* worker_scratch(int64_t floats);

// Bytes held by the calling thread's buffer (for tests).
int64_t worker_scratch_bytes();

}  // namespace fusejit
