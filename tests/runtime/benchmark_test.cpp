// run_benchmark: its copy ceiling, measured before the plans and after them,
// the better of the two counting, with the predictions following it; and
// mistakes in the call, which are statuses.
#include "runtime/benchmark.h"

#include <gtest/gtest.h>

#include <memory>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "fusejit.h"
#include "runtime/bench_report.h"

namespace fusejit {
namespace {

// The CPU backend, except that its copies measure what the test says.
class ScriptedCopyBackend : public Backend {
 public:
  ScriptedCopyBackend(std::unique_ptr<Backend> inner, std::vector<double> copies)
      : inner_(std::move(inner)), copies_(std::move(copies)) {}

  std::string_view name() const override { return inner_->name(); }
  std::string description() const override { return inner_->description(); }
  DeviceSpec device() const override { return inner_->device(); }
  FusionOptions fusion_options() const override { return inner_->fusion_options(); }
  absl::StatusOr<std::unique_ptr<LoadedPlan>> load(const FusionPlan& plan, const LoadOptions& options) override {
    return inner_->load(plan, options);
  }
  absl::StatusOr<double> measure_copy_gbps(int64_t) override {
    if (next_ >= copies_.size()) return absl::InternalError("more copies than the test scripted");
    return copies_[next_++];
  }
  absl::Status flush_cache() override { return inner_->flush_cache(); }

  size_t copies_measured() const { return next_; }

