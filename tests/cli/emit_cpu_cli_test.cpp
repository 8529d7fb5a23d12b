// `fusejit emit --target cpu`: the C++ the CPU backend runs, written where a
// user can read it, and complete enough to compile on its own.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/run_command.h"

namespace fusejit {
namespace {

using testing::make_temp_dir;
using testing::read_file;
using testing::run_command;
using testing::run_fusejit;
using testing::write_file;

const std::string kExamples = std::string(FUSEJIT_SOURCE_DIR) + "/examples/graphs";

// Small enough to compile in seconds; a pointwise kernel and a row kernel
// with a dropout among them.
std::string chain_file(const std::string& dir) {
  const std::string path = dir + "/chain.fj";
  write_file(path,
             "input x: bf16[32, 96]\n"
             "input b: bf16[96]\n"
             "h = add(x, b)\n"
             "d = dropout(h, p=0.25, seed=7)\n"
             "y = layer_norm(d)\n"
             "output y\n");
  return path;
}

TEST(EmitCpu, WritesEachKernelAsCompilableCppAndHitsTheCacheTheSecondTime) {
  const std::string dir = make_temp_dir("fusejit-emit-cpu");
  const std::string env = "FUSEJIT_CACHE_DIR=" + dir + "/cache ";
  const std::string args = " emit " + chain_file(dir) + " --target cpu --unfused --json --out " + dir + "/k";
  auto first = run_command(env + FUSEJIT_CLI_PATH + args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const nlohmann::json j = nlohmann::json::parse(first.out);
  EXPECT_EQ(j["target"], "cpu");
  EXPECT_EQ(j["plan"], "unfused");
  EXPECT_EQ(j["out"], dir + "/k");
  ASSERT_EQ(j["kernels"].size(), 3u) << first.out;  // add, dropout, layer_norm
  EXPECT_EQ(j["kernels"][0]["variant"], "pointwise");
  EXPECT_EQ(j["kernels"][2]["variant"], "row");
  EXPECT_EQ(j["kernels"][2]["work_items"], 32);  // rows
  EXPECT_GT(j["kernels"][2]["scratch_bytes_per_thread"].get<int64_t>(), 0);
  EXPECT_EQ(j["kernels"][1]["dropout_seeds"], nlohmann::json::array({7}));
  for (const nlohmann::json& k : j["kernels"]) {
    EXPECT_EQ(k["cache_hit"], false) << k;
    EXPECT_GT(k["compile_ms"].get<double>(), 0) << k;
    EXPECT_TRUE(k["library"].is_null()) << k;
    ASSERT_TRUE(std::filesystem::exists(dir + "/k/" + k["source"].get<std::string>())) << k;
  }
  EXPECT_TRUE(std::filesystem::exists(dir + "/k/plan.txt"));
  EXPECT_NE(read_file(dir + "/k/emitted.txt").find("  k2_layer_norm.cpp\n"), std::string::npos);

  // Each file is the whole translation unit: compiled alone with the flags
  // the listing names, it defines the kernel's entry point; and it compiles
  // without a warning when the user turns them on (the listing's -w
  // left out: it silences -Wall whatever the order).
  const nlohmann::json& row = j["kernels"][2];
  std::string command;
  for (const auto& word : j["compiler"]["command"]) command += word.get<std::string>() + " ";
  for (const auto& flag : j["compiler"]["flags"]) command += flag.get<std::string>() + " ";
  std::string strict_command;
  for (const auto& word : j["compiler"]["command"]) strict_command += word.get<std::string>() + " ";
  for (const auto& flag : j["compiler"]["flags"]) {
    if (flag != "-w") strict_command += flag.get<std::string>() + " ";
  }
  for (const nlohmann::json& k : j["kernels"]) {
    auto strict = run_command(strict_command + "-Wall -Wextra -Werror -fsyntax-only " + dir + "/k/" +
                              k["source"].get<std::string>());
    EXPECT_EQ(strict.exit_code, 0) << k["source"] << "\n" << strict.err;
  }
  auto built = run_command(command + dir + "/k/" + row["source"].get<std::string>() + " -o " + dir + "/row.so");
  ASSERT_EQ(built.exit_code, 0) << command << "\n" << built.err;
  auto symbols = run_command("nm -D --defined-only " + dir + "/row.so");
  EXPECT_NE(symbols.out.find(" T " + row["entry"].get<std::string>() + "\n"), std::string::npos) << symbols.out;

  // Again: refused without --overwrite; with it, every kernel from the cache.
  auto refused = run_command(env + FUSEJIT_CLI_PATH + args);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("from an earlier emit; pass --overwrite"), std::string::npos) << refused.err;
  auto second = run_command(env + FUSEJIT_CLI_PATH + args + " --overwrite");
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const nlohmann::json again = nlohmann::json::parse(second.out);
  for (const nlohmann::json& k : again["kernels"]) EXPECT_EQ(k["cache_hit"], true) << k;

  // The fused plan in text: one line per kernel and the compile command;
  // the unfused plan's files, unchanged since, are removed.
  auto fused =
      run_command(env + FUSEJIT_CLI_PATH + " emit " + dir + "/chain.fj --target CPU --overwrite --out " + dir + "/k");
  ASSERT_EQ(fused.exit_code, 0) << fused.err;
  EXPECT_NE(fused.out.find("fused plan of " + dir + "/chain.fj: 1 kernel -> " + dir + "/k/"), std::string::npos)
      << fused.out;
  EXPECT_NE(fused.out.find("host compiler: "), std::string::npos) << fused.out;
  EXPECT_NE(fused.out.find("-O3"), std::string::npos) << fused.out;
  EXPECT_NE(fused.out.find("k0_add_dropout_layer_norm"), std::string::npos) << fused.out;
  EXPECT_NE(fused.out.find("(row, 32 rows of 96"), std::string::npos) << fused.out;
  EXPECT_NE(fused.err.find("removed 3 files of an earlier emit"), std::string::npos) << fused.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/k/k0_add.cpp"));
}

// On the CPU a matmul is generated code too, so it has a file.
TEST(EmitCpu, MatmulsAreGeneratedKernels) {
  const std::string dir = make_temp_dir("fusejit-emit-cpu-matmul");
  auto r = run_fusejit("emit " + kExamples + "/mlp_block.fj --target cpu --json --out " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  int matmuls = 0;
  for (const nlohmann::json& k : j["kernels"]) {
    if (k["variant"] != "matmul") continue;
    ++matmuls;
    EXPECT_TRUE(k["library"].is_null()) << k;
    EXPECT_NE(read_file(dir + "/" + k["source"].get<std::string>()).find(k["entry"].get<std::string>()),
              std::string::npos);
  }
  EXPECT_EQ(matmuls, 2);
}

// The GPU's options are a usage mistake with the CPU target, a host
// compiler that does not run is one line, and one that fails the compile
// prints its log; none of them leaves anything behind.
TEST(EmitCpu, MistakesAreRefusedBeforeAnythingIsWritten) {
  const std::string dir = make_temp_dir("fusejit-emit-cpu-mistakes");
  const std::string file = chain_file(dir);
  // Usage mistakes: exit 2, as for any option misused.
  for (const char* option : {"--arch sm_90", "--access scalar"}) {
    auto r = run_fusejit("emit " + file + " --target cpu " + option + " --out " + dir + "/k");
    EXPECT_EQ(r.exit_code, 2) << option;
    EXPECT_NE(r.err.find(std::string(option).substr(0, std::string(option).find(' ')) +
                         ": applies to --target cuda only (the cpu target compiles for this CPU); see fusejit emit "
                         "--help"),
              std::string::npos)
        << r.err;
  }
  auto twice = run_fusejit("emit " + file + " --target cpu --target cuda --out " + dir + "/k");
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_NE(twice.err.find("--target was given 2 times; give it once"), std::string::npos) << twice.err;
  auto no_compiler = run_command("CXX=/nonexistent/c++ " + std::string(FUSEJIT_CLI_PATH) + " emit " + file +
                                 " --target cpu --out " + dir + "/k");
  EXPECT_EQ(no_compiler.exit_code, 1);
  EXPECT_NE(no_compiler.err.find("/nonexistent/c++"), std::string::npos) << no_compiler.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/k"));
  // A compiler that runs but fails the compile: its log, and the folders
  // this emit created (k and k/sub) are removed again.
  auto failed = run_command("CXX='c++ -no-such-flag' " + std::string(FUSEJIT_CLI_PATH) + " emit " + file +
                            " --target cpu --out " + dir + "/k/sub/");
  EXPECT_EQ(failed.exit_code, 1);
  EXPECT_NE(failed.err.find("failed to compile kernel"), std::string::npos) << failed.err;
  EXPECT_NE(failed.err.find("no-such-flag"), std::string::npos) << failed.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/k"));
}

}  // namespace
}  // namespace fusejit
