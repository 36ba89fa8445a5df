// Runtime environments through the public API (ray::RuntimeEnv, RayConfig::runtime_env,
// SetRuntimeEnv) on a real cluster: the job's env reaches every task, a task's own env
// is merged over it, working_dir is the worker's current directory, actors run (and
// restart) in their env, workers of two envs are never shared, and an env that cannot
// be applied fails the task or actor at once with RayRuntimeEnvException. One cluster
// (ClusterHarness: free ports, cleanup by pid) for the suite; each test is a job of
// its own (ray::Init with its config, ray::Shutdown); a second node takes tasks that
// need its custom resource (spillback). This binary is its own worker.
#include <ray/api.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cluster_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/runtime_env_helpers.h"

namespace runtime_env_test {
namespace {

using ::testing::HasSubstr;

using manta::testing::Cwd;
using manta::testing::EnvVars;
using manta::testing::GetEnv;
using manta::testing::RuntimeEnvError;

int Pid() { return getpid(); }
// "<pid> <value of name>": which worker ran it, and what it saw.
std::string PidAndEnv(std::string name) { return std::to_string(getpid()) + " " + GetEnv(name); }
// A child task submitted without an env of its own: it inherits this task's.
std::string ChildGetEnv(std::string name) { return *ray::Task(GetEnv).Remote(name).Get(); }

class EnvActor {
 public:
  static EnvActor* Create() { return new EnvActor(); }
  std::string Get(std::string name) { return GetEnv(name); }
  std::string Dir() { return Cwd(); }
  int Pid() { return getpid(); }
  std::string ChildGet(std::string name) { return *ray::Task(GetEnv).Remote(name).Get(); }
};

RAY_REMOTE(GetEnv, Cwd, Pid, PidAndEnv, ChildGetEnv, EnvActor::Create, &EnvActor::Get, &EnvActor::Dir,
           &EnvActor::Pid, &EnvActor::ChildGet);

class RuntimeEnvTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    harness_ = new manta::testing::ClusterHarness();
    harness_->StartHead({"--num-cpus=4"});
    // A second node that alone has "renv_other": tasks needing it spill back there.
    harness_->StartNode({"--num-cpus=1", "--resources={\"renv_other\": 1}"});
  }
  static void TearDownTestSuite() { delete harness_; }
  void TearDown() override { ray::Shutdown(); }

  // Starts this test's job with `config` (connected to the suite's cluster).
  static void InitJob(ray::RayConfig config = {}) {
    config.address = harness_->gcs_address();
    ray::Init(config);
  }

  static manta::testing::ClusterHarness* harness_;
};
manta::testing::ClusterHarness* RuntimeEnvTest::harness_ = nullptr;

TEST_F(RuntimeEnvTest, TheJobsEnvVarsReachItsTasksAndTheirChildrenButNotTheDriver) {
  ray::RayConfig config;
  config.runtime_env = EnvVars({{"RENV_JOB", "from-job"}});
  InitJob(config);
  EXPECT_EQ(*ray::Task(GetEnv).Remote("RENV_JOB").Get(), "from-job");
  EXPECT_EQ(*ray::Task(ChildGetEnv).Remote("RENV_JOB").Get(), "from-job");
  EXPECT_EQ(GetEnv("RENV_JOB"), "<unset>");
}

TEST_F(RuntimeEnvTest, ATasksEnvIsMergedOverTheJobsFieldByField) {
  ray::RayConfig config;
  ray::RuntimeEnv job = EnvVars({{"RENV_A", "job"}, {"RENV_B", "job"}});
  config.runtime_env = job;
  InitJob(config);
  ray::RuntimeEnv task = EnvVars({{"RENV_B", "task"}, {"RENV_C", "task"}});
  // env_vars are merged name by name, the task's value winning.
  EXPECT_EQ(*ray::Task(GetEnv).SetRuntimeEnv(task).Remote("RENV_A").Get(), "job");
  EXPECT_EQ(*ray::Task(GetEnv).SetRuntimeEnv(task).Remote("RENV_B").Get(), "task");
  EXPECT_EQ(*ray::Task(GetEnv).SetRuntimeEnv(task).Remote("RENV_C").Get(), "task");
  // A child of that task inherits the merged env.
  EXPECT_EQ(*ray::Task(ChildGetEnv).SetRuntimeEnv(task).Remote("RENV_C").Get(), "task");
  // Tasks without an env of their own still run in the job's alone.
  EXPECT_EQ(*ray::Task(GetEnv).Remote("RENV_B").Get(), "job");
  EXPECT_EQ(*ray::Task(GetEnv).Remote("RENV_C").Get(), "<unset>");
}

