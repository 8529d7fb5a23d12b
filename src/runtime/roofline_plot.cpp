#include "runtime/roofline_plot.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string_view>

#include <sys/statvfs.h>
#include <unistd.h>

#include <fmt/format.h>

#include "ir/error.h"
#include "ir/link_target.h"
#include "runtime/file_io.h"

namespace fusejit {
namespace {

// A string literal for gnuplot, taken as written: single-quoted, with a
// quote doubled. gnuplot runs a `command` in backquotes inside a
// double-quoted string (a chart named r`touch x`.svg ran touch), and
// expands backslash escapes there; in single quotes it does neither.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// A kernel's name as a field of a data block, where gnuplot takes a word
// as it is and strips only double quotes (a single-quoted name was labelled
// 'k0_add', quotes and all). Kernel names are C identifiers, the generated
// functions' names; anything else becomes '_', so that a label is one
// field and nothing in it is read as gnuplot syntax.
std::string data_label(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  }
  return out.empty() ? "_" : out;
}

}  // namespace

std::string roofline_gnuplot_script(const BenchResult& r, const std::string& path) {
  const bool svg = path.ends_with(".svg");
  const double peak = r.device.peak_f32_tflops * 1e3;  // GFLOP/s
  const double bw = r.ceiling_gbps;
  std::string s;
  s += svg ? "set terminal svg size 1000,650 dynamic noenhanced font 'sans,11'\n"
           : "set terminal pngcairo size 1000,650 noenhanced font 'sans,10'\n";
  s += fmt::format("set output {}\n", quoted(path));
  s += fmt::format("set title {}\n",
                   quoted(fmt::format("Roofline: {} ({})", r.backend, r.description.substr(0, 80))));
  s += "set logscale xy\nset grid\nset key top left\n";
  s += "set xlabel 'arithmetic intensity (FLOP/byte, cost model bytes)'\nset ylabel 'achieved GFLOP/s'\n";
  // The x range spans the kernels and the ridge point, with a margin.
  double lo = 1e30, hi = 0;
  for (const PlanBench* p : {&r.unfused, &r.fused}) {
    for (const KernelBench& k : p->kernels) {
      if (k.intensity > 0) {
        lo = std::min(lo, k.intensity);
        hi = std::max(hi, k.intensity);
      }
    }
  }
  const double ridge = bw > 0 ? peak / bw : 1;
  lo = std::min(lo, ridge) / 4;
  hi = std::max(hi, ridge) * 4;
  s += fmt::format("set xrange [{}:{}]\n", lo, hi);
  s += fmt::format("roof(x) = x * {} < {} ? x * {} : {}\n", bw, peak, bw, peak);
  s += "$unfused << EOD\n";
  for (const KernelBench& k : r.unfused.kernels)
    s += fmt::format("{} {} {}\n", k.intensity, k.achieved_gflops, data_label(k.name));
  s += "EOD\n$fused << EOD\n";
  for (const KernelBench& k : r.fused.kernels)
    s += fmt::format("{} {} {}\n", k.intensity, k.achieved_gflops, data_label(k.name));
  s += "EOD\n";
  // A kernel's own compute roof is below the FP32 peak: on a CPU its op
  // classes set it (erf and Philox run far below the FMA peak), on a GPU the
  // instructions its FLOPs cost to issue. The fused kernel's is drawn
  // dashed where it is below the solid roof.
  double mix_roof = 0;
  for (const KernelBench& k : r.fused.kernels) mix_roof = std::max(mix_roof, k.compute_roof_gflops);
  const bool draw_mix = mix_roof > 0 && mix_roof < 0.95 * peak;
  s += fmt::format("mix(x) = x * {} < {} ? x * {} : {}\n", bw, mix_roof, bw, mix_roof);
  s += fmt::format(
      "plot roof(x) with lines lw 2 lc rgb '#444444' title {}, \\\n{}"
      "  $unfused using 1:2 with points pt 7 ps 1.5 lc rgb '#d62728' title 'unfused kernels', \\\n"
      "  $unfused using 1:2:3 with labels offset 1,-0.8 left font ',9' tc rgb '#d62728' notitle, \\\n"
      "  $fused using 1:2 with points pt 5 ps 1.5 lc rgb '#1f77b4' title 'fused kernels', \\\n"
      "  $fused using 1:2:3 with labels offset 1,0.8 left font ',9' tc rgb '#1f77b4' notitle\n",
      quoted(fmt::format("roof: {:.1f} GB/s measured copy, {:.0f} GFLOP/s FP32 peak", bw, peak)),
      draw_mix ? fmt::format("  mix(x) with lines lw 1 dt 2 lc rgb '#444444' title {}, \\\n",
                             quoted(fmt::format("compute roof of the fused kernel's {}: {:.1f} GFLOP/s",
                                                r.device.models_instructions() ? "instruction issue" : "op mix",
                                                mix_roof)))
               : std::string());
  return s;
}

