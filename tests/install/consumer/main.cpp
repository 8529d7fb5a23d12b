// Uses an installed fusejit as a project of its own would: builds a graph
// through the C++ API, runs its fused plan on the CPU backend (kernels
// compiled at run time by the host compiler), checks it against the
// reference interpreter, emits its kernel's source for the CPU and for
// CUDA, and benchmarks fused against unfused.
#include <string>

#include <fmt/format.h>

#include <fusejit.h>

int main() {
  fusejit::Graph g;
  auto x = g.input("x", fusejit::DType::kF32, {4, 8});
  auto b = g.input("b", fusejit::DType::kF32, {8});
  g.output("y", softmax(gelu(x + b) * 0.5));
  if (!fusejit::verify(g).ok()) return 1;
  const fusejit::TensorMap inputs = fusejit::random_inputs(g, 1);
  auto reference = fusejit::interpret(g, inputs);
  if (!reference.ok()) return 1;

  const fusejit::FusionPlan plan = fusejit::make_fused_plan(g);
  auto backend = fusejit::make_backend("cpu");
  if (!backend.ok()) {
    fmt::print(stderr, "{}\n", fusejit::status_text(backend.status()));
    return 1;
  }
  auto outputs = fusejit::run_plan(**backend, plan, inputs);
  if (!outputs.ok()) {
    fmt::print(stderr, "{}\n", fusejit::status_text(outputs.status()));
    return 1;
  }
  const fusejit::Comparison c = fusejit::compare_tensors(outputs->at("y"), reference->at("y"));
  fmt::print("{}{} on the cpu backend: max relative error {:.2g}\n", fusejit::print_graph(g), fusejit::describe(plan),
             c.relative_error);
  if (!c.within(fusejit::DType::kF32)) return 1;

  // The generated source of the fused kernel, for each target.
  const fusejit::CpuKernelSource cpu_source = fusejit::emit_cpu_kernel(plan, 0);
  const fusejit::CudaKernelSource cuda_source = fusejit::emit_cuda_kernel(plan, 0);
  fmt::print("kernel {}: {} bytes of C++ ({} work items), {} bytes of CUDA\n", cpu_source.name,
             cpu_source.source.size(), cpu_source.count, cuda_source.source.size());
  if (cpu_source.source.find("extern \"C\" int " + cpu_source.name) == std::string::npos) return 1;

  auto bench = fusejit::run_benchmark(**backend, g, {.reps = 1, .read_counters = false});
  if (!bench.ok()) {
    fmt::print(stderr, "{}\n", fusejit::status_text(bench.status()));
    return 1;
  }
  fmt::print("{}", fusejit::format_bench(*bench));
  return bench->correct && fusejit::bench_json(*bench).contains("speedup_measured") ? 0 : 1;
}
