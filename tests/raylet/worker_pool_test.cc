// Tests of the raylet's WorkerPool (src/raylet/worker_pool.h) with a fake launcher:
// no process is started, the test registers "workers" itself and drives the loop.
#include "src/raylet/worker_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <signal.h>
#include <sys/wait.h>

#include <memory>
#include <optional>

#include "src/common/runtime_env.h"
#include "src/common/security.h"
#include "tests/raylet/fake_worker_launcher.h"
#include "test_util/test_util.h"
#include "tests/test_util/test_util.h"

namespace manta::raylet {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using PopResult = std::shared_ptr<std::optional<absl::StatusOr<WorkerInfo>>>;

class WorkerPoolTest : public ::testing::Test {
 protected:
  WorkerPoolTest() {
    options_.node_id = NodeID::FromRandom();
    options_.node_ip_address = "10.0.0.5";
    options_.raylet_port = 7100;
    options_.gcs_address = "10.0.0.1:6380";
    options_.store_socket = "/tmp/session_t/store.sock";
    options_.session_dir = "/tmp/session_t";
    options_.default_worker_path = "/opt/manta/bin/manta_worker";
    options_.cluster_token = "0123456789abcdef0123456789abcdef";
    options_.num_cpus = 4;
    // Timers the tests do not exercise are pushed far out.
    config_.worker_register_timeout_ms = 1000000;
    config_.idle_worker_killing_time_ms = 1000000;
    config_.worker_maximum_startup_concurrency = 4;
    config_.num_workers_soft_limit = 10;
    config_.driver_liveness_check_ms = 1000000;
    job_config_.add_worker_command("/home/u/my_driver");
    job_config_.add_worker_command("--flag");
  }

  void SetUp() override { MakePool(); }

  void MakePool() {
    pool_ = std::make_unique<WorkerPool>(loop_, options_, config_, launcher_);
    pool_->AddGoneListener([this](const WorkerGone& g) { gone_.push_back(g); });
  }

  // A pop for `job`, whose registration with the GCS says `config`.
  PopResult Pop(const JobID& job, const rpc::JobConfig& config) {
    pool_->SetJobConfig(job, config);
    return PopOnly(job);
  }
  PopResult PopOnly(const JobID& job) {
    auto result = std::make_shared<std::optional<absl::StatusOr<WorkerInfo>>>();
    pool_->PopWorker(job, [result](absl::StatusOr<WorkerInfo> w) { *result = std::move(w); });
    return result;
  }
  PopResult Pop(const JobID& job) { return Pop(job, job_config_); }
  // A pop for a worker of `job` started for `runtime_env` (the job's config is set).
  PopResult PopEnv(const JobID& job, const std::string& runtime_env) {
    pool_->SetJobConfig(job, job_config_);
    auto result = std::make_shared<std::optional<absl::StatusOr<WorkerInfo>>>();
    pool_->PopWorker(job, runtime_env, [result](absl::StatusOr<WorkerInfo> w) { *result = std::move(w); });
    return result;
  }

  // Registers the worker of the `index`-th start with its own token and id.
  absl::Status Register(size_t index, int port = 0) {
    const FakeWorkerLauncher::StartRecord& start = launcher_.starts.at(index);
    rpc::RegisterWorkerRequest request;
    request.set_worker_type(rpc::WORKER);
    request.set_startup_token(start.secrets.at("MANTA_WORKER_STARTUP_TOKEN"));
    request.set_worker_id(WorkerID::FromHex(start.env.at("MANTA_WORKER_ID"))->Binary());
    request.set_job_id(JobID::FromHex(start.env.at("MANTA_JOB_ID"))->Binary());
    request.set_pid(start.pid);
    request.mutable_address()->set_ip_address("10.0.0.5");
    request.mutable_address()->set_port(port != 0 ? port : 20000 + static_cast<int>(index));
    return CallRegister(request);
  }

  absl::Status CallRegister(const rpc::RegisterWorkerRequest& request) {
    std::optional<absl::Status> sent;
    pool_->HandleRegisterWorker(request, &last_register_reply_, rpc::SendReply([&](absl::Status s) { sent = s; }));
    loop_.RunUntilIdle();
    EXPECT_TRUE(sent.has_value());
    return sent.value_or(absl::InternalError("no reply"));
  }

  absl::Status RegisterDriver(const WorkerID& id, const JobID& job, pid_t pid) {
    rpc::RegisterWorkerRequest request;
    request.set_worker_type(rpc::DRIVER);
    request.set_worker_id(id.Binary());
    request.set_job_id(job.Binary());
    request.set_pid(pid);
    request.mutable_address()->set_ip_address("10.0.0.5");
    request.mutable_address()->set_port(30000);
    return CallRegister(request);
  }

