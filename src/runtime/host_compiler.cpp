#include "runtime/host_compiler.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cfenv>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string_view>

#include <absl/strings/ascii.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>
#include <fmt/format.h>

#include "cost/host_cpu.h"
#include "fusejit_version.h"
#include "ir/error.h"
#include "ir/messages.h"
#include "runtime/child_processes.h"
#include "runtime/compile_report.h"
#include "runtime/compile_temp_dir.h"
#include "runtime/compiler_macros.h"
#include "runtime/file_io.h"
#include "runtime/sha256.h"

extern char** environ;

namespace fusejit {
namespace {

constexpr const char* kObjectBlob = "so";
constexpr const char* kLogBlob = "compiler_log";

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

struct ProcessResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// The environment with TMPDIR set to `dir`: the compiler's own temporary
// files (GCC's assembly between cc1plus and as) then go to the private
// directory, and are removed with it however the compile ends.
std::vector<std::string> environment_with_tmpdir(const std::string& dir) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string_view(*e).starts_with("TMPDIR=")) continue;
    env.emplace_back(*e);
  }
  env.push_back("TMPDIR=" + dir);
  return env;
}

std::vector<char*> pointers_to(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Runs argv (looked up in PATH) without a shell, its output captured in a
// file of `dir`. An exec failure (no such program) is exit code 127. Where
// interrupts stop children (runtime/child_processes.h), it runs in a
// process group of its own, which an interrupt kills.
absl::StatusOr<ProcessResult> run_process(const std::vector<std::string>& argv, const std::string& dir) {
  const std::string log_path = dir + "/output.txt";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  const bool own_group = children_stop_on_interrupt();
  if (own_group) {
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attributes, 0);  // a new group, led by the child
  }
  std::vector<std::string> arg_strings = argv;
  std::vector<char*> args = pointers_to(arg_strings);
  std::vector<std::string> env_strings = environment_with_tmpdir(dir);
  std::vector<char*> env = pointers_to(env_strings);
  // Held from before the spawn: see RunningChildGroup.
  std::optional<RunningChildGroup> group;
  if (own_group) {
    group.emplace();
    end_if_interrupted();
  }
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &actions, &attributes, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  ProcessResult result;
  if (rc != 0) {
    if (group) group->exited();  // none started: ends the process if an interrupt came
    result.exit_code = 127;
    result.output = fmt::format("cannot run {}: {}", argv[0], std::strerror(rc));
    return result;
  }
  if (group) {
    group->started(pid);
    siginfo_t exit_info;
    while (waitid(P_PID, static_cast<id_t>(pid), &exit_info, WEXITED | WNOWAIT) < 0) {
      if (errno != EINTR) return absl::InternalError(fmt::format("waitid for {}: {}", argv[0], std::strerror(errno)));
    }
    group->exited();
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError(fmt::format("waitpid for {}: {}", argv[0], std::strerror(errno)));
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  absl::StatusOr<std::string> log = read_whole_file(log_path);
  if (log.ok()) result.output = *std::move(log);
  return result;
}

std::string cache_key(const HostCompiler& compiler, const std::string& source) {
  // The model and feature flags of this CPU, which -march=native compiles for.
  static const std::string cpu = host_cpu_identity();
  Sha256 hash;
  auto field = [&hash](std::string_view label, std::string_view value) {
    hash.update(fmt::format("{} {}\n", label, value.size())).update(value).update("\n");
  };
  field("target", "cpu");
  field("fusejit", FUSEJIT_VERSION);
  field("compiler", absl::StrJoin(compiler.command, " "));
  field("compiler_version", compiler.identity);
  field("cpu", cpu);
  for (const std::string& flag : host_compile_flags()) field("flag", flag);
  field("source", source);
  return hash.hex_digest();
}

// `cxx`: $CXX as read once by find_host_compiler, which caches by it.
std::vector<std::string> compiler_command(const std::optional<std::string>& cxx) {
  std::vector<std::string> command;
  if (cxx) {
    for (auto part : absl::StrSplit(*cxx, ' ', absl::SkipWhitespace())) command.emplace_back(part.data(), part.size());
  }
  if (command.empty()) command.push_back("c++");
  return command;
}

absl::StatusOr<HostCompiler> probe_compiler(const std::optional<std::string>& cxx) {
  HostCompiler compiler{compiler_command(cxx), ""};
  const std::string described =
      fmt::format("{}{}", absl::StrJoin(compiler.command, " "), cxx.has_value() ? " (from $CXX)" : "");
  absl::StatusOr<CompileTempDir> dir = CompileTempDir::make();
  if (!dir.ok()) return dir.status();
  std::vector<std::string> argv = compiler.command;
  argv.push_back("--version");
  absl::StatusOr<ProcessResult> r = run_process(argv, dir->path());
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) {
    // The first line of what it printed says what it is (or what went
    // wrong); the rest, a licence text say, would bury the advice.
    std::string first_line;
    for (absl::string_view line : absl::StrSplit(r->output, '\n')) {
      first_line = std::string(absl::StripAsciiWhitespace(line));
      if (!first_line.empty()) break;
    }
    return absl::UnavailableError(fmt::format(
        "no C++ compiler for the CPU backend: `{} --version` failed (exit {}{}); install g++ or set $CXX", described,
        r->exit_code, first_line.empty() ? "" : ", printing '" + first_line.substr(0, 200) + "'"));
  }
  compiler.identity = r->output.substr(0, r->output.find('\n'));
  return compiler;
}

