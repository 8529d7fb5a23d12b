// NumPy .npy files, little-endian, C order.
// f32 tensors are stored as '<f4', f16 as '<f2', and bf16 (which NumPy lacks)
// as '<f4' holding the exact bf16 values. Writing produces format 1.0 (2.0
// only if the header could not fit); it writes a temporary file beside `path`
// and renames it over `path`, so a failed write never leaves a truncated file
// where a good one was.
//
// Reading accepts format versions 1.0, 2.0 and 3.0 and the descrs '<f2',
// '<f4' and '<f8' (float64, as NumPy writes by default), for any target dtype,
// provided every value is exactly representable in the target dtype (NaN and
// infinities are). The header is checked fully (magic, version, header
// length, the dict's keys and values, rank 1 to 4 with positive extents, and
// a data size equal to what the shape needs); every problem is an
// InvalidArgument (NotFound for a missing file) naming the file and the
// problem. Checking the shape against what the caller expects is the caller's.
#pragma once

#include <string>

#include <absl/status/statusor.h>

#include "ir/host_tensor.h"

namespace fusejit {

// Writes `tensor` as a .npy file at `path`, whole or not at all: to a
// temporary beside it, then renamed over it. A path that is a symbolic link
// stays one: the file it points to is replaced.
absl::Status write_npy(const std::string& path, const HostTensor& tensor);
// The bytes write_npy writes, for a caller that writes several files as a
// group (fusejit run --save: replace_files, runtime/file_io.h).
absl::StatusOr<std::string> npy_bytes(const HostTensor& tensor);

// Reads `path` as a tensor of `dtype` with the file's shape; with
// `expected_shape`, a file of another shape is an error naming both, found
// from the header before any value is read. A 0-d array (a NumPy scalar)
// reads as shape [1].
absl::StatusOr<HostTensor> read_npy(const std::string& path, DType dtype, const Shape* expected_shape = nullptr);

}  // namespace fusejit
