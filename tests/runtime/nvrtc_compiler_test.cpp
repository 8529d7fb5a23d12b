#include "runtime/nvrtc_compiler.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>
#include <fmt/format.h>

#include "ir/error.h"
#include "ir/messages.h"
#include "runtime/compile_report.h"
#include "runtime/runtime_test_util.h"
#include "support/requirements.h"
#include "support/run_command.h"

namespace fusejit {
namespace {

using testing::read_file;

// 16-byte loads and stores through float4, a multiply, a bounds check.
constexpr const char* kScaleKernel = R"(extern "C" __global__ void scale(const float4* __restrict__ x,
                                     float4* __restrict__ y, float a, long long n) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) {
    float4 v = x[i];
    v.x *= a; v.y *= a; v.z *= a; v.w *= a;
    y[i] = v;
  }
}
)";

// Each test compiles with its own cache directory (where compile error
// reports go too) and without FUSEJIT_DUMP.
class NvrtcCompile : public ::testing::Test {
 protected:
  void SetUp() override { FUSEJIT_REQUIRE_NVRTC(); }

  CompiledKernel compile(const std::string& source, const CudaCompileOptions& options = {},
                         KernelCache* cache = nullptr, const std::string& name = "scale") {
    absl::StatusOr<CompiledKernel> k = compile_cuda(name, source, options, cache);
    EXPECT_TRUE(k.ok()) << k.status();
    return k.ok() ? *k : CompiledKernel{};
  }

  const testing::TempDir tmp_{"fusejit-nvrtc"};
  const std::string& root_ = tmp_.path();
  testing::ScopedEnv cache_dir_{"FUSEJIT_CACHE_DIR", root_};
  testing::ScopedEnv dump_{"FUSEJIT_DUMP", std::nullopt};
};

