#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>

#include "cli/commands.h"
#include "fusejit.h"
#include "ir/counted.h"
#include "ir/messages.h"
#include "runtime/file_io.h"

namespace fusejit::cli {
namespace {

struct RunOptions {
  std::string file;
  std::string backend = "reference";
  uint64_t seed = 0;
  std::string inputs_dir;
  std::string save_dir;
  bool overwrite = false;
  std::string rounding = "every-op";
  bool rounding_given = false;
};

struct Summary {
  int64_t finite = 0;
  double mean = 0, stddev = 0;
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  int64_t nan = 0, pos_inf = 0, neg_inf = 0;
};

// Statistics over the finite values; NaN and inf are counted apart so that
// one bad element is visible rather than turning every figure into NaN.
// Welford's update keeps the deviation exact for values far from zero.
Summary summarize(const HostTensor& t) {
  Summary s;
  double m2 = 0;
  for (double v : t.values) {
    if (std::isnan(v)) {
      ++s.nan;
    } else if (std::isinf(v)) {
      ++(v > 0 ? s.pos_inf : s.neg_inf);
    } else {
      ++s.finite;
      const double delta = v - s.mean;
      s.mean += delta / static_cast<double>(s.finite);
      m2 += delta * (v - s.mean);
      // -0 below +0, so that the zeros of x * 0 read "min -0 max 0".
      if (v < s.min || (v == s.min && std::signbit(v))) s.min = v;
      if (v > s.max || (v == s.max && !std::signbit(v))) s.max = v;
    }
  }
  if (s.finite > 0) s.stddev = std::sqrt(m2 / static_cast<double>(s.finite));
  return s;
}

// Ten columns: six decimals for ordinary magnitudes; scientific notation
// for huge or tiny ones, which six decimals would spell out in 40 digits
// (float32's 3.4e38) or show as 0.000000.
std::string summary_number(double v) {
  const double a = std::fabs(v);
  if (a != 0 && (a >= 1e6 || a < 1e-4)) return fmt::format("{:>10.3e}", v);
  return fmt::format("{:>10.6f}", v);
}

// "mean ... std ... min ... max ...", then what was not finite, if anything.
std::string format_summary(const Summary& s) {
  if (s.finite + s.nan + s.pos_inf + s.neg_inf == 0) return "no elements";
  std::string out = s.finite > 0 ? fmt::format("mean {}  std {}  min {}  max {}", summary_number(s.mean),
                                               summary_number(s.stddev), summary_number(s.min), summary_number(s.max))
                                 : std::string("no finite values");
  if (s.nan > 0) out += fmt::format("  nan {}", s.nan);
  if (s.pos_inf > 0) out += fmt::format("  +inf {}", s.pos_inf);
  if (s.neg_inf > 0) out += fmt::format("  -inf {}", s.neg_inf);
  return out;
}

std::string npy_path(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / (name + ".npy")).string();
}

// Before anything runs: none of the files --save would write may exist
// unless the user asked to overwrite them, so that a long run never ends in
// "already exists" and nothing the user has is replaced unasked.
absl::Status check_save_targets(const std::string& dir, const Graph& graph, bool overwrite, bool& created) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(fmt::format("--save {}: exists and is not a directory", dir));
  }
  // The folder is made now, so that one that cannot be (under /proc, in a
  // read-only place) fails before the run rather than after it.
  created = std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InvalidArgumentError(fmt::format("--save {}: cannot create directory: {}", dir, ec.message()));
  // An existing folder on a read-only file system fails now too.
  if (absl::Status s = check_can_create_files(dir); !s.ok()) {
    return absl::Status(s.code(), fmt::format("--save: {}", status_text(s)));
  }
  std::vector<int32_t> ids = graph.inputs();
  for (int32_t id : graph.outputs()) ids.push_back(id);
  // Names the folder's file system cannot hold fail now, not after the run.
  const long name_max = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  for (int32_t id : ids) {
    const std::string file = graph.node(id).name + ".npy";
    if (name_max > 0 && std::ssize(file) > name_max) {
      return absl::InvalidArgumentError(
          fmt::format("--save: {}.npy is {} bytes long; files in {} can have at most {}: rename the {} of the graph",
                      graph.node(id).name.substr(0, 40) + "...", file.size(), dir, name_max,
                      graph.node(id).op == Op::kInput ? "input" : "value"));
    }
  }
  for (int32_t id : ids) {
    const std::string path = npy_path(dir, graph.node(id).name);
    // The link itself (a dangling one exists too), and what it leads to.
    if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec))) continue;
    const std::filesystem::file_status target = std::filesystem::status(path, ec);
    // Not even --overwrite replaces a directory (or a device, a socket; or a
    // link to one): a file written first would be left behind by the failure.
    if (std::filesystem::exists(target) && !std::filesystem::is_regular_file(target)) {
      return absl::FailedPreconditionError(
          fmt::format("--save: {} exists and is not a file; move it or choose another --save folder", path));
    }
    if (!overwrite) {
      return absl::AlreadyExistsError(fmt::format("--save: {} already exists; pass --overwrite to replace it", path));
    }
  }
  return absl::OkStatus();
}

