// Tests of the --resources parser, resource formatting and fixed-point arithmetic
// (src/scheduling/resources.h).
#include "src/scheduling/resources.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace manta::scheduling {
namespace {

using ::testing::HasSubstr;

absl::Status ParseError(const std::string& json) {
  absl::StatusOr<ResourceMap> parsed = ParseCustomResources(json);
  EXPECT_FALSE(parsed.ok()) << json;
  return parsed.status();
}

TEST(ResourcesTest, EmptyStringIsNoResources) {
  absl::StatusOr<ResourceMap> parsed = ParseCustomResources("");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->empty());
}

TEST(ResourcesTest, EmptyObjectIsNoResources) {
  absl::StatusOr<ResourceMap> parsed = ParseCustomResources("{}");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->empty());
}

TEST(ResourcesTest, ValidObject) {
  absl::StatusOr<ResourceMap> parsed = ParseCustomResources(R"({"accelerator": 2, "special": 0.5, "zero": 0})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ResourceMap expected = {{"accelerator", 2.0}, {"special", 0.5}, {"zero", 0.0}};
  EXPECT_EQ(*parsed, expected);
}

TEST(ResourcesTest, NotJson) {
  absl::Status s = ParseError("{accelerator: 2");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("not valid JSON"));
}

TEST(ResourcesTest, ArrayIsNotAnObject) {
  absl::Status s = ParseError(R"(["accelerator", 2])");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("JSON object"));
  EXPECT_FALSE(ParseCustomResources("3").ok());
  EXPECT_FALSE(ParseCustomResources(R"("x")").ok());
}

TEST(ResourcesTest, NonNumberValue) {
  for (const std::string json : {R"({"special": "2"})", R"({"special": true})", R"({"special": null})",
                                 R"({"special": [2]})", R"({"special": {"n": 2}})"}) {
    absl::Status s = ParseError(json);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << json;
    EXPECT_THAT(std::string(s.message()), HasSubstr("'special'")) << json;
  }
}

TEST(ResourcesTest, NegativeValue) {
  absl::Status s = ParseError(R"({"special": -1})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("non-negative"));
}

TEST(ResourcesTest, InfiniteValue) {
  // 1e999 overflows a double: parsed as infinity, which is no quantity.
  EXPECT_FALSE(ParseCustomResources(R"({"special": 1e999})").ok());
}

TEST(ResourcesTest, EmptyName) {
  absl::Status s = ParseError(R"({"": 1})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

TEST(ResourcesTest, PredefinedNamesAreRejected) {
  for (const std::string name : {"CPU", "GPU", "memory", "object_store_memory"}) {
    absl::Status s = ParseError("{\"" + name + "\": 1}");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(std::string(s.message()), HasSubstr(name));
  }
  // Names are case-sensitive: only the exact predefined names are reserved.
  EXPECT_TRUE(ParseCustomResources(R"({"cpu": 1})").ok());
}

TEST(ResourcesTest, FormatResources) {
  ResourceMap resources = {
      {"CPU", 4},
      {"GPU", 0},
      {"memory", 2.0 * 1024 * 1024 * 1024},
      {"object_store_memory", 512.0 * 1024 * 1024},
      {"special", 0.25},
  };
  EXPECT_EQ(FormatResources(resources),
            "CPU: 4, GPU: 0, memory: 2.00 GiB, object_store_memory: 0.50 GiB, special: 0.25");
  EXPECT_EQ(FormatResources({}), "");
  EXPECT_EQ(FormatResources({{"x", 1}}), "x: 1");
}

TEST(ResourcesTest, DetectedMachineResourcesArePositive) {
  EXPECT_GE(DetectNumCpus(), 1);
  EXPECT_GT(DetectMemoryBytes(), 0);
}

TEST(ResourcesTest, FractionsAddAndSubtractExactly) {
  // 0.1 is not a binary fraction: with plain doubles, ten thousand takes of it and
  // as many returns drift away from the total.
  ResourceMap available{{"CPU", 3}, {"special", 1}};
  const ResourceMap tenth{{"CPU", 0.1}, {"special", 0.0003}};
  for (int i = 0; i < 10000; ++i) SubtractResources(available, tenth);
  EXPECT_EQ(available.at("CPU"), -997.0);
  for (int i = 0; i < 10000; ++i) AddResources(available, tenth);
  EXPECT_EQ(available.at("CPU"), 3.0);
  EXPECT_EQ(available.at("special"), 1.0);
  // Thirty bundles of 0.1 CPU fill exactly three CPUs: the last one fits, another does not.
  ResourceMap node{{"CPU", 3}};
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(ResourcesFit({{"CPU", 0.1}}, node)) << i;
    SubtractResources(node, {{"CPU", 0.1}});
  }
  EXPECT_EQ(node.at("CPU"), 0.0);
  EXPECT_FALSE(ResourcesFit({{"CPU", 0.0001}}, node));
}

TEST(ResourcesTest, QuantitiesAreRoundedToTheStep) {
  EXPECT_EQ(ToSteps(0.5), 5000);
  EXPECT_EQ(ToSteps(0.00004), 0);
  EXPECT_EQ(ToSteps(0.00006), 1);
  EXPECT_TRUE(SameQuantity(0.1 + 0.2, 0.3));
  EXPECT_EQ(Quantize(0.1 + 0.2), Quantize(0.3));
  // Bytes of memory stay exact far beyond a machine's size.
  EXPECT_EQ(Quantize(1024.0 * 1024 * 1024 * 1024), 1024.0 * 1024 * 1024 * 1024);
  EXPECT_EQ(QuantizeResources({{"CPU", 1}, {"tiny", 0.00001}, {"none", 0}}), (ResourceMap{{"CPU", 1}}));
  EXPECT_THAT(ParseError(R"({"tiny": 0.00001})").message(), HasSubstr("resolution"));
}

}  // namespace
}  // namespace manta::scheduling
