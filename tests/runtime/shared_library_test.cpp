#include "runtime/shared_library.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/runtime_test_util.h"

namespace fusejit {
namespace {

using testing::ScopedEnv;
using testing::TempDir;

TEST(CudaLibraryCandidates, SonamesFirstThenTheBuildsFilesThenTheToolkitFolders) {
  ScopedEnv home("CUDA_HOME", "/opt/cuda-a");
  ScopedEnv path("CUDA_PATH", std::nullopt);
  const std::vector<std::string> names =
      cuda_library_candidates({"libx.so.13", "libx.so.12"}, {"/built/lib/libx.so.13"});
  const std::vector<std::string> expected = {
      "libx.so.13",
      "libx.so.12",
      "/built/lib/libx.so.13",
      "/opt/cuda-a/lib64/libx.so.13",
      "/opt/cuda-a/lib64/libx.so.12",
      "/opt/cuda-a/lib/libx.so.13",
      "/opt/cuda-a/lib/libx.so.12",
      "/opt/cuda-a/extras/CUPTI/lib64/libx.so.13",
      "/opt/cuda-a/extras/CUPTI/lib64/libx.so.12",
      "/usr/local/cuda/lib64/libx.so.13",
      "/usr/local/cuda/lib64/libx.so.12",
      "/usr/local/cuda/lib/libx.so.13",
      "/usr/local/cuda/lib/libx.so.12",
      "/usr/local/cuda/extras/CUPTI/lib64/libx.so.13",
      "/usr/local/cuda/extras/CUPTI/lib64/libx.so.12",
  };
  EXPECT_EQ(names, expected);
}

TEST(CudaLibraryCandidates, NamesEachPlaceOnce) {
  ScopedEnv home("CUDA_HOME", "/usr/local/cuda");
  ScopedEnv path("CUDA_PATH", "/usr/local/cuda");
  const std::vector<std::string> names =
      cuda_library_candidates({"liby.so.1"}, {"/usr/local/cuda/lib64/liby.so.1", ""});
  const std::vector<std::string> expected = {"liby.so.1", "/usr/local/cuda/lib64/liby.so.1",
                                             "/usr/local/cuda/lib/liby.so.1",
                                             "/usr/local/cuda/extras/CUPTI/lib64/liby.so.1"};
  EXPECT_EQ(names, expected);
}

// A library the loader cannot find by soname (no ldconfig entry, no
// LD_LIBRARY_PATH) loads from $CUDA_HOME's lib64: the device machine's
// toolkit may be registered nowhere.
TEST(CudaLibraryCandidates, ALibraryOnlyUnderCudaHomeLoads) {
  Dl_info info{};
  ASSERT_NE(::dladdr(reinterpret_cast<void*>(static_cast<double (*)(double)>(&std::cos)), &info), 0);
  ASSERT_NE(info.dli_fname, nullptr);
  const TempDir dir("shared-library");
  std::filesystem::create_directories(std::filesystem::path(dir.path()) / "lib64");
  const std::string soname = "libfusejit_test_only_under_cuda_home.so.7";
  std::filesystem::copy_file(info.dli_fname, std::filesystem::path(dir.path()) / "lib64" / soname);
  ScopedEnv home("CUDA_HOME", dir.path());

  absl::StatusOr<SharedLibrary> library = SharedLibrary::open(cuda_library_candidates({soname}));
  ASSERT_TRUE(library.ok()) << library.status();
  EXPECT_EQ(library->name(), (std::filesystem::path(dir.path()) / "lib64" / soname).string());
  double (*cosine)(double) = nullptr;
  ASSERT_TRUE(library->bind(cosine, "cos"));
  EXPECT_DOUBLE_EQ(cosine(0.0), 1.0);
}

TEST(SharedLibrary, AFailureQuotesTheLoaderOnceAndListsFoldersThatLackTheFile) {
  absl::StatusOr<SharedLibrary> library =
      SharedLibrary::open({"libfusejit_missing.so.3", "/nonexistent-a/libfusejit_missing.so.3",
                           "/nonexistent-b/libfusejit_missing.so.3", "/nonexistent-a/libfusejit_missing.so.2"});
  ASSERT_FALSE(library.ok());
  EXPECT_EQ(library.status().code(), absl::StatusCode::kNotFound);
  const std::string message(library.status().message());
  EXPECT_EQ(message,
            "libfusejit_missing.so.3: cannot open shared object file: No such file or directory; "
            "no such file in /nonexistent-a, /nonexistent-b");
  // One path, as FUSEJIT_CUDA_DRIVER names: the path itself.
  absl::StatusOr<SharedLibrary> one = SharedLibrary::open({"/nonexistent-a/x.so"});
  ASSERT_FALSE(one.ok());
  EXPECT_EQ(one.status().message(), "/nonexistent-a/x.so: no such file");
}

}  // namespace
}  // namespace fusejit
