// `fusejit bench`, `fusejit demo` and the JIT backends of `fusejit run`, as
// a user drives them, at sizes that take a second or two.
#include <filesystem>
#include <set>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cost/host_cpu.h"
#include "fusejit.h"
#include "runtime/runtime_test_util.h"
#include "support/graph_variants.h"
#include "support/run_command.h"

namespace fusejit {
namespace {

using testing::make_temp_dir;
using testing::run_command;
using testing::run_fusejit;
using testing::write_file;

std::string tiny_chain(const std::string& dir) {
  const std::string path = dir + "/chain.fj";
  write_file(path,
             "input x: bf16[64, 256]\ninput b: bf16[256]\ninput gamma: bf16[256]\ninput beta: bf16[256]\n"
             "h = add(x, b)\ng = gelu(h)\nd = dropout(g, p=0.1, seed=42)\n"
             "y = layer_norm(d, gamma, beta, eps=1e-5)\noutput y\n");
  return path;
}

TEST(BenchCli, JsonHasEveryFieldAndBothPlansAreChecked) {
  const std::string dir = make_temp_dir("fusejit-bench");
  auto r = run_fusejit("bench " + tiny_chain(dir) + " --backend cpu --reps 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  // Exactly the keys the README lists (under "--json prints one object
  // instead"): a key added or renamed here is documented there.
  auto keys_of = [](const nlohmann::json& object) {
    std::set<std::string> keys;
    for (const auto& [key, value] : object.items()) keys.insert(key);
    return keys;
  };
  EXPECT_EQ(keys_of(j), (std::set<std::string>{"backend",
                                               "device",
                                               "cost_model_device",
                                               "cost_model_bandwidth_gbps",
                                               "cost_model_launch_us",
                                               "ceiling_best_gbps",
                                               "ceiling_gbps",
                                               "copy_bytes",
                                               "working_set_bytes",
                                               "last_level_cache_bytes",
                                               "reps",
                                               "inputs",
                                               "seed",
                                               "graph",
                                               "speedup_measured",
                                               "speedup_predicted",
                                               "bytes_saved",
                                               "max_rel_error",
                                               "correct",
                                               "measured_bytes_note",
                                               "unfused",
                                               "fused"}));
  EXPECT_EQ(keys_of(j["fused"]),
            (std::set<std::string>{"bytes", "flops", "measured_bytes", "predicted_us", "measured_us_median",
                                   "measured_us_min", "effective_gbps", "max_rel_error", "correct", "mismatch",
                                   "beyond_float64_tolerance", "outputs_beyond_float64_tolerance",
                                   "order_dependent_elements", "kernels"}));
  EXPECT_EQ(keys_of(j["fused"]["kernels"][0]), (std::set<std::string>{"name",
                                                                      "executed_by",
                                                                      "bytes",
                                                                      "flops",
                                                                      "intensity",
                                                                      "compute_roof_gflops",
                                                                      "bandwidth_share",
                                                                      "instructions",
                                                                      "predicted_us",
                                                                      "measured_us_median",
                                                                      "measured_us_min",
                                                                      "effective_gbps",
                                                                      "achieved_gflops",
                                                                      "measured_bytes",
                                                                      "compile_ms",
                                                                      "cache_hit",
                                                                      "same_code_as",
                                                                      "launch_shape",
                                                                      "launch_tuning",
                                                                      "library_call"}));
  EXPECT_EQ(j["backend"], "cpu");
  EXPECT_GT(j["ceiling_gbps"].get<double>(), 0);
  // The CPU's predictions use the bandwidth measured in the same run.
  EXPECT_EQ(j["cost_model_bandwidth_gbps"].get<double>(), j["ceiling_gbps"].get<double>());
  // And the launch overhead measured in this process.
  EXPECT_GT(j["cost_model_launch_us"].get<double>(), 0);
  EXPECT_GT(j["bytes_saved"].get<int64_t>(), 0);
  EXPECT_LT(j["max_rel_error"].get<double>(), 3e-2);
  for (const char* plan : {"unfused", "fused"}) {
    const nlohmann::json& run = j[plan];
    for (const char* key : {"bytes", "predicted_us", "measured_us_median", "measured_us_min", "effective_gbps",
                            "kernels"}) {
      EXPECT_TRUE(run.contains(key)) << plan << "." << key;
    }
    EXPECT_TRUE(run["correct"].get<bool>()) << plan;
    EXPECT_FALSE(run["beyond_float64_tolerance"].get<bool>()) << plan;
    EXPECT_EQ(run["outputs_beyond_float64_tolerance"], nlohmann::json::array()) << plan;
    EXPECT_EQ(run["order_dependent_elements"], 0) << plan;
    EXPECT_GT(run["measured_us_median"].get<double>(), 0) << plan;
    for (const nlohmann::json& k : run["kernels"]) {
      for (const char* key : {"name", "bytes", "predicted_us", "measured_us_median", "effective_gbps",
                              "measured_bytes"}) {
        EXPECT_TRUE(k.contains(key)) << plan << " kernel ." << key;
      }
      EXPECT_TRUE(k["measured_bytes"].is_null());  // no counters on the CPU
    }
  }
  EXPECT_EQ(j["fused"]["kernels"].size(), 1u);
  EXPECT_EQ(j["unfused"]["kernels"].size(), 4u);
  // Why there are no measured bytes, as asked or as the backend says.
  EXPECT_TRUE(testing::contains(j["measured_bytes_note"].get<std::string>(), "not read on the CPU"))
      << j["measured_bytes_note"];
  EXPECT_TRUE(j["fused"]["measured_bytes"].is_null());
  auto off = run_fusejit("bench " + tiny_chain(dir) + " --backend cpu --reps 1 --no-counters --json");
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_TRUE(
      testing::contains(nlohmann::json::parse(off.out)["measured_bytes_note"].get<std::string>(), "--no-counters"))
      << off.out;
}

// --inputs DIR: both plans run on the .npy files `run --save` wrote, and
// the report says so; a file that does not fit the graph is an error that
// names the input, before anything is timed.
TEST(BenchCli, InputsAreReadFromAFolder) {
  const std::string dir = make_temp_dir("fusejit-bench-inputs");
  const std::string graph = tiny_chain(dir);
  ASSERT_EQ(run_fusejit("run " + graph + " --seed 4 --save " + dir + "/data").exit_code, 0);
  auto r = run_fusejit("bench " + graph + " --backend cpu --reps 1 --json --inputs " + dir + "/data");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["inputs"], dir + "/data");
  EXPECT_TRUE(j["seed"].is_null());
  EXPECT_TRUE(j["correct"].get<bool>());
  auto text = run_fusejit("bench " + graph + " --backend cpu --reps 1 --inputs " + dir + "/data");
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(testing::contains(text.out, "inputs: from " + dir + "/data\n")) << text.out;
  auto random = run_fusejit("bench " + graph + " --backend cpu --reps 1 --seed 3");
  EXPECT_TRUE(testing::contains(random.out, "inputs: random, normal(0, 1) rounded to their dtypes (seed 3)\n"))
      << random.out;

  auto both = run_fusejit("bench " + graph + " --backend cpu --seed 3 --inputs " + dir + "/data");
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_TRUE(testing::contains(both.err, "excludes")) << both.err;
  std::filesystem::copy_file(dir + "/data/b.npy", dir + "/data/x.npy",
                             std::filesystem::copy_options::overwrite_existing);
  auto wrong = run_fusejit("bench " + graph + " --backend cpu --inputs " + dir + "/data");
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_TRUE(testing::contains(wrong.err, "fusejit: error: input x: bf16[64, 256]: ")) << wrong.err;
  EXPECT_FALSE(testing::contains(wrong.out, "speedup")) << wrong.out;
}

TEST(BenchCli, KernelsOfRepeatedLayersNameTheCodeTheyRun) {
  const std::string dir = make_temp_dir("fusejit-bench");
  write_file(dir + "/layers.fj", testing::stacked_layers_text(2));
  auto r = run_fusejit("bench " + dir + "/layers.fj --backend cpu --reps 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  // Per layer: matmul, add, dropout, layer_norm unfused; a matmul and a row
  // kernel fused. The second layer runs the first layer's code.
  for (const auto& [plan, per_layer] : {std::pair{"unfused", 4}, std::pair{"fused", 2}}) {
    const nlohmann::json& kernels = j[plan]["kernels"];
    ASSERT_EQ(kernels.size(), 2u * per_layer) << plan;
    for (int k = 0; k < 2 * per_layer; ++k) {
      const nlohmann::json& same = kernels[k]["same_code_as"];
      if (k < per_layer) {
        EXPECT_TRUE(same.is_null()) << plan << " " << kernels[k];
      } else {
        EXPECT_EQ(same, kernels[k - per_layer]["name"]) << plan << " " << kernels[k];
        EXPECT_EQ(kernels[k]["compile_ms"], 0.0) << plan << " " << kernels[k];
      }
    }
    EXPECT_TRUE(j[plan]["correct"].get<bool>()) << plan;
  }
}

TEST(BenchCli, TamperedOutputsAreReportedAsWrong) {
  const std::string dir = make_temp_dir("fusejit-bench-tamper");
  auto r = run_fusejit("bench " + tiny_chain(dir) + " --backend cpu --reps 1 --tamper-for-testing");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(testing::contains(r.out, "check fused: ") && testing::contains(r.out, "WRONG")) << r.out;
  EXPECT_TRUE(testing::contains(r.err, "wrong results")) << r.err;
}

// `fusejit bench FILE --json` on the CPU, once, checking that both plans
// are correct yet have an output outside the float64 tolerance.
nlohmann::json bench_correct_beyond_float64_tolerance(const std::string& path) {
  auto r = run_fusejit("bench " + path + " --backend cpu --reps 1 --json");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  for (const char* plan : {"unfused", "fused"}) {
    EXPECT_TRUE(j.is_object() && j[plan]["correct"] == true) << plan << ": " << r.out;
    EXPECT_TRUE(j.is_object() && j[plan]["beyond_float64_tolerance"] == true) << plan << ": " << r.out;
  }
  return j;
}

// The mean of a LayerNorm's output is zero up to rounding, so its relative
// error against float64 is huge for any float32 kernel. bench judges it as the
// fuzzer does (first_wrong_output): correct, with the error still reported.
TEST(BenchCli, IllConditionedOutputIsJudgedAsTheFuzzerJudgesIt) {
  const std::string path = make_temp_dir("fusejit-bench-ill") + "/mean_of_layer_norm.fj";
  write_file(path, "input x: f32[64, 1000]\ny = layer_norm(x)\nm = mean(y)\noutput m\n");
  const nlohmann::json j = bench_correct_beyond_float64_tolerance(path);
  EXPECT_GT(j["max_rel_error"].get<double>(), 1e-3) << "the float64 error is reported as it is";
  auto text = run_fusejit("bench " + path + " --backend cpu --reps 1");
  ASSERT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_TRUE(testing::contains(text.out, "check fused: max relative error")) << text.out;
  EXPECT_TRUE(
      testing::contains(text.out,
                        "ok, as float32 arithmetic gives (it overflows inside a kernel) or within the rounding "
                        "noise of an ill-conditioned result, but outside the float64 reference's tolerance: m: "))
      << text.out;
}

// A row sum past float32's range makes a mean infinite in the kernels, as
// float32 arithmetic does (and PyTorch): correct, but named with where it
// differs, and its NaN error does not hide the other outputs' errors.
TEST(BenchCli, AnOutputThatOverflowsInFloat32IsNamedAndHidesNoOtherError) {
  const std::string path = make_temp_dir("fusejit-bench-overflow") + "/overflow.fj";
  write_file(path,
             "input x: f32[16, 64]\na = abs(x)\ns = mul(a, 3e37)\nt = add(s, 3e37)\nm = mean(t)\n"
             "z = add(x, 1)\noutput m, z\n");
  const nlohmann::json j = bench_correct_beyond_float64_tolerance(path);
  for (const char* plan : {"unfused", "fused"}) {
    ASSERT_EQ(j[plan]["outputs_beyond_float64_tolerance"].size(), 1u) << j[plan];
    EXPECT_TRUE(testing::contains(j[plan]["outputs_beyond_float64_tolerance"][0].get<std::string>(), "m: element 0"))
        << j[plan]["outputs_beyond_float64_tolerance"];
    EXPECT_TRUE(testing::contains(j[plan]["outputs_beyond_float64_tolerance"][0].get<std::string>(),
                                  "is inf where the reference has"))
        << j[plan]["outputs_beyond_float64_tolerance"];
    ASSERT_TRUE(j[plan]["max_rel_error"].is_number()) << "z's error, not NaN: " << j[plan];
    EXPECT_LT(j[plan]["max_rel_error"].get<double>(), 1e-5) << plan;
  }
  ASSERT_TRUE(j["max_rel_error"].is_number()) << j;
  auto text = run_fusejit("bench " + path + " --backend cpu --reps 1");
  ASSERT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_TRUE(testing::contains(text.out, "outside the float64 reference's tolerance: m: element 0")) << text.out;
  EXPECT_FALSE(testing::contains(text.out, "max relative error nan")) << text.out;
}

// A row that sums 3e38 + 3e38 - 3e38 is 3e38 or inf in float32 depending
// on the order of the additions (the CPU kernel's lanes add elements 0 and 16
// first: inf): bench accepts either and says how many elements it did not
// compare, rather than calling a right kernel wrong.
TEST(BenchCli, SumsThatOverflowInSomeOrdersOnlyAreNotCalledWrong) {
  const std::string dir = make_temp_dir("fusejit-bench-order");
  write_file(dir + "/sum.fj", "input x: f32[4, 64]\ns = sum(x)\nt = mul(s, 0.5)\noutput t\n");
  HostTensor x = HostTensor::random_normal(DType::kF32, {4, 64}, 9);
  const double big = static_cast<float>(3e38);
  x.values[0] = big, x.values[16] = big, x.values[1] = -big;
  std::filesystem::create_directories(dir + "/in");
  ASSERT_TRUE(write_npy(dir + "/in/x.npy", x).ok());
  auto r = run_fusejit("bench " + dir + "/sum.fj --backend cpu --reps 1 --json --inputs " + dir + "/in");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  for (const char* plan : {"unfused", "fused"}) {
    EXPECT_TRUE(j[plan]["correct"].get<bool>()) << j[plan];
    EXPECT_EQ(j[plan]["order_dependent_elements"], 1) << j[plan];
    // The element left out is left out of the error too: what remains is
    // within f32's tolerance, and no element is named as differing.
    ASSERT_TRUE(j[plan]["max_rel_error"].is_number()) << j[plan];
    EXPECT_LT(j[plan]["max_rel_error"].get<double>(), 1e-5) << j[plan];
    EXPECT_TRUE(j[plan]["outputs_beyond_float64_tolerance"].empty()) << j[plan];
  }
  auto text = run_fusejit("bench " + dir + "/sum.fj --backend cpu --reps 1 --inputs " + dir + "/in");
  ASSERT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_TRUE(testing::contains(text.out, "1 element not compared (float32 sums there overflow in some orders"))
      << text.out;
  EXPECT_FALSE(testing::contains(text.out, "outside the float64 reference's tolerance")) << text.out;
}

TEST(BenchCli, TablesAndRoofline) {
  const std::string dir = make_temp_dir("fusejit-bench-text");
  auto r = run_fusejit("bench " + tiny_chain(dir) + " --backend cpu --reps 2");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* text : {"memory ceiling:", "unfused plan: 4 kernels", "fused plan: 1 kernel", "speedup of fused",
                           "bytes saved by fusion", "roofline (cpu", "check fused: max relative error"}) {
    EXPECT_TRUE(testing::contains(r.out, text)) << text << "\n" << r.out;
  }
}

TEST(BenchCli, PlotIsDrawnAndNeverOverwrittenUnasked) {
  if (run_command("command -v gnuplot").exit_code != 0) GTEST_SKIP() << "gnuplot is not installed";
  const std::string dir = make_temp_dir("fusejit-bench-plot");
  const std::string svg = dir + "/roofline.svg";
  auto r = run_fusejit("bench " + tiny_chain(dir) + " --backend cpu --reps 1 --plot " + svg);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string chart = testing::read_file(svg);
  EXPECT_TRUE(testing::contains(chart, "<svg")) << chart.substr(0, 200);
  EXPECT_TRUE(testing::contains(chart, "k0_add_gelu_dropout_layer_norm")) << "the fused kernel is labelled";
  write_file(svg, "mine");
  auto again = run_fusejit("bench " + tiny_chain(dir) + " --backend cpu --reps 1 --plot " + svg);
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_TRUE(testing::contains(again.err, "already exists")) << again.err;
  EXPECT_EQ(testing::read_file(svg), "mine");
  // A usage error, found before the benchmark runs rather than after.
  auto bad = run_fusejit("bench " + tiny_chain(dir) + " --backend cpu --reps 1 --plot " + dir + "/chart.pdf");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(testing::contains(bad.err, ".svg or .png")) << bad.err;
  EXPECT_TRUE(bad.out.empty()) << bad.out;
  // The chart's working script is a temporary file of its own: a user's
  // file beside the chart is left alone. A folder that is not there, or a
  // folder where the chart would go, fails before the benchmark runs.
  const std::string other = dir + "/other.svg";
  write_file(other + ".gnuplot", "my script");
  auto script = run_fusejit("bench " + tiny_chain(dir) + " --backend cpu --reps 1 --plot " + other);
  EXPECT_EQ(script.exit_code, 0) << script.err;
  EXPECT_TRUE(testing::contains(testing::read_file(other), "<svg"));
  EXPECT_EQ(testing::read_file(other + ".gnuplot"), "my script");
  std::filesystem::create_directory(dir + "/folder.svg");
  auto folder = run_fusejit("bench " + tiny_chain(dir) + " --backend cpu --reps 1 --overwrite --plot " + dir +
                            "/folder.svg");
  EXPECT_EQ(folder.exit_code, 1);
  EXPECT_TRUE(testing::contains(folder.err, "folder.svg exists and is not a file")) << folder.err;
  EXPECT_FALSE(testing::contains(folder.out, "measured")) << folder.out;
  EXPECT_TRUE(std::filesystem::is_directory(dir + "/folder.svg"));
  auto nowhere = run_fusejit("bench " + tiny_chain(dir) + " --backend cpu --reps 1 --plot " + dir + "/no/such.svg");
  EXPECT_EQ(nowhere.exit_code, 1);
  EXPECT_TRUE(testing::contains(nowhere.err, "/no does not exist")) << nowhere.err;
  EXPECT_FALSE(testing::contains(nowhere.out, "measured")) << nowhere.out;
  // A file where the chart's folder would be is named as such, not as missing.
  for (const std::string& below : {other + "/x.svg", other + "/deeper/x.svg"}) {
    auto through_file = run_fusejit("bench " + tiny_chain(dir) + " --backend cpu --reps 1 --plot " + below);
    EXPECT_EQ(through_file.exit_code, 1);
    EXPECT_TRUE(testing::contains(through_file.err, "other.svg is not a folder")) << through_file.err;
    EXPECT_FALSE(testing::contains(through_file.out, "measured")) << through_file.out;
  }
  // gnuplot's script cannot hold a newline: refused before the benchmark.
  auto newline = run_fusejit("bench " + tiny_chain(dir) + " --backend cpu --reps 1 --plot '" + dir + "/new\nline.svg'");
  EXPECT_EQ(newline.exit_code, 1);
  EXPECT_TRUE(testing::contains(newline.err, "control character")) << newline.err;
  EXPECT_FALSE(testing::contains(newline.out, "measured")) << newline.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/new\nline.svg"));
  // A name is taken as written: gnuplot runs what is in backquotes inside
  // a double-quoted string, so a chart named so once ran `touch`.
  // (The command runs in dir, where `touch INJECTED` would create it.)
  const std::string odd = "r`touch INJECTED`'q'.svg";
  auto literal = run_command("cd " + dir + " && " + FUSEJIT_CLI_PATH + " bench " + tiny_chain(dir) +
                             " --backend cpu --reps 1 --plot \"r\\`touch INJECTED\\`'q'.svg\"");
  EXPECT_EQ(literal.exit_code, 0) << literal.err;
  EXPECT_TRUE(testing::contains(testing::read_file(dir + "/" + odd), "<svg"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/INJECTED"));
}

// `fusejit bench` of tiny_chain(dir) on the CPU, once, with `script` as
// the gnuplot on its PATH (in dir/bin): the command, to which the caller
// adds --plot and its options.
std::string bench_with_stand_in_gnuplot(const std::string& dir, const std::string& script) {
  std::filesystem::create_directories(dir + "/bin");
  write_file(dir + "/bin/gnuplot", "#!/bin/sh\n" + script);
  std::filesystem::permissions(dir + "/bin/gnuplot", std::filesystem::perms::owner_all);
  return "PATH=" + dir + "/bin:/usr/bin:/bin " + std::string(FUSEJIT_CLI_PATH) + " bench " + tiny_chain(dir) +
         " --backend cpu --reps 1";
}

// The line of a stand-in gnuplot that finds where the script says to draw.
constexpr char kGnuplotOutput[] = "out=$(sed -n \"s/^set output '\\(.*\\)'$/\\1/p\" \"$1\")\n";

// A chart gnuplot fails to draw leaves the file it would have replaced, even
// with --overwrite, and no temporary file behind.
TEST(BenchCli, AFailedDrawingLeavesTheOldChart) {
  const std::string dir = make_temp_dir("fusejit-bench-badgnuplot");
  const std::string bench = bench_with_stand_in_gnuplot(dir, "echo 'gnuplot: broken on purpose' >&2\nexit 1\n");
  const std::string chart = dir + "/keep.svg";
  write_file(chart, "old chart");
  auto r = run_command(bench + " --overwrite --plot " + chart);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(testing::contains(r.err, "gnuplot failed to draw " + chart + ": gnuplot: broken on purpose")) << r.err;
  EXPECT_EQ(testing::read_file(chart), "old chart");
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().string().find(".tmp-"), std::string::npos) << entry.path();
  }
}

// gnuplot exits 0 when its writes fail (a full disk left 4096 bytes of an
// SVG, or none): a chart cut short is an error, and the file it would have
// replaced is kept. The stand-in gnuplot writes a cut-off SVG and exits 0.
TEST(BenchCli, AChartCutShortIsAnErrorAndLeavesTheOldOne) {
  const std::string dir = make_temp_dir("fusejit-bench-cutshort");
  const std::string bench = bench_with_stand_in_gnuplot(
      dir, std::string(kGnuplotOutput) + "printf '<svg><g fill=\"none\" stro' > \"$out\"\n");
  const std::string chart = dir + "/keep.svg";
  write_file(chart, "<svg>old chart</svg>");
  auto r = run_command(bench + " --overwrite --plot " + chart);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(testing::contains(r.err, "--plot " + chart +
                                           ": gnuplot's chart came out incomplete (24 bytes, without the end of "
                                           "an SVG file); the file there was left as it was"))
      << r.err;
  EXPECT_EQ(testing::read_file(chart), "<svg>old chart</svg>");
  auto fresh = run_command(bench + " --plot " + dir + "/new.png");
  EXPECT_EQ(fresh.exit_code, 1);
  EXPECT_TRUE(testing::contains(fresh.err, "without the end of a PNG file); nothing was written")) << fresh.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/new.png"));
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().string().find(".tmp-"), std::string::npos) << entry.path();
  }
}

