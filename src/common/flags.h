// A daemon's command line: named options, flags, --help and clear errors. CLI11 does
// the work behind this small interface, so that its templates are compiled once
// (flags.cc) rather than in every daemon's main: they were about 9 s of each.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace manta {

class FlagParser {
 public:
  // Refines the option just added; each call returns the same option.
  class Option {
   public:
    Option& Required();
    Option& Range(int64_t min, int64_t max);  // inclusive
    Option& NonNegative();

   private:
    friend class FlagParser;
    explicit Option(CLI::Option* option) : option_(option) {}
    CLI::Option* option_;
  };

  // `description` heads --help.
  explicit FlagParser(const std::string& description);
  ~FlagParser();
  FlagParser(const FlagParser&) = delete;
  FlagParser& operator=(const FlagParser&) = delete;

  // `--name value` or `--name=value`; the target keeps its value when not given.
  Option Add(const std::string& name, std::string* value, const std::string& help);
  Option Add(const std::string& name, int* value, const std::string& help);
  Option Add(const std::string& name, int64_t* value, const std::string& help);
  Option Add(const std::string& name, uint64_t* value, const std::string& help);
  Option Add(const std::string& name, double* value, const std::string& help);
  // A flag without a value: true when given.
  void AddFlag(const std::string& name, bool* value, const std::string& help);

  // A subcommand (`program <name> ...`) with options of its own; a name without
  // leading dashes is a positional argument, in the order added. Owned by this parser.
  FlagParser& AddSubcommand(const std::string& name, const std::string& description);
  // After Parse(): whether this subcommand was given.
  bool Given() const;

  // Arguments no option names are left for the program (e.g. ray::Init's --ray_*
  // flags) instead of being an error.
  void AllowExtras();

  // nullopt: go on. Otherwise the program should exit with this code: 0 after --help
  // (printed to stdout), non-zero after a bad command line (named on stderr).
  std::optional<int> Parse(int argc, char** argv);

 private:
  explicit FlagParser(CLI::App* subcommand);

  std::unique_ptr<CLI::App> owned_;  // null for a subcommand (its parent's app owns it)
  CLI::App* app_;
  std::vector<std::unique_ptr<FlagParser>> subcommands_;
};

}  // namespace manta
