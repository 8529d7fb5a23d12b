// Lower bounds from the ops alone (ir/value_bounds.h), which decide where a
// GPU kernel may take rsqrt.approx.ftz.
#include "ir/value_bounds.h"

#include <gtest/gtest.h>

#include "ir/composites.h"
#include "ir/text_format.h"

namespace fusejit {
namespace {

Graph parse(std::string_view text) {
  absl::StatusOr<Graph> g = parse_graph(text);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Graph();
}

std::optional<double> bound_of(const Graph& g, std::string_view name) {
  return lower_bound(g, Operand::value(g.find(name).value()));
}

TEST(ValueBounds, ANormsVariancePlusEpsilonIsNormal) {
  // LayerNorm's and RMSNorm's expansions: rsqrt(mean(square(...)) + eps).
  for (const char* dtype : {"f32", "bf16", "f16"}) {
    const Graph g = expand_composites(
        parse(fmt::format("input x: {0}[8, 64]\ny = layer_norm(x)\nz = rms_norm(x, eps=1e-6)\noutput y, z\n", dtype)));
    int rsqrts = 0;
    for (int32_t id = 0; id < g.num_nodes(); ++id) {
      if (g.node(id).op != Op::kRsqrt) continue;
      ++rsqrts;
      EXPECT_TRUE(is_at_least_min_normal(g, g.node(id).operands[0])) << dtype << " " << g.node(id).name;
    }
    EXPECT_EQ(rsqrts, 2) << dtype;
  }
}

TEST(ValueBounds, OpsThatSayNothingGiveNoBound) {
  const Graph g = parse(
      "input x: f32[4, 8]\n"
      "a = add(x, 1.0)\n"  // x may be anything
      "s = square(x)\n"
      "d = sub(s, 1e-3)\n"  // a difference: no claim
      "q = div(s, 3.0)\n"   // a division: no claim
      "m = mul(s, -2.0)\n"  // a negative factor: no claim
      "r = rsqrt(s)\n"      // rsqrt(-0) is -inf
      "n = add(s, -1.0)\n"  // a negative bound: no claim
      "output a, d, q, m, r, n\n");
  for (const char* name : {"x", "a", "d", "q", "m", "r", "n"}) EXPECT_FALSE(bound_of(g, name).has_value()) << name;
  EXPECT_EQ(bound_of(g, "s"), 0.0);
}

TEST(ValueBounds, BoundsFollowAddsProductsMaximaAndReductions) {
  const Graph g = parse(
      "input x: f32[4, 8]\n"
      "e = exp(x)\n"
      "a = add(e, 0.5)\n"
      "p = mul(a, a)\n"
      "mx = maximum(x, 2.0)\n"  // max with anything is at least 2
      "r = sum(a)\n"
      "m = mean(p)\n"
      "output p, mx, r, m\n");
  EXPECT_NEAR(*bound_of(g, "a"), 0.5, 1e-5);  // each op loosens a bound by 2^-20 of it
  EXPECT_NEAR(*bound_of(g, "p"), 0.25, 1e-5);
  EXPECT_NEAR(*bound_of(g, "mx"), 2.0, 1e-5);
  EXPECT_NEAR(*bound_of(g, "r"), 0.5, 1e-5);
  // A mean's f32 rounding is allowed for generously: half the bound.
  EXPECT_GT(*bound_of(g, "m"), 0.1);
  EXPECT_LE(*bound_of(g, "m"), 0.25);
}

TEST(ValueBounds, RoundingToF16CanReachZero) {
  // 1e-8 is below half of f16's smallest subnormal (2^-24 = 6e-8): the
  // rounded value may be 0, and so is its bound; 1e-3 stays near 1e-3.
  const Graph g = parse(
      "input x: f16[4, 8]\n"
      "s = square(x)\n"
      "tiny = add(s, 1e-8)\n"
      "big = add(s, 1e-3)\n"
      "output tiny, big\n");
  EXPECT_EQ(*bound_of(g, "tiny"), 0.0);
  EXPECT_FALSE(is_at_least_min_normal(g, Operand::value(g.find("tiny").value())));
  EXPECT_GT(*bound_of(g, "big"), 0.99e-3);
}

}  // namespace
}  // namespace fusejit
