#include "runtime/compile_report.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>
#include <regex>

#include <absl/strings/str_join.h>
#include <fmt/format.h>

#include "cost/device.h"
#include "ir/error.h"
#include "ir/messages.h"
#include "runtime/file_io.h"

namespace fusejit {

namespace {

// The source's lines, without their newlines.
std::vector<std::string_view> split_lines(std::string_view source) {
  std::vector<std::string_view> lines;
  for (size_t start = 0; start < source.size();) {
    const size_t end = std::min(source.find('\n', start), source.size());
    lines.push_back(source.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// "  12 | text\n" for line i (0-based) of `lines`.
std::string numbered_line(const std::vector<std::string_view>& lines, int i) {
  return fmt::format("{:>4} | {}\n", i + 1, lines[static_cast<size_t>(i)]);
}

}  // namespace

std::string number_lines(std::string_view source) {
  const std::vector<std::string_view> lines = split_lines(source);
  std::string out;
  for (int i = 0; i < static_cast<int>(lines.size()); ++i) out += numbered_line(lines, i);
  return out;
}

std::string cited_source_lines(std::string_view log, std::string_view source) {
  const std::vector<std::string_view> lines = split_lines(source);
  const int count = static_cast<int>(lines.size());
  std::vector<bool> shown(lines.size(), false);
  static const std::regex kCitation(R"(\.(?:cu|cpp)(?:\((\d+)\)|:(\d+):))");
  const std::string text(log);
  bool any = false;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kCitation); it != std::sregex_iterator(); ++it) {
    const std::string digits = (*it)[1].matched ? (*it)[1].str() : (*it)[2].str();
    if (digits.size() > 9) continue;
    const int line = std::stoi(digits);  // 1-based
    if (line < 1 || line > count) continue;
    any = true;
    for (int l = std::max(1, line - kCitedContext); l <= std::min(count, line + kCitedContext); ++l) shown[l - 1] = true;
  }
  if (!any) return {};
  std::string out;
  for (int i = 0; i < count; ++i) {
    if (!shown[i]) continue;
    if (i > 0 && !shown[i - 1] && !out.empty()) out += "     ...\n";
    out += numbered_line(lines, i);
  }
  return out;
}

CompileFailureText format_compile_failure(const CompileFailure& f) {
  const std::string head = fmt::format("{0} failed to compile kernel '{1}' for {2}: {3}\n"
                                       "options: {4}\n"
                                       "{0} log:\n{5}\n",
                                       f.compiler, f.name, f.arch, f.error, absl::StrJoin(f.options, " "), f.log);
  const std::string file = kernel_file_stem(f.name) + f.extension;
  const std::string cited = cited_source_lines(f.log, f.source);
  return {
      .brief = head + (cited.empty() ? fmt::format("source {}: the log cites none of its lines\n", file)
                                     : fmt::format("source {}, the lines the log cites:\n{}", file, cited)),
      .full = head + fmt::format("source {}:\n{}", file, number_lines(f.source)),
  };
}

absl::Status compile_failure_status(const std::string& file_name, const CompileFailureText& text) {
  absl::StatusOr<std::string> path = write_compile_report(file_name, text.full);
  if (!path.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("{}(could not write a report: {})", text.full, status_text(path.status())));
  }
  return absl::InvalidArgumentError(fmt::format("{}report, with the whole source: {}", text.brief, *path));
}

absl::StatusOr<std::string> write_compile_report(const std::string& file_name, std::string_view text) {
  std::vector<std::filesystem::path> dirs = {std::filesystem::path(cache_directory()) / "errors"};
  const absl::StatusOr<std::string> temp = temporary_directory();
  if (temp.ok()) dirs.push_back(std::filesystem::path(*temp) / "fusejit-errors");
  std::vector<std::string> failures;
  for (const std::filesystem::path& dir : dirs) {
    const std::string path = (dir / file_name).string();
    absl::Status s = ensure_directory(dir.string());
    if (s.ok()) s = replace_file(path, text);
    if (s.ok()) return path;
    failures.emplace_back(status_text(s));
  }
  if (!temp.ok()) failures.emplace_back(status_text(temp.status()));
  return absl::UnavailableError(absl::StrJoin(failures, "; "));
}

namespace {

// How far a dump numbers a name (NAME-2 ... NAME-N).
constexpr int kMaxDumpNumber = 1000;

// Whether `path` can hold `contents` without replacing anything: it does not
// exist (free), or holds exactly that (the same kernel dumped again).
bool free_or_same(const std::string& path, const std::string& contents, bool free_counts = true) {
  absl::StatusOr<std::string> existing = read_whole_file(path);
  if (existing.ok()) return *existing == contents;
  return free_counts && existing.status().code() == absl::StatusCode::kNotFound;
}

// The files this process has dumped: a name taken by one of them (the
// unfused and the fused plan of one graph both have a k0_gelu) is numbered
// without a warning, which is for files that were there before.
class DumpedFiles {
 public:
  void add(const std::string& path) {
    std::lock_guard<std::mutex> lock(mutex_);
    paths_.insert(path);
  }
  bool contains(const std::string& path) {
    std::lock_guard<std::mutex> lock(mutex_);
    return paths_.contains(path);
  }