// Removes the --save folder this run created if the run fails before
// saving into it (only while it is empty: nothing in it is ever deleted).
struct CreatedFolder {
  std::string dir;
  bool remove = false;
  ~CreatedFolder() {
    std::error_code ec;
    if (remove) std::filesystem::remove(dir, ec);
  }
};

// Writes every tensor as DIR/NAME.npy (check_save_targets() has run), all
// or none, as one group of replace_files (runtime/file_io.h): a failure (a
// full disk, a link into a missing folder) leaves DIR as it was, so that a
// rerun does not stop at a file of the failed one. Without --overwrite the
// group is created with create_files, which replaces nothing: a file that
// appeared since check_save_targets (another run saving into the same
// folder) fails the save, where two runs used to replace each other's
// files and could leave one's inputs beside the other's outputs. The
// files' bytes are all in memory at once, 2 or 4 per element beside the
// tensors' 8.
absl::Status save_all(const std::string& dir, const TensorMap& inputs, const TensorMap& outputs, bool overwrite) {
  if (absl::Status s = ensure_directory(dir); !s.ok()) return s;
  std::map<std::string, std::string> contents;
  for (const TensorMap* map : {&inputs, &outputs}) {
    for (const auto& [name, t] : *map) {
      absl::StatusOr<std::string> bytes = npy_bytes(t);
      if (!bytes.ok()) {
        return absl::Status(bytes.status().code(), fmt::format("{}: {}", name, std::string(bytes.status().message())));
      }
      contents.emplace(npy_path(dir, name), *std::move(bytes));
    }
  }
  std::map<std::string, std::string_view> files;
  for (const auto& [path, bytes] : contents) files.emplace(path, bytes);
  if (overwrite) return replace_files(files);
  absl::Status created = create_files(files);
  if (absl::IsAlreadyExists(created)) {
    return absl::AlreadyExistsError(
        fmt::format("{}, made while this run ran (another run saving into the same folder?); saved nothing, pass "
                    "--overwrite to replace it",
                    std::string(created.message())));
  }
  return created;
}

