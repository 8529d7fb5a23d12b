#include "ir/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>
#include <system_error>

#include <fmt/format.h>

#include "ir/link_target.h"

namespace fusejit {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
// Headers are a few dozen bytes; NumPy itself refuses more than 10000 by
// default. A larger length is a corrupt file, not a reason to allocate.
constexpr uint32_t kMaxHeaderLength = 1 << 20;

absl::Status npy_error(std::string_view path, std::string_view problem) {
  return absl::InvalidArgumentError(fmt::format("{}: {}", path, problem));
}

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

// The header as it can be shown in a message: printable ASCII, at most 120 characters.
std::string printable(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 120)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7f) ? std::string(1, c) : fmt::format("\\x{:02x}", u);
  }
  if (text.size() > 120) out += "...";
  return out;
}

enum class Descr { kF2, kF4, kF8 };

int64_t item_size(Descr d) { return d == Descr::kF2 ? 2 : d == Descr::kF4 ? 4 : 8; }

struct Header {
  Descr descr = Descr::kF4;
  bool fortran_order = false;
  Shape shape;
};

// A parser for the one Python dict literal a .npy header holds, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (8192, 4096), }
// Returns an error message, empty on success.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  std::string parse(Header& header) {
    bool have_descr = false, have_order = false, have_shape = false;
    skip_space();
    if (!eat('{')) return expected("'{'");
    for (;;) {
      skip_space();
      if (eat('}')) break;
      std::string key;
      if (auto e = string_literal(key); !e.empty()) return e;
      skip_space();
      if (!eat(':')) return expected(fmt::format("':' after the key '{}'", key));
      skip_space();
      std::string problem;
      if (key == "descr") {
        if (have_descr) return fmt::format("the key 'descr' appears twice");
        have_descr = true;
        problem = descr(header.descr);
      } else if (key == "fortran_order") {
        if (have_order) return fmt::format("the key 'fortran_order' appears twice");
        have_order = true;
        problem = boolean(header.fortran_order);
      } else if (key == "shape") {
        if (have_shape) return fmt::format("the key 'shape' appears twice");
        have_shape = true;
        problem = shape(header.shape);
      } else {
        return fmt::format("unexpected key '{}' (a .npy header has exactly 'descr', 'fortran_order', 'shape')",
                           printable(key));
      }
      if (!problem.empty()) return problem;
      skip_space();
      if (eat(',')) continue;
      skip_space();
      if (eat('}')) break;
      return expected("',' or '}'");
    }
    skip_space();
    if (pos_ != text_.size()) return expected("the end of the header after '}'");
    if (!have_descr) return "the header has no 'descr' key";
    if (!have_order) return "the header has no 'fortran_order' key";
    if (!have_shape) return "the header has no 'shape' key";
    return "";
  }

 private:
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t')) ++pos_;
  }
  bool eat(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  std::string expected(std::string_view what) const {
    return fmt::format("malformed header: expected {} at offset {} of \"{}\"", what, pos_, printable(text_));
  }

  std::string string_literal(std::string& out) {
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return expected("a quoted string");
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) return expected("a closing quote");
    out = std::string(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return "";
  }

  std::string descr(Descr& out) {
    std::string d;
    if (auto e = string_literal(d); !e.empty()) return e;
    if (d == "<f2") {
      out = Descr::kF2;
    } else if (d == "<f4") {
      out = Descr::kF4;
    } else if (d == "<f8") {
      out = Descr::kF8;
    } else if (d == ">f2" || d == ">f4" || d == ">f8") {
      return fmt::format("descr '{}' is big-endian; only little-endian '<f2', '<f4', '<f8' are supported", d);
    } else {
      return fmt::format("unsupported descr '{}'; expected '<f4' (f32, bf16), '<f2' (f16) or '<f8'", printable(d));
    }
    return "";
  }

  std::string boolean(bool& out) {
    const std::string_view rest = text_.substr(pos_);
    if (rest.starts_with("True")) {
      out = true;
      pos_ += 4;
    } else if (rest.starts_with("False")) {
      out = false;
      pos_ += 5;
    } else {
      return expected("True or False for 'fortran_order'");
    }
    return "";
  }

  // A tuple of non-negative integers: (), (3,), (2, 3); trailing comma optional.
  std::string shape(Shape& out) {
    if (!eat('(')) return expected("a tuple such as (2, 3) for 'shape'");
    for (;;) {
      skip_space();
      if (eat(')')) return "";
      if (out.rank() == 32) return "the shape has more than 32 dimensions";
      if (pos_ < text_.size() && text_[pos_] == '-') return expected("a non-negative extent in 'shape'");
      int64_t value = 0;
      const size_t start = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        if (__builtin_mul_overflow(value, 10, &value) || __builtin_add_overflow(value, text_[pos_] - '0', &value)) {
          return fmt::format("an extent in the shape does not fit in 64 bits: \"{}\"", printable(text_));
        }
        ++pos_;
      }
      if (pos_ == start) return expected("an integer extent in 'shape'");
      eat('L');  // Python 2 long literals, as old NumPy wrote them
      out.push_back(value);
      skip_space();
      if (eat(',')) continue;
      skip_space();
      if (eat(')')) return "";
      return expected("',' or ')' in 'shape'");
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

uint32_t load_le(const unsigned char* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void store_le(unsigned char* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

// Reads exactly `n` bytes at the current position.
bool read_exact(std::FILE* f, void* out, size_t n) { return std::fread(out, 1, n, f) == n; }

std::string coordinates(const Shape& shape, int64_t flat) {
  std::string out;
  for (int d = shape.rank() - 1; d >= 0; --d) {
    out = fmt::format("{}{}", flat % shape[d], out.empty() ? "" : ", " + out);
    flat /= shape[d];
  }
  return "[" + out + "]";
}

// How to save an array that loads as `dtype`: inputs are taken exactly, so
// the values must already be rounded to it.
std::string rounding_hint(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "save the array as float32 (NumPy: a.astype(np.float32))";
    case DType::kF16: return "save the array as float16 (NumPy: a.astype(np.float16))";
    case DType::kBF16:
      return "NumPy has no bfloat16: save float32 values that are bf16 values (PyTorch: "
             "t.to(torch.bfloat16).float().numpy())";
  }
  return "";
}

}  // namespace

absl::StatusOr<HostTensor> read_npy(const std::string& path, DType dtype, const Shape* expected_shape) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
  // writer for ever; it is refused below as not a regular file.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  File file(fd >= 0 ? fdopen(fd, "rb") : nullptr);
  if (fd >= 0 && !file) {
    const int err = errno;
    ::close(fd);
    errno = err;
  }
  if (!file) {
    const int err = errno;
    const std::string message = fmt::format("{}: cannot open: {}", path, errno_text(err));
    return err == ENOENT ? absl::NotFoundError(message) : absl::InvalidArgumentError(message);
  }
  std::FILE* f = file.get();
  struct stat info;
  if (fstat(fileno(f), &info) != 0 || !S_ISREG(info.st_mode)) return npy_error(path, "not a regular file");
  if (std::fseek(f, 0, SEEK_END) != 0) return npy_error(path, fmt::format("cannot seek: {}", errno_text(errno)));
  const long long file_size = ftello(f);
  if (file_size < 0 || std::fseek(f, 0, SEEK_SET) != 0) {
    return npy_error(path, fmt::format("cannot determine the file size: {}", errno_text(errno)));
  }

  unsigned char prefix[12];
  if (file_size < 10 || !read_exact(f, prefix, 10)) {
    return npy_error(path, fmt::format("not a .npy file: {} bytes is shorter than the 10-byte preamble", file_size));
  }
  if (std::string_view(reinterpret_cast<const char*>(prefix), 6) != kMagic) {
    return npy_error(path, "not a .npy file: it does not start with the magic string \\x93NUMPY");
  }
  const int major = prefix[6], minor = prefix[7];
  if (major < 1 || major > 3 || minor != 0) {
    return npy_error(path,
                     fmt::format("unsupported .npy format version {}.{} (expected 1.0, 2.0 or 3.0)", major, minor));
  }
  int64_t preamble = 10;
  uint32_t header_length = load_le(prefix + 8, 2);
  if (major >= 2) {
    if (file_size < 12 || !read_exact(f, prefix + 10, 2)) {
      return npy_error(path, "truncated: the file ends inside the header length");
    }
    preamble = 12;
    header_length = load_le(prefix + 8, 4);
  }
  if (header_length > kMaxHeaderLength) {
    return npy_error(path, fmt::format("header length {} is implausibly large (corrupt file?)", header_length));
  }
  if (preamble + header_length > file_size) {
    return npy_error(path, fmt::format("truncated: the header length {} runs past the end of the file ({} bytes)",
                                       header_length, file_size));
  }
  std::string header_text(header_length, '\0');
  if (!read_exact(f, header_text.data(), header_length)) {
    return npy_error(path, "read error or unexpected end of file in the header");
  }

  Header header;
  if (std::string problem = HeaderParser(header_text).parse(header); !problem.empty()) {
    return npy_error(path, problem);
  }
  if (header.fortran_order) {
    return npy_error(path, "fortran_order is True; only C-order (row-major) arrays are supported");
  }
  // A 0-d array, which np.save writes for a NumPy scalar, holds one
  // element: it reads as [1], the shape fusejit gives a scalar.
  const bool zero_d = header.shape.rank() == 0;
  const Shape shape = zero_d ? Shape{1} : header.shape;
  // How errors name the file's shape.
  const std::string shape_text = zero_d ? std::string("() (a 0-d array, read as [1])") : fmt::format("{}", shape);
  if (shape.rank() > kMaxRank) {
    return npy_error(path, fmt::format("shape {} has rank {}; fusejit tensors have rank 1 to 4", shape, shape.rank()));
  }
  for (int64_t d : shape) {
    if (d < 1) return npy_error(path, fmt::format("shape {} has an extent below 1", shape));
  }
  if (expected_shape != nullptr && shape != *expected_shape) {
    return npy_error(path, fmt::format("has shape {}, the graph expects {}", shape_text, *expected_shape));
  }
  int64_t data_bytes = 0;
  if (shape.numel_overflows() || __builtin_mul_overflow(shape.numel(), item_size(header.descr), &data_bytes)) {
    return npy_error(path, fmt::format("shape {} has too many elements", shape));
  }
  const int64_t data_offset = preamble + header_length;
  const int64_t have_bytes = file_size - data_offset;
  if (have_bytes != data_bytes) {
    return npy_error(path, fmt::format("{}: shape {} needs {} bytes of data, the file has {}",
                                       have_bytes < data_bytes ? "truncated" : "trailing bytes", shape_text, data_bytes,
                                       have_bytes));
  }

  HostTensor tensor;
  tensor.dtype = dtype;
  tensor.shape = shape;
  const int64_t n = shape.numel();
  tensor.values.resize(n);
  // Convert in chunks so the raw bytes never need a second full-size buffer.
  constexpr int64_t kChunk = 1 << 16;
  const int size = static_cast<int>(item_size(header.descr));
  std::vector<unsigned char> raw(kChunk * size);
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    const int64_t count = std::min(kChunk, n - begin);
    if (!read_exact(f, raw.data(), count * size)) {
      return npy_error(path, "read error or unexpected end of file in the data");
    }
    for (int64_t i = 0; i < count; ++i) {
      const unsigned char* p = raw.data() + i * size;
      double v = 0;
      switch (header.descr) {
        case Descr::kF2: v = half_bits_to_float(static_cast<uint16_t>(load_le(p, 2))); break;
        case Descr::kF4: v = std::bit_cast<float>(load_le(p, 4)); break;
        case Descr::kF8:
          v = std::bit_cast<double>(static_cast<uint64_t>(load_le(p + 4, 4)) << 32 | load_le(p, 4));
          break;
      }
      if (!std::isnan(v) && round_to_dtype(v, dtype) != v) {
        return npy_error(
            path, fmt::format("element {} (at {}) is {:.17g}, which is not exactly representable in {} "
                              "(the nearest {} value is {:.9g}); {}",
                              begin + i, coordinates(shape, begin + i), v, dtype, dtype, round_to_dtype(v, dtype),
                              rounding_hint(dtype)));
      }
      tensor.values[begin + i] = v;
    }
  }
  return tensor;
}

