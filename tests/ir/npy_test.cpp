// .npy reading and writing: round trips for every dtype, headers written by
// hand (independent of the writer), and every kind of malformed file.
#include "ir/npy.h"

#include <sys/stat.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fusejit {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class NpyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("npy_test_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::string write_bytes(const std::string& name, const std::string& bytes) const {
    const std::string p = path(name);
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }

  static std::string read_bytes(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  // Reads `bytes` as a file and expects an InvalidArgument naming the file and `problem`.
  void expect_error(const std::string& bytes, const std::string& problem, DType dtype = DType::kF32) {
    const std::string p = write_bytes("bad.npy", bytes);
    const absl::StatusOr<HostTensor> t = read_npy(p, dtype);
    ASSERT_FALSE(t.ok()) << "expected an error containing: " << problem;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
    const std::string message(t.status().message());
    EXPECT_THAT(message, HasSubstr(p));
    EXPECT_THAT(message, HasSubstr(problem));
  }

  fs::path dir_;
};

// A file built by hand: magic, version, header length, header, data.
std::string npy_file(const std::string& header, const std::string& data, int major = 1) {
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const uint32_t length = static_cast<uint32_t>(header.size());
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) out += static_cast<char>((length >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string f32_data(std::initializer_list<float> values) {
  std::string out;
  for (float f : values) {
    const auto bits = std::bit_cast<uint32_t>(f);
    for (int i = 0; i < 4; ++i) out += static_cast<char>((bits >> (8 * i)) & 0xff);
  }
  return out;
}

std::string f64_data(std::initializer_list<double> values) {
  std::string out;
  for (double d : values) {
    const auto bits = std::bit_cast<uint64_t>(d);
    for (int i = 0; i < 8; ++i) out += static_cast<char>((bits >> (8 * i)) & 0xff);
  }
  return out;
}

const std::string kF32Header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n";
const std::string kSixFloats = f32_data({1.0f, -2.5f, 0.0f, 3.0f, 1e-3f, -65504.0f});

bool same_bits(double a, double b) { return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); }

// Random values of every kind a dtype holds: normal-range of both signs, near
// its smallest and largest magnitudes, subnormals, zeros, infinities, NaN.
HostTensor varied_tensor(DType dtype, const Shape& shape, uint32_t seed) {
  std::mt19937_64 gen(seed);
  const double tiny = dtype == DType::kF16 ? 0x1p-24 : dtype == DType::kBF16 ? 0x1p-133 : 0x1p-149;
  const double large = dtype == DType::kF16 ? 60000.0 : 3e38;
  HostTensor t{dtype, shape, {}};
  for (int64_t i = 0; i < shape.numel(); ++i) {
    const double u = static_cast<double>(gen() >> 11) * 0x1p-53 - 0.5;
    double v;
    switch (i % 8) {
      case 0: v = u * 8; break;
      case 1: v = u * large; break;
      case 2: v = tiny * static_cast<double>(gen() % 100); break;  // subnormal
      case 3: v = -tiny * 3; break;
      case 4: v = i % 16 == 4 ? 0.0 : -0.0; break;
      case 5: v = i % 16 == 5 ? std::numeric_limits<double>::infinity() : -large * 2; break;
      case 6: v = std::nan(""); break;
      default: v = u * 1e-3; break;
    }
    t.values.push_back(round_to_dtype(v, dtype));
  }
  return t;
}

TEST_F(NpyTest, RoundTripsEveryDType) {
  for (DType dtype : kAllDTypes) {
    for (const Shape& shape : {Shape{7}, Shape{3, 5}, Shape{2, 3, 4}, Shape{2, 1, 3, 5}}) {
      const HostTensor t = varied_tensor(dtype, shape, 17);
      const std::string p = path(std::string(dtype_name(dtype)) + ".npy");
      ASSERT_TRUE(write_npy(p, t).ok());
      const absl::StatusOr<HostTensor> back = read_npy(p, dtype);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(back->dtype, dtype);
      EXPECT_EQ(back->shape, shape);
      ASSERT_EQ(back->numel(), t.numel());
      for (int64_t i = 0; i < t.numel(); ++i) {
        if (std::isnan(t.values[i])) {
          EXPECT_TRUE(std::isnan(back->values[i]));
        } else {
          EXPECT_TRUE(same_bits(back->values[i], t.values[i]))
              << dtype_name(dtype) << " element " << i << ": " << t.values[i];
        }
      }
    }
  }
}

TEST_F(NpyTest, WritesTheNumPyLayout) {
  HostTensor t{DType::kF16, {2, 3}, {1, 2, 3, 4, 5, 6}};
  const std::string p = path("h.npy");
  ASSERT_TRUE(write_npy(p, t).ok());
  const std::string bytes = read_bytes(p);
  ASSERT_GE(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_length = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
  EXPECT_EQ((10 + header_length) % 64, 0u);  // data aligned as NumPy aligns it
  const std::string header = bytes.substr(10, header_length);
  EXPECT_THAT(header, ::testing::StartsWith("{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3), }"));
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(bytes.size(), 10 + header_length + 6 * 2);
  EXPECT_EQ(bytes.substr(10 + header_length, 2), std::string("\x00\x3c", 2));  // 1.0 in f16, little-endian

  // bf16 goes to '<f4' holding the exact values; a rank-1 shape is a 1-tuple.
  HostTensor b{DType::kBF16, {3}, {1.0, -2.0, 0.5}};
  ASSERT_TRUE(write_npy(p, b).ok());
  const std::string bb = read_bytes(p);
  EXPECT_THAT(bb, HasSubstr("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"));
  EXPECT_EQ(bb.substr(bb.size() - 12), f32_data({1.0f, -2.0f, 0.5f}));
}

TEST_F(NpyTest, ReadsHandMadeHeaders) {
  const std::string p1 = write_bytes("a.npy", npy_file(kF32Header, kSixFloats));
  absl::StatusOr<HostTensor> t = read_npy(p1, DType::kF32);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape, (Shape{2, 3}));
  EXPECT_EQ(t->values, (std::vector<double>{1.0, -2.5, 0.0, 3.0, static_cast<double>(1e-3f), -65504.0}));

  // Other key order, double quotes, no trailing comma, no padding, version 2.0 and 3.0.
  const std::string loose = "{\"shape\": (2,3), \"fortran_order\": False, \"descr\": \"<f4\"}";
  for (int major : {1, 2, 3}) {
    const std::string p = write_bytes("b.npy", npy_file(loose, kSixFloats, major));
    t = read_npy(p, DType::kF32);
    ASSERT_TRUE(t.ok()) << "version " << major << ": " << t.status();
    EXPECT_EQ(t->shape, (Shape{2, 3}));
    EXPECT_EQ(t->values[1], -2.5);
  }

  // '<f2' data, read as f16 and widened to f32.
  const std::string half = npy_file("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }\n",
                                    std::string("\x00\x3c\x01\x00", 4));  // 1.0 and 2^-24
  const std::string p2 = write_bytes("c.npy", half);
  for (DType dtype : {DType::kF16, DType::kF32}) {
    t = read_npy(p2, dtype);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->values, (std::vector<double>{1.0, 0x1p-24}));
    EXPECT_EQ(t->dtype, dtype);
  }

  // '<f8' data holding exact values, as NumPy writes float64 arrays by default.
  const std::string p3 = write_bytes(
      "d.npy",
      npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1, 1, 3), }\n", f64_data({0.5, -1.0, 3.0})));
  for (DType dtype : kAllDTypes) {
    t = read_npy(p3, dtype);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->shape, (Shape{1, 1, 1, 3}));
    EXPECT_EQ(t->values, (std::vector<double>{0.5, -1.0, 3.0}));
  }

  // Python 2 long extents.
  const std::string p4 =
      write_bytes("e.npy", npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }\n", kSixFloats));
  EXPECT_TRUE(read_npy(p4, DType::kF32).ok());
}