 private:
  std::unique_ptr<Backend> inner_;
  std::vector<double> copies_;
  size_t next_ = 0;
};

BenchResult bench_with_copies(const Graph& g, std::vector<double> copies) {
  absl::StatusOr<std::unique_ptr<Backend>> cpu = make_cpu_backend();
  EXPECT_TRUE(cpu.ok()) << cpu.status();
  ScriptedCopyBackend backend(*std::move(cpu), std::move(copies));
  absl::StatusOr<BenchResult> r = run_benchmark(backend, g, {.reps = 1, .read_counters = false});
  EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(backend.copies_measured(), 2u) << "one copy before the plans, one after";
  return r.ok() ? *std::move(r) : BenchResult{};
}

// A copy that reads low before the plans (a neighbour's burst on a shared
// VM) and one that reads low after them give the same ceiling and the
// same predictions: the better copy's, which the cost model's device
// takes as its bandwidth.
TEST(Benchmark, TheBetterOfTheCopiesBeforeAndAfterThePlansIsTheCeiling) {
  const Graph g = parse_graph("input x: f32[64, 256]\ninput r: f32[64, 256]\ns = add(x, r)\n"
                              "y = layer_norm(s)\noutput y")
                      .value();
  const BenchResult low_first = bench_with_copies(g, {10, 40});
  const BenchResult low_last = bench_with_copies(g, {40, 10});
  for (const BenchResult* r : {&low_first, &low_last}) {
    EXPECT_EQ(r->ceiling_gbps, 40);
    ASSERT_TRUE(r->device.measured) << "the CPU's device is measured, so it takes the ceiling";
    EXPECT_EQ(r->device.bandwidth_gbps, 40);
    EXPECT_TRUE(r->correct);
  }
  const FusionPlan unfused = make_unfused_plan(g, fusion_options_for(low_first.device));
  const FusionPlan fused = make_fused_plan(g, fusion_options_for(low_first.device));
  const PlanComparison expected = compare_plans(unfused, fused, low_first.device);
  for (const BenchResult* r : {&low_first, &low_last}) {
    EXPECT_DOUBLE_EQ(r->speedup_predicted, expected.predicted_speedup);
    EXPECT_DOUBLE_EQ(r->unfused.predicted_us, expected.unfused.predicted_us);
    EXPECT_DOUBLE_EQ(r->fused.predicted_us, expected.fused.predicted_us);
    ASSERT_EQ(r->unfused.kernels.size(), expected.unfused.kernels.size());
    for (size_t k = 0; k < r->unfused.kernels.size(); ++k) {
      EXPECT_DOUBLE_EQ(r->unfused.kernels[k].predicted_us, expected.unfused.kernels[k].predicted_us) << k;
      EXPECT_EQ(r->unfused.kernels[k].compute_bound, expected.unfused.kernels[k].compute_bound) << k;
    }
  }
  // At 10 GB/s the same plans are predicted slower: the predictions did
  // follow the better copy.
  DeviceSpec slow = low_first.device;
  slow.bandwidth_gbps = 10;
  EXPECT_GT(compare_plans(unfused, fused, slow).unfused.predicted_us, low_first.unfused.predicted_us);
}

// Mistakes in a call are statuses that say what was wrong, found before
// any copy is measured or kernel compiled.
TEST(Benchmark, AGraphThatDoesNotVerifyOrNoRepetitionsAreAStatus) {
  absl::StatusOr<std::unique_ptr<Backend>> cpu = make_cpu_backend();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ScriptedCopyBackend backend(*std::move(cpu), {});  // any copy measured would be an InternalError
  Graph no_output;
  exp(no_output.input("x", DType::kF32, {4, 8}));
  absl::StatusOr<BenchResult> r = run_benchmark(backend, no_output, {.reps = 1});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(status_text(r.status()).starts_with("run_benchmark: the graph does not verify:")) << r.status();

  const Graph g = parse_graph("input x: f32[4, 8]\ny = exp(x)\noutput y").value();
  for (int reps : {0, -3}) {
    r = run_benchmark(backend, g, {.reps = reps});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(status_text(r.status()),
              fmt::format("run_benchmark: BenchOptions::reps must be at least 1, got {}", reps));
  }
  EXPECT_EQ(backend.copies_measured(), 0u);
}

// Inputs the caller gives are what both plans run on (the fused outputs
// are those of the given inputs, not of random ones); inputs that do not
// fit the graph are refused before any copy is measured.
TEST(Benchmark, GivenInputsAreWhatBothPlansRunOn) {
  const Graph g = parse_graph("input x: f32[64, 256]\nh = relu(x)\ny = softmax(h)\noutput y").value();
  TensorMap given = random_inputs(g, 9);
  for (size_t i = 0; i < given.at("x").values.size(); i += 3) given.at("x").values[i] = -50;  // relu gives 0
  const TensorMap want = interpret(g, given).value();
  TensorMap seen;
  BenchOptions options{.reps = 1, .read_counters = false};
  options.inputs = &given;
  options.inputs_from = "test data";
  options.tamper_fused_outputs = [&](TensorMap& outputs) { seen = outputs; };  // looks, changes nothing
  absl::StatusOr<std::unique_ptr<Backend>> cpu = make_cpu_backend();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  absl::StatusOr<BenchResult> r = run_benchmark(**cpu, g, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->correct);
  EXPECT_FALSE(r->random_inputs);
  EXPECT_EQ(r->inputs_from, "test data");
  ASSERT_EQ(seen.count("y"), 1u);
  EXPECT_TRUE(compare_tensors(seen.at("y"), want.at("y")).within(DType::kF32));
  EXPECT_FALSE(compare_tensors(seen.at("y"), interpret(g, random_inputs(g, 1)).value().at("y")).within(DType::kF32));
  EXPECT_NE(format_bench(*r).find("inputs: from test data\n"), std::string::npos) << format_bench(*r);

  absl::StatusOr<std::unique_ptr<Backend>> cpu2 = make_cpu_backend();
  ASSERT_TRUE(cpu2.ok()) << cpu2.status();
  ScriptedCopyBackend no_copies(*std::move(cpu2), {});
  given.at("x").shape = Shape({256, 64});
  r = run_benchmark(no_copies, g, options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(status_text(r.status()), "run_benchmark: input 'x': expected f32[64, 256], got f32[256, 64]");
  EXPECT_EQ(no_copies.copies_measured(), 0u);
}

}  // namespace
}  // namespace fusejit