  EventLoop loop_;
  WorkerPoolOptions options_;
  Config config_;
  rpc::JobConfig job_config_;
  FakeWorkerLauncher launcher_{loop_};
  std::unique_ptr<WorkerPool> pool_;
  std::vector<WorkerGone> gone_;
  rpc::RegisterWorkerReply last_register_reply_;
  const JobID job1_ = JobID::FromInt(1);
  const JobID job2_ = JobID::FromInt(2);
};

TEST_F(WorkerPoolTest, PopStartsAWorkerWithTheJobsCommandAndEnvironment) {
  config_.scheduler_spread_threshold = 0.75;  // a non-default setting the workers must see
  MakePool();
  rpc::JobConfig config = job_config_;
  (*config.mutable_worker_env())["USER_VAR"] = "x";
  (*config.mutable_worker_env())["MANTA_WORKER_ID"] = "not-allowed";
  config.add_code_search_path("/lib/a.so");
  config.add_code_search_path("/lib/b.so");
  PopResult result = Pop(job1_, config);
  loop_.RunUntilIdle();
  ASSERT_EQ(launcher_.starts.size(), 1u);
  EXPECT_FALSE(result->has_value());  // not before it registers

  const FakeWorkerLauncher::StartRecord& start = launcher_.starts[0];
  EXPECT_THAT(start.argv, ElementsAre("/home/u/my_driver", "--flag"));
  const auto& env = start.env;
  EXPECT_EQ(env.at("MANTA_WORKER_MODE"), "1");
  auto worker_id = WorkerID::FromHex(env.at("MANTA_WORKER_ID"));
  ASSERT_TRUE(worker_id.ok()) << env.at("MANTA_WORKER_ID");
  // Secrets go through the inherited pipe, never the environment.
  EXPECT_EQ(start.secrets.at("MANTA_WORKER_STARTUP_TOKEN").size(), 32u);
  EXPECT_EQ(start.secrets.at(kClusterTokenEnv), options_.cluster_token);
  EXPECT_FALSE(env.contains("MANTA_WORKER_STARTUP_TOKEN"));
  EXPECT_FALSE(env.contains(kClusterTokenEnv));
  EXPECT_EQ(env.at("MANTA_JOB_ID"), job1_.Hex());
  EXPECT_EQ(env.at("MANTA_NODE_ID"), options_.node_id.Hex());
  EXPECT_EQ(env.at("MANTA_NODE_IP_ADDRESS"), "10.0.0.5");
  EXPECT_EQ(env.at("MANTA_RAYLET_ADDRESS"), "10.0.0.5:7100");
  EXPECT_EQ(env.at("MANTA_GCS_ADDRESS"), "10.0.0.1:6380");
  EXPECT_EQ(env.at("MANTA_STORE_SOCKET"), "/tmp/session_t/store.sock");
  EXPECT_EQ(env.at("MANTA_SESSION_DIR"), "/tmp/session_t");
  EXPECT_EQ(env.at("MANTA_CODE_SEARCH_PATH"), "/lib/a.so:/lib/b.so");
  EXPECT_DOUBLE_EQ(std::stod(env.at("MANTA_scheduler_spread_threshold")), 0.75);
  EXPECT_EQ(env.at("USER_VAR"), "x");
  EXPECT_EQ(start.output.out, "/tmp/session_t/logs/worker-" + worker_id->Hex() + "-" + job1_.Hex() + ".out");
  EXPECT_EQ(start.output.err, "/tmp/session_t/logs/worker-" + worker_id->Hex() + "-" + job1_.Hex() + ".err");

  ASSERT_TRUE(Register(0, 23456).ok());
  EXPECT_EQ(last_register_reply_.node_id(), options_.node_id.Binary());
  EXPECT_EQ(last_register_reply_.object_store_socket(), "/tmp/session_t/store.sock");
  EXPECT_EQ(last_register_reply_.session_dir(), "/tmp/session_t");
  ASSERT_TRUE(result->has_value());
  ASSERT_TRUE(result->value().ok()) << result->value().status();
  const WorkerInfo& worker = *result->value();
  EXPECT_EQ(worker.worker_id, *worker_id);
  EXPECT_EQ(worker.job_id, job1_);
  EXPECT_EQ(worker.pid, start.pid);
  EXPECT_EQ(worker.address.port(), 23456);
  EXPECT_EQ(worker.address.ip_address(), "10.0.0.5");
  EXPECT_EQ(worker.address.worker_id(), worker_id->Binary());
  EXPECT_EQ(worker.address.node_id(), options_.node_id.Binary());
  EXPECT_EQ(pool_->num_starting(), 0u);
}

TEST_F(WorkerPoolTest, APopWaitsForItsJobsRegistrationAndNothingElseSaysHowToStart) {
  std::vector<JobID> asked;
  pool_ = std::make_unique<WorkerPool>(loop_, options_, config_, launcher_,
                                       [&](const JobID& job) { asked.push_back(job); });
  PopResult first = PopOnly(job1_);
  PopResult second = PopOnly(job1_);
  loop_.RunUntilIdle();
  EXPECT_EQ(asked, std::vector<JobID>{job1_});  // asked once
  EXPECT_TRUE(launcher_.starts.empty());        // nothing to start with yet
  pool_->SetJobConfig(job1_, job_config_);
  loop_.RunUntilIdle();
  ASSERT_EQ(launcher_.starts.size(), 2u);
  EXPECT_THAT(launcher_.starts[0].argv, ElementsAre("/home/u/my_driver", "--flag"));
  // A job the GCS does not know: its pops fail with the reason.
  PopResult unknown = PopOnly(job2_);
  pool_->FailJob(job2_, absl::NotFoundError("job 2 is not registered with the GCS"));
  loop_.RunUntilIdle();
  ASSERT_TRUE(unknown->has_value());
  EXPECT_THAT(std::string(unknown->value().status().message()), HasSubstr("not registered"));
  EXPECT_EQ(asked.size(), 2u);
}

TEST_F(WorkerPoolTest, WithoutAWorkerCommandTheGenericWorkerIsStarted) {
  rpc::JobConfig config;
  config.add_code_search_path("/lib/tasks.so");
  Pop(job1_, config);
  loop_.RunUntilIdle();
  ASSERT_EQ(launcher_.starts.size(), 1u);
  EXPECT_THAT(launcher_.starts[0].argv, ElementsAre("/opt/manta/bin/manta_worker"));
  EXPECT_EQ(launcher_.starts[0].env.at("MANTA_CODE_SEARCH_PATH"), "/lib/tasks.so");
}

TEST_F(WorkerPoolTest, StartFailureIsReportedToThePop) {
  launcher_.FailNextStart(absl::NotFoundError("cannot execute /nope: No such file or directory"));
  PopResult result = Pop(job1_);
  loop_.RunUntilIdle();
  ASSERT_TRUE(result->has_value());
  ASSERT_FALSE(result->value().ok());
  EXPECT_THAT(std::string(result->value().status().message()), HasSubstr("No such file"));
  EXPECT_EQ(pool_->num_workers(), 0u);

  // No command at all: an error, not a crash.
  options_.default_worker_path = "";
  MakePool();
  PopResult none = Pop(job1_, rpc::JobConfig());
  loop_.RunUntilIdle();
  ASSERT_TRUE(none->has_value());
  EXPECT_THAT(std::string(none->value().status().message()), HasSubstr("manta_worker"));
}

TEST_F(WorkerPoolTest, ReturnedWorkersAreReusedPerJob) {
  PopResult first = Pop(job1_);
  loop_.RunUntilIdle();
  ASSERT_TRUE(Register(0).ok());
  ASSERT_TRUE(first->has_value() && first->value().ok());
  WorkerID w1 = first->value()->worker_id;
  pool_->PushWorker(w1);
  EXPECT_EQ(pool_->num_idle(), 1u);

  // Same job: the idle worker, no new process.
  PopResult again = Pop(job1_);
  loop_.RunUntilIdle();
  ASSERT_TRUE(again->has_value() && again->value().ok());
  EXPECT_EQ(again->value()->worker_id, w1);
  EXPECT_EQ(launcher_.starts.size(), 1u);

  // Another job never gets job 1's worker.
  pool_->PushWorker(w1);
  PopResult other = Pop(job2_);
  loop_.RunUntilIdle();
  EXPECT_FALSE(other->has_value());
  ASSERT_EQ(launcher_.starts.size(), 2u);
  EXPECT_EQ(launcher_.starts[1].env.at("MANTA_JOB_ID"), job2_.Hex());
  ASSERT_TRUE(Register(1).ok());
  ASSERT_TRUE(other->has_value() && other->value().ok());
  EXPECT_NE(other->value()->worker_id, w1);
  EXPECT_EQ(pool_->num_idle(), 1u);  // job 1's worker is still idle
}

TEST_F(WorkerPoolTest, StartupConcurrencyIsCapped) {
  config_.worker_maximum_startup_concurrency = 2;
  MakePool();
  std::vector<PopResult> results;
  for (int i = 0; i < 5; ++i) results.push_back(Pop(job1_));
  loop_.RunUntilIdle();
  EXPECT_EQ(launcher_.starts.size(), 2u);
  EXPECT_EQ(pool_->num_starting(), 2u);

  ASSERT_TRUE(Register(0).ok());  // a slot frees: one more start
  EXPECT_EQ(launcher_.starts.size(), 3u);
  ASSERT_TRUE(Register(1).ok());
  ASSERT_TRUE(Register(2).ok());
  EXPECT_EQ(launcher_.starts.size(), 5u);
  ASSERT_TRUE(Register(3).ok());
  ASSERT_TRUE(Register(4).ok());
  EXPECT_EQ(launcher_.starts.size(), 5u);
  for (const PopResult& r : results) {
    ASSERT_TRUE(r->has_value());
    EXPECT_TRUE(r->value().ok());
  }
}

TEST_F(WorkerPoolTest, ZeroStartupConcurrencyMeansTheCpuCount) {
  config_.worker_maximum_startup_concurrency = 0;
  options_.num_cpus = 3;
  MakePool();
  for (int i = 0; i < 10; ++i) Pop(job1_);
  loop_.RunUntilIdle();
  EXPECT_EQ(launcher_.starts.size(), 3u);
}

TEST_F(WorkerPoolTest, UnknownTokenIsRejected) {
  rpc::RegisterWorkerRequest request;
  request.set_worker_type(rpc::WORKER);
  request.set_startup_token("424242");
  request.set_pid(77);
  absl::Status s = CallRegister(request);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("unknown startup token"));

