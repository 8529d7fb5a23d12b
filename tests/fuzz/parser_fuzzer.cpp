// libFuzzer target over the .fj text format, the verifier and every stage
// after parsing that needs no data (issue 6, "Parser and verifier fuzzing").
//
// Each input is read as .fj text. A property that does not hold prints what
// broke and calls abort(), so that libFuzzer (or the replay tool,
// replay_main.cpp) reports it with the input that caused it:
//
// - rejected text: the message is non-empty and every line of it is a
//   diagnostic "fuzz.fj:LINE:COL: error: MESSAGE" (text_format.h's promise)
//   whose LINE and COL lie inside the text;
// - accepted text: the graph verifies, print_graph() of it parses back to an
//   equal graph and prints identically (the round trip text_format.h
//   promises);
// - small accepted graphs also go through the unfused and fused plans, the
//   roofline report and the CPU and CUDA source emitters, none of which may
//   throw. Sources are strings only: nothing is compiled, run or allocated
//   at the graph's (possibly enormous) sizes.
// A rejected text is also tried again without the lines its errors name
// (check_text below), so that mutants reach the later stages too.
//
// Build: cmake --preset fuzz && cmake --build --preset fuzz (needs clang);
// run: scripts/fuzz-parser.sh [SECONDS].
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/cpu/cpu_emitter.h"
#include "fusejit.h"

