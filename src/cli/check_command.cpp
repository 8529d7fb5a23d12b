#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "fusejit.h"

namespace fusejit::cli {

void register_check(CLI::App& app, int& exit_code) {
  auto file = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("check", "Parse and verify a .fj graph; print its canonical text");
  cmd->add_option("FILE", *file, kGraphFileHelp)->required();
  cmd->callback([file, &exit_code] {
    const std::optional<Graph> graph = load_graph(*file);
    if (!graph) {
      exit_code = 1;
      return;
    }
    fmt::print("{}", print_graph(*graph));
    exit_code = 0;
  });
}

}  // namespace fusejit::cli