  // A known token with someone else's worker id is rejected too.
  Pop(job1_);
  loop_.RunUntilIdle();
  request.set_startup_token(launcher_.starts[0].secrets.at("MANTA_WORKER_STARTUP_TOKEN"));
  request.set_worker_id(WorkerID::FromRandom().Binary());
  EXPECT_EQ(CallRegister(request).code(), absl::StatusCode::kInvalidArgument);
  request.clear_worker_id();  // and with none at all
  EXPECT_EQ(CallRegister(request).code(), absl::StatusCode::kInvalidArgument);
  request.set_startup_token("");
  EXPECT_EQ(CallRegister(request).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool_->num_starting(), 1u);
}

TEST_F(WorkerPoolTest, StartupTokensAre128RandomBitsAndNeverEchoed) {
  for (int i = 0; i < 3; ++i) Pop(job1_);
  loop_.RunUntilIdle();
  ASSERT_GE(launcher_.starts.size(), 2u);
  std::set<std::string> tokens;
  for (const auto& start : launcher_.starts) {
    const std::string& token = start.secrets.at("MANTA_WORKER_STARTUP_TOKEN");
    EXPECT_EQ(token.size(), 32u);  // 16 bytes in hex
    tokens.insert(token);
  }
  EXPECT_EQ(tokens.size(), launcher_.starts.size());
  rpc::RegisterWorkerRequest request;
  request.set_worker_type(rpc::WORKER);
  std::string guess = *tokens.begin();
  guess.back() = guess.back() == '0' ? '1' : '0';
  request.set_startup_token(guess);
  absl::Status s = CallRegister(request);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(s.message()).find(guess), std::string::npos);
}

