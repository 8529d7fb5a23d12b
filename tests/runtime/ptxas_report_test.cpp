#include "runtime/ptxas_report.h"

#include <gtest/gtest.h>

namespace fusejit {
namespace {

// Two kernels and an out-of-line device function, as ptxas -v prints them
// (a compiler warning line in between, which is not ptxas's).
constexpr const char* kLog = R"(k.cu(7): warning #177-D: variable "unused" was declared but never referenced
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'row_kernel' for 'sm_90'
ptxas info    : Function properties for row_kernel
ptxas         .     24 bytes stack frame, 16 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 4096 bytes smem, 400 bytes cmem[0]
ptxas info    : Function properties for __internal_trig_reduction_slowpathd
ptxas         .     40 bytes stack frame, 0 bytes spill stores, 4 bytes spill loads
ptxas info    : Compiling entry function 'pointwise' for 'sm_90'
ptxas info    : Function properties for pointwise
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 384 bytes cmem[0]
ptxas info    : Compile time = 13.933 ms
)";

TEST(NvrtcPtxasReport, ReadsEveryFunction) {
  const PtxasReport r = parse_ptxas_log(kLog);
  ASSERT_EQ(r.functions.size(), 3u);
  const PtxasFunction& row = r.functions[0];
  EXPECT_EQ(row.name, "row_kernel");
  EXPECT_TRUE(row.entry);
  EXPECT_EQ(row.registers, 255);
  EXPECT_EQ(row.stack_bytes, 24);
  EXPECT_EQ(row.spill_store_bytes, 16);
  EXPECT_EQ(row.spill_load_bytes, 8);
  EXPECT_EQ(row.shared_bytes, 4096);
  const PtxasFunction& slowpath = r.functions[1];
  EXPECT_EQ(slowpath.name, "__internal_trig_reduction_slowpathd");
  EXPECT_FALSE(slowpath.entry);
  EXPECT_EQ(slowpath.registers, -1);
  EXPECT_EQ(slowpath.stack_bytes, 40);
  EXPECT_EQ(slowpath.spill_load_bytes, 4);
  const PtxasFunction& pointwise = r.functions[2];
  EXPECT_EQ(pointwise.name, "pointwise");
  EXPECT_EQ(pointwise.registers, 32);
  EXPECT_EQ(pointwise.shared_bytes, 0);
  EXPECT_EQ(pointwise.spill_store_bytes + pointwise.spill_load_bytes, 0);
}

TEST(NvrtcPtxasReport, SummarisesTheWorstFunction) {
  const PtxasReport r = parse_ptxas_log(kLog);
  EXPECT_EQ(r.registers, 255);
  EXPECT_EQ(r.spill_store_bytes, 16);
  EXPECT_EQ(r.spill_load_bytes, 12);
  EXPECT_EQ(r.spill_bytes(), 16);  // what is spilled: the stores, as ptxas and nvcc say
  EXPECT_EQ(r.shared_bytes, 4096);
  EXPECT_EQ(r.stack_bytes, 40);
}

TEST(NvrtcPtxasReport, KeepsOnlyPtxasLines) {
  const PtxasReport r = parse_ptxas_log(kLog);
  EXPECT_EQ(r.log.find("warning"), std::string::npos);
  EXPECT_TRUE(r.log.starts_with("ptxas info    : 0 bytes gmem\n"));
  EXPECT_TRUE(r.log.ends_with("Compile time = 13.933 ms\n"));
}

TEST(NvrtcPtxasReport, NoPtxasOutputMeansUnknownRegisters) {
  const PtxasReport r = parse_ptxas_log("");
  EXPECT_EQ(r.registers, -1);
  EXPECT_TRUE(r.functions.empty());
  EXPECT_EQ(r.spill_bytes(), 0);
}

}  // namespace
}  // namespace fusejit