TEST_F(NpyTest, ReadingF4AsSixteenBitRequiresExactValues) {
  // bf16 stored as '<f4' with exact bf16 values reads fine.
  const std::string ok_file = write_bytes("ok.npy", npy_file(kF32Header, f32_data({1, 2, 3, 0.5f, -0.25f, 256})));
  EXPECT_TRUE(read_npy(ok_file, DType::kBF16).ok());
  EXPECT_TRUE(read_npy(ok_file, DType::kF16).ok());
  // 0.1f is not a bf16 value: the error names element 4 at [1, 1] and its value.
  expect_error(npy_file(kF32Header, f32_data({1, 2, 3, 4, 0.1f, 6})),
               "element 4 (at [1, 1]) is 0.10000000149011612, which is not exactly representable in bf16",
               DType::kBF16);
  expect_error(npy_file(kF32Header, f32_data({1, 70000, 3, 4, 5, 6})), "element 1 (at [0, 1]) is 70000", DType::kF16);
  expect_error(npy_file(kF32Header, f32_data({1, 2, 1e-8f, 4, 5, 6})), "not exactly representable in f16", DType::kF16);
  expect_error(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }\n", f64_data({1.0, 0.1})),
               "element 1 (at [1]) is 0.10000000000000001, which is not exactly representable in f32 (the nearest f32 "
               "value is 0.100000001); save the array as float32 (NumPy: a.astype(np.float32))");
  // NaN and infinities are representable everywhere.
  const float inf = std::numeric_limits<float>::infinity();
  const std::string special = write_bytes("s.npy", npy_file(kF32Header, f32_data({inf, -inf, std::nanf(""), 0, 0, 0})));
  EXPECT_TRUE(read_npy(special, DType::kF16).ok());
  EXPECT_TRUE(read_npy(special, DType::kBF16).ok());
}