TEST(NvrtcOptions, FollowTheDesign) {
  absl::StatusOr<std::vector<std::string>> sm = nvrtc_options({.arch = "sm_80"});
  ASSERT_TRUE(sm.ok()) << sm.status();
  EXPECT_EQ(absl::StrJoin(*sm, " "), "--std=c++17 -default-device --gpu-architecture=sm_80 --ptxas-options=-v");
  absl::StatusOr<std::vector<std::string>> all =
      nvrtc_options({.arch = "compute_90", .fast_math = true, .line_info = true});
  ASSERT_TRUE(all.ok()) << all.status();
  // No ptxas runs for a virtual architecture.
  EXPECT_EQ(absl::StrJoin(*all, " "),
            "--std=c++17 -default-device --gpu-architecture=compute_90 --use_fast_math -lineinfo");
  // --minimal from NVRTC 12.4 on, which knows it.
  absl::StatusOr<std::vector<std::string>> new_nvrtc = nvrtc_options({.arch = "sm_90"}, {12, 4});
  ASSERT_TRUE(new_nvrtc.ok()) << new_nvrtc.status();
  EXPECT_EQ(absl::StrJoin(*new_nvrtc, " "),
            "--std=c++17 -default-device --gpu-architecture=sm_90 --ptxas-options=-v --minimal");
  absl::StatusOr<std::vector<std::string>> old_nvrtc = nvrtc_options({.arch = "sm_90"}, {12, 3});
  ASSERT_TRUE(old_nvrtc.ok()) << old_nvrtc.status();
  EXPECT_EQ(old_nvrtc->back(), "--ptxas-options=-v");
  for (const char* good : {"sm_90a", "sm_100f", "compute_100a", "sm_120"}) {
    EXPECT_TRUE(nvrtc_options({.arch = good}).ok()) << good;
  }
  EXPECT_NE(nvrtc_options({.arch = "sm_80a"}).status().message().find("the 'a' variants begin at sm_90a; use sm_80"),
            std::string_view::npos)
      << nvrtc_options({.arch = "sm_80a"}).status();
  for (const char* bad :
       {"", "sm90", "sm_", "90", "sm_90 -I/etc", "compute_x", "sm_0090", "sm_80a", "sm_90f", "compute_86a"}) {
    absl::StatusOr<std::vector<std::string>> r = nvrtc_options({.arch = bad});
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST_F(NvrtcCompile, VersionIsMajorDotMinor) {
  const std::string v = nvrtc_version();
  EXPECT_TRUE(nvrtc_available());
  ASSERT_NE(v.find('.'), std::string::npos) << v;
  EXPECT_GE(std::stoi(v), 11) << v;
}

TEST_F(NvrtcCompile, CompilesToCubinAndPtxWithA16ByteLoadAndAPtxasReport) {
  for (const char* arch : {"sm_80", "sm_90"}) {
    const CompiledKernel k = compile(kScaleKernel, {.arch = arch});
    EXPECT_EQ(k.arch, arch);
    EXPECT_FALSE(k.cache_hit);
    EXPECT_TRUE(
        k.cubin.starts_with("\x7f"
                            "ELF"))
        << arch;
    EXPECT_TRUE(testing::contains(k.ptx, ".entry scale")) << k.ptx;
    EXPECT_TRUE(testing::contains(k.ptx, "ld.global.nc.v4.f32")) << k.ptx;
    EXPECT_TRUE(testing::contains(k.ptx, "st.global.v4.f32")) << k.ptx;
    ASSERT_EQ(k.ptxas.functions.size(), 1u) << k.log;
    EXPECT_EQ(k.ptxas.functions[0].name, "scale");
    // A handful of registers: 4 values, 2 pointers, an index, a scalar.
    EXPECT_GE(k.ptxas.registers, 8) << k.log;
    EXPECT_LE(k.ptxas.registers, 40) << k.log;
    EXPECT_FALSE(k.ptxas.has_spills()) << k.log;
    EXPECT_EQ(k.ptxas.stack_bytes, 0) << k.log;
    EXPECT_TRUE(testing::contains(k.log, std::string("for '") + arch + "'")) << k.log;
    EXPECT_GT(k.compile_ms, 0);
  }
}

TEST_F(NvrtcCompile, VirtualArchitectureGivesPtxOnly) {
  const CompiledKernel k = compile(kScaleKernel, {.arch = "compute_90"});
  EXPECT_TRUE(k.cubin.empty());
  EXPECT_TRUE(testing::contains(k.ptx, ".target sm_90")) << k.ptx;
  EXPECT_EQ(k.ptxas.registers, -1);
}

TEST_F(NvrtcCompile, LineInfoAndFastMathReachNvrtc) {
  constexpr const char* kSqrt = R"(extern "C" __global__ void r(float* x) { x[threadIdx.x] = sqrtf(x[threadIdx.x]); })";
  const CompiledKernel precise = compile(kSqrt, {}, nullptr, "r");
  const CompiledKernel fast = compile(kSqrt, {.fast_math = true, .line_info = true}, nullptr, "r");
  EXPECT_TRUE(testing::contains(precise.ptx, "sqrt.rn.f32")) << precise.ptx;
  EXPECT_TRUE(testing::contains(fast.ptx, "sqrt.approx.ftz.f32")) << fast.ptx;
  EXPECT_TRUE(testing::contains(fast.ptx, ".loc")) << fast.ptx;
  EXPECT_FALSE(testing::contains(precise.ptx, ".loc")) << precise.ptx;
}

TEST_F(NvrtcCompile, CacheHitsOnlyWhenSourceOptionsAndArchAreTheSame) {
  KernelCache cache("");
  const CompiledKernel first = compile(kScaleKernel, {}, &cache);
  const CompiledKernel again = compile(kScaleKernel, {}, &cache);
  EXPECT_FALSE(first.cache_hit);
  EXPECT_TRUE(again.cache_hit);
  EXPECT_EQ(again.cache_key, first.cache_key);
  EXPECT_EQ(again.cubin, first.cubin);
  EXPECT_EQ(again.ptx, first.ptx);
  EXPECT_EQ(again.ptxas.registers, first.ptxas.registers);
  const CompiledKernel variants[] = {
      compile(std::string(kScaleKernel) + "\n", {}, &cache), compile(kScaleKernel, {.fast_math = true}, &cache),
      compile(kScaleKernel, {.line_info = true}, &cache),    compile(kScaleKernel, {.arch = "sm_80"}, &cache),
      compile(kScaleKernel, {.arch = "compute_90"}, &cache),
  };
  std::set<std::string> keys = {first.cache_key};
  for (const CompiledKernel& k : variants) {
    EXPECT_FALSE(k.cache_hit) << absl::StrJoin(k.options, " ");
    keys.insert(k.cache_key);
  }
  EXPECT_EQ(keys.size(), 6u);
}

TEST_F(NvrtcCompile, DiskCacheServesAnotherCacheInstance) {
  const std::string dir = root_ + "/kernels";
  KernelCache writer(dir);
  const CompiledKernel cold = compile(kScaleKernel, {}, &writer);
  KernelCache reader(dir);
  const CompiledKernel warm = compile(kScaleKernel, {}, &reader);
  EXPECT_TRUE(warm.cache_hit);
  EXPECT_EQ(warm.cubin, cold.cubin);
  EXPECT_EQ(warm.ptx, cold.ptx);
  EXPECT_EQ(warm.log, cold.log);
  EXPECT_EQ(warm.ptxas.registers, cold.ptxas.registers);
}

TEST_F(NvrtcCompile, CorruptCacheEntryIsRecompiledWithAWarning) {
  const std::string dir = root_ + "/kernels";
  KernelCache first(dir);
  const CompiledKernel cold = compile(kScaleKernel, {}, &first);
  const std::string path = first.entry_path(cold.cache_key);
  std::string file = read_file(path);
  file[file.size() / 3] ^= 0x40;
  testing::write_file(path, file);

  ScopedWarningSink warnings;
  KernelCache second(dir);
  const CompiledKernel recompiled = compile(kScaleKernel, {}, &second);
  EXPECT_FALSE(recompiled.cache_hit);
  EXPECT_EQ(recompiled.cubin, cold.cubin);
  ASSERT_EQ(warnings.messages().size(), 1u) << warnings.text();
  EXPECT_TRUE(testing::contains(warnings.messages()[0], path)) << warnings.text();
  KernelCache third(dir);
  EXPECT_TRUE(compile(kScaleKernel, {}, &third).cache_hit);
}

// The message and the report file hold the NVRTC log (with the line of the
// error) and the options; the message numbers the source lines within
// kCitedContext of the error, the report every line.
void expect_compile_error_report(const std::string& name, const std::string& source, int error_line,
                                 const std::string& report_dir) {
  absl::StatusOr<CompiledKernel> k = compile_cuda(name, source, {}, nullptr);
  ASSERT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument) << k.status();
  const std::string message(status_text(k.status()));
  EXPECT_TRUE(testing::contains(message, name + ".cu(" + std::to_string(error_line) + "): error")) << message;
  EXPECT_TRUE(testing::contains(message, "options: --std=c++17 -default-device --gpu-architecture=sm_90")) << message;
  EXPECT_TRUE(testing::contains(message, "NVRTC_ERROR_COMPILATION")) << message;
  const size_t report_at = message.rfind("\nreport, with the whole source: ");
  ASSERT_NE(report_at, std::string::npos) << message;
  const std::string path = message.substr(report_at + 32);
  EXPECT_TRUE(path.starts_with(report_dir)) << path;
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  const std::string report = read_file(path);
  EXPECT_TRUE(testing::contains(report, name + ".cu(" + std::to_string(error_line) + "): error")) << report;
  std::vector<std::string> lines = absl::StrSplit(source, '\n');
  for (size_t i = 0; i < lines.size() && !lines[i].empty(); ++i) {
    const std::string numbered = fmt::format("{:>4} | {}\n", i + 1, lines[i]);
    EXPECT_TRUE(testing::contains(report, numbered)) << numbered << "\nnot in the report\n" << report;
    const bool near = std::abs(static_cast<int>(i + 1) - error_line) <= kCitedContext;
    EXPECT_EQ(testing::contains(message, numbered), near) << numbered << "\nin the message:\n" << message;
  }
  std::filesystem::remove(path);
}

TEST_F(NvrtcCompile, SyntaxErrorIsReportedWithLogAndNumberedSource) {
  expect_compile_error_report("broken_syntax",
                              "extern \"C\" __global__ void broken_syntax(float* x) {\n"
                              "  int i = threadIdx.x;\n"
                              "  x[i] = 1.0f * ;\n"
                              "}\n",
                              3, root_ + "/errors/");
}

TEST_F(NvrtcCompile, ErrorInALongSourceShowsOnlyTheLinesAroundIt) {
  std::string source = "extern \"C\" __global__ void broken_long(float* x) {\n";
  for (int line = 2; line < 50; ++line) source += "  x[" + std::to_string(line) + "] = 0.0f;\n";
  source += "  x[0] = undeclared;\n}\n";
  expect_compile_error_report("broken_long", source, 50, root_ + "/errors/");
}

TEST_F(NvrtcCompile, TypeErrorIsReportedWithLogAndNumberedSource) {
  expect_compile_error_report("broken_types",
                              "struct Pair { float a; float b; };\n"
                              "extern \"C\" __global__ void broken_types(float* x) {\n"
                              "  Pair p = {1.0f, 2.0f};\n"
                              "  float* q = p;\n"
                              "  x[threadIdx.x] = *q;\n"
                              "}\n",
                              4, root_ + "/errors/");
}

TEST_F(NvrtcCompile, ErrorReportGoesToTheTempDirectoryWhenTheCacheDirectoryIsUnwritable) {
  const std::string file = root_ + "/regular_file";
  testing::write_file(file, "x");
  testing::ScopedEnv cache_dir("FUSEJIT_CACHE_DIR", file + "/cache");
  // The temp directory is shared: a name of this process's own.
  const std::string name = "broken_tmp_" + std::to_string(getpid());
  expect_compile_error_report(name, "extern \"C\" __global__ void broken_tmp() { undeclared(); }\n", 1,
                              (std::filesystem::temp_directory_path() / "fusejit-errors").string());
}

TEST_F(NvrtcCompile, DumpWritesSourcePtxAndPtxasReportOnMissAndHit) {
  const std::string dump = root_ + "/dump/sub";
  testing::ScopedEnv env("FUSEJIT_DUMP", dump);
  KernelCache cache("");
  for (int pass = 0; pass < 2; ++pass) {
    std::filesystem::remove_all(dump);
    const CompiledKernel k = compile(kScaleKernel, {}, &cache);
    EXPECT_EQ(k.cache_hit, pass == 1);
    EXPECT_EQ(read_file(dump + "/scale.cu"), kScaleKernel);
    EXPECT_EQ(read_file(dump + "/scale.ptx"), k.ptx);
    EXPECT_EQ(read_file(dump + "/scale.ptxas.txt"), k.log);
    EXPECT_TRUE(testing::contains(k.log, "Used ")) << k.log;
  }
}

// FUSEJIT_DUMP replaces nothing: a file of the user's, or another graph's
// kernel of the same name, is kept and the kernel goes to NAME-2, NAME-3;
// the same kernel dumped again goes where it already is.
TEST_F(NvrtcCompile, DumpKeepsFilesWithOtherContentAndNumbersTheNewOnes) {
  const std::string dump = root_ + "/dump-numbered";
  std::filesystem::create_directories(dump);
  testing::write_file(dump + "/k0_add.cu", "my notes\n");
  testing::ScopedEnv env("FUSEJIT_DUMP", dump);
  const std::string first = "// first\n", second = "// second\n", ptx = "// ptx\n";
  ScopedWarningSink warnings;
  dump_files_if_requested("k0_add", {{".cu", &first}, {".ptx", &ptx}});
  dump_files_if_requested("k0_add", {{".cu", &first}, {".ptx", &ptx}});  // the same kernel again
  dump_files_if_requested("k0_add", {{".cu", &second}, {".ptx", &ptx}});
  EXPECT_EQ(read_file(dump + "/k0_add.cu"), "my notes\n");
  EXPECT_FALSE(std::filesystem::exists(dump + "/k0_add.ptx"));  // a pair is never split across names
  EXPECT_EQ(read_file(dump + "/k0_add-2.cu"), first);
  EXPECT_EQ(read_file(dump + "/k0_add-2.ptx"), ptx);
  EXPECT_EQ(read_file(dump + "/k0_add-3.cu"), second);
  EXPECT_EQ(read_file(dump + "/k0_add-3.ptx"), ptx);
  EXPECT_FALSE(std::filesystem::exists(dump + "/k0_add-4.cu"));
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dump)) ++files;
  EXPECT_EQ(files, 5u) << "no temporaries left behind";
  // Said once per process (only this test makes numbered dumps), and only
  // for a file that was there before: k0_add-2 taking k0_add-3 is not news.
  ASSERT_EQ(warnings.messages().size(), 1u) << warnings.text();
  EXPECT_TRUE(testing::contains(warnings.messages()[0], "NAME-2")) << warnings.text();

  // A fresh folder: the process's own earlier kernel of the same name (the
  // unfused and the fused plan's k0_gelu) is numbered without a warning.
  const std::string fresh = root_ + "/dump-fresh";
  testing::ScopedEnv fresh_env("FUSEJIT_DUMP", fresh);
  ScopedWarningSink quiet;
  dump_files_if_requested("k0_gelu", {{".cu", &first}});
  dump_files_if_requested("k0_gelu", {{".cu", &second}});
  EXPECT_EQ(read_file(fresh + "/k0_gelu.cu"), first);
  EXPECT_EQ(read_file(fresh + "/k0_gelu-2.cu"), second);
  EXPECT_TRUE(quiet.messages().empty()) << quiet.text();
}

