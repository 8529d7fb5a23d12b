// Plans of the example graphs on every listed device: kernel counts, kinds
// and byte counts worked out by hand from the shapes in the files.
#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include "fusejit.h"

namespace fusejit {
namespace {

const std::string kExamples = std::string(FUSEJIT_SOURCE_DIR) + "/examples/graphs/";

struct Expected {
  std::string file;
  std::vector<std::string> unfused_kinds;
  int64_t unfused_bytes;
  std::vector<std::string> fused_kinds;
  int64_t fused_bytes;
  // On the CPU, outputs under 16 MiB and a matmul's C are read before they
  // are written (write-allocate; fusion/cpu_output_stores.h): bytes on top.
  int64_t cpu_write_allocated_unfused = 0;
  int64_t cpu_write_allocated_fused = 0;
};

std::vector<std::string> kinds(const FusionPlan& plan) {
  std::vector<std::string> out;
  for (const Kernel& k : plan.kernels) out.emplace_back(kernel_kind_name(k.kind));
  return out;
}

std::vector<Expected> expectations() {
  constexpr int64_t kBf16 = 2;
  std::vector<Expected> out;
  {  // x [8192, 4096], b, gamma, beta [4096]
    const int64_t mn = 8192ll * 4096, n = 4096;
    out.push_back({"bias_gelu_dropout_layernorm.fj",
                   {"pointwise", "pointwise", "pointwise", "row"},
                   kBf16 * ((mn + n + mn) + (mn + mn) + (mn + mn) + (mn + 2 * n + mn)),
                   {"row"},
                   kBf16 * (mn + 3 * n + mn)});
  }
  {  // x [256, 768] @ w1 [768, 3072] + b1, gelu, @ w2 [3072, 768] + b2
    const int64_t x = 256 * 768, w = 768 * 3072, h = 256 * 3072;
    const int64_t mm1 = x + w + h, mm2 = h + w + x;
    out.push_back({"mlp_block.fj",
                   {"matmul", "pointwise", "pointwise", "matmul", "pointwise"},
                   kBf16 * (mm1 + (h + 3072 + h) + (h + h) + mm2 + (x + 768 + x)),
                   // the bias adds and the GeLU run in the GEMMs' epilogues
                   {"matmul", "matmul"},
                   kBf16 * ((mm1 + 3072) + (mm2 + 768)),
                   // every output is under 16 MiB
                   kBf16 * (3 * h + 2 * x),
                   kBf16 * (h + x)});
  }
  {  // x, residual [4096, 1024]; outputs r and y
    const int64_t mn = 4096ll * 1024, n = 1024;
    out.push_back({"residual_layernorm.fj",
                   {"pointwise", "row"},
                   kBf16 * ((3 * mn) + (mn + 2 * n + mn)),
                   {"row"},
                   kBf16 * (2 * mn + 2 * n + 2 * mn),
                   kBf16 * 2 * mn,  // r and y, 8 MiB each
                   kBf16 * 2 * mn});
  }
  {  // x, z [2048, 4096], w [4096]
    const int64_t mn = 2048ll * 4096, n = 4096;
    out.push_back({"rmsnorm_silu_gate.fj",
                   {"row", "pointwise", "pointwise"},
                   kBf16 * ((mn + n + mn) + (2 * mn) + (3 * mn)),
                   {"row"},
                   kBf16 * (mn + mn + n + mn)});
  }
  {  // scores [2, 16, 512, 512]
    const int64_t t = 2ll * 16 * 512 * 512;
    out.push_back({"softmax.fj", {"pointwise", "row"}, kBf16 * (4 * t), {"row"}, kBf16 * (2 * t)});
  }
  return out;
}

TEST(ExamplePlans, KernelsAndBytesOnEveryDevice) {
  for (const Expected& e : expectations()) {
    absl::StatusOr<Graph> graph = parse_graph_file(kExamples + e.file);
    ASSERT_TRUE(graph.ok()) << graph.status();
    for (const std::string& name : device_names()) {
      const DeviceSpec device = *find_device(name);
      const FusionOptions options = fusion_options_for(device);
      const FusionPlan unfused = make_unfused_plan(*graph, options);
      const FusionPlan fused = make_fused_plan(*graph, options);
      const PlanComparison c = compare_plans(unfused, fused, device);
      SCOPED_TRACE(e.file + " on " + name + "\n" + describe(unfused) + describe(fused));
      EXPECT_EQ(kinds(unfused), e.unfused_kinds);
      EXPECT_EQ(kinds(fused), e.fused_kinds);
      const bool cpu = !device.models_instructions();
      const int64_t unfused_bytes = e.unfused_bytes + (cpu ? e.cpu_write_allocated_unfused : 0);
      const int64_t fused_bytes = e.fused_bytes + (cpu ? e.cpu_write_allocated_fused : 0);
      EXPECT_EQ(c.unfused.bytes, unfused_bytes);
      EXPECT_EQ(c.fused.bytes, fused_bytes);
      EXPECT_EQ(c.bytes_saved, unfused_bytes - fused_bytes);
      EXPECT_GE(c.predicted_speedup, 1.0);
    }
  }
}

TEST(ExamplePlans, EveryExampleHasAnExpectation) {
  std::set<std::string> covered;
  for (const Expected& e : expectations()) covered.insert(e.file);
  for (const auto& entry : std::filesystem::directory_iterator(kExamples)) {
    if (entry.path().extension() == ".fj") {
      EXPECT_TRUE(covered.contains(entry.path().filename().string())) << entry.path() << " has no expectation";
    }
  }
}

}  // namespace
}  // namespace fusejit