// --plot over a symbolic link draws into the file it points to and keeps
// the link (gnuplot here is a stand-in that writes a line where the script
// says, so any machine runs this).
TEST(BenchCli, PlotThroughALinkKeepsTheLink) {
  const std::string dir = make_temp_dir("fusejit-bench-plotlink");
  const std::string bench =
      bench_with_stand_in_gnuplot(dir, std::string(kGnuplotOutput) + "echo '<svg>drawn</svg>' > \"$out\"\n");
  std::filesystem::create_directories(dir + "/charts");
  write_file(dir + "/charts/r.svg", "old chart");
  std::filesystem::create_symlink("charts/r.svg", dir + "/r.svg");
  auto r = run_command(bench + " --overwrite --plot " + dir + "/r.svg");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::is_symlink(dir + "/r.svg"));
  EXPECT_EQ(testing::read_file(dir + "/charts/r.svg"), "<svg>drawn</svg>\n");
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/charts")) {
    EXPECT_EQ(entry.path().filename(), "r.svg") << "a temporary file is left: " << entry.path();
  }
}

// Without gnuplot, --plot fails before the benchmark runs and writes nothing.
TEST(BenchCli, PlotWithoutGnuplotFailsFirst) {
  const std::string dir = make_temp_dir("fusejit-bench-nognuplot");
  auto r = run_command("PATH=/nonexistent " + std::string(FUSEJIT_CLI_PATH) + " bench " + tiny_chain(dir) +
                       " --backend cpu --reps 1 --plot " + dir + "/r.svg");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(testing::contains(r.err, "needs gnuplot, which is not on PATH")) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/r.svg.gnuplot"));
}

