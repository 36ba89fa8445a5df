// Runtime envs in local mode (src/api/local_mode_runtime.h): the job's env is applied
// to this one process while the runtime lives and undone at Shutdown; a task or actor
// env other than the job's is refused with RayRuntimeEnvException; an env that
// cannot be applied fails Init. Each test is its own Init/Shutdown in this process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "ray/api.h"
#include "tests/test_util/runtime_env_helpers.h"
#include "tests/test_util/test_util.h"

namespace local_mode_runtime_env_test {
namespace {

using ::testing::HasSubstr;

using manta::testing::Cwd;
using manta::testing::EnvVars;
using manta::testing::GetEnv;
using manta::testing::RuntimeEnvError;


class Probe {
 public:
  static Probe* Create() { return new Probe(); }
  std::string Get(std::string name) { return GetEnv(name); }
};

RAY_REMOTE(GetEnv, Cwd, Probe::Create, &Probe::Get);

class LocalModeRuntimeEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("LM_RENV_EXISTING", "before", 1);
    unsetenv("LM_RENV_NEW");
    cwd_before_ = Cwd();
  }
  void TearDown() override {
    ray::Shutdown();
    unsetenv("LM_RENV_EXISTING");
  }
  std::string cwd_before_;
};

TEST_F(LocalModeRuntimeEnvTest, TheJobsEnvIsAppliedToTheProcessAndUndoneAtShutdown) {
  manta::testing::TempDir dir;
  ray::RuntimeEnv env = EnvVars({{"LM_RENV_EXISTING", "job"}, {"LM_RENV_NEW", "new"}});
  env.Set("working_dir", dir.path());
  ray::RayConfig config;
  config.local_mode = true;
  config.runtime_env = env;
  ray::Init(config);
  EXPECT_EQ(*ray::Task(GetEnv).Remote("LM_RENV_EXISTING").Get(), "job");
  EXPECT_EQ(*ray::Task(GetEnv).Remote("LM_RENV_NEW").Get(), "new");
  EXPECT_EQ(*ray::Task(Cwd).Remote().Get(), std::filesystem::canonical(dir.path()).string());
  auto probe = ray::Actor(Probe::Create).Remote();
  EXPECT_EQ(*probe.Task(&Probe::Get).Remote("LM_RENV_NEW").Get(), "new");
  ray::Shutdown();
  EXPECT_EQ(GetEnv("LM_RENV_EXISTING"), "before");
  EXPECT_EQ(GetEnv("LM_RENV_NEW"), "<unset>");
  EXPECT_EQ(Cwd(), cwd_before_);
}

TEST_F(LocalModeRuntimeEnvTest, ATaskOrActorEnvOtherThanTheJobsIsRefused) {
  ray::RayConfig config;
  config.local_mode = true;
  config.runtime_env = EnvVars({{"LM_RENV_NEW", "job"}});
  ray::Init(config);
  ray::RuntimeEnv other = EnvVars({{"LM_RENV_NEW", "task"}});
  EXPECT_THAT(RuntimeEnvError([&] { ray::Task(GetEnv).SetRuntimeEnv(other).Remote("LM_RENV_NEW"); }),
              HasSubstr("local_mode"));
  EXPECT_THAT(RuntimeEnvError([&] { ray::Actor(Probe::Create).SetRuntimeEnv(other).Remote(); }),
              HasSubstr("local_mode"));
  // An env that merges into the job's own (or no env at all) is fine.
  ray::RuntimeEnv same = EnvVars({{"LM_RENV_NEW", "job"}});
  EXPECT_EQ(*ray::Task(GetEnv).SetRuntimeEnv(same).Remote("LM_RENV_NEW").Get(), "job");
  EXPECT_EQ(*ray::Task(GetEnv).SetRuntimeEnv(ray::RuntimeEnv()).Remote("LM_RENV_NEW").Get(), "job");
}

TEST_F(LocalModeRuntimeEnvTest, AnEnvThatCannotBeAppliedFailsInitAndChangesNothing) {
  ray::RuntimeEnv env = EnvVars({{"LM_RENV_NEW", "x"}});
  env.Set("working_dir", std::string("/nonexistent/manta-local-mode"));
  ray::RayConfig config;
  config.local_mode = true;
  config.runtime_env = env;
  EXPECT_THAT(RuntimeEnvError([&] { ray::Init(config); }), HasSubstr("/nonexistent/manta-local-mode"));
  EXPECT_FALSE(ray::IsInitialized());
  EXPECT_EQ(GetEnv("LM_RENV_NEW"), "<unset>");
  EXPECT_EQ(Cwd(), cwd_before_);

  ray::RuntimeEnv pip;
  pip.Set("pip", std::vector<std::string>{"requests"});
  config.runtime_env = pip;
  EXPECT_THAT(RuntimeEnvError([&] { ray::Init(config); }), HasSubstr("'pip'"));
  EXPECT_FALSE(ray::IsInitialized());
}

}  // namespace
}  // namespace local_mode_runtime_env_test