TEST_F(WorkerPoolTest, RepeatedRegistrationIsAnsweredAgain) {
  PopResult result = Pop(job1_);
  loop_.RunUntilIdle();
  ASSERT_TRUE(Register(0).ok());
  ASSERT_TRUE(Register(0).ok());
  EXPECT_EQ(pool_->num_workers(), 1u);
}

TEST_F(WorkerPoolTest, WorkerThatDoesNotRegisterInTimeIsKilled) {
  config_.worker_register_timeout_ms = 0;
  MakePool();
  PopResult result = Pop(job1_);
  loop_.RunUntilIdle();  // the deadline passes at once
  ASSERT_EQ(launcher_.starts.size(), 1u);
  pid_t pid = launcher_.starts[0].pid;
  EXPECT_THAT(launcher_.SignalsTo(pid), ElementsAre(SIGKILL));
  ASSERT_TRUE(result->has_value());
  EXPECT_EQ(result->value().status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(result->value().status().message()), HasSubstr("did not register"));
  EXPECT_EQ(pool_->num_workers(), 0u);
  // Too late now.
  EXPECT_EQ(Register(0).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(WorkerPoolTest, WorkerExitingBeforeRegisteringFailsItsPop) {
  PopResult result = Pop(job1_);
  loop_.RunUntilIdle();
  pool_->OnProcessExit(launcher_.starts[0].pid, 1 << 8);  // exit code 1
  loop_.RunUntilIdle();
  ASSERT_TRUE(result->has_value());
  ASSERT_FALSE(result->value().ok());
  EXPECT_THAT(std::string(result->value().status().message()), HasSubstr("exit code 1"));
  EXPECT_THAT(std::string(result->value().status().message()), HasSubstr(launcher_.starts[0].output.err));
  EXPECT_EQ(pool_->num_starting(), 0u);
}

TEST_F(WorkerPoolTest, IdleWorkersBeyondTheSoftLimitAreAskedToExit) {
  config_.num_workers_soft_limit = 1;
  config_.idle_worker_killing_time_ms = 0;
  MakePool();
  PopResult a = Pop(job1_);
  PopResult b = Pop(job1_);
  loop_.RunUntilIdle();
  ASSERT_TRUE(Register(0).ok());
  ASSERT_TRUE(Register(1).ok());
  pool_->PushWorker(a->value()->worker_id);
  loop_.RunUntilIdle();
  EXPECT_TRUE(launcher_.exit_requests.empty());  // one idle worker: within the limit
  pool_->PushWorker(b->value()->worker_id);
  loop_.RunUntilIdle();
  ASSERT_EQ(launcher_.exit_requests.size(), 1u);
  EXPECT_EQ(launcher_.exit_requests[0].address.port(), 20001);
  EXPECT_EQ(pool_->num_idle(), 1u);

  // It agrees and exits: gone, and the other stays.
  launcher_.ReplyExit(absl::OkStatus(), true);
  loop_.RunUntilIdle();
  pool_->OnProcessExit(launcher_.starts[1].pid, 0);
  ASSERT_EQ(gone_.size(), 1u);
  EXPECT_EQ(gone_[0].worker_id, b->value()->worker_id);
  EXPECT_EQ(pool_->num_workers(), 1u);
  EXPECT_EQ(pool_->num_idle(), 1u);
}

TEST_F(WorkerPoolTest, IdleWorkerThatDeclinesToExitIsKept) {
  config_.num_workers_soft_limit = 0;
  config_.idle_worker_killing_time_ms = 0;
  config_.worker_exit_grace_ms = 1000000;
  MakePool();
  PopResult a = Pop(job1_);
  loop_.RunUntilIdle();
  ASSERT_TRUE(Register(0).ok());
  pool_->PushWorker(a->value()->worker_id);
  loop_.RunUntilIdle();
  ASSERT_EQ(launcher_.exit_requests.size(), 1u);
  launcher_.ReplyExit(absl::OkStatus(), false);  // it still owns objects
  loop_.RunUntilIdle();
  EXPECT_EQ(pool_->num_workers(), 1u);
  EXPECT_TRUE(launcher_.SignalsTo(launcher_.starts[0].pid).empty());
  // It is asked again after another idle period.
  ASSERT_EQ(launcher_.exit_requests.size(), 1u);
  // This time the RPC fails: SIGTERM.
  launcher_.ReplyExit(absl::UnavailableError("connection refused"), false);
  loop_.RunUntilIdle();
  EXPECT_THAT(launcher_.SignalsTo(launcher_.starts[0].pid), ElementsAre(SIGTERM));
}

TEST_F(WorkerPoolTest, LeasedWorkerExitIsAnnounced) {
  PopResult a = Pop(job1_);
  loop_.RunUntilIdle();
  ASSERT_TRUE(Register(0).ok());
  pool_->OnProcessExit(launcher_.starts[0].pid, SIGKILL);  // killed by signal 9
  ASSERT_EQ(gone_.size(), 1u);
  EXPECT_EQ(gone_[0].worker_id, a->value()->worker_id);
  EXPECT_FALSE(gone_[0].is_driver);
  EXPECT_THAT(gone_[0].reason, HasSubstr("signal 9"));
  EXPECT_EQ(pool_->num_workers(), 0u);
  // Unknown pids are ignored; pushing the dead worker does nothing.
  pool_->OnProcessExit(999999, 0);
  pool_->PushWorker(a->value()->worker_id);
  EXPECT_EQ(pool_->num_idle(), 0u);
  EXPECT_EQ(gone_.size(), 1u);
}

TEST_F(WorkerPoolTest, DriverDeathKillsItsJobsWorkers) {
  WorkerID driver = WorkerID::FromRandom();
  // The pid means nothing here (the driver may run in another pid namespace): only
  // its connection to the object store tells whether it lives.
  ASSERT_TRUE(RegisterDriver(driver, job1_, 4242).ok());
  pool_->OnStoreClientConnected(driver.Hex());
  EXPECT_EQ(pool_->num_drivers(), 1u);
  PopResult a = Pop(job1_);
  PopResult b = Pop(job2_);
  PopResult starting = Pop(job1_);
  loop_.RunUntilIdle();
  ASSERT_TRUE(Register(0).ok());
  ASSERT_TRUE(Register(1).ok());
  ASSERT_EQ(launcher_.starts.size(), 3u);

  pool_->CheckDrivers();  // still connected
  pool_->OnStoreClientClosed(WorkerID::FromRandom().Hex());  // another client
  pool_->OnStoreClientClosed("not a worker id");
  EXPECT_TRUE(gone_.empty());

  pool_->OnStoreClientClosed(driver.Hex());
  loop_.RunUntilIdle();
  EXPECT_EQ(pool_->num_drivers(), 0u);
  ASSERT_FALSE(gone_.empty());
  EXPECT_TRUE(gone_[0].is_driver);
  EXPECT_EQ(gone_[0].worker_id, driver);
  EXPECT_EQ(gone_[0].job_id, job1_);
  // Job 1's workers (leased and starting) are killed; job 2's is not.
  EXPECT_THAT(launcher_.SignalsTo(launcher_.starts[0].pid), ElementsAre(SIGKILL));
  EXPECT_THAT(launcher_.SignalsTo(launcher_.starts[2].pid), ElementsAre(SIGKILL));
  EXPECT_TRUE(launcher_.SignalsTo(launcher_.starts[1].pid).empty());
  EXPECT_EQ(pool_->num_workers(), 1u);
  ASSERT_TRUE(starting->has_value());
  EXPECT_FALSE(starting->value().ok());
}

TEST_F(WorkerPoolTest, DriverThatNeverConnectsToTheStoreIsGoneAfterTheRegisterTimeout) {
  config_.worker_register_timeout_ms = 0;
  WorkerID connected = WorkerID::FromRandom();
  WorkerID silent = WorkerID::FromRandom();
  ASSERT_TRUE(RegisterDriver(connected, job1_, 10).ok());
  ASSERT_TRUE(RegisterDriver(silent, job2_, 11).ok());
  pool_->OnStoreClientConnected(connected.Hex());
  ASSERT_TRUE(manta::testing::WaitFor([&] {
    pool_->CheckDrivers();
    return pool_->num_drivers() == 1u;
  }, 5000));
  ASSERT_EQ(gone_.size(), 1u);
  EXPECT_EQ(gone_[0].worker_id, silent);
}

TEST_F(WorkerPoolTest, MalformedDriverRegistrationIsRejected) {
  rpc::RegisterWorkerRequest request;
  request.set_worker_type(rpc::DRIVER);
  request.set_worker_id("short");
  request.set_job_id(job1_.Binary());
  request.set_pid(10);
  EXPECT_EQ(CallRegister(request).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool_->num_drivers(), 0u);
}

TEST_F(WorkerPoolTest, ShutdownKillsEveryWorker) {
  Pop(job1_);
  Pop(job2_);
  loop_.RunUntilIdle();
  ASSERT_TRUE(Register(0).ok());
  pool_->Shutdown();
  EXPECT_THAT(launcher_.SignalsTo(launcher_.starts[0].pid), ElementsAre(SIGKILL));
  EXPECT_THAT(launcher_.SignalsTo(launcher_.starts[1].pid), ElementsAre(SIGKILL));
  EXPECT_EQ(pool_->num_workers(), 0u);
  PopResult late = Pop(job1_);
  loop_.RunUntilIdle();
  ASSERT_TRUE(late->has_value());
  EXPECT_EQ(late->value().status().code(), absl::StatusCode::kUnavailable);
}

// ---- Runtime envs: workers keyed by (job, env) ------------------------------------

TEST_F(WorkerPoolTest, AWorkerStartsWithItsRuntimeEnvsVariablesAndDirectory) {
  testing::TempDir dir;
  const std::string env = R"({"env_vars":{"MANTA_WORKER_ID":"nope","MODE":"fast","USER_VAR":"env"},"working_dir":")" +
                          dir.path() + R"("})";
  rpc::JobConfig config = job_config_;
  (*config.mutable_worker_env())["USER_VAR"] = "job";
  pool_->SetJobConfig(job1_, config);
  auto result = std::make_shared<std::optional<absl::StatusOr<WorkerInfo>>>();
  pool_->PopWorker(job1_, env, [result](absl::StatusOr<WorkerInfo> w) { *result = std::move(w); });
  loop_.RunUntilIdle();
  ASSERT_EQ(launcher_.starts.size(), 1u);
  const FakeWorkerLauncher::StartRecord& start = launcher_.starts[0];
  EXPECT_EQ(start.working_dir, dir.path());
  EXPECT_EQ(start.env.at("MODE"), "fast");
  EXPECT_EQ(start.env.at("USER_VAR"), "env");  // the runtime env's value wins over the job's
  EXPECT_NE(start.env.at("MANTA_WORKER_ID"), "nope");  // identity is never overridden
  EXPECT_EQ(start.env.at("MANTA_RUNTIME_ENV"), env);  // what its tasks' children inherit
  ASSERT_TRUE(Register(0).ok());
  ASSERT_TRUE(result->has_value() && result->value().ok());
  EXPECT_EQ(result->value()->runtime_env, env);
}

