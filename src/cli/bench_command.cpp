#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "fusejit.h"
#include "ir/messages.h"
#include "runtime/bench_report.h"
#include "runtime/roofline_plot.h"

namespace fusejit::cli {
namespace {

struct BenchCommandOptions {
  std::string file;
  BenchSettings settings;
};

}  // namespace

void add_bench_options(CLI::App* cmd, BenchSettings& s) {
  cmd->add_option("--backend", s.backend,
                  "auto (the GPU when there is one, else the CPU), cpu, cuda (GPU 0) or cuda:N (GPU N)")
      ->transform(backend_choice({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--reps", s.reps, "timed repetitions of each plan")
      ->check(whole_number_range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--seed", s.seed, "seed of the random inputs")
      ->check(seed_validator())->capture_default_str();
  cmd->add_flag("--json", s.json, "print one JSON object instead of tables");
  // The extension is checked before the benchmark runs, not after.
  CLI::Option* plot =
      cmd->add_option("--plot", s.plot, "draw the roofline chart into FILE (.svg or .png; needs gnuplot)");
  plot->check(CLI::Validator(
          [](std::string& path) -> std::string {
            return path.ends_with(".svg") || path.ends_with(".png") ? "" : "the chart file must end in .svg or .png";
          },
          "FILE.svg|FILE.png"));
  cmd->add_flag("--overwrite", s.overwrite, "let --plot replace an existing file")->needs(plot);
  cmd->add_flag("--no-counters", s.no_counters, "do not read the GPU's memory traffic counters (CUPTI)");
  // Shows that a wrong result fails the run (tests use it).
  cmd->add_flag("--tamper-for-testing", s.tamper, "")->group("");
}

bool plot_target_ok(const BenchSettings& s) {
  if (s.plot.empty()) return true;
  const absl::Status check = check_roofline_plot_target(s.plot, s.overwrite);
  if (!check.ok()) eprint("fusejit: error: {}\n", status_text(check));
  return check.ok();
}

int run_bench(Backend& backend, const Graph& graph, const BenchSettings& s, const std::string& title) {
  BenchOptions options;
  options.reps = s.reps;
  options.seed = s.seed;
  absl::StatusOr<TensorMap> given;
  if (!s.inputs_dir.empty()) {
    given = load_inputs(graph, s.inputs_dir);
    if (!given.ok()) {
      eprint("fusejit: error: {}\n", status_text(given.status()));
      return 1;
    }
    options.inputs = &*given;
    options.inputs_from = s.inputs_dir;
  }
  options.read_counters = !s.no_counters;
  // A progress line that rewrites itself, on a terminal only, so that logs
  // and --json output stay clean.
  const bool tty = isatty(STDERR_FILENO) != 0;
  if (tty) options.progress = [](std::string_view line) { eprint("\r\033[K{}", line); };
  if (s.tamper) {
    options.tamper_fused_outputs = [](TensorMap& outputs) {
      for (auto& [name, t] : outputs) {
        if (!t.values.empty()) t.values[t.values.size() / 2] += 1000.0;
      }
    };
  }
  if (!s.json && !s.show_plans) fmt::print("{}\n", title);
  absl::StatusOr<BenchResult> result = run_benchmark(backend, graph, options);
  if (tty) eprint("\r\033[K");
  if (!result.ok()) {
    eprint("fusejit: error: {}\n", status_text(result.status()));
    return 1;
  }
  if (s.json) {
    fmt::print("{}\n", bench_json(*result).dump(2));
  } else {
    if (s.show_plans) {
      const FusionOptions fusion = fusion_options_for(result->device);
      const FusionPlan unfused = make_unfused_plan(graph, fusion);
      const FusionPlan fused = make_fused_plan(graph, fusion);
      const PlanComparison predicted = compare_plans(unfused, fused, result->device);
      fmt::print("cost model device: {}\n{}\n{}\n{}{}\n{}\n", format_device(result->device),
                 format_plan_table(unfused, predicted.unfused), format_plan_table(fused, predicted.fused),
                 format_saving(predicted), format_idle_threads(predicted, result->device), title);
    }
    fmt::print("{}\n{}", format_bench(*result), format_roofline(*result));
  }
  if (!s.plot.empty()) {
    if (absl::Status st = write_roofline_plot(*result, s.plot); !st.ok()) {
      eprint("fusejit: error: {}\n", status_text(st));
      return 1;
    }
    if (!s.json) fmt::print("roofline chart: {}\n", s.plot);
  }
  if (!result->correct) {
    std::vector<std::string> wrong;
    if (!result->unfused.correct) wrong.push_back("unfused: " + result->unfused.mismatch);
    if (!result->fused.correct) wrong.push_back("fused: " + result->fused.mismatch);
    eprint("fusejit: error: {} computed wrong results: {}\n", wrong.size() == 2 ? "both plans" : "a plan",
           fmt::join(wrong, "; "));
    return 1;
  }
  return 0;
}

void register_bench(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<BenchCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Run the unfused and the fused plan of a .fj graph, check both against the reference, and time them");
  cmd->add_option("FILE", opt->file, kGraphFileHelp)->required();
  add_bench_options(cmd, opt->settings);
  cmd->add_option("--inputs", opt->settings.inputs_dir,
                  "run both plans on each input NAME read from DIR/NAME.npy (as `fusejit run --save` writes them) "
                  "instead of random inputs")
      ->check(input_folder_validator())
      ->excludes("--seed");
  cmd->callback([opt, &exit_code] {
    const std::optional<Graph> graph = load_graph(opt->file);
    if (!graph || !plot_target_ok(opt->settings)) {
      exit_code = 1;
      return;
    }
    const std::unique_ptr<Backend> backend = open_backend(opt->settings.backend);
    exit_code = backend ? run_bench(*backend, *graph, opt->settings, fmt::format("fusejit bench {}", graph->source_file())) : 1;
  });
}

}  // namespace fusejit::cli
