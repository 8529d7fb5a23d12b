// Builds a small graph through the installed library and prints it.
#include <fmt/format.h>

#include <fusejit.h>

int main() {
  fusejit::Graph g;
  auto x = g.input("x", fusejit::DType::kF32, {4, 8});
  g.output("y", softmax(x * 0.5));
  if (!fusejit::verify(g).ok()) return 1;
  auto outputs = fusejit::interpret(g, fusejit::random_inputs(g, 1));
  if (!outputs.ok()) return 1;
  fmt::print("{}", fusejit::print_graph(g));
  return 0;
}
