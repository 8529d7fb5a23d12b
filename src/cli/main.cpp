// fusejit: check, plan, emit, run and benchmark fused kernels for graphs of
// memory-bound tensor ops.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string_view>
#include <system_error>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "cli/commands.h"
#include "fusejit.h"
#include "ir/messages.h"
#include "runtime/child_processes.h"

namespace {

int run_command_line(int argc, char** argv) {
  CLI::App app{"fusejit: a kernel-fusion code generator and JIT for memory-bound tensor ops"};
  app.name("fusejit");
  app.set_version_flag("--version", fmt::format("fusejit {} (CUDA toolkit at build time: {})", FUSEJIT_VERSION,
                                                FUSEJIT_HAVE_CUDA_BUILD ? "ON" : "OFF"));
  app.require_subcommand(1);
  int exit_code = 0;
  fusejit::cli::register_check(app, exit_code);
  fusejit::cli::register_run(app, exit_code);
  fusejit::cli::register_plan(app, exit_code);
  fusejit::cli::register_devices(app, exit_code);
  fusejit::cli::register_emit(app, exit_code);
  fusejit::cli::register_bench(app, exit_code);
  fusejit::cli::register_demo(app, exit_code);
  fusejit::cli::register_fuzz(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Usage errors (unknown flag, missing file argument) exit with 2, so that
    // scripts can tell them from a graph that failed to check (1).
    fusejit::eprint("fusejit: error: {}\n", fusejit::cli::usage_error_text(app, e, argc, argv));
    return 2;
  } catch (const std::bad_alloc&) {
    fusejit::eprint("fusejit: error: out of host memory: an allocation failed\n");
    return 1;
  } catch (const std::system_error& e) {
    // fmt::print throws "cannot write to file: ..." when stdout is full
    // (`> /dev/full`); said as every other command says it.
    if (std::ferror(stdout) != 0 && std::string_view(e.what()).starts_with("cannot write to file")) {
      fusejit::eprint("fusejit: error: cannot write the standard output: {}\n", e.code().message());
    } else {
      fusejit::eprint("fusejit: error: {}\n", e.what());
    }
    return 1;
  } catch (const std::exception& e) {
    fusejit::eprint("fusejit: error: {}\n", e.what());
    return 1;
  }
  return exit_code;
}

// What stdio still buffers is written at exit, where a failure (a full
// disk, a file system gone) would pass without a word and exit 0: a script
// running `fusejit bench --json > r.json` would get a truncated file. So the
// buffer is flushed here, and a failed write is an error.
int flush_standard_output(int exit_code) {
  errno = 0;
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) != 0;
  // A command that failed has said why (a write that failed in fmt::print
  // threw, and run_command_line said "cannot write the standard output");
  // exit 0 is what must not stand.
  if (failed && exit_code == 0) {
    const int err = errno;
    fusejit::eprint("fusejit: error: cannot write the standard output: {}\n",
                    err != 0 ? std::strerror(err) : "write error");
    return 1;
  }
  return exit_code;
}

// A standard stream the caller closed (`2>&-`) leaves its descriptor free
// for the next file opened, and a warning meant for stderr would then be
// written into a kernel-cache entry or a --save file. /dev/null takes it:
// writable for stderr (diagnostics the caller chose not to see), but
// read-only for stdout, so that writing the output fails and the command
// exits 1 (flush_standard_output) rather than 0 with its output lost, and
// write-only for stdin, so that reading a graph from it (`check - <&-`)
// fails rather than reading an empty graph.
void reserve_standard_descriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int opened = open("/dev/null", fd == 1 ? O_RDONLY : O_WRONLY);
    if (opened >= 0 && opened != fd) {
      dup2(opened, fd);
      close(opened);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  reserve_standard_descriptors();
  fusejit::stop_children_on_interrupt();
  return flush_standard_output(run_command_line(argc, argv));
}
