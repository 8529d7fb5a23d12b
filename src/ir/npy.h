// NumPy .npy files (format version 1.0 and 2.0, little-endian, C order).
// f32 tensors are stored as '<f4', f16 as '<f2', and bf16 (which NumPy lacks)
// as '<f4' holding the exact bf16 values. Reading checks the header fully:
// a corrupt or truncated file is an error naming the file and the problem.
#pragma once

#include <string>

#include <absl/status/statusor.h>

#include "ir/host_tensor.h"

namespace fusejit {

absl::Status write_npy(const std::string& path, const HostTensor& tensor);

// Reads `path` as a tensor of `dtype`. A '<f4' file read as f16 or bf16 must
// hold values exactly representable in that dtype; otherwise it is an error.
absl::StatusOr<HostTensor> read_npy(const std::string& path, DType dtype);

}  // namespace fusejit
