// run_benchmark: its copy ceiling, timed beside every repetition of the
// plans, the median counting, with the predictions following it; and
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

// The CPU backend, except that its copies take the times the test says,
// and it logs what it is asked to do: 'c' for a copy, 'f' for a cache flush
// (one before every kernel).
class ScriptedCopyBackend : public Backend {
 public:
  ScriptedCopyBackend(std::unique_ptr<Backend> inner, std::vector<double> copy_us)
      : inner_(std::move(inner)), copy_us_(std::move(copy_us)) {}

  std::string_view name() const override { return inner_->name(); }
  std::string description() const override { return inner_->description(); }
  DeviceSpec device() const override { return inner_->device(); }
  FusionOptions fusion_options() const override { return inner_->fusion_options(); }
  absl::StatusOr<std::unique_ptr<LoadedPlan>> load(const FusionPlan& plan, const LoadOptions& options) override {
    return inner_->load(plan, options);
  }
  absl::StatusOr<std::unique_ptr<CopyTimer>> prepare_copy(int64_t) override {
    ++prepared_;
    return std::unique_ptr<CopyTimer>(new Copy(*this));
  }
  absl::Status flush_cache() override {
    log_ += 'f';
    return inner_->flush_cache();
  }
  // A launch overhead unlike any a CPU measures, logged as 'l'.
  std::optional<double> measure_launch_us() override {
    log_ += 'l';
    return kScriptedLaunchUs;
  }
  static constexpr double kScriptedLaunchUs = 123.0;

  size_t copies_prepared() const { return prepared_; }
  const std::string& log() const { return log_; }

 private:
  class Copy : public CopyTimer {
   public:
    explicit Copy(ScriptedCopyBackend& backend) : backend_(backend) {}
    absl::StatusOr<double> time_us() override {
      if (backend_.next_ >= backend_.copy_us_.size()) return absl::InternalError("more copies than the test scripted");
      backend_.log_ += 'c';
      return backend_.copy_us_[backend_.next_++];
    }

   private:
    ScriptedCopyBackend& backend_;
  };

  std::unique_ptr<Backend> inner_;
  std::vector<double> copy_us_;
  size_t next_ = 0, prepared_ = 0;
  std::string log_;
};

// GB/s of a copy of `bytes` (read and written) in `us`.
double gbps_of_copy(int64_t bytes, double us) { return 2.0 * static_cast<double>(bytes) / (us * 1e3); }

