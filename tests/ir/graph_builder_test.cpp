#include <gtest/gtest.h>

#include "fusejit.h"

namespace fusejit {
namespace {

TEST(GraphBuilder, BuildsTheIssueExample) {
  Graph g;
  auto x = g.input("x", DType::kBF16, {8192, 4096});
  auto b = g.input("b", DType::kBF16, {4096});
  auto gamma = g.input("gamma", DType::kBF16, {4096});
  auto beta = g.input("beta", DType::kBF16, {4096});
  auto y = layer_norm(dropout(gelu(x + b), 0.1, 42), gamma, beta);
  g.output("y", y);
  EXPECT_TRUE(verify(g).ok()) << verify(g);
  EXPECT_EQ(y.shape(), (Shape{8192, 4096}));
  EXPECT_EQ(y.dtype(), DType::kBF16);
  EXPECT_EQ(y.name(), "y");
}

}  // namespace
}  // namespace fusejit
