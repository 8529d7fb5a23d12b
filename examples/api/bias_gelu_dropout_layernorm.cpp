// The bias -> GeLU -> dropout -> LayerNorm chain of
// examples/graphs/bias_gelu_dropout_layernorm.fj, built through the C++ API.
// Prints the graph in the text format, runs it on the reference interpreter
// at a small size and prints a summary of the output; then runs the fused
// plan with generated kernels (on the GPU when one is usable, else compiled
// C++ on the CPU) and checks it against the reference; last, runs it again
// on raw bf16 arrays (LoadedPlan::set_input, read_output).
//
//   ./build/examples/bias_gelu_dropout_layernorm_api [ROWS]
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fusejit.h"

using fusejit::DType;

namespace {

fusejit::Graph build(int64_t rows, int64_t cols) {
  fusejit::Graph g;
  auto x = g.input("x", DType::kBF16, {rows, cols});
  auto b = g.input("b", DType::kBF16, {cols});
  auto gamma = g.input("gamma", DType::kBF16, {cols});
  auto beta = g.input("beta", DType::kBF16, {cols});
  auto y = layer_norm(dropout(gelu(x + b), 0.1, 42), gamma, beta);
  g.output("y", y);
  return g;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 64;
  if (argc > 2) {
    fmt::print(stderr, "usage: {} [ROWS]: one argument at most, got {}\n", argv[0], argc - 1);
    return 2;
  }
  if (argc > 1) {
    char* end = nullptr;
    errno = 0;
    rows = std::strtoll(argv[1], &end, 10);
    // strtoll clamps what overflows to LLONG_MAX and says so only in errno.
    if (end == argv[1] || *end != '\0' || rows < 1 || errno == ERANGE) {
      fmt::print(stderr, "usage: {} [ROWS]: ROWS must be a positive whole number below 2^63, got '{}'\n", argv[0],
                 argv[1]);
      return 2;
    }
  }
  try {
    fusejit::Graph g = build(rows, 4096);
    if (absl::Status s = fusejit::verify(g); !s.ok()) {
      fmt::print(stderr, "{}\n", fusejit::status_text(s));
      return 1;
    }
    fmt::print("{}\n", fusejit::print_graph(g));
    auto outputs = fusejit::interpret(g, fusejit::random_inputs(g, /*seed=*/0));
    if (!outputs.ok()) {
      fmt::print(stderr, "{}\n", fusejit::status_text(outputs.status()));
      return 1;
    }
    const fusejit::HostTensor& y = outputs->at("y");
    double sum = 0;
    for (double v : y.values) sum += v;
    fmt::print("y: {}{}, mean {:.6f}\n", y.dtype, y.shape, sum / static_cast<double>(y.numel()));

    // The fused plan, JIT-compiled: "auto" is the GPU when one is usable,
    // else the CPU ("cuda" and "cpu" choose).
    absl::StatusOr<std::unique_ptr<fusejit::Backend>> backend = fusejit::make_backend("auto");
    if (!backend.ok()) {
      fmt::print(stderr, "{}\n", fusejit::status_text(backend.status()));
      return 1;
    }
    // Fused for the backend that runs it (a GPU keeps rows up to its
    // persistent limit on chip; a CPU reads any row once).
    const fusejit::FusionPlan plan = fusejit::make_fused_plan(g, (*backend)->fusion_options());
    const fusejit::TensorMap inputs = fusejit::random_inputs(g, /*seed=*/0);
    absl::StatusOr<fusejit::TensorMap> fused = fusejit::run_plan(**backend, plan, inputs);
    // The reference of that plan rounds where its kernels store values.
    absl::StatusOr<fusejit::TensorMap> reference = fusejit::interpret_plan(plan, inputs);
    if (!fused.ok() || !reference.ok()) {
      fmt::print(stderr, "{}\n", fusejit::status_text(!fused.ok() ? fused.status() : reference.status()));
      return 1;
    }
    const fusejit::Comparison c = fusejit::compare_tensors(fused->at("y"), reference->at("y"));
    fmt::print("fused plan on {} ({} kernel): relative error {:.3g} against the reference (tolerance {:.3g}): {}\n",
               (*backend)->name(), plan.kernels.size(), c.relative_error, fusejit::tolerance(y.dtype),
               c.within(y.dtype) ? "ok" : "WRONG: " + c.mismatch);
    if (!c.within(y.dtype)) return 1;

    // A program that holds its tensors in their storage form (bf16 as the
    // uint16_t bit patterns a framework keeps) loads the plan once and
    // copies bytes in and out, without the float64 HostTensor conversion.
    absl::StatusOr<std::unique_ptr<fusejit::LoadedPlan>> loaded = (*backend)->load(plan);
    if (!loaded.ok()) {
      fmt::print(stderr, "{}\n", fusejit::status_text(loaded.status()));
      return 1;
    }
    for (const auto& [name, tensor] : inputs) {
      std::vector<uint16_t> bits(static_cast<size_t>(tensor.numel()));
      fusejit::encode_storage(tensor, bits.data());  // stands in for the program's own bf16 array
      if (absl::Status s = (*loaded)->set_input(name, bits.data(), bits.size() * sizeof(uint16_t)); !s.ok()) {
        fmt::print(stderr, "{}\n", fusejit::status_text(s));
        return 1;
      }
    }
    std::vector<uint16_t> y_bits(static_cast<size_t>(y.numel()));
    absl::Status ran = (*loaded)->run();
    if (ran.ok()) ran = (*loaded)->read_output("y", y_bits.data(), y_bits.size() * sizeof(uint16_t));
    if (!ran.ok()) {
      fmt::print(stderr, "{}\n", fusejit::status_text(ran));
      return 1;
    }
    std::vector<uint16_t> fused_bits(y_bits.size());
    fusejit::encode_storage(fused->at("y"), fused_bits.data());
    const bool same = y_bits == fused_bits;
    fmt::print("raw bf16 inputs and output: {}\n", same ? "the same bits as the HostTensor run" : "DIFFERENT bits");
    if (!same) return 1;
  } catch (const fusejit::Error& e) {
    // Shape and type errors are reported at the call that made them.
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