// One copy is timed in each repetition, between the plans: a copy that
// reads slow (a neighbour's burst on a shared VM) or fast moves the median
// of them, the ceiling, no more than a kernel's odd repetition moves its
// median. The cost model's device (the CPU's is measured) takes the
// ceiling as its bandwidth.
TEST(Benchmark, TheCeilingIsTheMedianOfACopyTimedInEachRepetition) {
  const Graph g = parse_graph("input x: f32[64, 256]\ninput r: f32[64, 256]\ns = add(x, r)\n"
                              "y = layer_norm(s)\noutput y")
                      .value();
  absl::StatusOr<std::unique_ptr<Backend>> cpu = make_cpu_backend();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  // The warm-up's copy (untimed) first; then 5 repetitions, one of them a
  // burst that halves the bandwidth and one twice as fast as the rest.
  ScriptedCopyBackend backend(*std::move(cpu), {1.0, 5000, 10000, 5000, 2500, 5000});
  absl::StatusOr<BenchResult> r = run_benchmark(backend, g, {.reps = 5, .read_counters = false});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->correct);
  EXPECT_EQ(backend.copies_prepared(), 1u);
  EXPECT_DOUBLE_EQ(r->ceiling_gbps, gbps_of_copy(r->copy_bytes, 5000));
  EXPECT_DOUBLE_EQ(r->ceiling_best_gbps, gbps_of_copy(r->copy_bytes, 2500));
  ASSERT_TRUE(r->device.measured) << "the CPU's device is measured, so it takes the ceiling";
  EXPECT_DOUBLE_EQ(r->device.bandwidth_gbps, r->ceiling_gbps);

  // Each repetition's copy comes before both plans or after both, so that
  // every pair of copies has a repetition of each plan between them.
  const FusionPlan unfused = make_unfused_plan(g, fusion_options_for(r->device));
  const FusionPlan fused = make_fused_plan(g, fusion_options_for(r->device));
  const std::string both(unfused.kernels.size() + fused.kernels.size(), 'f');
  EXPECT_EQ(backend.log(), both + "cc" + both + both + "cc" + both + both + "cc" + both + "l")
      << "warm-up, then 5 repetitions, then the launch overhead";
  // The launch overhead measured in the run replaces the cached one, as the
  // ceiling replaces the cached bandwidth.
  EXPECT_EQ(r->device.launch_overhead_us, ScriptedCopyBackend::kScriptedLaunchUs);
  EXPECT_EQ(r->cached_launch_us, backend.device().launch_overhead_us);

  const PlanComparison expected = compare_plans(unfused, fused, r->device);
  EXPECT_DOUBLE_EQ(r->speedup_predicted, expected.predicted_speedup);
  EXPECT_DOUBLE_EQ(r->unfused.predicted_us, expected.unfused.predicted_us);
  EXPECT_DOUBLE_EQ(r->fused.predicted_us, expected.fused.predicted_us);
  ASSERT_EQ(r->unfused.kernels.size(), expected.unfused.kernels.size());
  for (size_t k = 0; k < r->unfused.kernels.size(); ++k) {
    EXPECT_DOUBLE_EQ(r->unfused.kernels[k].predicted_us, expected.unfused.kernels[k].predicted_us) << k;
    EXPECT_EQ(r->unfused.kernels[k].compute_bound, expected.unfused.kernels[k].compute_bound) << k;
  }
  // At the best copy's bandwidth the same plans are predicted faster: the
  // predictions did follow the median.
  DeviceSpec best = r->device;
  best.bandwidth_gbps = r->ceiling_best_gbps;
  EXPECT_LT(compare_plans(unfused, fused, best).unfused.predicted_us, r->unfused.predicted_us);

  const std::string text = format_bench(*r);
  EXPECT_NE(text.find(fmt::format("memory ceiling: {:.1f} GB/s (the predictions' bandwidth), the median of 5 ",
                                  r->ceiling_gbps)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(fmt::format("(best {:.1f} GB/s)", r->ceiling_best_gbps)), std::string::npos) << text;
  EXPECT_NE(text.find(fmt::format("launch: 123.0 us per kernel (the predictions'), the thread pool's hand-off "
                                  "measured in this run (the cached figure, from the process that measured this "
                                  "CPU, is {:.1f})",
                                  r->cached_launch_us)),
            std::string::npos)
      << text;
  const nlohmann::json j = bench_json(*r);
  EXPECT_EQ(j.at("cost_model_launch_us").get<double>(), 123.0);
  EXPECT_DOUBLE_EQ(j.at("ceiling_gbps").get<double>(), r->ceiling_gbps);
  EXPECT_DOUBLE_EQ(j.at("ceiling_best_gbps").get<double>(), r->ceiling_best_gbps);
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
  EXPECT_EQ(backend.copies_prepared(), 0u);

  // Random inputs that cannot fit in memory: a status, as for the run
  // functions, not the exception random_inputs throws.
  Graph huge;
  huge.output("y", relu(huge.input("x", DType::kF32, {int64_t{1} << 23, int64_t{1} << 22})));
  r = run_benchmark(backend, huge, {.reps = 1});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_TRUE(status_text(r.status()).starts_with("out of host memory")) << r.status();
  EXPECT_EQ(backend.copies_prepared(), 0u);
}

// Inputs the caller gives are what both plans run on (the fused outputs
// are those of the given inputs, not of random ones); inputs that do not
// fit the graph are refused before any copy is prepared.
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
  EXPECT_EQ(status_text(r.status()), "input 'x': expected f32[64, 256], got f32[256, 64]");
  EXPECT_EQ(no_copies.copies_prepared(), 0u);
}

}  // namespace
}  // namespace fusejit
