#include "support/loaded_plan_checks.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "fusejit.h"
#include "runtime/tensor_storage.h"

namespace fusejit::testing {
namespace {

// Each input's storage bytes, as a framework would hold them.
std::vector<uint8_t> storage_of(const HostTensor& t) {
  std::vector<uint8_t> bytes(static_cast<size_t>(storage_bytes(t.dtype, t.shape)));
  encode_storage(t, bytes.data());
  return bytes;
}

void expect_refused(const absl::Status& s, absl::StatusCode code, const std::string& says) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_NE(std::string(status_text(s)).find(says), std::string::npos) << "expected \"" << says << "\" in: " << s;
}

}  // namespace

void expect_raw_io_matches_host_tensors(Backend& backend) {
  absl::StatusOr<Graph> parsed = parse_graph(
      "input x: bf16[37, 40]\ninput h: f16[5, 40]\ninput s: f32[37, 40]\n"
      "y = softmax(x)\nv = exp(h)\nw = relu(s)\noutput y\noutput v\noutput w\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const Graph& g = *parsed;
  const FusionPlan plan = make_unfused_plan(g, backend.fusion_options());
  absl::StatusOr<std::unique_ptr<LoadedPlan>> by_tensor = backend.load(plan);
  absl::StatusOr<std::unique_ptr<LoadedPlan>> by_bytes = backend.load(plan);
  ASSERT_TRUE(by_tensor.ok()) << by_tensor.status();
  ASSERT_TRUE(by_bytes.ok()) << by_bytes.status();
  LoadedPlan& raw = **by_bytes;

  TensorMap inputs = random_inputs(g, 11);
  // Bit patterns a conversion could lose: NaN and infinities pass as they are.
  inputs.at("s").values[3] = std::numeric_limits<double>::quiet_NaN();
  inputs.at("s").values[4] = -std::numeric_limits<double>::infinity();
  ASSERT_TRUE((*by_tensor)->set_inputs(inputs).ok());
  ASSERT_TRUE((*by_tensor)->run().ok());
  absl::StatusOr<TensorMap> want = (*by_tensor)->outputs();
  ASSERT_TRUE(want.ok()) << want.status();

  // Before every input is given, nothing runs.
  const std::vector<uint8_t> x = storage_of(inputs.at("x"));
  ASSERT_TRUE(raw.set_input("x", x.data(), x.size()).ok());
  expect_refused(raw.run(), absl::StatusCode::kFailedPrecondition,
                 "run() before inputs h, s were given (by set_input() or set_inputs()); every input the graph "
                 "declares must be given, even one no output reads");
  expect_refused(raw.run_kernel(0), absl::StatusCode::kFailedPrecondition, "run_kernel(0) before inputs h, s were");
  for (const char* name : {"h", "s"}) {
    const std::vector<uint8_t> bytes = storage_of(inputs.at(name));
    ASSERT_TRUE(raw.set_input(name, bytes.data(), bytes.size()).ok()) << name;
  }
  std::vector<uint8_t> y(static_cast<size_t>(storage_bytes(DType::kBF16, Shape({37, 40}))));
  expect_refused(raw.read_output("y", y.data(), y.size()), absl::StatusCode::kFailedPrecondition,
                 "read_output(\"y\") before kernel 0");
  ASSERT_TRUE(raw.poison_outputs().ok());
  ASSERT_TRUE(raw.run().ok());
  for (int32_t id : g.outputs()) {
    const Node& n = g.node(id);
    std::vector<uint8_t> got(static_cast<size_t>(storage_bytes(n.dtype, n.shape)));
    ASSERT_TRUE(raw.read_output(n.name, got.data(), got.size()).ok()) << n.name;
    EXPECT_EQ(got, storage_of(want->at(n.name))) << "output " << n.name << " differs from the HostTensor path's bits";
  }

  // A new value of one input makes every result stale, that input's kernel
  // and the others alike.
  ASSERT_TRUE(raw.set_input("h", storage_of(inputs.at("h")).data(), storage_bytes(DType::kF16, Shape({5, 40}))).ok());
  expect_refused(raw.read_output("y", y.data(), y.size()), absl::StatusCode::kFailedPrecondition, "before kernel 0");
  ASSERT_TRUE(raw.run().ok());
  EXPECT_TRUE(raw.read_output("y", y.data(), y.size()).ok());

  // What is refused changes nothing: the results stay readable.
  expect_refused(raw.set_input("xx", x.data(), x.size()), absl::StatusCode::kInvalidArgument,
                 "set_input(\"xx\"): the graph has no input of that name (did you mean 'x'?); its inputs: x, h, s");
  expect_refused(raw.set_input("x", x.data(), x.size() - 2), absl::StatusCode::kInvalidArgument,
                 "set_input(\"x\", 2958 bytes): x: bf16[37, 40] holds 2960 bytes (1480 of 2 bytes)");
  expect_refused(raw.set_input("y", y.data(), y.size()), absl::StatusCode::kInvalidArgument,
                 "the graph has no input of that name");
  expect_refused(raw.read_output("x", y.data(), y.size()), absl::StatusCode::kInvalidArgument,
                 "read_output(\"x\"): the graph has no output of that name");
  expect_refused(raw.read_output("w", y.data(), y.size()), absl::StatusCode::kInvalidArgument,
                 "read_output(\"w\", 2960 bytes): w: f32[37, 40] holds 5920 bytes");
  expect_refused(raw.set_input("x", nullptr, x.size()), absl::StatusCode::kInvalidArgument,
                 "set_input(\"x\"): data is null");
  expect_refused(raw.read_output("y", nullptr, y.size()), absl::StatusCode::kInvalidArgument,
                 "read_output(\"y\"): data is null");
  EXPECT_TRUE(raw.read_output("y", y.data(), y.size()).ok());
  EXPECT_EQ(y, storage_of(want->at("y")));
}

namespace {

Graph two_dropouts(int64_t first_seed, int64_t second_seed) {
  absl::StatusOr<Graph> g =
      parse_graph(fmt::format("input x: bf16[37, 64]\ninput gamma: bf16[64]\n"
                              "h = gelu(x)\nd1 = dropout(h, p=0.3, seed={})\ny = layer_norm(d1, gamma)\n"
                              "d2 = dropout(x, p=0.5, seed={})\noutput y\noutput d2\n",
                              first_seed, second_seed));
  if (!g.ok()) throw Error(std::string(status_text(g.status())));
  return *std::move(g);
}

// The outputs of `plan` on `inputs`, each as its storage bits.
std::map<std::string, std::vector<uint8_t>> run_bits(LoadedPlan& loaded, const TensorMap& inputs) {
  std::map<std::string, std::vector<uint8_t>> bits;
  EXPECT_TRUE(loaded.set_inputs(inputs).ok());
  EXPECT_TRUE(loaded.run().ok());
  absl::StatusOr<TensorMap> out = loaded.outputs();
  EXPECT_TRUE(out.ok()) << out.status();
  if (out.ok()) {
    for (const auto& [name, t] : *out) bits[name] = storage_of(t);
  }
  return bits;
}

}  // namespace

void expect_new_dropout_seed_draws_that_seeds_mask(Backend& backend) {
  const Graph original = two_dropouts(1, 2);
  const Graph reseeded = two_dropouts(77, 2);
  const TensorMap inputs = random_inputs(original, 5);
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "fused plan" : "unfused plan");
    const auto plan_of = [&](const Graph& g) {
      return fused ? make_fused_plan(g, backend.fusion_options()) : make_unfused_plan(g, backend.fusion_options());
    };
    absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = backend.load(plan_of(original));
    absl::StatusOr<std::unique_ptr<LoadedPlan>> want_loaded = backend.load(plan_of(reseeded));
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    ASSERT_TRUE(want_loaded.ok()) << want_loaded.status();
    LoadedPlan& p = **loaded;
    const auto before = run_bits(p, inputs);
    const auto want = run_bits(**want_loaded, inputs);
    ASSERT_NE(before.at("y"), want.at("y")) << "seeds 1 and 77 should drop different elements";

    ASSERT_TRUE(p.set_dropout_seed("d1", 77).ok());
    expect_refused(p.outputs().status(), absl::StatusCode::kFailedPrecondition,
                   "outputs() before kernel 0 (" + p.plan().kernels[0].name +
                       ") ran after the last set_dropout_seed(\"d1\", 77): run() the plan");
    ASSERT_TRUE(p.run().ok());
    absl::StatusOr<TensorMap> out = p.outputs();
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(storage_of(out->at("y")), want.at("y")) << "d1's new seed";
    EXPECT_EQ(storage_of(out->at("d2")), before.at("d2")) << "d2 keeps its seed";
    // The reference of the reseeded graph agrees (not only the backend with itself).
    absl::StatusOr<TensorMap> ref = interpret_plan(plan_of(reseeded), inputs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_TRUE(compare_tensors(out->at("y"), ref->at("y")).within(DType::kBF16));

    // Back to the graph's seed: the first results again.
    ASSERT_TRUE(p.set_dropout_seed("d1", 1).ok());
    EXPECT_EQ(run_bits(p, inputs), before);

    expect_refused(p.set_dropout_seed("h", 3), absl::StatusCode::kInvalidArgument,
                   "set_dropout_seed(\"h\"): h: bf16[37, 64] is not a dropout; its dropouts: d1, d2");
    // y is the user's layer_norm (a mul in the plan's expanded graph): no op named.
    expect_refused(p.set_dropout_seed("y", 3), absl::StatusCode::kInvalidArgument,
                   "set_dropout_seed(\"y\"): y: bf16[37, 64] is not a dropout;");
    expect_refused(p.set_dropout_seed("d3", 3), absl::StatusCode::kInvalidArgument,
                   "the graph has no node of that name (did you mean 'd1'?); its dropouts: d1, d2");
    expect_refused(p.set_dropout_seed("d2", -1), absl::StatusCode::kInvalidArgument,
                   "set_dropout_seed(\"d2\", -1): a dropout seed is a non-negative integer");
    EXPECT_EQ(run_bits(p, inputs), before) << "refused seeds change nothing";
  }
}

}  // namespace fusejit::testing