namespace {

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string dirs = path;
  for (size_t start = 0; start <= dirs.size();) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::filesystem::path candidate =
        std::filesystem::path(end > start ? dirs.substr(start, end - start) : ".") / program;
    if (access(candidate.c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

// Whether gnuplot's drawing at `path` is whole: an SVG closed by </svg>, a
// PNG ending in its IEND chunk. gnuplot exits 0 when its writes fail: on
// a full disk it left the first 4096 bytes of an SVG, or none.
bool drawing_is_complete(const std::string& path, bool svg) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.eof() && in.fail()) return false;
  if (svg) {
    while (!bytes.empty() && std::isspace(static_cast<unsigned char>(bytes.back()))) bytes.pop_back();
    return bytes.ends_with("</svg>");
  }
  static constexpr char kPngEnd[] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', '\xae', '\x42', '\x60', '\x82'};
  return bytes.starts_with("\x89PNG") && bytes.ends_with(std::string_view(kPngEnd, sizeof kPngEnd));
}

// Why a drawing may be cut short: "; the file system holding it has 12 KiB
// free" where the file system of `folder` (the chart's) has under a MiB
// left (a chart is tens of KiB), else nothing.
std::string full_disk_note(const std::string& folder) {
  struct statvfs fs {};
  if (statvfs(folder.c_str(), &fs) != 0) return "";
  const uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  if (free_bytes >= (uint64_t{1} << 20)) return "";
  return fmt::format("; the file system holding it has {} KiB free", free_bytes >> 10);
}

}  // namespace

