#include "cost/host_cpu.h"

#include <fstream>

#include <gtest/gtest.h>

namespace fusejit {
namespace {

TEST(HostCpu, ModelIsTheValueOfTheModelNameLine) {
  std::ifstream in("/proc/cpuinfo");
  if (!in) GTEST_SKIP() << "no /proc/cpuinfo on this system";
  const std::string model = host_cpu_model();
  EXPECT_FALSE(model.empty());
  EXPECT_NE(model.rfind("model name", 0), 0u) << "the label is not part of the value: " << model;
  EXPECT_NE(model.front(), ' ');
  // The identity starts with the full model line and carries the flags line,
  // which is what decides whether -march=native code may run here.
  const std::string identity = host_cpu_identity();
  EXPECT_NE(identity.find(model), std::string::npos);
  std::string line;
  bool has_flags = false;
  while (std::getline(in, line)) has_flags = has_flags || line.starts_with("flags");
  if (has_flags) EXPECT_NE(identity.find("\nflags"), std::string::npos) << identity;
}

}  // namespace
}  // namespace fusejit