// Random inputs that cannot fit in memory are refused before anything is
// measured: with an empty cache, the CPU's calibration took seconds first.
TEST(BenchCli, InputsThatCannotFitAreRefusedBeforeTheCpuIsMeasured) {
  const std::string dir = make_temp_dir("fusejit-bench-huge");
  write_file(dir + "/huge.fj", "input x: f32[100000000, 100000]\ny = exp(x)\noutput y\n");
  auto r = run_command("FUSEJIT_CACHE_DIR=" + dir + "/cache " + std::string(FUSEJIT_CLI_PATH) + " bench " + dir +
                       "/huge.fj --backend cpu");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(testing::contains(r.err, "out of host memory: input x: f32[100000000, 100000]")) << r.err;
  EXPECT_FALSE(testing::contains(r.err, "measuring this CPU")) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/cache/cpu-device-jit.json"));
}

// `fusejit devices` shows the CPU as plan and bench model it, says where
// its figures are cached, and --remeasure replaces them (a measurement
// taken on a busy machine would otherwise stay).
TEST(DevicesCli, CpuFiguresAreCachedAndRemeasuredOnRequest) {
  const std::string dir = make_temp_dir("fusejit-devices");
  const std::string env = "FUSEJIT_CACHE_DIR=" + dir + " ";
  auto first = run_command(env + FUSEJIT_CLI_PATH + " devices");
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  for (const char* text : {"h100:", "h200:", "cpu:", "op throughput of JIT kernels", "/cpu-device.json and "}) {
    EXPECT_TRUE(testing::contains(first.out, text)) << text << "\n" << first.out;
  }
  // A figure in the cache is what is shown, until --remeasure.
  const std::string path = dir + "/cpu-device.json";
  nlohmann::json cached = nlohmann::json::parse(testing::read_file(path));
  cached["bandwidth_gbps"] = 12345.0;
  write_file(path, cached.dump());
  auto from_cache = run_command(env + FUSEJIT_CLI_PATH + " devices");
  ASSERT_EQ(from_cache.exit_code, 0) << from_cache.err;
  EXPECT_TRUE(testing::contains(from_cache.out, "bandwidth 12345 GB/s")) << from_cache.out;
  // Figures measured while other programs kept the machine busy are shown
  // marked, or, where the machine is idle now, measured again (keeping
  // the better of each figure: the 12345 stays).
  cached["bandwidth_gbps"] = 12345.0;
  cached["others_busy_share"] = 0.9;
  write_file(path, cached.dump());
  auto busy = run_command(env + FUSEJIT_CLI_PATH + " devices");
  ASSERT_EQ(busy.exit_code, 0) << busy.err;
  EXPECT_TRUE(testing::contains(busy.out, "bandwidth 12345 GB/s")) << busy.out;
  const bool marked =
      testing::contains(busy.out, "measured while other programs took 90% of the time of the CPUs fusejit runs on");
  const bool measured_again =
      testing::contains(busy.err,
                        "the cached figures were measured while other programs took 90% of the time of "
                        "the CPUs fusejit runs on, and they are idle now");
  EXPECT_TRUE(marked != measured_again) << busy.out << busy.err;
  EXPECT_EQ(nlohmann::json::parse(testing::read_file(path))["others_busy_share"].get<double>() < 0.9, measured_again);
  // Figures measured again twice for that are kept, marked, whatever the
  // machine is doing now.
  cached["busy_remeasures"] = 2;
  write_file(path, cached.dump());
  auto kept = run_command(env + FUSEJIT_CLI_PATH + " devices");
  ASSERT_EQ(kept.exit_code, 0) << kept.err;
  EXPECT_TRUE(testing::contains(kept.out,
                                "took 90% of the time of the CPUs fusejit runs on: the figures may be low; measured "
                                "again as often as fusejit does by itself; `fusejit devices --remeasure` measures them "
                                "now"))
      << kept.out;
  EXPECT_FALSE(testing::contains(kept.err, "measuring this CPU's memory bandwidth")) << kept.err;
  auto again = run_command(env + FUSEJIT_CLI_PATH + " devices --remeasure");
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_FALSE(testing::contains(again.out, "bandwidth 12345 GB/s")) << again.out;
  EXPECT_TRUE(testing::contains(again.out, "measured now, cached in")) << again.out;
  EXPECT_NE(nlohmann::json::parse(testing::read_file(path))["bandwidth_gbps"].get<double>(), 12345.0);
  // Other tests run beside this one: figures measured busy could be
  // measured again by either process below, which would then describe
  // different devices. Marked idle, both read the same.
  nlohmann::json copy_figures = nlohmann::json::parse(testing::read_file(path));
  copy_figures["others_busy_share"] = 0.0;
  write_file(path, copy_figures.dump());
  nlohmann::json jit_figures = nlohmann::json::parse(testing::read_file(dir + "/cpu-device-jit.json"));
  for (nlohmann::json& entry : jit_figures["entries"]) entry["others_busy_share"] = 0.0;
  write_file(dir + "/cpu-device-jit.json", jit_figures.dump());
  // --json: the same devices, each as `plan --json` describes its device.
  auto json = run_command(env + FUSEJIT_CLI_PATH + " devices --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json j = nlohmann::json::parse(json.out);
  std::vector<std::string> names;
  for (const nlohmann::json& d : j["devices"]) names.push_back(d["name"]);
  EXPECT_EQ(names, device_names());
  const nlohmann::json cpu = j["devices"].back();
  EXPECT_EQ(cpu["bandwidth_gbps"], nlohmann::json::parse(testing::read_file(path))["bandwidth_gbps"]);
  EXPECT_EQ(cpu["native_bf16_stores"], host_cpu_has_avx512_bf16());
  EXPECT_EQ(cpu["native_f16_stores"], host_cpu_has_f16c());
  EXPECT_TRUE(j["devices"][0]["native_bf16_stores"].is_null()) << "a GPU: " << j["devices"][0];
  EXPECT_TRUE(j["devices"][0]["native_f16_stores"].is_null()) << "a GPU: " << j["devices"][0];
  EXPECT_TRUE(j["devices"][0]["others_busy_share"].is_null()) << "a datasheet's: " << j["devices"][0];
  EXPECT_GE(cpu["others_busy_share"].get<double>(), 0.0) << cpu;
  EXPECT_LE(cpu["others_busy_share"].get<double>(), 1.0) << cpu;
  auto plan = run_command(env + FUSEJIT_CLI_PATH + " plan " + FUSEJIT_SOURCE_DIR +
                          "/examples/graphs/softmax.fj --device cpu --json");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_EQ(nlohmann::json::parse(plan.out)["device"], cpu);
  EXPECT_EQ(j["cpu_cache"], (nlohmann::json{path, dir + "/cpu-device-jit.json"}));
  EXPECT_TRUE(j["gpu"]["usable"].is_boolean());
  EXPECT_TRUE(j["gpu"].contains(j["gpu"]["usable"].get<bool>() ? "description" : "reason")) << j["gpu"];
  // Measuring is announced, and a damaged cache file is named, measured
  // again and replaced.
  EXPECT_TRUE(testing::contains(first.err, "measuring this CPU's memory bandwidth and FP32 peak")) << first.err;
  write_file(path, "{garbage");
  auto repaired = run_command(env + FUSEJIT_CLI_PATH + " devices");
  ASSERT_EQ(repaired.exit_code, 0) << repaired.err;
  EXPECT_TRUE(testing::contains(repaired.err, "its cache file is not JSON; the figures go to " + path)) << repaired.err;
  EXPECT_GT(nlohmann::json::parse(testing::read_file(path))["bandwidth_gbps"].get<double>(), 0);
  // A bandwidth measured another way (a memcpy, which read each destination
  // line too; 4 KiB pages; 32-byte stores on an AVX-512 CPU) or an FMA peak
  // of narrower vectors than the kernels use is measured again.
  nlohmann::json old_method = nlohmann::json::parse(testing::read_file(path));
  const std::string copy = old_method["copy"];
  EXPECT_TRUE(testing::contains(copy, "streaming stores") || testing::contains(copy, "memcpy")) << copy;
  EXPECT_TRUE(testing::contains(copy, "over huge pages")) << copy;  // Linux with transparent huge pages
  const int lanes = old_method["fma_lanes"];
  EXPECT_TRUE(lanes == 4 || lanes == 8 || lanes == 16) << lanes;
  // So is one whose class figures were divided by other op weights
  // (dropout's FLOP weight was 18).
  EXPECT_TRUE(testing::contains(old_method["op_weights"].get<std::string>(), "philox 10")) << old_method.dump();
  for (const char* field : {"copy", "fma_lanes", "op_weights"}) {
    SCOPED_TRACE(field);
    nlohmann::json stale = old_method;
    const std::string f = field;
    stale[field] = f == "copy"         ? nlohmann::json("streaming stores")
                   : f == "fma_lanes" ? nlohmann::json(lanes / 2)
                                      : nlohmann::json("simple 2, div_sqrt 4, exp_log 8, erf 16, pow 16, philox 18");
    stale["bandwidth_gbps"] = 12345.0;
    write_file(path, stale.dump());
    auto remeasured = run_command(env + FUSEJIT_CLI_PATH + " devices");
    ASSERT_EQ(remeasured.exit_code, 0) << remeasured.err;
    EXPECT_FALSE(testing::contains(remeasured.out, "bandwidth 12345 GB/s")) << remeasured.out;
    EXPECT_TRUE(testing::contains(remeasured.err,
                                  "measured for another CPU, thread count, fusejit version, copy method, FMA width"))
        << remeasured.err;
  }
}

TEST(DemoCli, RunsTheChainOnTheCpuAtASmallSize) {
  auto r = run_fusejit("demo --backend cpu --rows 32 --cols 512 --reps 2");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* text : {"bias -> GeLU -> dropout(p=0.1) -> LayerNorm on [32, 512] bf16", "predicted",
                           "speedup of fused over unfused: measured", "roofline"}) {
    EXPECT_TRUE(testing::contains(r.out, text)) << text << "\n" << r.out;
  }
  // The plans first, predicted with the device the measured run used.
  EXPECT_LT(r.out.find("cost model device: cpu"), r.out.find("\nmeasured:\n")) << r.out;
  EXPECT_TRUE(testing::contains(r.out, "GB/s (the predictions' bandwidth), the median of 2 multi-threaded ")) << r.out;
  auto json = run_fusejit("demo --backend cpu --rows 32 --cols 512 --reps 1 --json");
  ASSERT_EQ(json.exit_code, 0) << json.out << json.err;
  EXPECT_EQ(nlohmann::json::parse(json.out).at("graph"), "<demo>") << json.out;
  auto bad = run_fusejit("demo --backend cpu --rows 0");
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  // --dtype, in any case: the chain in that dtype, checked against the reference.
  auto f16 = run_fusejit("demo --backend cpu --rows 16 --cols 256 --reps 1 --dtype F16");
  ASSERT_EQ(f16.exit_code, 0) << f16.out << f16.err;
  for (const char* text : {"LayerNorm on [16, 256] f16", "input x: f16[16, 256]", "check unfused: ", "check fused: "}) {
    EXPECT_TRUE(testing::contains(f16.out, text)) << text << "\n" << f16.out;
  }
  EXPECT_FALSE(testing::contains(f16.out, "WRONG")) << f16.out;  // the demo exits 0 only when both are right, too
  auto f64 = run_fusejit("demo --backend cpu --dtype f64");
  EXPECT_EQ(f64.exit_code, 2) << f64.out << f64.err;
  EXPECT_TRUE(testing::contains(f64.err, "--dtype")) << f64.err;
  // One row cannot be split over threads: said with the plans, as `plan` says it.
  if (std::thread::hardware_concurrency() > 1) {
    auto one_row = run_fusejit("demo --backend cpu --rows 1 --cols 4096 --reps 1");
    ASSERT_EQ(one_row.exit_code, 0) << one_row.out << one_row.err;
    const size_t note = one_row.out.find("too little work to split over all ");
    EXPECT_NE(note, std::string::npos) << one_row.out;
    EXPECT_LT(note, one_row.out.find("\nmeasured:\n")) << one_row.out;
  }
}

