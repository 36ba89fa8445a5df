// Tests of FlagParser (src/common/flags.h): options, flags, ranges, extras and
// subcommands, through Parse() as a program's main() calls it.
#include "src/common/flags.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace manta {
namespace {

// Parse() over a command line given as words (the program name first).
std::optional<int> ParseWords(FlagParser& flags, std::vector<std::string> words) {
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  return flags.Parse(static_cast<int>(argv.size()), argv.data());
}

TEST(FlagParserTest, OptionsAndFlagsTakeTheirValuesAndKeepDefaultsOtherwise) {
  FlagParser flags("test");
  std::string name = "default";
  int64_t count = 3;
  uint64_t big = 0;
  double ratio = 0.5;
  int untouched = 7;
  bool verbose = false;
  flags.Add("--name", &name, "a name");
  flags.Add("--count", &count, "a count");
  flags.Add("--big", &big, "a big number");
  flags.Add("--ratio", &ratio, "a ratio");
  flags.Add("--untouched", &untouched, "not given");
  flags.AddFlag("--verbose", &verbose, "a flag");
  EXPECT_EQ(ParseWords(flags, {"prog", "--name", "x", "--count=-4", "--big", "18446744073709551615", "--ratio",
                               "2.5", "--verbose"}),
            std::nullopt);
  EXPECT_EQ(name, "x");
  EXPECT_EQ(count, -4);
  EXPECT_EQ(big, 18446744073709551615ULL);
  EXPECT_EQ(ratio, 2.5);
  EXPECT_EQ(untouched, 7);
  EXPECT_TRUE(verbose);
}

TEST(FlagParserTest, BadCommandLinesExitNonZeroAndHelpExitsZero) {
  auto parser = [](int64_t* value) {
    auto flags = std::make_unique<FlagParser>("test");
    flags->Add("--n", value, "a number").Range(1, 10);
    return flags;
  };
  int64_t n = 0;
  for (std::vector<std::string> bad : std::vector<std::vector<std::string>>{
           {"prog", "--n", "11"}, {"prog", "--n", "0"}, {"prog", "--n", "five"}, {"prog", "--unknown"}}) {
    std::optional<int> exit_code = ParseWords(*parser(&n), bad);
    ASSERT_TRUE(exit_code.has_value()) << bad.back();
    EXPECT_NE(*exit_code, 0) << bad.back();
  }
  EXPECT_EQ(ParseWords(*parser(&n), {"prog", "--n", "10"}), std::nullopt);
  EXPECT_EQ(n, 10);
  EXPECT_EQ(ParseWords(*parser(&n), {"prog", "--help"}), std::optional<int>(0));
}

TEST(FlagParserTest, RequiredNonNegativeAndExtras) {
  double seconds = 1;
  FlagParser required("test");
  required.Add("--seconds", &seconds, "how long").Required().NonNegative();
  EXPECT_NE(ParseWords(required, {"prog"}).value_or(0), 0);

  FlagParser negative("test");
  negative.Add("--seconds", &seconds, "how long").NonNegative();
  EXPECT_NE(ParseWords(negative, {"prog", "--seconds", "-1"}).value_or(0), 0);

  FlagParser extras("test");
  extras.Add("--seconds", &seconds, "how long");
  extras.AllowExtras();
  EXPECT_EQ(ParseWords(extras, {"prog", "--ray_address", "x", "--seconds", "0.25"}), std::nullopt);
  EXPECT_EQ(seconds, 0.25);
}

TEST(FlagParserTest, SubcommandsTakePositionalArgumentsAndSayWhichWasGiven) {
  FlagParser flags("test");
  int rounds = 5;
  flags.Add("--rounds", &rounds, "rounds");
  std::string ip;
  int port = 0;
  int64_t bytes = 128;
  FlagParser& send = flags.AddSubcommand("send", "send bytes");
  send.Add("ip", &ip, "where").Required();
  send.Add("port", &port, "its port").Required().Range(1, 65535);
  send.Add("bytes", &bytes, "how many");
  FlagParser& receive = flags.AddSubcommand("receive", "receive bytes");
  receive.Add("port", &port, "port").Required();

  EXPECT_EQ(ParseWords(flags, {"prog", "send", "10.0.0.1", "80"}), std::nullopt);
  EXPECT_TRUE(send.Given());
  EXPECT_FALSE(receive.Given());
  EXPECT_EQ(ip, "10.0.0.1");
  EXPECT_EQ(port, 80);
  EXPECT_EQ(bytes, 128);

  FlagParser none("test");
  FlagParser& only = none.AddSubcommand("only", "a subcommand");
  EXPECT_EQ(ParseWords(none, {"prog"}), std::nullopt);
  EXPECT_FALSE(only.Given());
}

TEST(FlagParserTest, ASubcommandChecksItsOwnArguments) {
  auto parse = [](std::vector<std::string> words) {
    FlagParser flags("test");
    int port = 0;
    flags.AddSubcommand("receive", "receive bytes").Add("port", &port, "port").Required().Range(1, 65535);
    return ParseWords(flags, std::move(words));
  };
  EXPECT_NE(parse({"prog", "receive"}).value_or(0), 0);           // missing
  EXPECT_NE(parse({"prog", "receive", "0"}).value_or(0), 0);      // out of range
  EXPECT_NE(parse({"prog", "receive", "1", "2"}).value_or(0), 0);  // one too many
  EXPECT_EQ(parse({"prog", "receive", "65535"}), std::nullopt);
}

}  // namespace
}  // namespace manta
