// `fusejit emit`, one function per target: each generates the kernels of a
// plan, compiles them as its backend would (through the kernel cache),
// writes them into --out (cli/emit_folder.h) and lists them. They return
// the process exit code.
#pragma once

#include <string>

namespace fusejit::cli {

struct EmitOptions {
  std::string file;
  std::string target = "cuda";
  std::string arch = "sm_90";
  std::string out = "fusejit-kernels";
  std::string access = "vector";
  bool unfused = false;
  bool json = false;
  bool overwrite = false;
};

// .cu, .ptx and ptxas report per kernel, compiled by NVRTC for opt.arch.
int emit_cuda_target(const EmitOptions& opt);
// .cpp per kernel, compiled by the host compiler as the CPU backend does.
int emit_cpu_target(const EmitOptions& opt);

}  // namespace fusejit::cli