TEST(RunCli, JitBackendsAgreeWithTheReference) {
  const std::string dir = make_temp_dir("fusejit-run-cpu");
  const std::string file = tiny_chain(dir);
  auto cpu = run_fusejit("run " + file + " --backend cpu --save " + dir + "/cpu");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.out << cpu.err;
  EXPECT_TRUE(testing::contains(cpu.out, "backend cpu (")) << cpu.out;
  auto ref = run_fusejit("run " + file + " --backend reference --rounding outputs-only --save " + dir + "/ref");
  ASSERT_EQ(ref.exit_code, 0) << ref.out << ref.err;
  absl::StatusOr<HostTensor> a = read_npy(dir + "/cpu/y.npy", DType::kBF16);
  absl::StatusOr<HostTensor> b = read_npy(dir + "/ref/y.npy", DType::kBF16);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_LT(relative_error(*a, *b), tolerance(DType::kBF16));
}

// A cache directory that cannot be used (here a file) costs the caching,
// with one warning per reason, not one per kernel, and no claim that the
// CPU's measured figures were kept.
TEST(RunCli, AnUnusableCacheDirectoryIsOneWarningPerReason) {
  const std::string dir = make_temp_dir("fusejit-run-cache");
  write_file(dir + "/not-a-directory", "a file\n");
  // bench: it compiles kernels and calibrates the cost model (run does not
  // calibrate), so every cache the directory holds is tried.
  auto r = run_command("FUSEJIT_CACHE_DIR=" + dir + "/not-a-directory " + std::string(FUSEJIT_CLI_PATH) + " bench " +
                       tiny_chain(dir) + " --backend cpu --reps 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto count = [&](const std::string& needle) {
    int n = 0;
    for (size_t at = r.err.find(needle); at != std::string::npos; at = r.err.find(needle, at + 1)) ++n;
    return n;
  };
  // The kernel cache: one warning, that it is in memory only; not also one
  // that an entry could not be read, which says the same again.
  EXPECT_EQ(count("cannot read kernel cache entry"), 0) << r.err;
  EXPECT_EQ(count("cannot write the kernel cache"), 1) << r.err;
  EXPECT_EQ(count("cannot keep the CPU's op throughputs"), 1) << r.err;
  EXPECT_EQ(count("kept in"), 0) << r.err;
}