absl::StatusOr<std::string> npy_bytes(const HostTensor& tensor) {
  const Shape& shape = tensor.shape;
  if (shape.rank() < 1 || shape.rank() > kMaxRank || shape.numel_overflows() || tensor.numel() != shape.numel()) {
    return absl::InvalidArgumentError(
        fmt::format("cannot write a tensor of shape {} holding {} values", shape, tensor.numel()));
  }
  const bool half = tensor.dtype == DType::kF16;
  std::string dims;
  for (int64_t d : shape) dims += fmt::format("{}, ", d);
  if (shape.rank() > 1) dims.resize(dims.size() - 2);  // "(3,)" but "(2, 3)"
  if (shape.rank() == 1) dims.pop_back();
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", half ? "<f2" : "<f4", dims);
  // Pad with spaces and end with '\n' so the data starts 64-byte aligned, as NumPy does.
  const bool v1 = header.size() + 64 <= 0xffff;  // the padded length must fit in 16 bits
  const size_t preamble = v1 ? 10 : 12;
  header.append(63 - (preamble + header.size()) % 64, ' ');
  header += '\n';

  const int size = half ? 2 : 4;
  std::string bytes(kMagic);
  bytes.reserve(preamble + header.size() + static_cast<size_t>(tensor.numel()) * size);
  bytes += static_cast<char>(v1 ? 1 : 2);
  bytes += '\0';
  unsigned char length[4];
  store_le(length, header.size(), v1 ? 2 : 4);
  bytes.append(reinterpret_cast<const char*>(length), v1 ? 2 : 4);
  bytes += header;
  for (double value : tensor.values) {
    // Rounding again keeps the file exact for its dtype even if a caller broke HostTensor's invariant.
    const auto f = static_cast<float>(round_to_dtype(value, tensor.dtype));
    unsigned char raw[4];
    if (half) {
      store_le(raw, float_to_half_bits(f), 2);
    } else {
      store_le(raw, std::bit_cast<uint32_t>(f), 4);
    }
    bytes.append(reinterpret_cast<const char*>(raw), size);
  }
  return bytes;
}