TEST_F(NpyTest, MissingFileAndDirectory) {
  const absl::StatusOr<HostTensor> t = read_npy(path("nope.npy"), DType::kF32);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr(path("nope.npy")));
  const absl::StatusOr<HostTensor> d = read_npy(dir_.string(), DType::kF32);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("not a regular file"));
  // A FIFO with no writer: refused at once, not waited on for ever.
  ASSERT_EQ(mkfifo(path("fifo.npy").c_str(), 0600), 0);
  const absl::StatusOr<HostTensor> f = read_npy(path("fifo.npy"), DType::kF32);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("not a regular file"));
}

TEST_F(NpyTest, RejectsBadPreambles) {
  expect_error("", "shorter than the 10-byte preamble");
  expect_error("\x93NUMPY\x01", "shorter than the 10-byte preamble");
  expect_error(npy_file(kF32Header, kSixFloats).replace(5, 1, "Z"), "magic string");
  expect_error("PK\x03\x04 this is a zip file, not npy", "magic string");
  expect_error(npy_file(kF32Header, kSixFloats, 4), "unsupported .npy format version 4.0");
  std::string minor = npy_file(kF32Header, kSixFloats);
  minor[7] = 1;
  expect_error(minor, "unsupported .npy format version 1.1");
  expect_error(npy_file(kF32Header, kSixFloats, 2).substr(0, 11), "truncated: the file ends inside the header length");
  // Header length beyond the end of the file, and an absurd header length.
  std::string long_header = npy_file(kF32Header, "");
  long_header[8] = '\xff';
  long_header[9] = '\x7f';
  expect_error(long_header, "truncated: the header length 32767 runs past the end of the file");
  std::string huge = npy_file(kF32Header, kSixFloats, 2);
  huge[11] = '\x7f';
  expect_error(huge, "implausibly large");
}

// np.save of a NumPy scalar writes a 0-d array: one element, read as [1]
// (fusejit has no rank 0), also where the graph expects [1]; where it
// expects another shape the error says how the file was read.
TEST_F(NpyTest, AZeroDimensionalArrayReadsAsOneElement) {
  const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (), }";
  const std::string p = write_bytes("scalar.npy", npy_file(header, f32_data({-2.5f})));
  const Shape one{1};
  for (const Shape* expected : {static_cast<const Shape*>(nullptr), &one}) {
    const absl::StatusOr<HostTensor> t = read_npy(p, DType::kF32, expected);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->shape, one);
    ASSERT_EQ(t->values.size(), 1u);
    EXPECT_EQ(t->values[0], -2.5);
  }
  const Shape two{2};
  const absl::StatusOr<HostTensor> t = read_npy(p, DType::kF32, &two);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()),
              HasSubstr("has shape () (a 0-d array, read as [1]), the graph expects [2]"));
  // One element's bytes, no more.
  expect_error(npy_file(header, f32_data({1.0f, 2.0f})),
               "trailing bytes: shape () (a 0-d array, read as [1]) needs 4 bytes of data, the file has 8");
}