// `fusejit fuzz --check`: saved graphs (reproducers) are checked like
// generated ones, each reported by file; one that fails makes the exit code 1.
TEST(FuzzCli, CheckReportsEveryFile) {
  const std::string dir = make_temp_dir("fusejit-fuzz-check");
  write_file(dir + "/good.fj", "input x: f32[5, 17]\ns = sum(x)\ny = dropout(s, p=0.5, seed=3)\noutput y\n");
  write_file(dir + "/bad.fj", "input x: f32[4]\ny = exp(z)\noutput y\n");
  auto good = run_fusejit("fuzz --backend cpu --check " + dir + "/good.fj");
  EXPECT_EQ(good.exit_code, 0) << good.out << good.err;
  EXPECT_TRUE(testing::contains(good.out, dir + "/good.fj: ok")) << good.out;
  auto both = run_fusejit("fuzz --backend cpu --json --check " + dir + "/good.fj " + dir + "/bad.fj");
  EXPECT_EQ(both.exit_code, 1) << both.out << both.err;
  const nlohmann::json j = nlohmann::json::parse(both.out);
  EXPECT_EQ(j["graphs"], 2);
  EXPECT_EQ(j["mismatches"], 0) << "a file that does not parse is not a mismatch";
  EXPECT_EQ(j["invalid_files"], 1);
  ASSERT_EQ(j["failures"].size(), 1u);
  EXPECT_EQ(j["failures"][0]["file"], dir + "/bad.fj");
  EXPECT_TRUE(
      testing::contains(j["failures"][0]["error"].get<std::string>(), dir + "/bad.fj:2:9: error: undefined name 'z'"))
      << j.dump(2);
}