struct LoadedObject {
  void* handle = nullptr;
  int fd = -1;  // the memfd it was loaded from, or -1
};

// dlopen() runs an object's constructors, and GCC links one into objects
// built with -ffast-math (crtfastmath.o) that sets flush-to-zero and
// denormals-are-zero for the calling thread: from then on the reference
// interpreter, and the caller's own code, would read every subnormal as 0.
// The floating-point environment is put back as it was after each load.
class KeepFloatingPointEnvironment {
 public:
  KeepFloatingPointEnvironment() { saved_ = fegetenv(&env_) == 0; }
  ~KeepFloatingPointEnvironment() {
    if (saved_) fesetenv(&env_);
  }
  KeepFloatingPointEnvironment(const KeepFloatingPointEnvironment&) = delete;
  KeepFloatingPointEnvironment& operator=(const KeepFloatingPointEnvironment&) = delete;

 private:
  std::fenv_t env_;
  bool saved_ = false;
};

// Loads a shared object from bytes: through an anonymous in-memory file
// when the kernel allows it, else through a file in a temporary directory.
// The memfd stays open while the object is loaded: dlopen() recognises an
// already loaded object by its path, and "/proc/self/fd/N" names another
// object as soon as N is reused.
absl::StatusOr<LoadedObject> load_object(const std::string& name, const std::string& object) {
  const KeepFloatingPointEnvironment keep;
  const int fd = memfd_create(("fusejit-" + name).c_str(), MFD_CLOEXEC);
  if (fd >= 0) {
    size_t done = 0;
    while (done < object.size()) {
      const ssize_t n = write(fd, object.data() + done, object.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    void* handle = nullptr;
    if (done == object.size()) handle = dlopen(fmt::format("/proc/self/fd/{}", fd).c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) return LoadedObject{handle, fd};
    close(fd);
  }
  absl::StatusOr<CompileTempDir> dir = CompileTempDir::make();
  if (!dir.ok()) return dir.status();
  // A fresh directory per object, so the path is new too.
  const std::string path = dir->path() + "/kernel.so";
  if (absl::Status s = replace_file(path, object); !s.ok()) return s;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    // dlerror() starts with the path, a temporary that is gone by the time
    // anyone reads the message.
    std::string_view why = dlerror();
    if (why.starts_with(path + ": ")) why.remove_prefix(path.size() + 2);
    return absl::InternalError(fmt::format("cannot load the compiled kernel '{}': {}", name, why));
  }
  return LoadedObject{handle, -1};
}

// The words of $FUSEJIT_CXXFLAGS, in order; empty where it is unset.
std::vector<std::string> extra_flags() {
  std::vector<std::string> flags;
  if (const char* extra = std::getenv("FUSEJIT_CXXFLAGS"); extra != nullptr) {
    for (auto part : absl::StrSplit(extra, ' ', absl::SkipWhitespace())) flags.emplace_back(part.data(), part.size());
  }
  return flags;
}

// The flags before $FUSEJIT_CXXFLAGS: what this CPU and fusejit ask for.
std::vector<std::string> native_compile_flags() {
  std::vector<std::string> flags = {
      "-std=c++17", "-O3", "-march=native", "-fno-math-errno", "-ffp-contract=off", "-fopenmp-simd", "-fPIC",
      "-shared",    "-w"};
  // On AVX-512 CPUs, vectorize with 512-bit registers. GCC and clang prefer
  // 256 bits when tuning for Intel's cores (a guard against the clock drop of
  // Skylake-era parts); on a Sapphire Rapids-class Xeon the fused demo
  // kernel ran 1.2x faster with 512 (bench/results/2026-12-01-cpu-intel.md),
  // and GCC already chose 512 for AMD's AVX-512 cores. fj_vec (fj_math.h)
  // assumes this width wherever AVX-512F is on.
  if (__builtin_cpu_supports("avx512f")) flags.push_back("-mprefer-vector-width=512");
  return flags;
}

// The compiler's predefined macros with `flags`.
absl::StatusOr<std::map<std::string, std::string>> predefined_macros(const HostCompiler& compiler,
                                                                     const std::vector<std::string>& flags) {
  absl::StatusOr<CompileTempDir> dir = CompileTempDir::make();
  if (!dir.ok()) return dir.status();
  std::vector<std::string> argv = compiler.command;
  for (const std::string& flag : flags) {
    if (flag != "-shared") argv.push_back(flag);
  }
  argv.insert(argv.end(), {"-dM", "-E", "-x", "c++", "/dev/null"});
  absl::StatusOr<ProcessResult> r = run_process(argv, dir->path());
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) {
    return absl::InvalidArgumentError(fmt::format("{} fails (exit code {}): {}", absl::StrJoin(argv, " "), r->exit_code,
                                                  std::string(absl::StripAsciiWhitespace(r->output))));
  }
  return parse_macro_dump(r->output);
}

