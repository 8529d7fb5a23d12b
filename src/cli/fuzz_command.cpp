#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "fusejit.h"
#include "ir/counted.h"
#include "ir/messages.h"
#include "runtime/file_io.h"
#include "runtime/fuzz.h"

namespace fusejit::cli {
namespace {

struct FuzzCommandOptions {
  int graphs = 100;
  uint64_t seed = 1;
  std::string backend = "auto";
  bool cuda_compile = false;
  std::string arch = "sm_90";
  bool json = false;
  bool special_values = false;
  std::vector<std::string> files;  // --check: these graphs instead of random ones
};

// The signal (SIGINT or SIGTERM) that asked a random-graph run to stop; 0 if none.
// Lock-free: the signal handler claims it, on whichever thread it runs.
std::atomic<int> interrupted{0};
static_assert(std::atomic<int>::is_always_lock_free);

// Catches SIGINT and SIGTERM while it lives: the first asks the run to stop
// (interrupted); a second puts back the handler that was there before and
// acts as it would have without this: under the fusejit command,
// stop_children_on_interrupt()'s, which ends a host compiler still running
// along with fusejit (SA_RESETHAND's default action left it orphaned). A
// repeat of the first signal within kRepeatNs is the same request delivered twice,
// not a second one: timeout(1) signals its command and then the command's
// process group, and the second copy killed fusejit before its summary. A
// signal the process was started ignoring (a background job of a script
// ignores SIGINT) stays ignored. One at a time: the previous handlers are
// static, for the signal handler to read.
class StopSignals {
 public:
  StopSignals() {
    first_ns_.store(0);
    struct sigaction action = {};
    action.sa_handler = [](int signal) {
      struct timespec now = {};
      clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe
      const int64_t ns = int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
      // The copies may reach two threads at once: the time is stored
      // before the signal is claimed, so that whoever sees it claimed sees
      // a time near its own (racing firsts store times microseconds apart).
      if (interrupted.load() == 0) first_ns_.store(ns);
      int first = 0;
      if (interrupted.compare_exchange_strong(first, signal)) return;
      if (first == signal && ns - first_ns_.load() < kRepeatNs) return;
      for (int i = 0; i < 2; ++i) {
        if (kSignals[i] != signal) continue;
        // Blocked while this handler runs, so the signal raised here waits
        // for it to return and then meets the previous handler.
        sigaction(signal, &previous_[i], nullptr);
        raise(signal);
      }
    };
    sigemptyset(&action.sa_mask);
    for (int s : kSignals) sigaddset(&action.sa_mask, s);
    action.sa_flags = SA_RESTART;  // a copy ignored must not fail a write of the summary with EINTR
    for (int i = 0; i < 2; ++i) {
      sigaction(kSignals[i], nullptr, &previous_[i]);
      if (previous_[i].sa_handler != SIG_IGN) sigaction(kSignals[i], &action, nullptr);
    }
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  ~StopSignals() {
    for (int i = 0; i < 2; ++i) sigaction(kSignals[i], &previous_[i], nullptr);
  }

 private:
  static constexpr int kSignals[2] = {SIGINT, SIGTERM};
  static constexpr int64_t kRepeatNs = 100'000'000;  // 0.1 s: far below a person's second Ctrl-C
  static inline struct sigaction previous_[2] = {};
  // Lock-free atomics: what a signal handler may share with other threads.
  static inline std::atomic<int64_t> first_ns_{0};
  static_assert(std::atomic<int64_t>::is_always_lock_free);
};

void print_failure(const FuzzFailure& f, bool special_values) {
  const std::string again = fmt::format("--seed {} --graphs 1{}", f.seed, special_values ? " --special-values" : "");
  if (f.not_checked) {
    fmt::print("NOT CHECKED: the graph of {} ({} statements): {}\n{}\n", again, f.original_statements, f.what, f.graph);
  } else {
    fmt::print("MISMATCH: the graph of {} (shrunk from {} to {} statements): {}\n{}\n", again, f.original_statements,
               f.shrunk_statements, f.what, f.graph);
  }
  std::fflush(stdout);
}

// --check: each file (a reproducer an earlier run printed, or any graph) is
// checked as a generated graph would be, without shrinking.
int check_files(const FuzzCommandOptions& opt, const FuzzOptions& options) {
  // not_checked: valid, but not for --arch, or too large for this machine
  int failed = 0, unreadable = 0, not_checked = 0;
  int64_t kernels = 0;
  nlohmann::json failures = nlohmann::json::array();
  for (const std::string& given : opt.files) {
    // "-": standard input, named <stdin> in diagnostics, as for every command's FILE.
    const std::string file = graph_source_name(given);
    // A file that cannot be read, or does not parse (the user's error, at
    // its file:line), is not a mismatch; the other files are still checked.
    const absl::StatusOr<std::string> text = read_graph_text(given);
    const absl::StatusOr<Graph> parsed = text.ok() ? parse_graph(*text, file) : absl::StatusOr<Graph>(text.status());
    if (!parsed.ok()) {
      const std::string error(status_text(parsed.status()));
      ++unreadable;
      eprint("{}\n", error);
      failures.push_back({{"file", file}, {"error", error}});
      if (!opt.json) {
        fmt::print("{}: not checked: {}\n", file,
                   text.ok() ? "it is not a valid graph (errors above)" : "it cannot be read (error above)");
      }
      continue;
    }
    if (options.cuda_compile) {
      if (absl::Status s = check_dtypes_for_arch(*parsed, options.cuda_arch); !s.ok()) {
        const std::string error = fmt::format("{}: {}", file, status_text(s));
        ++not_checked;
        eprint("fusejit: error: {}\n", error);
        failures.push_back({{"file", file}, {"error", error}});
        if (!opt.json) fmt::print("{}: not checked: its kernels cannot compile for --arch {}\n", file, options.cuda_arch);
        continue;
      }
    }
    const GraphCheck check = check_graph_text(*text, options, &kernels);
    if (!check.not_checked.empty()) {
      ++not_checked;
      failures.push_back({{"file", file}, {"error", check.not_checked}});
      if (!opt.json) fmt::print("{}: not checked: {}\n", file, check.not_checked);
      continue;
    }
    const std::string& what = check.mismatch;
    failed += !what.empty();
    if (!what.empty()) failures.push_back({{"file", file}, {"what", what}, {"graph", *text}});
    if (!opt.json) fmt::print("{}: {}\n", file, what.empty() ? "ok" : "MISMATCH: " + what);
  }
  if (opt.json) {
    fmt::print("{}\n", nlohmann::json{{"graphs", opt.files.size()}, {"kernels", kernels}, {"mismatches", failed},
                                      {"invalid_files", unreadable}, {"not_checked", not_checked},
                                      {"failures", failures}}
                           .dump(2));
  }
  return failed == 0 && unreadable == 0 && not_checked == 0 ? 0 : 1;
}

int fuzz(const FuzzCommandOptions& opt) {
  if (opt.backend == "none" && !opt.cuda_compile) {
    eprint(
        "fusejit: error: --backend none runs nothing; add --cuda-compile to compile every kernel, "
        "or choose a backend (auto, cpu, cuda)\n");
    return 2;
  }
  // Ctrl-C (or SIGTERM) ends a random-graph run after the graph in
  // progress, which is not counted, and the summary still comes; a second
  // one kills at once. Caught from here on, not only once the graphs
  // begin: opening the backend, loading NVRTC and the preflight compile
  // can take seconds on a busy machine, and a signal then killed fusejit
  // without its summary. A --check of files runs to the end.
  interrupted.store(0);
  std::optional<StopSignals> stop_signals;
  if (opt.files.empty()) stop_signals.emplace();
  std::unique_ptr<Backend> backend;
  if (opt.backend != "none") {
    backend = open_backend(opt.backend);
    if (!backend) return 1;
  }
  if (std::count(opt.files.begin(), opt.files.end(), "-") > 1) {
    eprint("fusejit: error: --check: '-' (standard input) is given more than once; it can be read once\n");
    return 2;
  }
  if (opt.cuda_compile) {
    if (absl::Status s = nvrtc_status(); !s.ok()) {
      eprint("fusejit: error: --cuda-compile: {}\n", status_text(s));
      return 1;
    }
    // A bad --arch is the user's typo, not a mismatch of every graph.
    if (absl::Status s = check_cuda_arch(opt.arch); !s.ok()) {
      eprint("fusejit: error: --arch: {}\n", status_text(s));
      return 2;
    }
    // Generated graphs use bf16; a file given to --check is checked on its own (below).
    if (opt.files.empty() && cuda_arch_number(opt.arch) < 80) {
      eprint(
          "fusejit: error: --arch {}: fuzz graphs use bf16, which needs sm_80 or newer (compute capability "
          "8.0); choose --arch sm_80 or later\n",
          opt.arch);
      return 2;
    }
  }
  FuzzOptions options;
  options.graphs = opt.graphs;
  options.seed = opt.seed;
  options.backend = backend.get();
  options.cuda_compile = opt.cuda_compile;
  options.cuda_arch = opt.arch;
  options.special_values = opt.special_values;
  // A toolchain that cannot compile one op would fail every graph alike.
  if (const std::string what = fuzz_preflight(options); !what.empty()) {
    eprint("fusejit: error: fuzz cannot check even a one-op graph here, so every graph would fail alike: {}\n", what);
    return 1;
  }
  if (!opt.files.empty()) return check_files(opt, options);
  // Progress: a line that rewrites itself on a terminal; in a log, a line a
  // minute, so that a long run is seen to be alive and where it is.
  const bool tty = isatty(STDERR_FILENO) != 0;
  auto last_line = std::chrono::steady_clock::now();
  options.progress = [tty, &last_line](std::string_view line) {
    if (tty) {
      eprint("\r\033[K{}", line);
    } else if (std::chrono::steady_clock::now() - last_line >= std::chrono::minutes(1)) {
      last_line = std::chrono::steady_clock::now();
      eprint("fuzz: {}\n", line);
    }
  };
  // Failures as they are found, not only at the end of a long run.
  if (!opt.json) {
    options.on_failure = [tty, special = opt.special_values](const FuzzFailure& f) {
      if (tty) eprint("\r\033[K");
      print_failure(f, special);
    };
  }
  options.stop_requested = [] { return interrupted != 0; };
  const FuzzResult r = run_fuzz(options);
  if (tty) eprint("\r\033[K");
  if (opt.json) {
    nlohmann::json failures = nlohmann::json::array();
    for (const FuzzFailure& f : r.failures) {
      failures.push_back({{"seed", f.seed},
                          {"what", f.what},
                          {"graph", f.graph},
                          {"statements", f.original_statements},
                          {"shrunk_statements", f.shrunk_statements},
                          {"not_checked", f.not_checked}});
    }
    fmt::print("{}\n", nlohmann::json{{"graphs", r.graphs},
                                      {"kernels", r.kernels},
                                      {"mismatches", r.mismatches},
                                      {"not_checked", r.not_checked},
                                      {"interrupted", r.stopped},
                                      {"failures", failures}}
                           .dump(2));
  } else {
    fmt::print("fuzz: {} (seed {}), backend {}{}, {} compiled, {}{}{}\n", counted(r.graphs, "graph"), opt.seed,
               backend ? std::string(backend->name()) : "none", opt.cuda_compile ? " + NVRTC " + opt.arch : "",
               counted(r.kernels, "kernel"), counted(r.mismatches, "mismatch", "mismatches"),
               r.not_checked > 0 ? fmt::format(", {} not checked (out of memory)", r.not_checked) : "",
               r.stopped ? fmt::format("; interrupted: graphs {} to {} were not checked (--seed {} --graphs {} checks "
                                       "them)",
                                       r.graphs + 1, opt.graphs, opt.seed + r.graphs, opt.graphs - r.graphs)
                         : "");
  }
  if (r.mismatches > 0 || r.not_checked > 0) return 1;
  return r.stopped ? 128 + interrupted.load() : 0;  // as a shell reports a command the signal ended: 130, 143
}

}  // namespace

void register_fuzz(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<FuzzCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "fuzz", "Differential fuzzing: random graphs, both plans against the reference interpreter");
  CLI::Option* graphs = cmd->add_option("--graphs", opt->graphs, "graphs to try")
                            ->check(whole_number_range(1, 100000000))
                            ->capture_default_str();
  CLI::Option* seed = cmd->add_option("--seed", opt->seed, "first seed: graph i is the first graph of --seed seed+i")
                          ->check(seed_validator())
                          ->capture_default_str();
  cmd->add_option("--backend", opt->backend,
                  "run the plans on auto, cpu, cuda or cuda:N (GPU N); none only generates (and compiles)")
      ->transform(backend_choice({"auto", "cpu", "cuda", "none"}))
      ->capture_default_str();
  CLI::Option* cuda_compile =
      cmd->add_flag("--cuda-compile", opt->cuda_compile, "also compile every kernel of both plans with NVRTC");
  cmd->add_option("--arch", opt->arch, "architecture for --cuda-compile (sm_80 or newer)")
      ->needs(cuda_compile)
      ->capture_default_str();
  cmd->add_option("--check", opt->files,
                  "check these graph files (e.g. a printed reproducer; '-': standard input) instead of random graphs")
      ->check(CLI::Validator(
          [](std::string& file) -> std::string {
            if (file == "-") return "";
            // CLI11 gives --check the word after it whatever it is, so
            // `--check --json g.fj` reads --json as the first file. Any
            // other file that cannot be read is reported by check_files
            // like one that does not parse (exit 1, the rest still
            // checked), as `run` and `check` report it.
            if (file.starts_with("-") && !CLI::ExistingFile(file).empty()) {
              return fmt::format(
                  "'{0}' is not a file but looks like an option: the files come right after "
                  "--check (fuzz --check FILE... [options]); a file of that name is ./{0}",
                  file);
            }
            return "";
          },
          "FILE"))
      ->excludes(graphs)  // random graphs' count and seed mean nothing for given files
      ->excludes(seed);
  cmd->add_flag("--special-values", opt->special_values,
                "inputs with special values among the normal ones: +-0, +-inf, NaN, each dtype's largest and "
                "smallest magnitudes, 3e38 and 1e20 (sums and squares past float32's range)");
  cmd->add_flag(
      "--json", opt->json,
      "print one JSON object: graphs, kernels, mismatches, not_checked, failures, and interrupted (random graphs) "
      "or invalid_files (--check)");
  cmd->callback([opt, &exit_code] { exit_code = fuzz(*opt); });
}

}  // namespace fusejit::cli