TEST_F(WorkerPoolTest, AWorkerWithoutARuntimeEnvStartsInTheRayletsDirectory) {
  Pop(job1_);
  loop_.RunUntilIdle();
  ASSERT_EQ(launcher_.starts.size(), 1u);
  EXPECT_EQ(launcher_.starts[0].working_dir, "");
  EXPECT_FALSE(launcher_.starts[0].env.contains("MANTA_RUNTIME_ENV"));
}

TEST_F(WorkerPoolTest, WorkersOfOneEnvNeverServeAnotherAndIdleOnesAreReused) {
  const std::string env_a = R"({"env_vars":{"E":"a"}})";
  const std::string env_b = R"({"env_vars":{"E":"b"}})";
  PopResult a = PopEnv(job1_, env_a);
  loop_.RunUntilIdle();
  ASSERT_TRUE(Register(0).ok());
  ASSERT_TRUE(a->has_value() && a->value().ok());
  const WorkerID worker_a = a->value()->worker_id;
  pool_->PushWorker(worker_a);  // idle now, for env_a only
  EXPECT_EQ(pool_->num_idle(), 1u);

  // Another env (and no env at all) gets a new worker, not the idle one.
  PopResult b = PopEnv(job1_, env_b);
  PopResult none = PopEnv(job1_, "");
  loop_.RunUntilIdle();
  ASSERT_EQ(launcher_.starts.size(), 3u);
  EXPECT_FALSE(b->has_value());
  EXPECT_FALSE(none->has_value());
  EXPECT_EQ(launcher_.starts[1].env.at("E"), "b");
  EXPECT_FALSE(launcher_.starts[2].env.contains("E"));
  EXPECT_EQ(pool_->num_idle(), 1u);
  ASSERT_TRUE(Register(1).ok());
  ASSERT_TRUE(Register(2).ok());
  ASSERT_TRUE(b->has_value() && b->value().ok());
  ASSERT_TRUE(none->has_value() && none->value().ok());
  EXPECT_NE(b->value()->worker_id, worker_a);
  EXPECT_NE(none->value()->worker_id, worker_a);
  EXPECT_EQ(b->value()->runtime_env, env_b);

  // The same env again: the idle worker, no new start.
  PopResult again = PopEnv(job1_, env_a);
  loop_.RunUntilIdle();
  EXPECT_EQ(launcher_.starts.size(), 3u);
  ASSERT_TRUE(again->has_value() && again->value().ok());
  EXPECT_EQ(again->value()->worker_id, worker_a);

  // A worker returned while another env's pop waits does not serve it.
  PopResult waiting_b = PopEnv(job1_, env_b);
  loop_.RunUntilIdle();
  ASSERT_EQ(launcher_.starts.size(), 4u);
  pool_->PushWorker(worker_a);
  loop_.RunUntilIdle();
  EXPECT_FALSE(waiting_b->has_value());
  EXPECT_EQ(pool_->num_idle(), 1u);
  ASSERT_TRUE(Register(3).ok());
  ASSERT_TRUE(waiting_b->has_value() && waiting_b->value().ok());
  EXPECT_EQ(waiting_b->value()->runtime_env, env_b);
}