// Whether kernels compiled with $FUSEJIT_CXXFLAGS can run here: an error
// for flags that enable an instruction set this CPU lacks (the kernel would
// die of SIGILL, cached or not), a warning (once) for flags that relax
// floating-point semantics. Free where the variable is unset; otherwise
// the compiler's macros are read once per compiler and value.
absl::Status check_extra_flags(const HostCompiler& compiler) {
  const std::vector<std::string> extra = extra_flags();
  if (extra.empty()) return absl::OkStatus();
  static std::mutex mutex;
  static std::map<std::vector<std::string>, absl::Status> checked;
  std::vector<std::string> key = compiler.command;
  key.insert(key.end(), extra.begin(), extra.end());
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = checked.find(key); it != checked.end()) return it->second;
  const std::string quoted = absl::StrJoin(extra, " ");
  auto check = [&]() -> absl::Status {
    std::vector<std::string> flags = native_compile_flags();
    absl::StatusOr<std::map<std::string, std::string>> without = predefined_macros(compiler, flags);
    if (!without.ok()) return without.status();
    flags.insert(flags.end(), extra.begin(), extra.end());
    absl::StatusOr<std::map<std::string, std::string>> with = predefined_macros(compiler, flags);
    if (!with.ok()) {
      return absl::InvalidArgumentError(fmt::format("FUSEJIT_CXXFLAGS ('{}') is not accepted by the host compiler: {}",
                                                    quoted, status_text(with.status())));
    }
    if (const std::vector<std::string> beyond = instruction_sets_beyond(*without, *with); !beyond.empty()) {
      return absl::FailedPreconditionError(fmt::format(
          "FUSEJIT_CXXFLAGS ('{}') enables instruction sets this CPU lacks (the compiler defines {}): kernels "
          "compiled with it would stop the program with an illegal instruction; remove those flags",
          quoted, absl::StrJoin(beyond, ", ")));
    }
    if (const std::vector<std::string> relaxed = relaxed_float_semantics(*with); !relaxed.empty()) {
      warn(
          fmt::format("FUSEJIT_CXXFLAGS ('{}') relaxes floating-point semantics ({}): kernels may treat NaN, "
                      "infinity, signed zeros and rounding otherwise than the reference, and fail its checks",
                      quoted, absl::StrJoin(relaxed, ", ")));
    }
    return absl::OkStatus();
  };
  return checked.emplace(std::move(key), check()).first->second;
}

}  // namespace

std::vector<std::string> host_compile_flags() {
  // $FUSEJIT_CXXFLAGS comes last, so that it can narrow what -march=native
  // enables ("-mno-avx512f": kernels for an AVX2 machine sharing the cache,
  // or the AVX2 paths tested on an AVX-512 one). Read at every compile; the
  // flags are part of every cache key.
  std::vector<std::string> flags = native_compile_flags();
  for (std::string& flag : extra_flags()) flags.push_back(std::move(flag));
  return flags;
}

absl::StatusOr<HostCompiler> find_host_compiler() {
  // Probed once per value of $CXX in a process, failures included: every
  // kernel compiled does not pay a `--version`, and a program that found
  // no compiler can set $CXX and try again.
  static std::mutex mutex;
  static std::map<std::optional<std::string>, absl::StatusOr<HostCompiler>> probed;
  const char* cxx = std::getenv("CXX");
  const std::optional<std::string> key = cxx != nullptr ? std::optional<std::string>(cxx) : std::nullopt;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = probed.find(key);
  if (it == probed.end()) it = probed.emplace(key, probe_compiler(key)).first;
  return it->second;
}