// What the machine cannot do is not a mismatch: a graph too large for its
// memory is "not checked", with the reason; a host compiler that cannot
// compile one op (a bad FUSEJIT_CXXFLAGS) stops the run once, before any
// graph is blamed.
// --cuda-compile compiles every launch shape the CUDA backend may time and
// keep, not only the default: a block-per-row LayerNorm over rows of 4096
// bf16 is 2 kernels per plan (16-byte and scalar variants) and 4 more
// shapes (256 threads, and 512 with one and two rows ahead, or 256 with one).
TEST(FuzzCli, CudaCompileCoversEveryLaunchShape) {
  const std::string dir = make_temp_dir("fusejit-fuzz-shapes");
  write_file(dir + "/ln.fj", "input x: bf16[8, 4096]\ny = layer_norm(x)\noutput y\n");
  auto r = run_fusejit("fuzz --backend none --cuda-compile --json --check " + dir + "/ln.fj");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["kernels"], 2 * (2 + 4)) << r.out;
}

TEST(FuzzCli, TheMachinesLimitsAreNotMismatches) {
  const std::string dir = make_temp_dir("fusejit-fuzz-limits");
  write_file(dir + "/huge.fj", "input x: f32[1000000, 1000000]\ny = relu(x)\noutput y\n");
  auto huge = run_fusejit("fuzz --backend cpu --json --check " + dir + "/huge.fj");
  EXPECT_EQ(huge.exit_code, 1) << huge.out << huge.err;
  const nlohmann::json j = nlohmann::json::parse(huge.out);
  EXPECT_EQ(j["mismatches"], 0) << huge.out;
  EXPECT_EQ(j["not_checked"], 1) << huge.out;
  EXPECT_TRUE(testing::contains(j["failures"][0]["error"].get<std::string>(), "out of host memory")) << huge.out;
  auto text = run_fusejit("fuzz --backend cpu --check " + dir + "/huge.fj");
  EXPECT_TRUE(testing::contains(text.out, dir + "/huge.fj: not checked: cannot make its inputs: out of host memory"))
      << text.out;

  for (const std::string& args : {std::string("--graphs 2"), "--check " + dir + "/huge.fj"}) {
    SCOPED_TRACE(args);
    auto broken = testing::run_command(
        fmt::format("FUSEJIT_CXXFLAGS=-fno-such-flag {} fuzz --backend cpu {}", FUSEJIT_CLI_PATH, args));
    EXPECT_EQ(broken.exit_code, 1) << broken.out << broken.err;
    EXPECT_TRUE(testing::contains(broken.err, "fusejit: error: fuzz cannot check even a one-op graph here"))
        << broken.err;
    EXPECT_FALSE(testing::contains(broken.out, "MISMATCH")) << broken.out;
  }
}