TEST_F(WorkerPoolTest, TheSameEnvOfAnotherJobGetsItsOwnWorker) {
  const std::string env = R"({"env_vars":{"E":"a"}})";
  PopResult first = PopEnv(job1_, env);
  loop_.RunUntilIdle();
  ASSERT_TRUE(Register(0).ok());
  pool_->PushWorker(first->value()->worker_id);
  PopResult other_job = PopEnv(job2_, env);
  loop_.RunUntilIdle();
  EXPECT_EQ(launcher_.starts.size(), 2u);
  EXPECT_EQ(launcher_.starts[1].env.at("MANTA_JOB_ID"), job2_.Hex());
}

TEST_F(WorkerPoolTest, AMissingWorkingDirFailsEveryPopOfItsEnvAtOnce) {
  const std::string env = R"({"working_dir":"/nonexistent/manta/renv"})";
  PopResult first = PopEnv(job1_, env);
  PopResult second = PopEnv(job1_, env);
  PopResult plain = PopEnv(job1_, "");
  loop_.RunUntilIdle();
  // Only the env-less pop started a worker.
  ASSERT_EQ(launcher_.starts.size(), 1u);
  for (const PopResult& r : {first, second}) {
    ASSERT_TRUE(r->has_value());
    ASSERT_FALSE(r->value().ok());
    EXPECT_TRUE(IsRuntimeEnvError(r->value().status()));
    EXPECT_THAT(std::string(r->value().status().message()), HasSubstr("/nonexistent/manta/renv"));
  }
  EXPECT_FALSE(plain->has_value());
  EXPECT_EQ(pool_->num_starting(), 1u);
}

TEST_F(WorkerPoolTest, AnEnvACppWorkerCannotApplyFailsItsPopNamingTheField) {
  PopResult pip = PopEnv(job1_, R"({"pip":["requests"]})");
  PopResult number = PopEnv(job1_, R"({"env_vars":{"A":1}})");
  loop_.RunUntilIdle();
  EXPECT_TRUE(launcher_.starts.empty());
  ASSERT_TRUE(pip->has_value() && number->has_value());
  EXPECT_TRUE(IsRuntimeEnvError(pip->value().status()));
  EXPECT_THAT(std::string(pip->value().status().message()), HasSubstr("'pip'"));
  EXPECT_TRUE(IsRuntimeEnvError(number->value().status()));
  EXPECT_THAT(std::string(number->value().status().message()), HasSubstr("'A'"));
}

