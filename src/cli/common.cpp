// What several commands share (declared in commands.h): loading a graph
// file and opening a backend, each printing why it failed.
#include <algorithm>
#include <charconv>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

#include <absl/strings/ascii.h>
#include <absl/strings/str_join.h>

#include <fmt/format.h>

#include "cli/commands.h"
#include "fusejit.h"
#include "ir/messages.h"
#include "runtime/nvrtc_compiler.h"

namespace fusejit::cli {

CLI::Validator seed_validator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        uint64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (text.empty() || ec != std::errc() || ptr != end) {
          return "a seed is an integer from 0 to 18446744073709551615, not '" + text + "'";
        }
        return "";
      },
      "UINT64");
}

CLI::Validator folder_name_validator() {
  return CLI::Validator([](std::string& dir) { return dir.empty() ? std::string("needs a folder") : ""; }, "DIR");
}

CLI::Validator input_folder_validator() {
  return CLI::Validator(
      [](std::string& dir) -> std::string {
        constexpr const char* kHolds = "a folder holding NAME.npy for each input NAME of the graph";
        if (dir.empty()) return fmt::format("needs {}", kHolds);
        std::error_code ec;
        const std::filesystem::file_status status = std::filesystem::status(dir, ec);
        if (status.type() == std::filesystem::file_type::not_found) {
          return fmt::format("'{}' does not exist; give {}", dir, kHolds);
        }
        if (ec) return fmt::format("'{}' cannot be read: {}", dir, ec.message());
        if (!std::filesystem::is_directory(status)) {
          return fmt::format("'{}' is not a folder; give {} (the folder itself)", dir, kHolds);
        }
        return "";
      },
      "DIR");
}

CLI::Validator whole_number_range(int64_t min, int64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        int64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (text.empty() || ptr != end || (ec != std::errc() && ec != std::errc::result_out_of_range)) {
          return fmt::format("'{}' is not a whole number", text);
        }
        if (ec == std::errc::result_out_of_range || value < min || value > max) {
          return fmt::format("{} is not in the range {} to {}", text, min, max);
        }
        return "";
      },
      fmt::format("INT in [{} - {}]", min, max));
}

CLI::Validator backend_choice(std::vector<std::string> names) {
  const bool cuda = std::find(names.begin(), names.end(), "cuda") != names.end();
  std::string accepted = absl::StrJoin(names, ", ");
  if (cuda) accepted += ", cuda:N (GPU N, from 0)";
  return CLI::Validator(
      [names, cuda, accepted](std::string& text) -> std::string {
        std::string lower = absl::AsciiStrToLower(text);
        if (std::find(names.begin(), names.end(), lower) != names.end() || (cuda && cuda_device_of(lower))) {
          text = lower;
          return "";
        }
        return fmt::format("'{}' is not a backend: expected {}", text, accepted);
      },
      "{" + absl::StrJoin(names, ",") + (cuda ? ",cuda:N}" : "}"));
}

absl::StatusOr<TensorMap> load_inputs(const Graph& graph, const std::string& dir) {
  TensorMap inputs;
  // Every input is read, so that one error lists every file to fix rather
  // than the first of several.
  std::vector<std::string> errors;
  const std::vector<bool> used = graph.reaches_outputs();
  for (int32_t id : graph.inputs()) {
    const Node& n = graph.node(id);
    const std::string path = (std::filesystem::path(dir) / (n.name + ".npy")).string();
    absl::StatusOr<HostTensor> t = read_npy(path, n.dtype, &n.shape);
    if (!t.ok()) {
      // An input no output reads still needs its values: say why it is asked for.
      const bool unused_and_missing = !used[id] && absl::IsNotFound(t.status());
      errors.push_back(fmt::format("input {}: {}{}", describe(n), status_text(t.status()),
                                   unused_and_missing ? "; no output reads this input, but every input the graph "
                                                        "declares needs its values: give a file or remove the input "
                                                        "from the graph"
                                                      : ""));
      continue;
    }
    if (errors.empty()) inputs.emplace(n.name, *std::move(t));
  }
  if (errors.size() == 1) return absl::InvalidArgumentError(errors[0]);
  if (!errors.empty()) {
    return absl::InvalidArgumentError(fmt::format("{} of the graph's {} inputs cannot be read from {}:\n  {}",
                                                  errors.size(), graph.inputs().size(), dir,
                                                  absl::StrJoin(errors, "\n  ")));
  }
  return inputs;
}

std::optional<Graph> load_graph(const std::string& file) {
  absl::StatusOr<Graph> graph = parse_graph_file(file);
  if (!graph.ok()) {
    eprint("{}\n", status_text(graph.status()));
    return std::nullopt;
  }
  // As many as the parser reports errors: a generated graph with thousands
  // of unused values would otherwise bury everything else in warnings.
  constexpr size_t kMaxWarnings = 100;
  const std::vector<std::string> warnings = graph_warnings(*graph);
  for (size_t i = 0; i < std::min(warnings.size(), kMaxWarnings); ++i) warn(warnings[i]);
  if (warnings.size() > kMaxWarnings) {
    warn(fmt::format("{} more warnings about {} are not shown (the first {} are)", warnings.size() - kMaxWarnings,
                     graph->source_file(), kMaxWarnings));
  }
  return *std::move(graph);
}

absl::Status check_dtypes_for_arch(const Graph& graph, const std::string& arch) {
  const int cc = cuda_arch_number(arch);
  for (const Node& node : graph.nodes()) {
    if (node.dtype == DType::kBF16 && cc < 80) {
      return absl::InvalidArgumentError(fmt::format(
          "--arch {}: {} is bf16, which needs sm_80 or newer (compute capability 8.0); choose --arch sm_80 or later",
          arch, describe(node)));
    }
  }
  return absl::OkStatus();
}

std::unique_ptr<Backend> open_backend(const std::string& name) {
  if (name == "auto") {
    // The GPU when it is usable; otherwise the CPU, saying why not the GPU.
    absl::StatusOr<std::unique_ptr<Backend>> cuda = make_backend("cuda");
    if (cuda.ok()) return *std::move(cuda);
    eprint("fusejit: note: --backend auto runs on the CPU: {}\n", status_text(cuda.status()));
    return open_backend("cpu");
  }
  absl::StatusOr<std::unique_ptr<Backend>> backend = make_backend(name);
  if (!backend.ok()) {
    eprint("fusejit: error: backend {}: {}\n", name, status_text(backend.status()));
    return nullptr;
  }
  return *std::move(backend);
}

void with_progress_line(const std::string& message, const std::function<void()>& work) {
  if (isatty(STDERR_FILENO) == 0) {
    work();
    return;
  }
  std::vector<std::string> held;
  {
    ScopedWarningSink hold;
    eprint("{}", message);
    work();
    eprint("\r\033[K");
    held = hold.messages();
  }
  for (const std::string& w : held) warn(w);
}

}  // namespace fusejit::cli