TEST_F(RuntimeEnvTest, WorkingDirIsTheWorkersCurrentDirectory) {
  manta::testing::TempDir job_dir;
  manta::testing::TempDir task_dir;
  ray::RayConfig config;
  ray::RuntimeEnv job;
  job.Set("working_dir", job_dir.path());
  config.runtime_env = job;
  InitJob(config);
  const std::string job_real = std::filesystem::canonical(job_dir.path()).string();
  const std::string task_real = std::filesystem::canonical(task_dir.path()).string();
  EXPECT_EQ(*ray::Task(Cwd).Remote().Get(), job_real);
  // The task's working_dir replaces the job's; given relative, it is taken relative
  // to the submitter's current directory.
  ray::RuntimeEnv task;
  task.Set("working_dir", std::filesystem::relative(task_dir.path()).string());
  EXPECT_EQ(*ray::Task(Cwd).SetRuntimeEnv(task).Remote().Get(), task_real);
  EXPECT_NE(Cwd(), job_real);  // the driver stays where it was
}

TEST_F(RuntimeEnvTest, AnActorRunsInItsEnvAndKeepsItAcrossARestart) {
  manta::testing::TempDir dir;
  ray::RayConfig config;
  config.runtime_env = EnvVars({{"RENV_JOB", "job"}});
  InitJob(config);
  ray::RuntimeEnv env = EnvVars({{"RENV_ACTOR", "actor"}});
  env.Set("working_dir", dir.path());
  ray::ActorHandle<EnvActor> actor = ray::Actor(EnvActor::Create).SetRuntimeEnv(env).SetMaxRestarts(1).Remote();
  const std::string real_dir = std::filesystem::canonical(dir.path()).string();
  EXPECT_EQ(*actor.Task(&EnvActor::Get).Remote("RENV_ACTOR").Get(), "actor");
  EXPECT_EQ(*actor.Task(&EnvActor::Get).Remote("RENV_JOB").Get(), "job");
  EXPECT_EQ(*actor.Task(&EnvActor::Dir).Remote().Get(), real_dir);
  // Tasks the actor submits inherit its env.
  EXPECT_EQ(*actor.Task(&EnvActor::ChildGet).Remote("RENV_ACTOR").Get(), "actor");

  const int first_pid = *actor.Task(&EnvActor::Pid).Remote().Get();
  ASSERT_EQ(kill(first_pid, SIGKILL), 0);
  // Calls made while it restarts wait for the new process.
  int second_pid = first_pid;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (second_pid == first_pid && std::chrono::steady_clock::now() < deadline) {
    try {
      second_pid = *actor.Task(&EnvActor::Pid).Remote().Get();
    } catch (const ray::internal::RayActorException&) {
      // The call was in flight when the process died: ask the restarted one.
    }
  }
  ASSERT_NE(second_pid, first_pid) << "the actor did not restart";
  EXPECT_EQ(*actor.Task(&EnvActor::Get).Remote("RENV_ACTOR").Get(), "actor");
  EXPECT_EQ(*actor.Task(&EnvActor::Dir).Remote().Get(), real_dir);
}

TEST_F(RuntimeEnvTest, ALeaseSpilledToAnotherNodeKeepsItsEnv) {
  ray::RayConfig config;
  config.runtime_env = EnvVars({{"RENV_JOB", "job"}});
  InitJob(config);
  ray::RuntimeEnv env = EnvVars({{"RENV_TASK", "task"}});
  std::string here = *ray::Task(GetEnv).Remote("MANTA_NODE_ID").Get();
  std::string there = *ray::Task(GetEnv).SetResource("renv_other", 1).Remote("MANTA_NODE_ID").Get();
  ASSERT_NE(there, here) << "the task did not run on the other node";
  EXPECT_EQ(*ray::Task(GetEnv).SetResource("renv_other", 1).SetRuntimeEnv(env).Remote("RENV_TASK").Get(), "task");
  EXPECT_EQ(*ray::Task(GetEnv).SetResource("renv_other", 1).SetRuntimeEnv(env).Remote("RENV_JOB").Get(), "job");
}

