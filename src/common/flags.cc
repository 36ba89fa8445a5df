#include "src/common/flags.h"

#include <CLI/CLI.hpp>

namespace manta {

FlagParser::Option& FlagParser::Option::Required() {
  option_->required();
  return *this;
}

FlagParser::Option& FlagParser::Option::Range(int64_t min, int64_t max) {
  option_->check(CLI::Range(min, max));
  return *this;
}

FlagParser::Option& FlagParser::Option::NonNegative() {
  option_->check(CLI::Validator(
      [](std::string& text) -> std::string {
        double value = 0;
        if (CLI::detail::lexical_cast(text, value) && value >= 0) return "";
        return "must be a number >= 0, not '" + text + "'";
      },
      "NONNEGATIVE"));
  return *this;
}

FlagParser::FlagParser(const std::string& description)
    : owned_(std::make_unique<CLI::App>(description)), app_(owned_.get()) {}

FlagParser::FlagParser(CLI::App* subcommand) : app_(subcommand) {}

FlagParser::~FlagParser() = default;

FlagParser::Option FlagParser::Add(const std::string& name, std::string* value, const std::string& help) {
  return Option(app_->add_option(name, *value, help));
}

FlagParser::Option FlagParser::Add(const std::string& name, int* value, const std::string& help) {
  return Option(app_->add_option(name, *value, help));
}

FlagParser::Option FlagParser::Add(const std::string& name, int64_t* value, const std::string& help) {
  return Option(app_->add_option(name, *value, help));
}

FlagParser::Option FlagParser::Add(const std::string& name, uint64_t* value, const std::string& help) {
  return Option(app_->add_option(name, *value, help));
}

FlagParser::Option FlagParser::Add(const std::string& name, double* value, const std::string& help) {
  return Option(app_->add_option(name, *value, help));
}

void FlagParser::AddFlag(const std::string& name, bool* value, const std::string& help) {
  app_->add_flag(name, *value, help);
}

FlagParser& FlagParser::AddSubcommand(const std::string& name, const std::string& description) {
  subcommands_.push_back(std::unique_ptr<FlagParser>(new FlagParser(app_->add_subcommand(name, description))));
  return *subcommands_.back();
}

bool FlagParser::Given() const { return app_->parsed(); }

void FlagParser::AllowExtras() { app_->allow_extras(); }

std::optional<int> FlagParser::Parse(int argc, char** argv) {
  try {
    app_->parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app_->exit(e);
  }
  return std::nullopt;
}

}  // namespace manta
