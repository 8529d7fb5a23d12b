// The subcommands of the `fusejit` program. Each registers itself on the
// CLI11 app and, when chosen, runs and stores the process exit code:
// 0 on success, 1 when the input was bad or the work failed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "fusejit.h"

namespace fusejit::cli {

// Reads and verifies FILE ("-": standard input); on failure prints the
// errors to stderr and returns nullopt (the command then exits with 1).
std::optional<Graph> load_graph(const std::string& file);
// Each input NAME of `graph` from DIR/NAME.npy, checked against the graph
// (dtype, shape, representable values); the error names each input and
// file that cannot be used.
absl::StatusOr<TensorMap> load_inputs(const Graph& graph, const std::string& dir);
inline constexpr const char* kGraphFileHelp = "graph in the .fj text format ('-': standard input)";
// InvalidArgument naming the first bf16 value when `arch` (sm_XX) is older
// than sm_80, which bf16 arithmetic needs: found before NVRTC prints pages
// of ptxas errors.
absl::Status check_dtypes_for_arch(const Graph& graph, const std::string& arch);
// make_backend(name); on failure prints why ("backend cuda: no CUDA driver:
// ...") to stderr and returns nullptr (the command then exits with 1).
std::unique_ptr<Backend> open_backend(const std::string& name);

// Runs `work` (a long compile) while a terminal shows `message` on stderr;
// warnings given meanwhile are held until the line is cleared, or they
// would be printed onto it.
void with_progress_line(const std::string& message, const std::function<void()>& work);

// For --seed: a non-negative integer that fits 64 bits (CLI11 alone would
// take "-1" as 2^64 - 1).
CLI::Validator seed_validator();
// For counts and sizes: a whole number from min to max. CLI::Range alone
// calls "abc" or "1.5" out of range rather than not a number.
CLI::Validator whole_number_range(int64_t min, int64_t max);
// --backend: one of `names` (any case, given back in lower case), or
// cuda:N for GPU N where `names` has cuda.
CLI::Validator backend_choice(std::vector<std::string> names);
// For --out and --save: a folder's name, not empty.
CLI::Validator folder_name_validator();
// --inputs DIR: an existing folder, or a message saying what DIR is instead.
CLI::Validator input_folder_validator();

// What `bench` and `demo` share: how to benchmark and what to print.
struct BenchSettings {
  std::string backend = "auto";
  int reps = 10;
  uint64_t seed = 1;
  std::string inputs_dir;  // bench --inputs: each input from DIR/NAME.npy instead of random
  bool json = false;
  std::string plot;
  bool overwrite = false;
  bool no_counters = false;
  bool tamper = false;
  // Print the cost model's device and both plans' predictions before the
  // measured figures (the demo), with the device the run predicted with.
  bool show_plans = false;
};
void add_bench_options(CLI::App* cmd, BenchSettings& settings);
// Whether --plot (if given) can be written: checked before anything runs;
// prints why not to stderr.
bool plot_target_ok(const BenchSettings& settings);

// What to tell the user about a command line CLI11 rejected: its message,
// with the command or option they most likely meant when one is misspelled
// ("unknown command 'emt' (did you mean 'emit'?)"), and where help is.
std::string usage_error_text(const CLI::App& app, const CLI::ParseError& error, int argc, char** argv);
// Benchmarks both plans of `graph` on `backend` (settings.backend is not
// read); prints `title`, the tables and the roofline (or JSON). 0 when both
// plans computed the right results.
int run_bench(Backend& backend, const Graph& graph, const BenchSettings& settings, const std::string& title);

void register_check(CLI::App& app, int& exit_code);
void register_run(CLI::App& app, int& exit_code);
void register_plan(CLI::App& app, int& exit_code);
void register_devices(CLI::App& app, int& exit_code);
void register_emit(CLI::App& app, int& exit_code);
void register_bench(CLI::App& app, int& exit_code);
void register_demo(CLI::App& app, int& exit_code);
void register_fuzz(CLI::App& app, int& exit_code);

}  // namespace fusejit::cli