TEST_F(NvrtcCompile, DumpFailureIsAWarningNotAnError) {
  const std::string file = root_ + "/regular_file";
  testing::write_file(file, "x");
  testing::ScopedEnv env("FUSEJIT_DUMP", file + "/dump");
  ScopedWarningSink warnings;
  const CompiledKernel k = compile(kScaleKernel);
  EXPECT_FALSE(k.ptx.empty());
  ASSERT_EQ(warnings.messages().size(), 1u) << warnings.text();
  EXPECT_TRUE(testing::contains(warnings.messages()[0], "FUSEJIT_DUMP")) << warnings.text();
}

// Several kernels compiled at once: the results in input order, each what
// compiling it alone gives, the same kernel twice served by one cache entry
// at the end, and of several failures the first in input order reported.
TEST_F(NvrtcCompile, KernelsCompiledTogetherAreThoseCompiledAlone) {
  KernelCache cache(root_ + "/together");
  std::vector<CudaSource> kernels;
  for (int i = 0; i < 5; ++i) {
    kernels.push_back({fmt::format("k{}", i), fmt::format("extern \"C\" __global__ void k{0}(float* x) {{ x[threadIdx.x] *= {0}.5f; }}\n", i)});
  }
  kernels.push_back(kernels[2]);
  absl::StatusOr<std::vector<CompiledKernel>> together = compile_cuda_all(kernels, {}, &cache, 3);
  ASSERT_TRUE(together.ok()) << together.status();
  ASSERT_EQ(together->size(), kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i) {
    const CompiledKernel alone = compile(kernels[i].source, {}, nullptr, kernels[i].name);
    EXPECT_EQ((*together)[i].name, kernels[i].name);
    EXPECT_EQ((*together)[i].ptx, alone.ptx) << kernels[i].name;
    EXPECT_TRUE(testing::contains((*together)[i].ptx, ".entry " + kernels[i].name)) << kernels[i].name;
  }
  EXPECT_TRUE(compile(kernels[2].source, {}, &cache, "k2").cache_hit);

  std::vector<CudaSource> broken = kernels;
  broken[1].source = "extern \"C\" __global__ void k1() { first_error(); }\n";
  broken[4].source = "extern \"C\" __global__ void k4() { second_error(); }\n";
  absl::StatusOr<std::vector<CompiledKernel>> failed = compile_cuda_all(broken, {}, nullptr, 4);
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(testing::contains(status_text(failed.status()), "first_error")) << failed.status();
  EXPECT_TRUE(compile_cuda_all({}, {}, nullptr)->empty());
}

