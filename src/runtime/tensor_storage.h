// HostTensor (float64 values) <-> the bytes a device buffer holds: f32, or
// the 16-bit patterns of f16/bf16, row-major. Values of a HostTensor are
// representable in its dtype, so encoding is exact.
#pragma once

#include <cstdint>

#include "ir/host_tensor.h"

namespace fusejit {

int64_t storage_bytes(DType dtype, const Shape& shape);
// Writes storage_bytes(tensor.dtype, tensor.shape) bytes; throws
// fusejit::Error when the tensor's values do not fill its shape, or dst is
// null.
void encode_storage(const HostTensor& tensor, void* dst);
// Reads storage_bytes(dtype, shape) bytes; throws fusejit::Error when src is
// null.
HostTensor decode_storage(DType dtype, const Shape& shape, const void* src);

}  // namespace fusejit