 private:
  std::mutex mutex_;
  std::set<std::string> paths_;
};

DumpedFiles& dumped_files() {
  static DumpedFiles* files = new DumpedFiles;  // never destroyed: dumps may come from threads at exit
  return *files;
}

// Writes each (suffix, contents) as base + suffix; AlreadyExists whose
// message is the path of the first that holds something else (a file of
// the user's, or another kernel of the same name), possibly created by
// another thread meanwhile.
absl::Status dump_under(const std::string& base, const std::vector<std::pair<std::string, const std::string*>>& files) {
  for (const auto& [suffix, contents] : files) {
    if (!free_or_same(base + suffix, *contents)) return absl::AlreadyExistsError(base + suffix);
  }
  for (const auto& [suffix, contents] : files) {
    absl::Status s = create_file(base + suffix, *contents);
    if (s.code() == absl::StatusCode::kAlreadyExists) {
      // Created meanwhile (another thread dumping the same kernel, or a
      // dangling link): done only if it holds this content.
      if (free_or_same(base + suffix, *contents, /*free_counts=*/false)) continue;
      return absl::AlreadyExistsError(base + suffix);
    }
    if (!s.ok()) return s;
    dumped_files().add(base + suffix);
  }
  return absl::OkStatus();
}

}  // namespace

void dump_files_if_requested(const std::string& name,
                             const std::vector<std::pair<std::string, const std::string*>>& files) {
  const char* dir = std::getenv("FUSEJIT_DUMP");
  if (dir == nullptr || *dir == '\0') return;
  const std::string base = (std::filesystem::path(dir) / kernel_file_stem(name)).string();
  absl::Status s = ensure_directory(dir);
  // Nothing in DIR is replaced: where NAME.cu (or .ptx, ...) holds other
  // content, from an earlier run or another graph's kernel of the same
  // name, this kernel goes to NAME-2.cu, then -3, ...
  int number = 1;
  bool kept_older_files = false;  // a name was taken by a file this process did not write
  while (s.ok()) {
    s = dump_under(number == 1 ? base : fmt::format("{}-{}", base, number), files);
    if (s.code() != absl::StatusCode::kAlreadyExists) break;
    kept_older_files = kept_older_files || !dumped_files().contains(std::string(s.message()));
    if (number == kMaxDumpNumber) {
      s = absl::AlreadyExistsError(fmt::format("{} holds files named {}, {}-2 ... {}-{}, all with other content", dir,
                                               kernel_file_stem(name), kernel_file_stem(name),
                                               kernel_file_stem(name), kMaxDumpNumber));
      break;
    }
    ++number;
    s = absl::OkStatus();
  }
  if (!s.ok()) {
    warn(fmt::format("FUSEJIT_DUMP: cannot dump kernel '{}': {}", name, status_text(s)));
  } else if (kept_older_files) {
    static std::once_flag once;
    std::call_once(once, [&] {
      warn(fmt::format("FUSEJIT_DUMP: {} already holds files named like this program's kernels, with other content; "
                       "they are kept, and this program's kernels of those names go to NAME-2, NAME-3, ...",
                       dir));
    });
  }
}

void dump_kernel_if_requested(const CompiledKernel& kernel) {
  // A PTX-only compile (compute_XX) has no ptxas report, and NVRTC often
  // nothing else to say: no empty .ptxas.txt then, as `fusejit emit`.
  if (kernel.log.empty()) {
    dump_files_if_requested(kernel.name, {{".cu", &kernel.source}, {".ptx", &kernel.ptx}});
  } else {
    dump_files_if_requested(kernel.name, {{".cu", &kernel.source}, {".ptx", &kernel.ptx}, {".ptxas.txt", &kernel.log}});
  }
}

std::string kernel_file_stem(std::string_view name) {
  if (name.empty()) return "kernel";
  std::string stem(name);
  for (char& c : stem) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    if (!ok) c = '_';
  }
  return stem;
}

}  // namespace fusejit
