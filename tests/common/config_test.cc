// Tests of the configuration table (src/common/config.h).
#include "src/common/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include "nlohmann/json.hpp"
#include "test_util/test_util.h"

namespace manta {
namespace {

using ::testing::HasSubstr;

using ::manta::testing::ScopedEnv;

TEST(ConfigTest, Defaults) {
  Config config;
  EXPECT_EQ(config.health_check_period_ms, 1000);
  EXPECT_EQ(config.health_check_failure_threshold, 5);
  EXPECT_EQ(config.gcs_rpc_server_reconnect_timeout_s, 60);
  EXPECT_EQ(config.grpc_client_max_attempts, 5);
  EXPECT_EQ(config.grpc_max_message_bytes, 64 * 1024 * 1024);
  EXPECT_EQ(config.testing_rpc_failure, "");
}

TEST(ConfigTest, FromEnvironmentWithoutOverridesIsDefault) {
  absl::StatusOr<Config> config = Config::FromEnvironment();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->NonDefaultEnv().empty());
}

TEST(ConfigTest, EnvironmentOverridesDefaults) {
  ScopedEnv period("MANTA_health_check_period_ms", "250");
  ScopedEnv failure("MANTA_testing_rpc_failure", "HealthCheck=drop_request");
  absl::StatusOr<Config> config = Config::FromEnvironment();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->health_check_period_ms, 250);
  EXPECT_EQ(config->testing_rpc_failure, "HealthCheck=drop_request");
  EXPECT_EQ(config->health_check_timeout_ms, 1000);  // untouched
}

TEST(ConfigTest, MalformedEnvironmentValueNamesTheVariable) {
  ScopedEnv bad("MANTA_redis_retry_attempts", "five");
  absl::StatusOr<Config> config = Config::FromEnvironment();
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("MANTA_redis_retry_attempts"));
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("five"));
}

TEST(ConfigTest, LoadAppliesEnvironmentThenSystemConfig) {
  ScopedEnv period("MANTA_health_check_period_ms", "250");
  ScopedEnv attempts("MANTA_redis_retry_attempts", "7");
  auto config = Config::Load(R"({"health_check_period_ms": 300})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->health_check_period_ms, 300);  // the system config wins
  EXPECT_EQ(config->redis_retry_attempts, 7);
  EXPECT_TRUE(Config::Load("").ok());
}

TEST(ConfigTest, LoadReportsEitherSourcesError) {
  EXPECT_FALSE(Config::Load("[1]").ok());
  ScopedEnv bad("MANTA_redis_retry_attempts", "five");
  auto config = Config::Load("");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("MANTA_redis_retry_attempts"), std::string::npos);
}

TEST(ConfigTest, SetKnownName) {
  Config config;
  ASSERT_TRUE(config.Set("resource_report_ms", "7").ok());
  EXPECT_EQ(config.resource_report_ms, 7);
  ASSERT_TRUE(config.Set("testing_rpc_failure", "*=delay:5").ok());
  EXPECT_EQ(config.testing_rpc_failure, "*=delay:5");
}

TEST(ConfigTest, SetUnknownNameIsAnError) {
  Config config;
  absl::Status s = config.Set("no_such_setting", "1");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("no_such_setting"));
}

TEST(ConfigTest, SetMalformedValueIsAnErrorAndKeepsTheOldValue) {
  Config config;
  absl::Status s = config.Set("resource_report_ms", "12abc");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("resource_report_ms"));
  EXPECT_FALSE(config.Set("resource_report_ms", "").ok());
  EXPECT_EQ(config.resource_report_ms, 100);
}

TEST(ConfigTest, ApplyJsonNumbersAndStrings) {
  Config config;
  absl::Status s = config.ApplyJson(R"({"health_check_period_ms": 20, "redis_retry_attempts": "3",
                                        "testing_rpc_failure": "RegisterNode=drop_reply"})");
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(config.health_check_period_ms, 20);
  EXPECT_EQ(config.redis_retry_attempts, 3);
  EXPECT_EQ(config.testing_rpc_failure, "RegisterNode=drop_reply");
}