namespace fusejit {
namespace {

// Plans and sources of a graph grow with its node count (an unfused plan has
// a kernel per op, each source embeds the helper headers), so they are built
// for small graphs only: this keeps one input to a few milliseconds under the
// sanitizers. Parsing, verifying and printing run on every input; they are
// linear in the text, which libFuzzer caps (-max_len).
constexpr int32_t kMaxNodesForPlans = 64;

[[noreturn]] void fail(std::string_view what, std::string_view detail) {
  std::fprintf(stderr, "parser_fuzzer: property violated: %.*s\n%.*s\n", static_cast<int>(what.size()), what.data(),
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

void check(bool ok, std::string_view what, std::string_view detail = {}) {
  if (!ok) fail(what, detail);
}

// The text's lines as the parser counts them: a final line break does not
// start another line, and an empty text is one empty line.
std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  do {
    const size_t end = std::min(text.find('\n', start), text.size());
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  } while (start < text.size());
  return lines;
}

// Parses a positive decimal int at text[*pos...] up to `stop`; false if absent.
bool read_number(std::string_view text, size_t* pos, char stop, int64_t* value) {
  const size_t begin = *pos;
  *value = 0;
  while (*pos < text.size() && text[*pos] >= '0' && text[*pos] <= '9' && *pos - begin < 10) {
    *value = *value * 10 + (text[*pos] - '0');
    ++*pos;
  }
  if (*pos == begin || *pos >= text.size() || text[*pos] != stop) return false;
  ++*pos;
  return *value >= 1;
}

// One line of a rejection: "fuzz.fj:LINE:COL: error: MESSAGE", with LINE a
// line of the text and COL at most one past its last byte. Returns LINE.
int64_t check_diagnostic(std::string_view diagnostic, const std::vector<std::string_view>& lines) {
  constexpr std::string_view kFile = "fuzz.fj:";
  constexpr std::string_view kError = " error: ";
  check(diagnostic.starts_with(kFile), "a diagnostic does not start with 'fuzz.fj:'", diagnostic);
  size_t pos = kFile.size();
  int64_t line = 0, col = 0;
  check(read_number(diagnostic, &pos, ':', &line) && read_number(diagnostic, &pos, ':', &col),
        "a diagnostic has no 1-based LINE:COL after the file name", diagnostic);
  check(line <= static_cast<int64_t>(lines.size()), "a diagnostic's line is past the end of the text", diagnostic);
  check(col <= static_cast<int64_t>(lines[line - 1].size()) + 1, "a diagnostic's column is past the end of its line",
        diagnostic);
  check(diagnostic.substr(pos).starts_with(kError) && diagnostic.size() > pos + kError.size(),
        "a diagnostic has no ': error: MESSAGE' after LINE:COL", diagnostic);
  return line;
}

// Checks every diagnostic of a rejection; returns the text without the lines
// they name.
std::string check_rejection(std::string_view text, const absl::Status& status) {
  const std::string_view message = status_text(status);
  check(!message.empty(), "a rejection has an empty message");
  const std::vector<std::string_view> lines = lines_of(text);
  std::vector<bool> named(lines.size(), false);
  for (std::string_view diagnostic : lines_of(message)) named[check_diagnostic(diagnostic, lines) - 1] = true;
  std::string rest;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!named[i]) rest.append(lines[i]).push_back('\n');
  }
  return rest;
}

void check_round_trip(const Graph& graph) {
  const absl::Status verified = verify(graph);
  check(verified.ok(), "an accepted graph does not verify", status_text(verified));
  const std::string printed = print_graph(graph);
  absl::StatusOr<Graph> again = parse_graph(printed, "fuzz.fj");
  check(again.ok(), "the printed graph does not parse", again.ok() ? printed : status_text(again.status()));
  const std::string reprinted = print_graph(*again);
  if (reprinted != printed) {
    fail("the printed graph prints differently after a round trip", "printed:\n" + printed + "reprinted:\n" + reprinted);
  }
  check(*again == graph, "the printed graph parses to a different graph", printed);
}

// What plan.h promises of any plan: its graph (the expanded user graph, made
// by a pass) verifies, and every node an output needs belongs to exactly one
// kernel; a node no output needs is computed by none (graph_warnings says so).
void check_plan(const FusionPlan& plan) {
  const absl::Status verified = verify(*plan.graph);
  check(verified.ok(), "a plan's graph does not verify", status_text(verified));
  const absl::Status runnable = verify_plan(plan);
  check(runnable.ok(), "a plan made by the passes is refused by verify_plan", status_text(runnable));
  std::vector<int> owners(plan.graph->num_nodes(), 0);
  for (const Kernel& k : plan.kernels) {
    for (int32_t id : k.nodes) {
      check(id >= 0 && id < plan.graph->num_nodes(), "a kernel holds a node that does not exist", k.name);
      ++owners[id];
    }
  }
  const std::vector<bool> live = plan.graph->reaches_outputs();
  for (int32_t id = 0; id < plan.graph->num_nodes(); ++id) {
    const bool input = plan.graph->node(id).op == Op::kInput;
    if (owners[id] != (input || !live[id] ? 0 : 1)) {
      fail("a node an output needs is in no kernel or in several, or an input or a node no output needs is in one",
           print_statement(*plan.graph, plan.graph->node(id)) + "\n" + describe(plan));
    }
  }
}

void check_sources(const FusionPlan& plan) {
  for (const CpuKernelSource& s : emit_cpu(plan)) {
    check(!s.name.empty() && s.source.find(s.name) != std::string::npos, "a CPU kernel's source lacks its entry point",
          s.name);
  }
  for (const CudaKernelSource& s : emit_cuda(plan)) {
    check(!s.name.empty() && s.source.find(s.name) != std::string::npos,
          "a CUDA kernel's source lacks its entry point", s.name);
  }
}

// Everything after parsing that needs no tensor data, as `fusejit plan` and
// `fusejit emit` run it.
void check_later_stages(const Graph& graph) {
  const DeviceSpec device = gpu_device("h100");
  FusionOptions short_rows;
  short_rows.persistent_row_limit = 4;
  for (const FusionOptions& options : {fusion_options_for(device), short_rows}) {
    // The second limit makes rows of a few elements take the re-reading
    // variant, which the small graphs a fuzzer finds would never reach.
    const FusionPlan unfused = make_unfused_plan(graph, options);
    const FusionPlan fused = make_fused_plan(graph, options);
    check_plan(unfused);
    check_plan(fused);
    const PlanComparison comparison = compare_plans(unfused, fused, device);
    // Formatted for what formatting exercises (no throw, no sanitizer
    // report); what the report says is the CLI tests' business.
    static_cast<void>(format_device(device) + format_plan_table(unfused, comparison.unfused) +
                      format_plan_table(fused, comparison.fused) + format_saving(comparison) +
                      comparison_json(device, unfused, fused, comparison).dump() + describe(unfused) +
                      describe(fused));
    check_sources(unfused);
    check_sources(fused);
    const bool has_row_kernel = std::any_of(fused.kernels.begin(), fused.kernels.end(),
                                            [](const Kernel& k) { return k.kind == KernelKind::kRow; });
    if (!has_row_kernel) break;  // the row limit changes nothing else
  }
}

// Most mutants are rejected, which would leave the stages after parsing
// nearly unexercised. So a rejected text is tried again without the lines its
// errors name, for a few rounds (dropping a line can leave later uses of its
// name undefined): this salvages a graph from many mutants, deterministically,
// for the cost of a few more parses.
constexpr int kSalvageRounds = 4;

void check_text(std::string_view text, int salvage_rounds) {
  absl::StatusOr<Graph> graph = parse_graph(text, "fuzz.fj");
  if (!graph.ok()) {
    const std::string rest = check_rejection(text, graph.status());
    if (salvage_rounds > 0 && rest.size() < text.size()) check_text(rest, salvage_rounds - 1);
    return;
  }
  check_round_trip(*graph);
  if (graph->num_nodes() > kMaxNodesForPlans) return;
  try {
    check_later_stages(*graph);
  } catch (const std::exception& e) {
    fail("a stage after parsing threw on a verified graph", e.what());
  }
}

}  // namespace
}  // namespace fusejit

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fusejit::check_text(std::string_view(reinterpret_cast<const char*>(data), size), fusejit::kSalvageRounds);
  return 0;
}
