// fusion/cpu_output_stores.h tells the cost model which outputs a CPU
// kernel stores from an array (and so, with AVX512-BF16 or F16C, rounds
// natively);
// the generator decides that for itself. Here the two are compared on the
// generated source of many kernels, so that they cannot drift apart.
#include "fusion/cpu_output_stores.h"

#include <gtest/gtest.h>

#include "codegen/cpu/cpu_emitter.h"
#include "codegen/kernel_names.h"
#include "fusejit.h"
#include "support/example_graphs.h"
#include "support/graph_variants.h"

namespace fusejit {
namespace {

void expect_agreement(const Graph& graph) {
  const FusionPlan plans[] = {make_unfused_plan(graph), make_fused_plan(graph)};
  for (const FusionPlan& plan : plans) {
    const Graph& g = *plan.graph;  // composites expanded
    for (size_t k = 0; k < plan.kernels.size(); ++k) {
      const Kernel& kernel = plan.kernels[k];
      if (kernel.kind == KernelKind::kMatmul) continue;
      const std::string source = emit_cpu_kernel(plan, static_cast<int>(k)).source;
      for (int32_t id : kernel.writes) {
        const std::string param = emit::param_name(g, id);
        const bool from_array = source.find("fj_stream_span(" + param + " ") != std::string::npos ||
                                source.find("fj_stream_block(" + param + " ") != std::string::npos ||
                                source.find("fj_store_span(" + param + " ") != std::string::npos;
        EXPECT_EQ(cpu_stores_from_array(kernel, g.node(id)), from_array)
            << kernel.name << " writes " << g.node(id).name << " (" << g.node(id).shape.to_string() << ")\n"
            << print_graph(g);
      }
    }
  }
}

TEST(CpuOutputStores, TheModelKnowsWhichOutputsAreStoredFromArrays) {
  for (const auto& file : testing::example_graph_files()) {
    SCOPED_TRACE(file.string());
    const Graph g = testing::parse_file_or_throw(file);
    expect_agreement(g);                        // at full size: outputs streamed
    expect_agreement(testing::shrink(g, 300));  // small: stored in their loops
  }
  for (const std::string& text : testing::varied_graph_texts()) expect_agreement(testing::parse_or_throw(text));
  const char* const edges[] = {
      // A per-row result of 16 MiB: stored row by row, never streamed.
      "input x: bf16[8388608, 4]\ny = sum(x)\noutput y",
      // Rows of one element: per-row values throughout.
      "input x: bf16[8388608, 1]\ny = softmax(x)\noutput y",
      // Dropout of a per-row value, and of a row-shaped one, in a row kernel.
      "input x: bf16[64, 1000]\nm = mean(x)\nd = dropout(m, p=0.1)\ne = dropout(x, p=0.2)\nf = sub(e, m)\noutput d, f",
      // Streamed pointwise and row outputs, one also used in its kernel.
      "input x: bf16[4096, 2048]\nh = neg(x)\ny = layer_norm(h)\noutput h, y",
  };
  for (const char* text : edges) expect_agreement(testing::parse_or_throw(text));
}

}  // namespace
}  // namespace fusejit
