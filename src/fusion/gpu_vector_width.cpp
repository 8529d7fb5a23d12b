#include "fusion/gpu_vector_width.h"

#include <algorithm>

#include "ir/philox.h"

namespace fusejit {
namespace {

bool has_dropout(const Graph& graph, const Kernel& kernel) {
  return std::any_of(kernel.nodes.begin(), kernel.nodes.end(),
                     [&](int32_t id) { return graph.node(id).op == Op::kDropout; });
}

}  // namespace

int gpu_vector_width(const Graph& graph, const Kernel& kernel) {
  int64_t narrowest = 4;
  auto consider = [&](int32_t id) { narrowest = std::min(narrowest, dtype_size(graph.node(id).dtype)); };
  for (int32_t id : kernel.reads) consider(id);
  for (int32_t id : kernel.writes) consider(id);
  const int width = static_cast<int>(16 / narrowest);
  // f32 with dropout: 8 elements (two adjacent 16-byte accesses) to a thread,
  // so that one Philox block decides them all; with 4 a thread would draw a
  // whole block and use half of it, about 8 more instructions per element.
  if (width < kDropoutGroup && kernel.iteration.last() % kDropoutGroup == 0 && has_dropout(graph, kernel)) {
    return kDropoutGroup;
  }
  return width;
}

bool gpu_has_vector_path(const Graph& graph, const Kernel& kernel) {
  return kernel.iteration.last() % gpu_vector_width(graph, kernel) == 0;
}

}  // namespace fusejit