absl::Status write_npy(const std::string& path, const HostTensor& tensor) {
  const absl::StatusOr<std::string> bytes = npy_bytes(tensor);
  if (!bytes.ok()) return npy_error(path, std::string(bytes.status().message()));
  // A link stays a link: the file it points to is replaced.
  const std::string target = link_target(path);
  if (is_special_file(target)) {
    return npy_error(path,
                     "is not a regular file (a device, a FIFO or a socket, or a link to one); the file is "
                     "written by replacing it whole, so it is left as it is");
  }
  static std::atomic<uint64_t> counter{0};
  const std::string temp = fmt::format("{}.tmp.{}.{}", target, getpid(), counter++);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) return npy_error(path, fmt::format("cannot create {}: {}", temp, errno_text(errno)));
  File file(fdopen(fd, "wb"));
  if (!file) {
    const int err = errno;
    ::close(fd);
    ::unlink(temp.c_str());
    return npy_error(path, fmt::format("cannot write {}: {}", temp, errno_text(err)));
  }
  auto fail = [&](std::string_view what) {
    const int err = errno;
    file.reset();
    ::unlink(temp.c_str());
    return npy_error(path, fmt::format("{} {}: {}", what, temp, errno_text(err)));
  };
  if (std::fwrite(bytes->data(), 1, bytes->size(), file.get()) != bytes->size()) return fail("cannot write");
  if (std::fflush(file.get()) != 0) return fail("cannot write");
  if (std::fclose(file.release()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    return npy_error(path, fmt::format("cannot write {}: {}", temp, errno_text(err)));
  }
  if (std::rename(temp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    return npy_error(path, fmt::format("cannot rename {} to the destination: {}", temp, errno_text(err)));
  }
  return absl::OkStatus();
}

}  // namespace fusejit