TEST_F(NvrtcCompile, ArchitectureForAGpu) {
  absl::StatusOr<std::string> hopper = cuda_arch_for(9, 0);
  ASSERT_TRUE(hopper.ok()) << hopper.status();
  EXPECT_EQ(*hopper, "sm_90");
  EXPECT_EQ(cuda_arch_for(8, 0).value_or(""), "sm_80");
  // A GPU newer than NVRTC knows gets PTX of the newest architecture NVRTC
  // knows, which NVRTC then compiles as a real architecture too.
  absl::StatusOr<std::string> future = cuda_arch_for(99, 9);
  ASSERT_TRUE(future.ok()) << future.status();
  ASSERT_TRUE(future->starts_with("compute_")) << *future;
  const int newest = std::stoi(future->substr(8));
  EXPECT_GE(newest, 90);
  EXPECT_EQ(cuda_arch_for(newest / 10, newest % 10).value_or(""), fmt::format("sm_{}", newest));
  EXPECT_EQ(cuda_arch_for(3, 0).status().code(), absl::StatusCode::kFailedPrecondition);
}

// Reported, not asserted: the cold compile of a tiny kernel, and hits from memory and from disk.
TEST_F(NvrtcCompile, ReportsCompileAndCacheTimes) {
  const std::string dir = root_ + "/kernels";
  KernelCache cache(dir);
  const CompiledKernel cold = compile(kScaleKernel, {}, &cache);
  const CompiledKernel memory_hit = compile(kScaleKernel, {}, &cache);
  KernelCache fresh(dir);
  const CompiledKernel disk_hit = compile(kScaleKernel, {}, &fresh);
  ASSERT_TRUE(memory_hit.cache_hit && disk_hit.cache_hit);
  std::printf("[ timing   ] NVRTC %s, sm_90 tiny kernel: cold compile %.1f ms, memory hit %.3f ms, disk hit %.3f ms\n",
              nvrtc_version().c_str(), cold.compile_ms, memory_hit.compile_ms, disk_hit.compile_ms);
}

}  // namespace
}  // namespace fusejit
