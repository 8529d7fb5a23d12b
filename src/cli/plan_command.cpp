#include <algorithm>
#include <cctype>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "fusejit.h"
#include "ir/messages.h"
#include "runtime/cpu_calibration.h"
#include "runtime/cuda_driver.h"

namespace fusejit::cli {
namespace {

struct PlanOptions {
  std::string file;
  std::string device = "h100";
  bool json = false;
};

// A device of find_device(), the CPU as the CPU backend runs it (op
// throughput of its JIT kernels) where there is one. Without a backend (no
// host compiler) the portable probe's figures, with a warning: its plain
// loops run 10-45x slower than JIT kernels, so the predictions are not
// what the CPU backend would do (a failed calibration warns the same way).
absl::StatusOr<DeviceSpec> device_as_modelled(const std::string& name) {
  if (name == "cpu") {
    absl::StatusOr<std::unique_ptr<Backend>> cpu = make_cpu_backend();
    if (cpu.ok()) return (*cpu)->device();
    warn(
        fmt::format("cpu device: no CPU backend ({}); using the library's figures, measured with portable loops, "
                    "not the JIT kernels the CPU backend would run",
                    status_text(cpu.status())));
  }
  return find_device(name);
}

int plan(const PlanOptions& opt) {
  const std::optional<Graph> graph = load_graph(opt.file);
  if (!graph) return 1;
  absl::StatusOr<DeviceSpec> device = device_as_modelled(opt.device);
  if (!device.ok()) {
    eprint("fusejit: error: {}\n", status_text(device.status()));
    return 1;
  }
  const FusionOptions options = fusion_options_for(*device);
  const FusionPlan unfused = make_unfused_plan(*graph, options);
  const FusionPlan fused = make_fused_plan(*graph, options);
  const PlanComparison comparison = compare_plans(unfused, fused, *device);
  if (opt.json) {
    nlohmann::json j = comparison_json(*device, unfused, fused, comparison);
    j["fusion_boundaries"] = boundaries_json(fused, options);
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("graph {}:\n{}\n", graph->source_file(), print_graph(*graph));
  fmt::print("device {}\n", format_device(*device));
  fmt::print("{}\n", format_plan_table(unfused, comparison.unfused));
  fmt::print("{}\n", format_plan_table(fused, comparison.fused));
  if (const std::string apart = format_boundaries(fused, options); !apart.empty()) fmt::print("{}\n", apart);
  fmt::print("{}", format_saving(comparison));
  fmt::print("{}", format_idle_threads(comparison, *device));
  std::vector<std::string> passes;
  for (const FusionPlan* p : {&unfused, &fused}) {
    for (const Kernel& k : p->kernels) {
      if (k.row_strategy == RowStrategy::kReread)
        passes.push_back(fmt::format("{} {} {}", p->label, k.name, k.row_passes));
    }
  }
  if (!passes.empty()) {
    fmt::print(
        "row* = the row exceeds {} elements and is read from memory once per reduction stage and, where the kernel "
        "writes row-length outputs, once more to write them; passes: {}\n",
        device->persistent_row_limit, fmt::join(passes, ", "));
  }
  return 0;
}

// The datasheet GPUs, then this CPU as `plan --device cpu` and the CPU
// backend model it (op throughput of its JIT kernels). The CPU's figures are
// measured once and cached (measured again by themselves where they were
// measured on a busy machine, once it is idle: cost/machine_load.h);
// --remeasure measures both caches again now.
int devices(bool remeasure, bool json) {
  if (remeasure) {
    for (const std::string& path : {cpu_device_cache_path(), cpu_calibration_cache_path()}) {
      std::error_code ec;
      std::filesystem::remove(path, ec);
      if (ec) {
        eprint("fusejit: error: cannot remove {} to measure again: {}\n", path, ec.message());
        return 1;
      }
    }
  }
  std::vector<DeviceSpec> modelled;
  for (const std::string& name : device_names()) {
    absl::StatusOr<DeviceSpec> device = device_as_modelled(name);
    if (!device.ok()) {
      eprint("fusejit: error: {}\n", status_text(device.status()));
      return 1;
    }
    modelled.push_back(*std::move(device));
  }
  // Which of them this machine can run on: GPU 0, which --backend auto
  // takes, and any others, for --backend cuda:N.
  absl::StatusOr<std::unique_ptr<Backend>> gpu = make_backend("cuda");
  std::vector<std::pair<std::string, std::string>> other_gpus;  // backend name, what the driver says
  if (absl::StatusOr<int> count = gpu.ok() ? cuda::device_count() : absl::StatusOr<int>(0); count.ok()) {
    for (int n = 1; n < *count; ++n) {
      absl::StatusOr<GpuInfo> info = query_gpu(n);
      other_gpus.emplace_back(fmt::format("cuda:{}", n),
                              info.ok() ? info->summary() : fmt::format("not usable: {}", status_text(info.status())));
    }
  }
  if (json) {
    nlohmann::json out;
    out["devices"] = nlohmann::json::array();
    for (const DeviceSpec& d : modelled) out["devices"].push_back(device_json(d));
    out["cpu_cache"] = {cpu_device_cache_path(), cpu_calibration_cache_path()};
    out["gpu"] = gpu.ok() ? nlohmann::json{{"usable", true}, {"description", (*gpu)->description()}}
                          : nlohmann::json{{"usable", false}, {"reason", status_text(gpu.status())}};
    out["other_gpus"] = nlohmann::json::array();
    for (const auto& [backend, description] : other_gpus) {
      out["other_gpus"].push_back({{"backend", backend}, {"description", description}});
    }
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  for (const DeviceSpec& d : modelled) {
    fmt::print("{}", format_device(d));
    if (d.name == "cpu") {
      fmt::print("  {} in {} and {}; `fusejit devices --remeasure` measures again\n",
                 remeasure ? "measured now, cached" : "cached", cpu_device_cache_path(), cpu_calibration_cache_path());
    }
    fmt::print("\n");
  }
  if (gpu.ok()) {
    fmt::print("this machine's GPU: {}; --backend auto runs on it{}\n", (*gpu)->description(),
               other_gpus.empty() ? "" : " (--backend cuda:0)");
    for (const auto& [backend, description] : other_gpus) fmt::print("  and --backend {}: {}\n", backend, description);
  } else {
    fmt::print("this machine's GPU: none usable ({}); --backend auto runs on the CPU\n", status_text(gpu.status()));
  }
  return 0;
}

}  // namespace

void register_plan(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<PlanOptions>();
  CLI::App* cmd = app.add_subcommand("plan", "Show the unfused and fused plans and their roofline costs");
  cmd->add_option("FILE", opt->file, kGraphFileHelp)->required();
  // A device name is a usage error like any other bad option value (exit 2),
  // checked before the graph is read; case does not matter (H100).
  cmd->add_option("--device", opt->device, "device to model: h100, h200, a100 or cpu (measured here)")
      ->transform(CLI::Validator(
          [](std::string& name) -> std::string {
            std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
            const std::vector<std::string> known = device_names();
            if (std::find(known.begin(), known.end(), name) != known.end()) return "";
            return fmt::format("unknown device '{}'; known devices: {}", name, fmt::join(known, ", "));
          },
          "DEVICE"))
      ->capture_default_str();
  cmd->add_flag("--json", opt->json, "print one JSON object instead of tables");
  cmd->callback([opt, &exit_code] { exit_code = plan(*opt); });
}

void register_devices(CLI::App& app, int& exit_code) {
  struct DevicesOptions {
    bool remeasure = false;
    bool json = false;
  };
  auto opt = std::make_shared<DevicesOptions>();
  CLI::App* cmd = app.add_subcommand("devices", "List the devices of the cost model with their ridge points");
  cmd->add_flag("--remeasure", opt->remeasure,
                "measure this CPU again (bandwidth, FMA peak, op throughput of JIT kernels)");
  cmd->add_flag("--json", opt->json, "print one JSON object: devices (as in plan --json), cpu_cache, gpu");
  cmd->callback([opt, &exit_code] { exit_code = devices(opt->remeasure, opt->json); });
}

}  // namespace fusejit::cli
