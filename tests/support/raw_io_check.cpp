#include "support/raw_io_check.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

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
  expect_refused(raw.run(), absl::StatusCode::kFailedPrecondition, "run() before set_inputs()");
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
  EXPECT_TRUE(raw.read_output("y", y.data(), y.size()).ok());
  EXPECT_EQ(y, storage_of(want->at("y")));
}

}  // namespace fusejit::testing