int run(const RunOptions& opt) {
  if (opt.rounding_given && opt.backend != "reference") {
    eprint(
        "fusejit: error: --rounding applies to the reference backend only; the {} backend runs the fused "
        "plan, which rounds as its kernels store values\n",
        opt.backend);
    return 2;  // options that do not go together: a usage error, as CLI11's own
  }
  const std::optional<Graph> graph = load_graph(opt.file);
  if (!graph) return 1;
  CreatedFolder save_folder{opt.save_dir};
  if (!opt.save_dir.empty()) {
    if (absl::Status s = check_save_targets(opt.save_dir, *graph, opt.overwrite, save_folder.remove); !s.ok()) {
      eprint("fusejit: error: {}\n", status_text(s));
      return 1;
    }
  }
  absl::StatusOr<TensorMap> inputs = opt.inputs_dir.empty() ? absl::StatusOr<TensorMap>(random_inputs(*graph, opt.seed))
                                                            : load_inputs(*graph, opt.inputs_dir);
  if (!inputs.ok()) {
    eprint("fusejit: error: {}\n", status_text(inputs.status()));
    return 1;
  }
  const auto start = std::chrono::steady_clock::now();
  std::string backend_text = opt.backend;
  absl::StatusOr<TensorMap> outputs;
  if (opt.backend == "reference") {
    InterpretOptions options;
    options.rounding = opt.rounding == "outputs-only" ? Rounding::kOutputsOnly : Rounding::kEveryOp;
    outputs = interpret(*graph, *inputs, options);
    backend_text = fmt::format("reference, rounding {}", opt.rounding);
  } else {
    const std::unique_ptr<Backend> backend = open_backend(opt.backend);
    if (!backend) return 1;
    const FusionPlan plan = make_fused_plan(*graph, backend->fusion_options());
    // A large kernel takes the host compiler seconds; say so, or run looks hung.
    absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded;
    with_progress_line(fmt::format("compiling the fused plan ({}; cached kernels load at once)...",
                                   counted(std::ssize(plan.kernels), "kernel")),
                       [&] { loaded = backend->load(plan); });
    outputs = loaded.ok() ? run_loaded(**loaded, *inputs) : loaded.status();
    backend_text = fmt::format("{} ({}), fused plan of {}", backend->name(), backend->description(),
                               counted(std::ssize(plan.kernels), "kernel"));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!outputs.ok()) {
    eprint("fusejit: error: {}\n", status_text(outputs.status()));
    return 1;
  }
  fmt::print("{}: {}, backend {}, inputs {}, {:.2f} s\n", graph->source_file(), counted(graph->num_nodes(), "node"),
             backend_text, opt.inputs_dir.empty() ? fmt::format("random (seed {})", opt.seed) : opt.inputs_dir,
             seconds);
  // Columns as wide as the longest name and shape (at least the usual 12
  // and 16), so that every output's numbers line up.
  size_t name_width = 12, shape_width = 16;
  for (int32_t id : graph->outputs()) {
    name_width = std::max(name_width, graph->node(id).name.size());
    shape_width = std::max(shape_width, graph->node(id).shape.to_string().size() + 1);
  }
  for (int32_t id : graph->outputs()) {
    const Node& n = graph->node(id);
    fmt::print("  {:<{}} {:>5}{:<{}} {}\n", n.name, name_width, n.dtype, n.shape.to_string(), shape_width,
               format_summary(summarize(outputs->at(n.name))));
  }
  if (!opt.save_dir.empty()) {
    if (absl::Status s = save_all(opt.save_dir, *inputs, *outputs, opt.overwrite); !s.ok()) {
      eprint("fusejit: error: {}\n", status_text(s));
      return 1;
    }
    save_folder.remove = false;
    fmt::print("saved inputs and outputs as .npy files in {}\n", opt.save_dir);
  }
  return 0;
}

}  // namespace

void register_run(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Run a .fj graph and print a summary of each output");
  cmd->add_option("FILE", opt->file, kGraphFileHelp)->required();
  cmd->add_option("--backend", opt->backend,
                  "where to run: reference (float64 interpreter), cpu (JIT-compiled C++), cuda (NVRTC on GPU 0), "
                  "cuda:N (on GPU N), "
                  "auto (cuda when a GPU is usable, else cpu); cpu, cuda and auto run the fused plan")
      ->transform(backend_choice({"reference", "auto", "cpu", "cuda"}))
      ->capture_default_str();
  CLI::Option* seed = cmd->add_option("--seed", opt->seed, "seed of the normal(0, 1) input generator")
                          ->check(seed_validator())
                          ->capture_default_str();
  cmd->add_option("--inputs", opt->inputs_dir, "read each input NAME from DIR/NAME.npy instead")
      ->check(input_folder_validator())
      ->excludes(seed);
  CLI::Option* save = cmd->add_option("--save", opt->save_dir, "write every input and output as DIR/NAME.npy")
                          ->check(folder_name_validator());
  cmd->add_flag("--overwrite", opt->overwrite, "let --save replace existing files")->needs(save);
  CLI::Option* rounding =
      cmd->add_option("--rounding", opt->rounding,
                      "where results are rounded to their dtype: every-op (as unfused kernels store them) or "
                      "outputs-only (as a fully fused kernel does); reference backend only")
          ->transform(CLI::IsMember({"every-op", "outputs-only"}, CLI::ignore_case))
          ->capture_default_str();
  cmd->callback([opt, rounding, &exit_code] {
    opt->rounding_given = rounding->count() > 0;
    exit_code = run(*opt);
  });
}

}  // namespace fusejit::cli
