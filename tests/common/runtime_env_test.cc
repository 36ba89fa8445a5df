// Tests of src/common/runtime_env.h: the canonical form, Ray's merge rules, working_dir
// resolution, and what a C++ worker can apply (errors naming the field).
#include "src/common/runtime_env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/test_util/test_util.h"

namespace manta {
namespace {

using ::testing::HasSubstr;

TEST(RuntimeEnvTest, CanonicalFormSortsKeysAndMapsEmptyToNothing) {
  EXPECT_EQ(*CanonicalRuntimeEnv(""), "");
  EXPECT_EQ(*CanonicalRuntimeEnv("{}"), "");
  EXPECT_EQ(*CanonicalRuntimeEnv(R"({ "working_dir": "/w", "env_vars": {"B": "2", "A": "1"} })"),
            R"({"env_vars":{"A":"1","B":"2"},"working_dir":"/w"})");
}

TEST(RuntimeEnvTest, NonObjectsAreMarkedErrors) {
  for (const char* bad : {"[1]", "\"x\"", "{\"a\": ", "3"}) {
    absl::StatusOr<std::string> s = CanonicalRuntimeEnv(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_TRUE(IsRuntimeEnvError(s.status())) << bad;
  }
}

TEST(RuntimeEnvTest, ChildFieldsReplaceTheParentsExceptEnvVars) {
  // Ray's inheritance example: pip replaced, env_vars merged with the child winning.
  auto merged = MergeRuntimeEnvs(R"({"pip": ["requests", "chess"], "env_vars": {"A": "a", "B": "b"}})",
                                 R"({"pip": ["torch"], "env_vars": {"B": "new", "C": "c"}})");
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(*merged, R"({"env_vars":{"A":"a","B":"new","C":"c"},"pip":["torch"]})");
}

TEST(RuntimeEnvTest, FieldsOnlyOneSideSetAreKept) {
  EXPECT_EQ(*MergeRuntimeEnvs(R"({"working_dir": "/job"})", R"({"env_vars": {"A": "1"}})"),
            R"({"env_vars":{"A":"1"},"working_dir":"/job"})");
  EXPECT_EQ(*MergeRuntimeEnvs(R"({"env_vars": {"A": "1"}})", R"({"working_dir": "/task"})"),
            R"({"env_vars":{"A":"1"},"working_dir":"/task"})");
  EXPECT_EQ(*MergeRuntimeEnvs(R"({"working_dir": "/job"})", R"({"working_dir": "/task"})"),
            R"({"working_dir":"/task"})");
}

TEST(RuntimeEnvTest, MergeWithNothingIsTheOtherSideCanonical) {
  EXPECT_EQ(*MergeRuntimeEnvs("", ""), "");
  EXPECT_EQ(*MergeRuntimeEnvs("", R"({"working_dir":"/w"})"), R"({"working_dir":"/w"})");
  EXPECT_EQ(*MergeRuntimeEnvs(R"({"working_dir":"/w"})", ""), R"({"working_dir":"/w"})");
  EXPECT_EQ(*MergeRuntimeEnvs(R"({"working_dir":"/w"})", "{}"), R"({"working_dir":"/w"})");
}

TEST(RuntimeEnvTest, EnvVarsThatAreNotAnObjectAreReplacedNotMerged) {
  // Left for the worker to refuse, naming the field (ParseWorkerRuntimeEnv).
  EXPECT_EQ(*MergeRuntimeEnvs(R"({"env_vars": {"A": "1"}})", R"({"env_vars": ["A"]})"), R"({"env_vars":["A"]})");
  EXPECT_EQ(*MergeRuntimeEnvs(R"({"env_vars": 5})", R"({"env_vars": {"A": "1"}})"), R"({"env_vars":{"A":"1"}})");
  auto bad = MergeRuntimeEnvs("not json", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(IsRuntimeEnvError(bad.status()));
}

TEST(RuntimeEnvTest, RelativeWorkingDirIsResolvedAgainstTheBase) {
  EXPECT_EQ(*ResolveWorkingDir(R"({"working_dir": "data/../proj"})", "/home/u"),
            R"({"working_dir":"/home/u/proj"})");
  EXPECT_EQ(*ResolveWorkingDir(R"({"working_dir": "/abs"})", "/home/u"), R"({"working_dir":"/abs"})");
  EXPECT_EQ(*ResolveWorkingDir(R"({"env_vars": {"A": "1"}})", "/home/u"), R"({"env_vars":{"A":"1"}})");
  auto bad = ResolveWorkingDir(R"({"working_dir": 7})", "/home/u");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("'working_dir'"));
}

TEST(RuntimeEnvTest, WorkerGetsEnvVarsAndWorkingDir) {
  auto env = ParseWorkerRuntimeEnv(R"({"env_vars": {"A": "1", "B": ""}, "working_dir": "/srv/w"})");
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->env_vars, (std::map<std::string, std::string>{{"A", "1"}, {"B", ""}}));
  EXPECT_EQ(env->working_dir, "/srv/w");
  auto none = ParseWorkerRuntimeEnv("");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->env_vars.empty());
  EXPECT_TRUE(none->working_dir.empty());
}

// Each bad env is refused with a marked error whose message names `field`.
struct BadEnv {
  const char* json;
  const char* field;
  const char* detail;
};

TEST(RuntimeEnvTest, WhatAWorkerCannotApplyIsRefusedNamingTheField) {
  const BadEnv cases[] = {
      {R"({"pip": ["requests"]})", "'pip'", "cannot be applied to a C++ worker"},
      {R"({"conda": "env"})", "'conda'", "only 'env_vars' and 'working_dir'"},
      {R"({"env_vars": {"A": 1}})", "'env_vars'", "the value of 'A' must be a string"},
      {R"({"env_vars": {"A": null}})", "'env_vars'", "must be a string"},
      {R"({"env_vars": ["A"]})", "'env_vars'", "object of strings"},
      {R"({"env_vars": {"A=B": "1"}})", "'env_vars'", "invalid variable name"},
      {R"({"env_vars": {"": "1"}})", "'env_vars'", "invalid variable name"},
      {R"({"working_dir": 3})", "'working_dir'", "non-empty string"},
      {R"({"working_dir": ""})", "'working_dir'", "non-empty string"},
      {R"({"working_dir": "relative/dir"})", "'working_dir'", "absolute path"},
      {R"({"working_dir": "s3://bucket/pkg.zip"})", "'working_dir'", "URI"},
  };
  for (const BadEnv& c : cases) {
    auto env = ParseWorkerRuntimeEnv(c.json);
    ASSERT_FALSE(env.ok()) << c.json;
    EXPECT_TRUE(IsRuntimeEnvError(env.status())) << c.json;
    EXPECT_THAT(env.status().message(), HasSubstr(c.field)) << c.json;
    EXPECT_THAT(env.status().message(), HasSubstr(c.detail)) << c.json;
  }
}

TEST(RuntimeEnvTest, CheckWorkingDirNamesTheDirectory) {
  testing::TempDir temp;
  std::filesystem::path dir = temp.path();
  EXPECT_TRUE(CheckWorkingDir(dir.string()).ok());

  absl::Status missing = CheckWorkingDir((dir / "missing").string());
  EXPECT_TRUE(IsRuntimeEnvError(missing));
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(missing.message(), HasSubstr((dir / "missing").string()));

  std::ofstream((dir / "file").string()) << "x";
  absl::Status file = CheckWorkingDir((dir / "file").string());
  EXPECT_TRUE(IsRuntimeEnvError(file));
  EXPECT_THAT(file.message(), HasSubstr("not a directory"));
}

TEST(RuntimeEnvTest, OnlyMarkedStatusesAreRuntimeEnvErrors) {
  EXPECT_FALSE(IsRuntimeEnvError(absl::OkStatus()));
  EXPECT_FALSE(IsRuntimeEnvError(absl::InvalidArgumentError("x")));
  EXPECT_TRUE(IsRuntimeEnvError(MarkRuntimeEnvError(absl::UnavailableError("x"))));
}

}  // namespace
}  // namespace manta
