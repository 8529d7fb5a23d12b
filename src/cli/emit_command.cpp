// `fusejit emit FILE [--target cuda|cpu]`: the options, and which target
// writes the kernels (cli/emit_targets.h).
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/emit_targets.h"

namespace fusejit::cli {

void register_emit(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<EmitOptions>();
  CLI::App* cmd = app.add_subcommand(
      "emit", "Generate and compile the kernels of a plan; write .cu, .ptx and ptxas reports (cuda) or .cpp (cpu)");
  cmd->add_option("FILE", opt->file, kGraphFileHelp)->required();
  cmd->add_option("--target", opt->target,
                  "cuda: CUDA C++ compiled by NVRTC; cpu: the C++ the CPU backend compiles with the host compiler")
      ->transform(CLI::IsMember({"cuda", "cpu"}, CLI::ignore_case))
      ->capture_default_str();
  CLI::Option* arch = cmd->add_option("--arch", opt->arch, "GPU architecture: sm_XX (CUBIN) or compute_XX (PTX only)")
                          ->capture_default_str();
  cmd->add_option("--out", opt->out, "directory for the kernels, plan.txt and emitted.txt (the list of files written)")
      ->check(folder_name_validator())
      ->capture_default_str();
  CLI::Option* access =
      cmd->add_option("--access", opt->access,
                      "which variant to write: vector (16-byte accesses, launched on aligned buffers) or scalar "
                      "(compiled when a buffer is not 16-byte aligned)")
          ->transform(CLI::IsMember({"vector", "scalar"}, CLI::ignore_case))
          ->capture_default_str();
  cmd->add_flag("--unfused", opt->unfused, "emit the unfused plan (one kernel per op) instead of the fused one");
  cmd->add_flag("--json", opt->json, "print one JSON object instead of lines");
  cmd->add_flag("--overwrite", opt->overwrite,
                "let --out replace an earlier emit's files (and remove the files an earlier emit listed in emitted.txt "
                "that this plan lacks, unless edited since)");
  cmd->callback([opt, arch, access, &exit_code] {
    if (opt->target == "cpu") {
      // Options of the other target are a usage mistake (exit 2), not
      // something to ignore.
      for (const CLI::Option* o : {arch, access}) {
        if (o->count() > 0) {
          throw CLI::ValidationError(o->get_name(),
                                     "applies to --target cuda only (the cpu target compiles for this CPU)");
        }
      }
      exit_code = emit_cpu_target(*opt);
    } else {
      exit_code = emit_cuda_target(*opt);
    }
  });
}

}  // namespace fusejit::cli