TEST_F(NpyTest, RejectsBadHeaderDicts) {
  struct Case {
    std::string header;
    std::string problem;
  };
  const Case cases[] = {
      {"{'fortran_order': False, 'shape': (2, 3), }", "no 'descr' key"},
      {"{'descr': '<f4', 'shape': (2, 3), }", "no 'fortran_order' key"},
      {"{'descr': '<f4', 'fortran_order': False, }", "no 'shape' key"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", "'descr' appears twice"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1}", "unexpected key 'extra'"},
      {"{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", "descr '>f4' is big-endian"},
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }", "unsupported descr '<i4'"},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3), }", "unsupported descr '|u1'"},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2, 3), }", "expected a quoted string"},
      {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", "fortran_order is True"},
      {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2, 3), }", "expected True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }", "expected a non-negative extent"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (two, 3), }", "expected an integer extent"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", "expected a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", "expected ',' or ')'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3", "expected ',' or ')'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 2, 3), }", "rank 5"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", "an extent below 1"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 3), }", "does not fit in 64 bits"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", "too many elements"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3037000499, 3037000499), }", "too many elements"},
      {"{'descr: '<f4', 'fortran_order': False, 'shape': (2, 3), }", "expected ':' after the key"},
      {"{'descr': '<f4", "expected a closing quote"},
      {"'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)", "expected '{'"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3)}", "expected ',' or '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)} trailing", "expected the end of the header"},
      {"", "expected '{'"},
      {std::string("{'descr': '<f4'\0, 'shape': (2, 3)}", sizeof("{'descr': '<f4'\0, 'shape': (2, 3)}") - 1), "\\x00"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.header);
    expect_error(npy_file(c.header, kSixFloats), c.problem);
  }
}

TEST_F(NpyTest, RejectsDataOfTheWrongSize) {
  expect_error(npy_file(kF32Header, kSixFloats.substr(0, 20)),
               "truncated: shape [2, 3] needs 24 bytes of data, the file has 20");
  expect_error(npy_file(kF32Header, ""), "truncated: shape [2, 3] needs 24 bytes of data, the file has 0");
  expect_error(npy_file(kF32Header, kSixFloats + "x"),
               "trailing bytes: shape [2, 3] needs 24 bytes of data, the file has 25");
  // A shape whose data would be enormous is refused before any allocation.
  expect_error(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 100000), }\n", kSixFloats),
               "needs 40000000000 bytes");
}

TEST_F(NpyTest, WriteReplacesAtomicallyAndReportsFailures) {
  const HostTensor t{DType::kF32, {2}, {1.0, 2.0}};
  const std::string p = path("x.npy");
  ASSERT_TRUE(write_npy(p, t).ok());
  ASSERT_TRUE(write_npy(p, HostTensor{DType::kF32, {3}, {4.0, 5.0, 6.0}}).ok());  // replaces
  EXPECT_EQ(read_npy(p, DType::kF32)->values, (std::vector<double>{4.0, 5.0, 6.0}));

  // Into a missing directory: an error naming the path.
  const absl::Status missing = write_npy(path("no/such/dir/x.npy"), t);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.message()), HasSubstr(path("no/such/dir/x.npy")));
  // Over a directory: the rename fails, the directory stays, no temporary file is left.
  fs::create_directory(path("d.npy"));
  const absl::Status over_dir = write_npy(path("d.npy"), t);
  ASSERT_FALSE(over_dir.ok());
  EXPECT_THAT(std::string(over_dir.message()), HasSubstr("cannot rename"));
  EXPECT_TRUE(fs::is_directory(path("d.npy")));
  for (const auto& entry : fs::directory_iterator(dir_)) {
    EXPECT_THAT(entry.path().filename().string(), ::testing::Not(HasSubstr(".tmp."))) << entry.path();
  }
  // A tensor whose values do not match its shape is refused; the old file stays.
  const absl::Status bad = write_npy(p, HostTensor{DType::kF32, {4}, {1.0}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.message()), HasSubstr("shape [4] holding 1 values"));
  EXPECT_EQ(read_npy(p, DType::kF32)->values, (std::vector<double>{4.0, 5.0, 6.0}));
}

}  // namespace
}  // namespace fusejit
