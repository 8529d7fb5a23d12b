// The bias -> GeLU -> dropout -> LayerNorm chain of
// examples/graphs/bias_gelu_dropout_layernorm.fj, built through the C++ API.
// Prints the graph in the text format, then runs it on the reference
// interpreter at a small size and prints a summary of the output.
//
//   ./build/examples/bias_gelu_dropout_layernorm_api [ROWS]
#include <cstdlib>
#include <string>

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
  const int64_t rows = argc > 1 ? std::atoll(argv[1]) : 64;
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
  } catch (const fusejit::Error& e) {
    // Shape and type errors are reported at the call that made them.
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