absl::Status check_roofline_plot_target(const std::string& path, bool overwrite) {
  // gnuplot reads the name (of the file a link points to, which it writes
  // beside) from a quoted string in its script, which a newline would end:
  // control characters are refused here, before the benchmark runs, rather
  // than found as a garbled gnuplot error after it.
  auto has_control = [](const std::string& name) {
    return std::any_of(name.begin(), name.end(),
                       [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
  };
  // A link is written through (write_roofline_plot): the chart lands where it points.
  const std::string target = link_target(path);
  if (has_control(path) || has_control(target)) {
    return absl::InvalidArgumentError(
        "--plot: the chart's file name (or the name its link points to) holds a control character, a newline "
        "or a tab, say; gnuplot takes the name from a line of its script, so choose another name");
  }
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (std::filesystem::exists(status)) {
    if (!std::filesystem::is_regular_file(status)) {
      return absl::AlreadyExistsError(fmt::format("--plot {} exists and is not a file", path));
    }
    if (!overwrite) {
      return absl::AlreadyExistsError(fmt::format("--plot {} already exists; pass --overwrite to replace it", path));
    }
  }
  const std::filesystem::path parent = std::filesystem::path(target).parent_path();
  if (!parent.empty() && !std::filesystem::is_directory(parent, ec)) {
    // A file on the way (a/b.svg/c/x.svg) is named as such, not as missing.
    for (std::filesystem::path p = parent; !p.empty() && p != p.parent_path(); p = p.parent_path()) {
      if (std::filesystem::exists(p, ec)) {
        if (!std::filesystem::is_directory(p, ec)) {
          return absl::FailedPreconditionError(fmt::format("--plot {}: {} is not a folder", path, p.string()));
        }
        break;
      }
    }
    return absl::NotFoundError(fmt::format("--plot {}: the folder {} does not exist", path, parent.string()));
  }
  if (absl::Status s = check_can_create_files(parent.empty() ? "." : parent.string()); !s.ok()) {
    return absl::Status(s.code(), fmt::format("--plot {}: {}", path, std::string(s.message())));
  }
  if (!on_path("gnuplot")) {
    return absl::UnavailableError(
        fmt::format("--plot {}: drawing the chart needs gnuplot, which is not on PATH (scripts/setup.sh installs it)",
                    path));
  }
  return absl::OkStatus();
}

absl::Status write_roofline_plot(const BenchResult& r, const std::string& path) {
  const std::string extension = path.ends_with(".svg") ? ".svg" : path.ends_with(".png") ? ".png" : "";
  if (extension.empty()) {
    return absl::InvalidArgumentError(fmt::format("--plot {}: the file must end in .svg or .png", path));
  }
  // gnuplot draws into a temporary file beside the chart, renamed over it
  // only once drawn: a failed drawing leaves what was there untouched. A
  // link stays a link: the file it points to is replaced.
  const std::string target = link_target(path);
  const std::string drawing = temporary_path_beside(target, extension);
  const std::string script_path = temporary_path_beside(target, ".gnuplot");
  if (absl::Status s = write_whole_file(script_path, roofline_gnuplot_script(r, drawing)); !s.ok()) {
    std::remove(script_path.c_str());
    return absl::Status(s.code(), fmt::format("--plot {}: cannot write the chart's gnuplot script beside it: {}", path,
                                              std::string(s.message())));
  }
  std::string shell_quoted = "'";
  for (char c : script_path) shell_quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  shell_quoted += "'";
  const std::string command = fmt::format("gnuplot {} 2>&1", shell_quoted);
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  int status = -1;
  if (pipe != nullptr) {
    char buffer[512];
    while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
    status = pclose(pipe);
  }
  std::error_code ec;
  std::filesystem::remove(script_path, ec);
  absl::Status result = absl::OkStatus();
  if (pipe == nullptr) {
    result = absl::UnavailableError("cannot run gnuplot");
  } else if (status != 0) {
    result = WIFEXITED(status) && WEXITSTATUS(status) == 127
                 ? absl::UnavailableError("--plot needs gnuplot, which is not installed (scripts/setup.sh installs it)")
                 : absl::InternalError(fmt::format("gnuplot failed to draw {}: {}", path, output));
  } else if (!drawing_is_complete(drawing, extension == ".svg")) {
    // Each query its own error code: they were once arguments of one call
    // sharing one, read in an unspecified order (a missing drawing printed
    // as 18446744073709551615 bytes).
    std::error_code size_error, exists_error;
    const uintmax_t size = std::filesystem::file_size(drawing, size_error);
    const bool target_exists = std::filesystem::exists(target, exists_error);
    const std::filesystem::path folder = std::filesystem::path(target).parent_path();
    result =
        absl::InternalError(fmt::format("--plot {}: gnuplot's chart came out {}{}; {}", path,
                                        size_error ? std::string("missing (gnuplot wrote no file)")
                                                   : fmt::format("incomplete ({} bytes, without the end of {} file)",
                                                                 size, extension == ".svg" ? "an SVG" : "a PNG"),
                                        full_disk_note(folder.empty() ? "." : folder.string()),
                                        target_exists ? "the file there was left as it was" : "nothing was written"));
  } else if (is_special_file(target)) {  // checked before the run too (check_roofline_plot_target)
    result = absl::FailedPreconditionError(
        fmt::format("--plot {}: is not a regular file (a device, a FIFO or a socket); it was left as it is", path));
  } else if (std::rename(drawing.c_str(), target.c_str()) != 0) {
    result =
        absl::InternalError(fmt::format("--plot {}: cannot replace it with the chart: {}", path, std::strerror(errno)));
  }
  if (!result.ok()) std::filesystem::remove(drawing, ec);
  return result;
}

}  // namespace fusejit