TEST_F(WorkerPoolTest, AStartFailureOfAnEnvsWorkerIsNotAnEnvError) {
  testing::TempDir dir;
  launcher_.FailNextStart(absl::NotFoundError("cannot execute /home/u/my_driver"));
  PopResult r = PopEnv(job1_, R"({"working_dir":")" + dir.path() + R"("})");
  loop_.RunUntilIdle();
  ASSERT_TRUE(r->has_value());
  ASSERT_FALSE(r->value().ok());
  EXPECT_FALSE(IsRuntimeEnvError(r->value().status()));
}

// ---- Records of live and gone workers (`manta list workers`, `manta logs`) ----------

// The record of `id` among `records`, or null.
const WorkerPool::WorkerRecord* RecordFor(const std::vector<WorkerPool::WorkerRecord>& records, const WorkerID& id) {
  for (const WorkerPool::WorkerRecord& r : records) {
    if (r.worker_id == id) return &r;
  }
  return nullptr;
}

WorkerID StartedWorkerId(const FakeWorkerLauncher::StartRecord& start) {
  return *WorkerID::FromHex(start.env.at("MANTA_WORKER_ID"));
}

TEST_F(WorkerPoolTest, AWorkersRecordGoesFromStartingToLeasedToIdle) {
  PopResult result = Pop(job1_);
  loop_.RunUntilIdle();
  ASSERT_EQ(launcher_.starts.size(), 1u);
  const WorkerID id = StartedWorkerId(launcher_.starts[0]);
  auto records = pool_->WorkerRecords();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].worker_id, id);
  EXPECT_EQ(records[0].job_id, job1_);
  EXPECT_STREQ(records[0].state, "STARTING");
  EXPECT_TRUE(records[0].alive);
  EXPECT_FALSE(records[0].is_driver);
  EXPECT_EQ(records[0].pid, launcher_.starts[0].pid);
  EXPECT_EQ(records[0].output.out, launcher_.starts[0].output.out);
  EXPECT_EQ(records[0].output.err, launcher_.starts[0].output.err);
  EXPECT_GT(records[0].start_unix_ms, 0);
  EXPECT_EQ(records[0].end_unix_ms, 0);
  EXPECT_TRUE(records[0].exit_detail.empty());

  ASSERT_TRUE(Register(0, 24680).ok());
  ASSERT_TRUE(result->has_value() && result->value().ok());
  records = pool_->WorkerRecords();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_STREQ(records[0].state, "LEASED");
  EXPECT_EQ(records[0].address.port(), 24680);
  EXPECT_EQ(records[0].address.worker_id(), id.Binary());
  EXPECT_EQ(records[0].pid, launcher_.starts[0].pid);

  pool_->PushWorker(id);
  records = pool_->WorkerRecords();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_STREQ(records[0].state, "IDLE");
  EXPECT_TRUE(records[0].alive);
}

TEST_F(WorkerPoolTest, KilledAndExitedWorkersAreRememberedAsDead) {
  PopResult a = Pop(job1_);
  PopResult b = Pop(job1_);
  PopResult c = Pop(job2_);
  loop_.RunUntilIdle();
  ASSERT_EQ(launcher_.starts.size(), 3u);
  ASSERT_TRUE(Register(0).ok());
  ASSERT_TRUE(Register(1).ok());
  const WorkerID killed = StartedWorkerId(launcher_.starts[0]);
  const WorkerID exited = StartedWorkerId(launcher_.starts[1]);
  const WorkerID starting = StartedWorkerId(launcher_.starts[2]);
  pool_->DisconnectWorker(killed, "its lease was revoked");
  pool_->OnProcessExit(launcher_.starts[1].pid, 3 << 8);  // exit code 3
  pool_->OnProcessExit(launcher_.starts[2].pid, SIGSEGV);  // before registering
  loop_.RunUntilIdle();

  const auto records = pool_->WorkerRecords();
  const WorkerPool::WorkerRecord* k = RecordFor(records, killed);
  ASSERT_NE(k, nullptr);
  EXPECT_STREQ(k->state, "DEAD");
  EXPECT_FALSE(k->alive);
  EXPECT_EQ(k->pid, launcher_.starts[0].pid);
  EXPECT_EQ(k->exit_detail, "its lease was revoked");
  EXPECT_GT(k->start_unix_ms, 0);
  EXPECT_GE(k->end_unix_ms, k->start_unix_ms);
  EXPECT_EQ(k->output.out, launcher_.starts[0].output.out);
  const WorkerPool::WorkerRecord* e = RecordFor(records, exited);
  ASSERT_NE(e, nullptr);
  EXPECT_STREQ(e->state, "DEAD");
  EXPECT_FALSE(e->alive);
  EXPECT_EQ(e->exit_detail, "worker process exited (exit code 3)");
  EXPECT_GE(e->end_unix_ms, e->start_unix_ms);
  const WorkerPool::WorkerRecord* s = RecordFor(records, starting);
  ASSERT_NE(s, nullptr);
  EXPECT_STREQ(s->state, "DEAD");
  EXPECT_EQ(s->job_id, job2_);
  EXPECT_THAT(s->exit_detail, HasSubstr("signal 11"));
  // The pops that lost their workers started new ones; those are live.
  size_t live = 0;
  for (const auto& r : records) live += r.alive ? 1 : 0;
  EXPECT_EQ(live, pool_->num_workers());
  EXPECT_EQ(records.size(), pool_->num_workers() + 3);
  // A second report of the killed worker's exit adds nothing.
  pool_->OnProcessExit(launcher_.starts[0].pid, SIGKILL);
  EXPECT_EQ(pool_->WorkerRecords().size(), records.size());
}