TEST(ConfigTest, ApplyJsonEmptyObjectChangesNothing) {
  Config config;
  ASSERT_TRUE(config.ApplyJson("{}").ok());
  EXPECT_TRUE(config.NonDefaultEnv().empty());
}

TEST(ConfigTest, ApplyJsonRejectsNonObjects) {
  Config config;
  EXPECT_EQ(config.ApplyJson("[1, 2]").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(config.ApplyJson("42").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(config.ApplyJson("{not json").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(config.ApplyJson("").code(), absl::StatusCode::kInvalidArgument);
}

TEST(ConfigTest, ApplyJsonRejectsUnknownNamesAndBadValues) {
  Config config;
  absl::Status unknown = config.ApplyJson(R"({"bogus_name": 1})");
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.message()), HasSubstr("bogus_name"));
  EXPECT_FALSE(config.ApplyJson(R"({"health_check_period_ms": "soon"})").ok());
  EXPECT_FALSE(config.ApplyJson(R"({"health_check_period_ms": [1]})").ok());
  EXPECT_FALSE(config.ApplyJson(R"({"health_check_period_ms": 1.5})").ok());
}

TEST(ConfigTest, ApplyJsonIsAllOrNothing) {
  // A node that ignores a bad system config must be left with its own values, not
  // with the entries before the bad one applied and the bad one zeroed.
  Config config;
  absl::Status s = config.ApplyJson(R"({"health_check_period_ms": 5, "raylet_gcs_check_period_ms": "x"})");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(config.health_check_period_ms, 1000);
  EXPECT_EQ(config.raylet_gcs_check_period_ms, 1000);
  EXPECT_TRUE(config.NonDefaultEnv().empty());
}

TEST(ConfigTest, NonDefaultEnvListsOnlyChangedValues) {
  Config config;
  ASSERT_TRUE(config.Set("health_check_timeout_ms", "300").ok());
  ASSERT_TRUE(config.Set("testing_rpc_failure", "*=drop_request").ok());
  ASSERT_TRUE(config.Set("health_check_period_ms", "1000").ok());  // equal to the default
  std::map<std::string, std::string> env = config.NonDefaultEnv();
  std::map<std::string, std::string> expected = {
      {"MANTA_health_check_timeout_ms", "300"},
      {"MANTA_testing_rpc_failure", "*=drop_request"},
  };
  EXPECT_EQ(env, expected);
}

TEST(ConfigTest, NonDefaultEnvRoundTripsThroughTheEnvironment) {
  Config config;
  ASSERT_TRUE(config.Set("redis_command_timeout_ms", "1234").ok());
  std::map<std::string, std::string> env = config.NonDefaultEnv();
  ASSERT_EQ(env.size(), 1u);
  ScopedEnv set(env.begin()->first.c_str(), env.begin()->second.c_str());
  absl::StatusOr<Config> child = Config::FromEnvironment();
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ(child->redis_command_timeout_ms, 1234);
}

TEST(ConfigTest, ToJsonRoundTripsThroughApplyJson) {
  Config head;
  ASSERT_TRUE(head.Set("health_check_failure_threshold", "9").ok());
  ASSERT_TRUE(head.Set("testing_rpc_failure", "HealthCheck=delay:10@0.5").ok());
  std::string json = head.ToJson();

  nlohmann::json parsed = nlohmann::json::parse(json);
  ASSERT_TRUE(parsed.is_object());
  EXPECT_EQ(parsed["health_check_failure_threshold"], 9);
  EXPECT_EQ(parsed["testing_rpc_failure"], "HealthCheck=delay:10@0.5");

  Config other;
  absl::Status s = other.ApplyJson(json);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(other.NonDefaultEnv(), head.NonDefaultEnv());
  EXPECT_EQ(other.ToJson(), json);
}

}  // namespace
}  // namespace manta
