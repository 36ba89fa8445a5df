// Tests of ray::RuntimeEnv (include/ray/api/runtime_env.h): every method, and the
// RayRuntimeEnvException (naming the field) for each kind of bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <ray/api.h>

#include <map>
#include <string>
#include <vector>

namespace {

using ::testing::HasSubstr;
using ray::internal::RayRuntimeEnvException;

// The message of the RayRuntimeEnvException `fn` throws ("" if it throws none).
template <typename F>
std::string RuntimeEnvError(F fn) {
  try {
    fn();
  } catch (const RayRuntimeEnvException& e) {
    return e.what();
  }
  return "";
}

// A user type converted the way Ray's own runtime-env tests do: `json` unqualified,
// at global scope.
struct Person {
  std::string name;
  int age = 0;
};
void to_json(json& j, const Person& p) { j = json{{"name", p.name}, {"age", p.age}}; }
void from_json(const json& j, Person& p) {
  j.at("name").get_to(p.name);
  j.at("age").get_to(p.age);
}

struct Limits {
  int cpu = 0;
  std::string policy;
};
void to_json(ray::json& j, const Limits& l) { j = ray::json{{"cpu", l.cpu}, {"policy", l.policy}}; }
void from_json(const ray::json& j, Limits& l) {
  j.at("cpu").get_to(l.cpu);
  j.at("policy").get_to(l.policy);
}

TEST(RuntimeEnvTest, NewEnvIsEmptyAndSerializesAsEmptyObject) {
  ray::RuntimeEnv env;
  EXPECT_TRUE(env.Empty());
  EXPECT_FALSE(env.Contains("env_vars"));
  EXPECT_EQ(env.Serialize(), "{}");
}

TEST(RuntimeEnvTest, SetAndGetTypedValues) {
  ray::RuntimeEnv env;
  env.Set<std::map<std::string, std::string>>("env_vars", {{"A", "1"}, {"B", "two"}});
  env.Set("working_dir", std::string("/tmp/project"));
  env.Set("retries", 3);
  env.Set("modules", std::vector<std::string>{"x", "y"});
  env.Set("limits", Limits{4, "spread"});
  EXPECT_FALSE(env.Empty());
  EXPECT_EQ((env.Get<std::map<std::string, std::string>>("env_vars")),
            (std::map<std::string, std::string>{{"A", "1"}, {"B", "two"}}));
  EXPECT_EQ(env.Get<std::string>("working_dir"), "/tmp/project");
  EXPECT_EQ(env.Get<int>("retries"), 3);
  EXPECT_EQ(env.Get<std::vector<std::string>>("modules"), (std::vector<std::string>{"x", "y"}));
  Limits limits = env.Get<Limits>("limits");
  EXPECT_EQ(limits.cpu, 4);
  EXPECT_EQ(limits.policy, "spread");
  // The JSON value itself, as in Ray.
  EXPECT_EQ(env.Get<ray::json>("env_vars")["B"], "two");
}

TEST(RuntimeEnvTest, SetReplacesAnEarlierValue) {
  ray::RuntimeEnv env;
  env.Set("working_dir", std::string("/a"));
  env.Set("working_dir", std::string("/b"));
  EXPECT_EQ(env.Get<std::string>("working_dir"), "/b");
}

TEST(RuntimeEnvTest, GetOfAMissingFieldThrowsNamingIt) {
  ray::RuntimeEnv env;
  std::string message = RuntimeEnvError([&] { env.Get<std::string>("working_dir"); });
  EXPECT_THAT(message, HasSubstr("'working_dir'"));
  EXPECT_THAT(message, HasSubstr("not set"));
}

TEST(RuntimeEnvTest, GetAsAnIncompatibleTypeThrowsNamingTheField) {
  ray::RuntimeEnv env;
  env.Set("working_dir", std::string("/tmp"));
  env.Set("env_vars", std::map<std::string, int>{{"A", 1}});
  EXPECT_THAT(RuntimeEnvError([&] { env.Get<int>("working_dir"); }), HasSubstr("'working_dir'"));
  EXPECT_THAT(RuntimeEnvError([&] { (env.Get<std::map<std::string, std::string>>("env_vars")); }),
              HasSubstr("'env_vars'"));
  EXPECT_THAT(RuntimeEnvError([&] { env.Get<Limits>("working_dir"); }), HasSubstr("'working_dir'"));
}

TEST(RuntimeEnvTest, SetOfAValueThatIsNotValidJsonTextThrowsNamingTheField) {
  ray::RuntimeEnv env;
  std::string message = RuntimeEnvError([&] { env.Set("working_dir", std::string("/tmp/\xff\xfe")); });
  EXPECT_THAT(message, HasSubstr("'working_dir'"));
  EXPECT_FALSE(env.Contains("working_dir"));
}

TEST(RuntimeEnvTest, EmptyFieldNameIsRefused) {
  ray::RuntimeEnv env;
  EXPECT_THAT(RuntimeEnvError([&] { env.Set("", 1); }), HasSubstr("must not be empty"));
  EXPECT_TRUE(env.Empty());
}

TEST(RuntimeEnvTest, JsonStrRoundTrip) {
  ray::RuntimeEnv env;
  env.SetJsonStr("env_vars", R"({"A": "1", "B": "2"})");
  EXPECT_EQ(env.GetJsonStr("env_vars"), R"({"A":"1","B":"2"})");
  EXPECT_EQ((env.Get<std::map<std::string, std::string>>("env_vars")),
            (std::map<std::string, std::string>{{"A", "1"}, {"B", "2"}}));
  env.Set("working_dir", std::string("/w"));
  EXPECT_EQ(env.GetJsonStr("working_dir"), "\"/w\"");
}

TEST(RuntimeEnvTest, SetJsonStrWithMalformedJsonThrowsNamingTheField) {
  ray::RuntimeEnv env;
  std::string message = RuntimeEnvError([&] { env.SetJsonStr("env_vars", R"({"A": )"); });
  EXPECT_THAT(message, HasSubstr("'env_vars'"));
  EXPECT_THAT(message, HasSubstr("malformed JSON"));
  EXPECT_FALSE(env.Contains("env_vars"));
}

TEST(RuntimeEnvTest, GetJsonStrOfAMissingFieldThrowsNamingIt) {
  ray::RuntimeEnv env;
  EXPECT_THAT(RuntimeEnvError([&] { env.GetJsonStr("pip"); }), HasSubstr("'pip'"));
}

TEST(RuntimeEnvTest, ContainsAndRemove) {
  ray::RuntimeEnv env;
  env.Set("working_dir", std::string("/w"));
  EXPECT_TRUE(env.Contains("working_dir"));
  EXPECT_TRUE(env.Remove("working_dir"));
  EXPECT_FALSE(env.Contains("working_dir"));
  EXPECT_FALSE(env.Remove("working_dir"));
  EXPECT_TRUE(env.Empty());
}

TEST(RuntimeEnvTest, SerializeDeserializeRoundTrip) {
  ray::RuntimeEnv env;
  env.Set<std::map<std::string, std::string>>("env_vars", {{"K", "v"}});
  env.Set("working_dir", std::string("/data"));
  std::string text = env.Serialize();
  EXPECT_EQ(text, R"({"env_vars":{"K":"v"},"working_dir":"/data"})");
  ray::RuntimeEnv back = ray::RuntimeEnv::Deserialize(text);
  EXPECT_EQ(back.Serialize(), text);
  EXPECT_EQ(back.Get<std::string>("working_dir"), "/data");
  EXPECT_TRUE(ray::RuntimeEnv::Deserialize("{}").Empty());
}

TEST(RuntimeEnvTest, SerializeToRuntimeEnvInfoWrapsTheSerializedEnv) {
  ray::RuntimeEnv env;
  env.Set("working_dir", std::string("/data"));
  ray::json info = ray::json::parse(env.SerializeToRuntimeEnvInfo());
  EXPECT_EQ(info, (ray::json{{"serializedRuntimeEnv", R"({"working_dir":"/data"})"}}));
}

TEST(RuntimeEnvTest, DeserializeRefusesMalformedJsonAndNonObjects) {
  EXPECT_THAT(RuntimeEnvError([] { ray::RuntimeEnv::Deserialize(R"({"env_vars": )"); }),
              HasSubstr("malformed JSON"));
  EXPECT_THAT(RuntimeEnvError([] { ray::RuntimeEnv::Deserialize(""); }), HasSubstr("malformed JSON"));
  EXPECT_THAT(RuntimeEnvError([] { ray::RuntimeEnv::Deserialize("[1, 2]"); }), HasSubstr("JSON object"));
  EXPECT_THAT(RuntimeEnvError([] { ray::RuntimeEnv::Deserialize("\"x\""); }), HasSubstr("JSON object"));
}

TEST(RuntimeEnvTest, ErrorsAreRayExceptions) {
  ray::RuntimeEnv env;
  EXPECT_THROW(env.Get<int>("missing"), ray::internal::RayException);
}

TEST(RuntimeEnvTest, CopiesAreIndependent) {
  ray::RuntimeEnv a;
  a.Set("working_dir", std::string("/a"));
  ray::RuntimeEnv b = a;
  b.Set("working_dir", std::string("/b"));
  EXPECT_EQ(a.Get<std::string>("working_dir"), "/a");
  EXPECT_EQ(b.Get<std::string>("working_dir"), "/b");
}

TEST(RuntimeEnvTest, RayConfigAndCallersTakeAnEnv) {
  ray::RuntimeEnv env;
  env.Set<std::map<std::string, std::string>>("env_vars", {{"K", "v"}});
  ray::RayConfig config;
  EXPECT_FALSE(config.runtime_env.has_value());
  config.runtime_env = env;
  ASSERT_TRUE(config.runtime_env.has_value());
  EXPECT_EQ(config.runtime_env->Serialize(), env.Serialize());
}

}  // namespace

TEST(RuntimeEnvTest, AUserTypeWithGlobalJsonConvertersRoundTrips) {
  ray::RuntimeEnv env;
  env.Set("person", Person{"Ada", 36});
  Person back = env.Get<Person>("person");
  EXPECT_EQ(back.name, "Ada");
  EXPECT_EQ(back.age, 36);
}
