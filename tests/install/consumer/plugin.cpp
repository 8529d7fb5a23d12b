// fusejit inside a shared library: runs a small fused plan on the CPU
// backend and checks it against the reference, for consumer_of_plugin.
#include <fmt/format.h>

#include <fusejit.h>

extern "C" int run_fusejit_in_a_shared_library() {
  fusejit::Graph g;
  auto x = g.input("x", fusejit::DType::kF32, {4, 8});
  g.output("y", rms_norm(x * 2.0));
  const fusejit::TensorMap inputs = fusejit::random_inputs(g, 2);
  const fusejit::FusionPlan plan = fusejit::make_fused_plan(g);
  auto backend = fusejit::make_backend("cpu");
  if (!backend.ok()) return 1;
  auto outputs = fusejit::run_plan(**backend, plan, inputs);
  auto reference = fusejit::interpret_plan(plan, inputs);
  if (!outputs.ok() || !reference.ok()) return 1;
  const fusejit::Comparison c = fusejit::compare_tensors(outputs->at("y"), reference->at("y"));
  fmt::print("in a shared library: max relative error {:.3g}\n", c.relative_error);
  return c.within(fusejit::DType::kF32) ? 0 : 1;
}