TEST_F(RuntimeEnvTest, WorkersOfTwoEnvsAreNeverShared) {
  InitJob();
  std::map<std::string, ray::RuntimeEnv> envs = {{"a", EnvVars({{"RENV_WHICH", "a"}})},
                                                 {"b", EnvVars({{"RENV_WHICH", "b"}})}};
  // Interleaved, one at a time: each env's idle worker is there when the other env's
  // task comes, and must not take it.
  std::map<std::string, std::set<std::string>> pids;  // env -> pids of its workers
  std::set<std::string> plain_pids;
  const int kRounds = 4;
  for (int round = 0; round < kRounds; ++round) {
    for (auto& [name, env] : envs) {
      std::string out = *ray::Task(PidAndEnv).SetRuntimeEnv(env).Remote("RENV_WHICH").Get();
      std::string pid = out.substr(0, out.find(' '));
      EXPECT_EQ(out.substr(out.find(' ') + 1), name) << "a task of env " << name << " ran in " << out;
      pids[name].insert(pid);
    }
    std::string out = *ray::Task(PidAndEnv).Remote("RENV_WHICH").Get();
    EXPECT_EQ(out.substr(out.find(' ') + 1), "<unset>");
    plain_pids.insert(out.substr(0, out.find(' ')));
  }
  for (const std::string& pid : pids["a"]) {
    EXPECT_FALSE(pids["b"].contains(pid)) << "worker " << pid << " ran tasks of both envs";
    EXPECT_FALSE(plain_pids.contains(pid)) << "worker " << pid << " ran tasks with and without an env";
  }
  for (const std::string& pid : pids["b"]) EXPECT_FALSE(plain_pids.contains(pid));
  // Workers of an env are reused, not started per task.
  EXPECT_LT(pids["a"].size(), static_cast<size_t>(kRounds));
  EXPECT_LT(pids["b"].size(), static_cast<size_t>(kRounds));
}

TEST_F(RuntimeEnvTest, AMissingWorkingDirFailsTheTaskPromptlyNamingIt) {
  InitJob();
  ray::RuntimeEnv env;
  env.Set("working_dir", std::string("/nonexistent/manta-renv-test"));
  auto start = std::chrono::steady_clock::now();
  std::string message = RuntimeEnvError([&] { ray::Task(Pid).SetRuntimeEnv(env).Remote().Get(); });
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_THAT(message, HasSubstr("/nonexistent/manta-renv-test"));
  EXPECT_LT(took, std::chrono::seconds(10)) << "failing took " << std::chrono::duration<double>(took).count() << " s";
  // The job's other tasks are unaffected.
  EXPECT_GT(*ray::Task(Pid).Remote().Get(), 0);
}

TEST_F(RuntimeEnvTest, AnActorWhoseWorkingDirIsMissingFailsItsCallsWithRuntimeEnvException) {
  InitJob();
  ray::RuntimeEnv env;
  env.Set("working_dir", std::string("/nonexistent/manta-renv-actor"));
  ray::ActorHandle<EnvActor> actor = ray::Actor(EnvActor::Create).SetRuntimeEnv(env).SetMaxRestarts(3).Remote();
  std::string message = RuntimeEnvError([&] { actor.Task(&EnvActor::Pid).Remote().Get(); });
  EXPECT_THAT(message, HasSubstr("/nonexistent/manta-renv-actor"));
}

TEST_F(RuntimeEnvTest, EnvsACppWorkerCannotApplyFailNamingTheField) {
  InitJob();
  ray::RuntimeEnv number;
  number.SetJsonStr("env_vars", R"({"RENV_NUMBER": 1})");
  EXPECT_THAT(RuntimeEnvError([&] { ray::Task(Pid).SetRuntimeEnv(number).Remote().Get(); }),
              HasSubstr("'RENV_NUMBER'"));
  ray::RuntimeEnv not_an_object;
  not_an_object.Set("env_vars", 5);
  EXPECT_THAT(RuntimeEnvError([&] { ray::Task(Pid).SetRuntimeEnv(not_an_object).Remote().Get(); }),
              HasSubstr("'env_vars'"));
  ray::RuntimeEnv pip;
  pip.Set("pip", std::vector<std::string>{"requests"});
  EXPECT_THAT(RuntimeEnvError([&] { ray::Task(Pid).SetRuntimeEnv(pip).Remote().Get(); }), HasSubstr("'pip'"));
}

TEST_F(RuntimeEnvTest, AJobEnvACppWorkerCannotApplyFailsInit) {
  ray::RayConfig config;
  ray::RuntimeEnv env;
  env.Set("conda", std::string("my-env"));
  config.runtime_env = env;
  config.address = harness_->gcs_address();
  EXPECT_THAT(RuntimeEnvError([&] { ray::Init(config); }), HasSubstr("'conda'"));
  EXPECT_FALSE(ray::IsInitialized());
}

}  // namespace
}  // namespace runtime_env_test