HostModule::~HostModule() {
  if (handle_ != nullptr) dlclose(handle_);
  if (fd_ >= 0) close(fd_);
}

HostModule::Entry HostModule::entry(const std::string& kernel) const {
  for (const auto& [name, entry] : entries_) {
    if (name == kernel) return entry;
  }
  return nullptr;
}

absl::StatusOr<std::unique_ptr<HostModule>> compile_host_module(const std::string& name, const std::string& source,
                                                                const std::vector<std::string>& entries,
                                                                KernelCache* cache) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<HostCompiler> compiler = find_host_compiler();
  if (!compiler.ok()) return compiler.status();
  if (absl::Status s = check_extra_flags(*compiler); !s.ok()) return s;
  const std::string key = cache_key(*compiler, source);
  // A module with nothing loaded yet; dropping one unloads what it holds.
  auto empty_module = [&] {
    std::unique_ptr<HostModule> m(new HostModule());
    m->name_ = name;
    m->cache_key_ = key;
    return m;
  };
  std::unique_ptr<HostModule> module = empty_module();
  dump_files_if_requested(name, {{".cpp", &source}});

  // Loads the object into the module and finds its entry points.
  auto load = [&](const std::string& object) -> absl::Status {
    absl::StatusOr<LoadedObject> loaded = load_object(name, object);
    if (!loaded.ok()) return loaded.status();
    module->handle_ = loaded->handle;
    module->fd_ = loaded->fd;
    for (const std::string& entry : entries) {
      auto address = reinterpret_cast<HostModule::Entry>(dlsym(module->handle_, entry.c_str()));
      if (address == nullptr) {
        return absl::InternalError(fmt::format("the compiled module '{}' has no entry point '{}'", name, entry));
      }
      module->entries_.emplace_back(entry, address);
    }
    return absl::OkStatus();
  };

  if (cache != nullptr) {
    std::optional<CacheEntry> entry = cache->lookup(module->cache_key_);
    if (entry && entry->blobs.contains(kObjectBlob)) {
      // An entry whose digest is right can still hold an object this
      // process cannot load (a cache shared with a machine of another
      // libc or architecture): compiled again, and replaced once the new
      // object loads, rather than failing every later run. Where the new
      // one does not load either (the machine's fault: no memory, a
      // noexec $TMPDIR), the entry is left as it was.
      if (absl::Status s = load(entry->blobs.at(kObjectBlob)); s.ok()) {
        module->cache_hit_ = true;
        module->compile_ms_ = ms_since(start);
        return module;
      } else {
        warn(fmt::format("the cached kernel '{}' in {} cannot be used ({}); compiling it again", name,
                         cache->entry_path(module->cache_key_), status_text(s)));
      }
      module = empty_module();
    }
  }
  absl::StatusOr<CompileTempDir> dir = CompileTempDir::make();
  if (!dir.ok()) return dir.status();
  const std::string stem = kernel_file_stem(name);
  const std::string src_path = dir->path() + "/" + stem + ".cpp";
  const std::string obj_path = dir->path() + "/" + stem + ".so";
  if (absl::Status s = replace_file(src_path, source); !s.ok()) return s;
  std::vector<std::string> argv = compiler->command;
  for (const std::string& flag : host_compile_flags()) argv.push_back(flag);
  argv.insert(argv.end(), {"-o", obj_path, src_path});
  absl::StatusOr<ProcessResult> r = run_process(argv, dir->path());
  if (!r.ok()) return r.status();
  absl::StatusOr<std::string> built =
      r->exit_code == 0 ? read_whole_file(obj_path) : absl::StatusOr<std::string>(std::string());
  if (r->exit_code != 0 || !built.ok()) {
    const std::string file_name = fmt::format("{}-{}.txt", stem, module->cache_key_.substr(0, 12));
    return compile_failure_status(
        file_name, format_compile_failure({
                       .compiler = fmt::format("the host compiler ({})", absl::StrJoin(compiler->command, " ")),
                       .extension = ".cpp",
                       .name = name,
                       .arch = "this CPU (-march=native)",
                       .error = r->exit_code != 0 ? fmt::format("exit code {}", r->exit_code)
                                                  : std::string(status_text(built.status())),
                       .options = host_compile_flags(),
                       .log = r->output,
                       .source = source,
                   }));
  }
  if (absl::Status s = load(*built); !s.ok()) return s;
  // Stored once it loads: an object that does not is not kept for later runs.
  if (cache != nullptr)
    cache->store(module->cache_key_, CacheEntry{.blobs = {{kObjectBlob, *built}, {kLogBlob, r->output}}});
  module->compile_ms_ = ms_since(start);
  return module;
}

}  // namespace fusejit
