// The message for a command line CLI11 rejected (declared in commands.h),
// with the command or option the user most likely meant.
#include <algorithm>
#include <cctype>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include <absl/strings/str_join.h>
#include <fmt/format.h>

#include "cli/commands.h"
#include "ir/closest_name.h"

namespace fusejit::cli {
namespace {

std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates) {
  const std::optional<std::string> best = closest_name(name, candidates);
  return best ? fmt::format(" (did you mean '{}'?)", *best) : "";
}

// CLI11's messages start as sentences ("A subcommand is required"); after
// "fusejit: error: " they read as the rest of ours do. A leading name in
// capitals ("FILE is required") stays as it is.
std::string lowercase_start(std::string text) {
  if (text.size() > 1 && std::isupper(static_cast<unsigned char>(text[0])) &&
      !std::isupper(static_cast<unsigned char>(text[1]))) {
    text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  }
  return text;
}

// CLI11 says "--target: At Most 1 required but received 2" of an option
// given twice; ours names what happened.
std::string given_more_than_once(std::string text) {
  static const std::regex kTwice(R"(^(\S+): At Most 1 required but received (\d+)$)");
  std::smatch m;
  if (std::regex_match(text, m, kTwice))
    return fmt::format("{} was given {} times; give it once", m[1].str(), m[2].str());
  return lowercase_start(std::move(text));
}

// CLI11 lists the arguments it did not expect last first ("c b a" for
// "a b c"); in the order the user typed them they are easier to find.
std::string unexpected_in_order(const CLI::App& command, const CLI::ParseError& error) {
  const std::vector<std::string> extras = command.remaining();
  if (dynamic_cast<const CLI::ExtrasError*>(&error) == nullptr || extras.empty()) {
    return given_more_than_once(error.what());
  }
  return fmt::format("the following argument{} not expected: {}", extras.size() > 1 ? "s were" : " was",
                     absl::StrJoin(extras, " "));
}

}  // namespace

std::string usage_error_text(const CLI::App& app, const CLI::ParseError& error, int argc, char** argv) {
  std::vector<std::string> commands;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    commands.push_back(sub->get_name());
  }
  // Before the command only fusejit's own options (--help, --version) may
  // come: `fusejit --seed 3 run g.fj` would otherwise be "unknown command
  // '3'", and `fusejit --bogus` "a subcommand is required".
  std::vector<std::string> own_options;
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) own_options.push_back("--" + name);
    for (const std::string& name : option->get_snames()) own_options.push_back("-" + name);
  }
  int command_at = 1;
  while (command_at < argc && std::find(commands.begin(), commands.end(), argv[command_at]) == commands.end()) {
    ++command_at;
  }
  for (int i = 1; i < command_at; ++i) {
    const std::string_view arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-') continue;
    const std::string name(arg.substr(0, arg.find('=')));
    if (std::find(own_options.begin(), own_options.end(), name) != own_options.end()) continue;
    if (command_at < argc) {
      return fmt::format(
          "'{0}' comes before the command '{1}', where only fusejit's own options ({2}) go; a command's options "
          "follow it (fusejit {1} ... {0}); see fusejit {1} --help",
          name, argv[command_at], absl::StrJoin(own_options, ", "));
    }
    return fmt::format("unknown option '{}'{}; the commands are {} (fusejit --help)", name,
                       did_you_mean(name, own_options), absl::StrJoin(commands, ", "));
  }
  // The command is the first argument that is not an option.
  int at = 1;
  while (at < argc && argv[at][0] == '-') ++at;
  if (at == argc) {  // no command, and only fusejit's own options (any other was named above)
    return fmt::format("{}; the commands are {} (fusejit --help)", lowercase_start(error.what()),
                       absl::StrJoin(commands, ", "));
  }
  const std::string command = argv[at];
  const CLI::App* sub = nullptr;
  for (const CLI::App* candidate : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (candidate->get_name() == command) sub = candidate;
  }
  if (sub == nullptr) {
    return fmt::format("unknown command '{}'{}; the commands are {} (fusejit --help)", command,
                       did_you_mean(command, commands), absl::StrJoin(commands, ", "));
  }
  // An option the command does not have: the nearest one it has.
  std::vector<std::string> options;
  for (const CLI::Option* option : sub->get_options()) {
    for (const std::string& name : option->get_lnames()) options.push_back("--" + name);
  }
  std::string hint;
  for (int i = at + 1; i < argc && hint.empty(); ++i) {
    const std::string_view arg = argv[i];
    if (!arg.starts_with("--")) continue;
    const std::string name(arg.substr(0, arg.find('=')));
    if (sub->get_option_no_throw(name) == nullptr) hint = did_you_mean(name, options);
  }
  // "-x.fj" is taken for a short option: a FILE then seems missing.
  const bool missing = dynamic_cast<const CLI::RequiredError*>(&error) != nullptr;
  for (int i = at + 1; i < argc && hint.empty() && missing; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-' || arg[1] == '-' || sub->get_option_no_throw(std::string(arg)) != nullptr) {
      continue;
    }
    hint =
        fmt::format(" ('{0}' was read as an option; a file whose name starts with '-' is ./{0}, or follows --)", arg);
  }
  return fmt::format("{}{}; see fusejit {} --help", unexpected_in_order(*sub, error), hint, command);
}

}  // namespace fusejit::cli
