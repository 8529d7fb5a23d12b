#include "fusion/gpu_vector_width.h"

#include <algorithm>

namespace fusejit {

int gpu_vector_width(const Graph& graph, const Kernel& kernel) {
  int64_t narrowest = 4;
  auto consider = [&](int32_t id) { narrowest = std::min(narrowest, dtype_size(graph.node(id).dtype)); };
  for (int32_t id : kernel.reads) consider(id);
  for (int32_t id : kernel.writes) consider(id);
  return static_cast<int>(16 / narrowest);
}

bool gpu_has_vector_path(const Graph& graph, const Kernel& kernel) {
  return kernel.iteration.last() % gpu_vector_width(graph, kernel) == 0;
}

}  // namespace fusejit
