// The offsets generated kernels compute for a tensor in their iteration
// space: as few divisions and modulos per row (or element) as its layout
// allows, since a GPU row kernel computes them for every row.
#include "codegen/tensor_access.h"

#include <gtest/gtest.h>

namespace fusejit {
namespace {

std::string row_of(const Shape& tensor, const Shape& iteration) {
  return row_offset(tensor_access(tensor, iteration), iteration, "row");
}

TEST(TensorAccess, ADenseTensorsRowStartsAtRowTimesItsLength) {
  // Three coordinates (a division, a modulo and a multiply each) were one.
  EXPECT_EQ(row_of({8, 16, 128, 128}, {8, 16, 128, 128}), "(row * 128)");
  EXPECT_EQ(row_of({4096, 1024}, {4096, 1024}), "(row * 1024)");
  EXPECT_EQ(row_of({1, 7, 1, 9}, {1, 7, 1, 9}), "(row * 9)");  // extents of 1 drop out
}

TEST(TensorAccess, BroadcastDimensionsMergeAndKeepTheirModulos) {
  // A [128, 128] mask under [8, 16, 128, 128] scores: one modulo.
  EXPECT_EQ(row_of({128, 128}, {8, 16, 128, 128}), "((row % 128) * 128)");
  // Broadcast along the heads only: the batch and the query position.
  EXPECT_EQ(row_of({8, 1, 128, 128}, {8, 16, 128, 128}), "((row / 2048) * 16384 + (row % 128) * 128)");
  // A [N] vector starts every row at 0; a per-row column at the row.
  EXPECT_EQ(row_of({128}, {8, 16, 128, 128}), "0");
  EXPECT_EQ(row_of({8, 16, 128, 1}, {8, 16, 128, 128}), "(row)");
}

TEST(TensorAccess, ElementOffsetsMergeTheSameWay) {
  const Shape iteration{8, 16, 128, 128};
  EXPECT_EQ(element_offset(tensor_access(iteration, iteration), iteration, "i"), "i");
  EXPECT_EQ(element_offset(tensor_access({128, 128}, iteration), iteration, "i"), "((i % 16384))");
  EXPECT_EQ(element_offset(tensor_access({8, 1, 128, 128}, iteration), iteration, "i"),
            "((i / 262144) * 16384 + (i % 16384))");
}

}  // namespace
}  // namespace fusejit