TEST_F(WorkerPoolTest, ADriverIsRunningWhileRegisteredAndDeadOnceGone) {
  const WorkerID driver = WorkerID::FromRandom();
  ASSERT_TRUE(RegisterDriver(driver, job1_, 4242).ok());
  pool_->OnStoreClientConnected(driver.Hex());
  auto records = pool_->WorkerRecords();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].worker_id, driver);
  EXPECT_EQ(records[0].job_id, job1_);
  EXPECT_TRUE(records[0].is_driver);
  EXPECT_TRUE(records[0].alive);
  EXPECT_STREQ(records[0].state, "RUNNING");
  EXPECT_EQ(records[0].pid, 4242);
  EXPECT_EQ(records[0].address.port(), 30000);
  EXPECT_EQ(records[0].address.worker_id(), driver.Binary());
  EXPECT_EQ(records[0].address.node_id(), options_.node_id.Binary());
  EXPECT_GT(records[0].start_unix_ms, 0);
  EXPECT_TRUE(records[0].output.out.empty());
  EXPECT_TRUE(records[0].output.err.empty());
  EXPECT_TRUE(pool_->WorkerLogs().empty());  // drivers have no worker log

  pool_->OnStoreClientClosed(driver.Hex());
  records = pool_->WorkerRecords();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].worker_id, driver);
  EXPECT_TRUE(records[0].is_driver);
  EXPECT_FALSE(records[0].alive);
  EXPECT_STREQ(records[0].state, "DEAD");
  EXPECT_EQ(records[0].pid, 4242);
  EXPECT_GE(records[0].end_unix_ms, records[0].start_unix_ms);
  EXPECT_EQ(records[0].exit_detail, "driver gone: its connection to the object store closed");
  EXPECT_TRUE(pool_->WorkerLogs().empty());
}

TEST_F(WorkerPoolTest, WorkerLogsListLiveThenGoneWorkersButNoDrivers) {
  const WorkerID driver = WorkerID::FromRandom();
  ASSERT_TRUE(RegisterDriver(driver, job2_, 99).ok());
  Pop(job1_);
  Pop(job1_);
  loop_.RunUntilIdle();
  ASSERT_EQ(launcher_.starts.size(), 2u);
  ASSERT_TRUE(Register(0).ok());
  ASSERT_TRUE(Register(1).ok());
  pool_->DisconnectWorker(StartedWorkerId(launcher_.starts[0]), "test");
  pool_->OnStoreClientConnected(driver.Hex());
  pool_->OnStoreClientClosed(driver.Hex());  // a gone driver: not in the logs either

  const auto logs = pool_->WorkerLogs();
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_EQ(logs[0].worker_id, StartedWorkerId(launcher_.starts[1]));
  EXPECT_TRUE(logs[0].alive);
  EXPECT_EQ(logs[0].output.out, launcher_.starts[1].output.out);
  EXPECT_EQ(logs[1].worker_id, StartedWorkerId(launcher_.starts[0]));
  EXPECT_FALSE(logs[1].alive);
  EXPECT_EQ(logs[1].output.out, launcher_.starts[0].output.out);
  for (const auto& r : logs) EXPECT_FALSE(r.is_driver);
  // The records have the gone driver as well.
  const auto records = pool_->WorkerRecords();
  EXPECT_EQ(records.size(), 3u);
  const WorkerPool::WorkerRecord* d = RecordFor(records, driver);
  ASSERT_NE(d, nullptr);
  EXPECT_TRUE(d->is_driver);
  EXPECT_STREQ(d->state, "DEAD");
}

TEST_F(WorkerPoolTest, OnlyTheLastGoneWorkersAreRemembered) {
  // Each round starts a worker, leases it, returns it and lets its process exit (an
  // idle worker's exit is not logged, so the rounds stay quiet).
  const size_t rounds = WorkerPool::kMaxExitedWorkers + 10;
  for (size_t i = 0; i < rounds; ++i) {
    PopResult result = Pop(job1_);
    loop_.RunUntilIdle();
    ASSERT_EQ(launcher_.starts.size(), i + 1);
    ASSERT_TRUE(Register(i).ok());
    ASSERT_TRUE(result->has_value() && result->value().ok());
    pool_->PushWorker(result->value()->worker_id);
    pool_->OnProcessExit(launcher_.starts[i].pid, static_cast<int>(i % 100) << 8);
  }
  PopResult live = Pop(job1_);
  loop_.RunUntilIdle();
  const auto records = pool_->WorkerRecords();
  ASSERT_EQ(records.size(), 1 + WorkerPool::kMaxExitedWorkers);
  EXPECT_TRUE(records[0].alive);
  EXPECT_STREQ(records[0].state, "STARTING");
  // The ten oldest went; the rest are kept oldest first.
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(RecordFor(records, StartedWorkerId(launcher_.starts[i])), nullptr) << i;
  }
  EXPECT_EQ(records[1].worker_id, StartedWorkerId(launcher_.starts[10]));
  EXPECT_EQ(records[1].exit_detail, "worker process exited (exit code 10)");
  EXPECT_EQ(records.back().worker_id, StartedWorkerId(launcher_.starts[rounds - 1]));
  EXPECT_STREQ(records.back().state, "DEAD");
  EXPECT_EQ(pool_->WorkerLogs().size(), 1 + WorkerPool::kMaxExitedWorkers);
}

}  // namespace
}  // namespace manta::raylet
