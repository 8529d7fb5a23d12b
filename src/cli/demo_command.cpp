// `fusejit demo`: the product's promise in one command. It benchmarks the
// bias -> GeLU -> dropout -> LayerNorm chain at the end of a transformer FFN,
// unfused and fused, on the GPU when there is one and on the CPU otherwise,
// and prints the plan, the predicted and measured saving, and where the
// kernels sit on the roofline.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "fusejit.h"
#include "ir/messages.h"

namespace fusejit::cli {
namespace {

struct DemoOptions {
  BenchSettings settings;
  std::optional<int64_t> rows, cols;
  std::optional<std::string> dtype;
};

Graph demo_graph(int64_t rows, int64_t cols, DType dtype) {
  Graph g;
  g.set_source_file("<demo>");  // its name where a file's would go: bench's "graph" in --json
  const Value x = g.input("x", dtype, {rows, cols});
  const Value b = g.input("b", dtype, {cols});
  const Value gamma = g.input("gamma", dtype, {cols});
  const Value beta = g.input("beta", dtype, {cols});
  g.output("y", layer_norm(dropout(gelu(add(x, b)), 0.1, 42), gamma, beta, 1e-5));
  return g;
}

int demo(const DemoOptions& opt) {
  // The size depends on where it runs: the GPU size of issue 5 ([16384,
  // 4096] bf16, 128 MiB per tensor, far beyond a 50 MiB L2), and on a CPU
  // [4096, 4096] bf16 (32 MiB per tensor, the size of a server's L3; the
  // unfused plan moves eight such tensors), whose reference check takes
  // about a second.
  const BenchSettings& settings = opt.settings;
  if (!plot_target_ok(settings)) return 1;
  const std::unique_ptr<Backend> backend = open_backend(settings.backend);
  if (!backend) return 1;
  const bool gpu = backend->name() == "cuda";
  const int64_t rows = opt.rows.value_or(gpu ? 16384 : 4096);
  const int64_t cols = opt.cols.value_or(4096);
  const std::optional<DType> dtype = parse_dtype(opt.dtype.value_or("bf16"));
  if (!dtype) {
    eprint("fusejit: error: --dtype {}: expected f32, f16 or bf16\n", *opt.dtype);
    return 2;
  }
  Graph graph;
  try {
    graph = demo_graph(rows, cols, *dtype);
  } catch (const Error& e) {
    eprint("fusejit: error: {}\n", e.what());
    return 1;
  }
  if (!settings.json) {
    fmt::print("fusejit demo: bias -> GeLU -> dropout(p=0.1) -> LayerNorm on [{}, {}] {}\n\n{}\n", rows, cols,
               *dtype, print_graph(graph));
    std::fflush(stdout);  // the graph shows while the run takes its seconds
  }
  BenchSettings with_plans = settings;
  with_plans.show_plans = true;
  return run_bench(*backend, graph, with_plans, "measured:");
}

}  // namespace

void register_demo(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<DemoOptions>();
  CLI::App* cmd = app.add_subcommand(
      "demo", "Benchmark the built-in bias -> GeLU -> dropout -> LayerNorm chain, unfused against fused");
  add_bench_options(cmd, opt->settings);
  cmd->add_option("--rows", opt->rows, "rows (tokens); default 16384 on a GPU, 4096 on the CPU")
      ->check(whole_number_range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option("--cols", opt->cols, "columns (hidden size); default 4096")
      ->check(whole_number_range(int64_t{1}, int64_t{1} << 30));
  cmd->add_option("--dtype", opt->dtype, "f32, f16 or bf16; default bf16")
      ->transform(CLI::IsMember({"f32", "f16", "bf16"}, CLI::ignore_case));
  cmd->callback([opt, &exit_code] { exit_code = demo(*opt); });
}

}  // namespace fusejit::cli
