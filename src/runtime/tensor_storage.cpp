#include "runtime/tensor_storage.h"

#include <cstring>

#include <fmt/format.h>

#include "ir/error.h"

namespace fusejit {

int64_t storage_bytes(DType dtype, const Shape& shape) { return shape.numel() * dtype_size(dtype); }

void encode_storage(const HostTensor& t, void* dst) {
  const size_t n = t.values.size();
  if (static_cast<int64_t>(n) != t.shape.numel()) {
    throw Error(fmt::format("encode_storage: the tensor holds {} values, but its shape {} has {}", n, t.shape,
                            t.shape.numel()));
  }
  if (dst == nullptr && n > 0) throw Error("encode_storage: the destination is a null pointer");
  switch (t.dtype) {
    case DType::kF32: {
      float* out = static_cast<float*>(dst);
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(t.values[i]);
      return;
    }
    case DType::kF16: {
      uint16_t* out = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) out[i] = float_to_half_bits(static_cast<float>(t.values[i]));
      return;
    }
    case DType::kBF16: {
      uint16_t* out = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) out[i] = float_to_bf16_bits(static_cast<float>(t.values[i]));
      return;
    }
  }
}

HostTensor decode_storage(DType dtype, const Shape& shape, const void* src) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = shape;
  const int64_t n = shape.numel();
  if (src == nullptr && n > 0)
    throw Error(fmt::format("decode_storage of {}{}: the source is a null pointer", dtype, shape));
  t.values.resize(static_cast<size_t>(n));
  switch (dtype) {
    case DType::kF32: {
      const float* in = static_cast<const float*>(src);
      for (int64_t i = 0; i < n; ++i) t.values[i] = in[i];
      break;
    }
    case DType::kF16: {
      const uint16_t* in = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) t.values[i] = half_bits_to_float(in[i]);
      break;
    }
    case DType::kBF16: {
      const uint16_t* in = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) t.values[i] = bf16_bits_to_float(in[i]);
      break;
    }
  }
  return t;
}

}  // namespace fusejit
