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

// The message of the fusejit::Error `build` throws, or "no error".
template <class F>
std::string error_of(F build) {
  try {
    build();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(GraphBuilder, AnEmptyValueIsAnErrorNotTheNumberZero) {
  Graph g;
  auto x = g.input("x", DType::kF32, {4});
  EXPECT_EQ(error_of([&] { g.output("y", x + Value{}); }),
            "add: operand 2 is an empty Value (default-constructed), not a tensor of a graph");
  EXPECT_EQ(error_of([&] { maximum(Value{}, x); }),
            "maximum: operand 1 is an empty Value (default-constructed), not a tensor of a graph");
  EXPECT_EQ(g.nodes().size(), 1u);  // nothing was added
  g.output("y", x + 0.0);           // the number 0 itself is still fine
  EXPECT_TRUE(verify(g).ok()) << verify(g);
}

TEST(GraphBuilder, ValuesOfAGraphThatWasMovedFromAreErrorsNotCrashes) {
  Graph g;
  auto x = g.input("x", DType::kF32, {4});
  Graph h = std::move(g);
  const std::string error = error_of([&] { neg(x); });
  EXPECT_TRUE(error.starts_with("neg: operand 1 is a Value (node 0) that its Graph no longer holds")) << error;
  EXPECT_TRUE(error_of([&] { (void)x.shape(); }).starts_with("a Value (node 0) that its Graph no longer holds"));
  EXPECT_NE(error_of([&] { g.output("y", x); }).find("no longer holds the value's node"), std::string::npos);
  // The graph it was moved into is whole; its own values work.
  EXPECT_EQ(h.nodes().size(), 1u);
  h.output("y", exp(Value(&h, 0)));
  EXPECT_TRUE(verify(h).ok()) << verify(h);
}

}  // namespace
}  // namespace fusejit