TEST(RunCli, CudaBackendWithoutAGpuSaysWhy) {
  if (make_cuda_backend().ok()) GTEST_SKIP() << "this machine has a usable GPU";
  const std::string dir = make_temp_dir("fusejit-run-cuda");
  auto r = run_fusejit("run " + tiny_chain(dir) + " --backend cuda");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(testing::contains(r.err, "backend cuda:")) << r.err;
  auto demo = run_fusejit("demo --backend cuda --rows 8");
  EXPECT_EQ(demo.exit_code, 1) << demo.out << demo.err;
  EXPECT_TRUE(testing::contains(demo.err, "backend cuda:")) << demo.err;
  EXPECT_TRUE(demo.out.empty()) << "nothing is printed before the error: " << demo.out;
  auto automatic = run_fusejit("run " + tiny_chain(dir) + " --backend auto");
  EXPECT_EQ(automatic.exit_code, 0) << automatic.err;
  EXPECT_TRUE(testing::contains(automatic.out, "backend cpu (")) << automatic.out;
  EXPECT_TRUE(testing::contains(automatic.err, "--backend auto runs on the CPU: ")) << "and says why:\n"
                                                                                    << automatic.err;
  auto devices = run_fusejit("devices");
  EXPECT_EQ(devices.exit_code, 0) << devices.err;
  EXPECT_TRUE(testing::contains(devices.out, "this machine's GPU: none usable (")) << devices.out;
}

}  // namespace
}  // namespace fusejit
