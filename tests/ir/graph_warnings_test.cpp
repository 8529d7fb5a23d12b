#include "ir/graph_warnings.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/text_format.h"

namespace fusejit {
namespace {

using Strings = std::vector<std::string>;

TEST(GraphWarnings, AGraphWithoutLooseEndsHasNone) {
  Graph g;
  auto x = g.input("x", DType::kF32, {4, 8});
  g.output("y", dropout(dropout(x, 0.1, 1), 0.1, 2));
  EXPECT_EQ(graph_warnings(g), Strings{});
}

// A graph built in C++ has no file locations: the warnings name the values.
TEST(GraphWarnings, UnusedValuesAndSharedSeedsInAGraphBuiltInCpp) {
  Graph g;
  auto x = g.input("x", DType::kF32, {4, 8});
  g.input("typo", DType::kF32, {8});
  auto h = exp(x);
  const std::string unused = neg(h).name();  // names the builder chose
  auto first = dropout(h, 0.1);
  const std::string first_name = first.name();
  g.output("y", dropout(first, 0.2));  // both with the default seed 0
  EXPECT_EQ(graph_warnings(g), (Strings{
                                   "'typo' is not used by any output; no plan reads it",
                                   "'" + unused + "' is not used by any output; it is not computed",
                                   "dropout 'y' has seed 0, as '" + first_name +
                                       "' has: they draw the same random numbers, so every element position the "
                                       "one with p=0.1 drops, the one with p=0.2 drops too; give each dropout a "
                                       "seed of its own (seed=N)",
                               }));
}

TEST(GraphWarnings, AGraphFromAFileIsWarnedAboutWithLocations) {
  absl::StatusOr<Graph> g = parse_graph(
      "input x: f32[4, 8]\n"
      "input b: f32[8]\n"
      "d1 = dropout(x, p=0.1, seed=7)\n"
      "d2 = dropout(d1, p=0.1, seed=7)\n"
      "output d2\n",
      "layers.fj");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(graph_warnings(*g), (Strings{
                                    "layers.fj:2:7: 'b' is not used by any output; no plan reads it",
                                    "layers.fj:4:1: dropout 'd2' has seed 7, as 'd1' (line 3) has: they drop the "
                                    "same element positions; give each dropout a seed of its own (seed=N)",
                                }));
}

// A dropout with p=0 drops nothing, so sharing its seed shares nothing.
TEST(GraphWarnings, ADropoutOfPZeroSharesNoMask) {
  absl::StatusOr<Graph> g = parse_graph(
      "input x: f32[4, 8]\n"
      "a = dropout(x, p=0)\n"
      "b = dropout(a, p=0.5)\n"
      "c = dropout(b, p=0)\n"
      "output c\n",
      "zero.fj");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(graph_warnings(*g), Strings{});
}

// The mask's numbers have 16 bits: p = 0.99999 drops everything, 0.9999
// keeps too few for its scale, 0.99 is close enough.
TEST(GraphWarnings, ADropoutWhoseMaskCannotKeepItsScaleIsNamed) {
  absl::StatusOr<Graph> g = parse_graph(
      "input x: f32[4, 8]\n"
      "d1 = dropout(x, p=0.9999, seed=1)\n"
      "d2 = dropout(d1, p=0.99999, seed=2)\n"
      "d3 = dropout(d2, p=0.99, seed=3)\n"
      "d4 = dropout(d3, p=0.9999, seed=4)\n"
      "output d4\n",
      "near_one.fj");
  ASSERT_TRUE(g.ok()) << g.status();
  // 0.9999: 6 kept in 65536 (threshold ceil(65529.4)), where 6.55 were asked
  // for; 0.99 keeps 655 for 655.36, within 1%: no warning.
  EXPECT_EQ(graph_warnings(*g),
            (Strings{
                "near_one.fj:2:1: dropout 'd1' has p=0.9999: its mask, drawn from 16-bit random numbers, keeps 6 "
                "elements in 65536 where 1 - p asks for 6.55, so its output's mean is 0.916 times its input's",
                "near_one.fj:3:1: dropout 'd2' has p=0.99999, within 2^-16 of 1: its mask, "
                "drawn from 16-bit random numbers, drops every element",
                "near_one.fj:5:1: dropout 'd4' has p=0.9999: its mask, drawn from 16-bit random numbers, keeps 6 "
                "elements in 65536 where 1 - p asks for 6.55, so its output's mean is 0.916 times its input's",
            }));
}

// Dropouts of different shapes share a mask by flat index, not by
// position: the warning says which.
TEST(GraphWarnings, SharedSeedsOfDifferentShapesNameFlatIndices) {
  absl::StatusOr<Graph> g = parse_graph(
      "input c: f32[6, 1]\n"
      "input s: f32[6, 40]\n"
      "e = dropout(c, p=0.5, seed=3)\n"
      "q = dropout(s, p=0.5, seed=3)\n"
      "r = dropout(s, p=0.25, seed=3)\n"
      "output e, q, r\n",
      "shapes.fj");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(graph_warnings(*g), (Strings{
                                    "shapes.fj:4:1: dropout 'q' has seed 3, as 'e' (line 3) has: they drop the "
                                    "same flat element indices; give each dropout a seed of its own (seed=N)",
                                    "shapes.fj:5:1: dropout 'r' has seed 3, as 'e' (line 3) has: they draw the same "
                                    "random numbers, so every flat element index the one with p=0.25 drops, the one "
                                    "with p=0.5 drops too; give each dropout a seed of its own (seed=N)",
                                }));
}

}  // namespace
}  // namespace fusejit
