// `manta job` on a real cluster (its head's dashboard runs the Jobs API): a job that
// runs a Ray-style driver (python_free_examples/hello) to success, one that fails
// with its exit code and output, one stopped while it runs, a driver stopped with
// the workers of its tasks, a working directory uploaded with the submission, the REST paths with and
// without the token, bad input (a malformed or taken submission id, an unsupported
// runtime_env field, an unknown id), and a supervisor killed under its job.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>

#include "nlohmann/json.hpp"
#include "src/common/http/http_get.h"
#include "src/common/util.h"
#include "tests/integration/cluster_harness.h"
#include "tests/test_util/test_util.h"

namespace manta::testing {
namespace {

class JobCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    harness_ = new ClusterHarness();
    harness_->StartHead({"--resources", R"({"host0": 100})"});  // for multihost_driver's loop
  }
  static void TearDownTestSuite() {
    delete harness_;
    harness_ = nullptr;
  }
  CommandResult Job(const std::vector<std::string>& args, int64_t timeout_ms = 60000) {
    std::vector<std::string> full = {"job"};
    full.insert(full.end(), args.begin(), args.end());
    return harness_->Manta(full, {}, timeout_ms);
  }
  // The job's record as `manta job status` prints it.
  nlohmann::json Status(const std::string& id) {
    CommandResult r = Job({"status", id});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return nlohmann::json::parse(r.output, nullptr, false);
  }
  bool WaitForStatus(const std::string& id, const std::string& status) {
    return WaitFor(
        [&] {
          nlohmann::json job = Status(id);
          return job.is_object() && job.value("status", "") == status;
        },
        30000);
  }
  static int DashboardPort() {
    absl::StatusOr<std::string> port = ReadFile(harness_->HeadSessionDir() + "/dashboard.ready");
    EXPECT_TRUE(port.ok());
    return port.ok() ? std::atoi(port->c_str()) : 0;
  }
  static ClusterHarness* harness_;
};
ClusterHarness* JobCliTest::harness_ = nullptr;

TEST_F(JobCliTest, ADriverRunsOnTheClusterToItsEnd) {
  const std::string hello = std::string(MANTA_BUILD_DIR) + "/python_free_examples/hello";
  CommandResult r = Job({"submit", "--wait", "--submission-id", "hello-1", "--", hello}, 120000);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("hello-1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Hello, Manta!"), std::string::npos) << r.output;  // the driver's output, followed
  EXPECT_NE(r.output.find("SUCCEEDED"), std::string::npos) << r.output;
  nlohmann::json job = Status("hello-1");
  EXPECT_EQ(job["status"], "SUCCEEDED");
  EXPECT_EQ(job["driver_exit_code"], 0);
  EXPECT_GT(job["end_time"].get<int64_t>(), job["start_time"].get<int64_t>());
  // The driver joined this cluster (RAY_ADDRESS): its job is in the GCS's table.
  CommandResult jobs = harness_->Manta({"list", "jobs"});
  EXPECT_NE(jobs.output.find("python_free_examples/hello"), std::string::npos) << jobs.output;
}

TEST_F(JobCliTest, AFailedEntrypointGivesItsCodeAndOutput) {
  CommandResult r = Job({"submit", "--submission-id", "fails-1", "--runtime-env-json",
                         R"({"env_vars": {"WHO": "the job"}})", "--", "echo from $WHO; exit 3"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(WaitForStatus("fails-1", "FAILED"));
  nlohmann::json job = Status("fails-1");
  EXPECT_EQ(job["driver_exit_code"], 3);
  EXPECT_NE(job["message"].get<std::string>().find("code 3"), std::string::npos) << job;
  CommandResult logs = Job({"logs", "fails-1"});
  EXPECT_EQ(logs.output, "from the job\n");
  // What follows an offset (how `logs -f` and `submit --wait` follow it).
  http::HttpGetOptions options;
  options.bearer_token = harness_->token();
  absl::StatusOr<http::HttpReply> part =
      http::HttpRequest("127.0.0.1", DashboardPort(), "GET", "/api/jobs/fails-1/logs?offset=5", "", options);
  ASSERT_TRUE(part.ok()) << part.status();
  nlohmann::json j = nlohmann::json::parse(part->body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << part->body;
  EXPECT_EQ(j["logs"], "the job\n");
  EXPECT_EQ(j["offset"], 5);
  EXPECT_EQ(j["next_offset"], 13);
}

TEST_F(JobCliTest, StopEndsARunningJob) {
  ASSERT_EQ(Job({"submit", "--submission-id", "long-1", "--", "sleep 300"}).exit_code, 0);
  ASSERT_TRUE(WaitForStatus("long-1", "RUNNING"));
  const int pid = Status("long-1")["entrypoint_pid"].get<int>();
  CommandResult stop = Job({"stop", "long-1"});
  EXPECT_EQ(stop.exit_code, 0) << stop.output;
  ASSERT_TRUE(WaitForStatus("long-1", "STOPPED"));
  EXPECT_TRUE(WaitFor([&] { return kill(pid, 0) != 0; }, 10000)) << "the entrypoint still runs";
  EXPECT_NE(Job({"stop", "long-1"}).output.find("is not running"), std::string::npos);
  CommandResult list = Job({"list"});
  EXPECT_NE(list.output.find("long-1"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find("STOPPED"), std::string::npos) << list.output;
}

// A driver whose tasks run in workers: stopping its job ends it and every worker of it.
TEST_F(JobCliTest, StopEndsTheDriverAndEveryWorkerOfIt) {
  const std::string driver = std::string(MANTA_BUILD_DIR) + "/tests/multihost/multihost_driver";
  ASSERT_EQ(Job({"submit", "--submission-id", "loop-1", "--", driver + " loop 0 120"}).exit_code, 0);
  auto alive_workers = [&] {
    CommandResult r = harness_->Manta({"list", "workers", "--format", "json", "--filter", "is_alive=true",
                                       "--filter", "worker_type=WORKER"});
    nlohmann::json rows = nlohmann::json::parse(r.output, nullptr, false);
    return rows.is_array() ? static_cast<int>(rows.size()) : -1;
  };
  ASSERT_TRUE(WaitFor([&] { return Job({"logs", "loop-1"}).output.find("LOOP 10") != std::string::npos; }, 60000))
      << Job({"logs", "loop-1"}).output;
  EXPECT_GE(alive_workers(), 1);
  ASSERT_EQ(Job({"stop", "loop-1"}).exit_code, 0);
  ASSERT_TRUE(WaitForStatus("loop-1", "STOPPED"));
  EXPECT_TRUE(WaitFor([&] { return alive_workers() == 0; }, 30000)) << alive_workers() << " workers left";
}

TEST_F(JobCliTest, ASupervisorKilledUnderItsJobFailsIt) {
  ASSERT_EQ(Job({"submit", "--submission-id", "orphan-1", "--", "sleep 300"}).exit_code, 0);
  ASSERT_TRUE(WaitForStatus("orphan-1", "RUNNING"));
  nlohmann::json job = Status("orphan-1");
  ASSERT_EQ(kill(job["supervisor_pid"].get<int>(), SIGKILL), 0);
  ASSERT_TRUE(WaitForStatus("orphan-1", "FAILED"));
  EXPECT_NE(Status("orphan-1")["message"].get<std::string>().find("supervisor"), std::string::npos);
  kill(-job["entrypoint_pid"].get<int>(), SIGKILL);  // its entrypoint, left by the killed supervisor
}

TEST_F(JobCliTest, AWorkingDirectoryIsUploadedAndTheEntrypointStartsInIt) {
  TempDir local;
  const std::filesystem::path dir = std::filesystem::path(local.path()) / "app";
  std::filesystem::create_directories(dir / "data");
  std::ofstream(dir / "run.sh") << "#!/bin/sh\necho \"rows: $(cat data/rows.txt)\"\n";
  std::filesystem::permissions(dir / "run.sh", std::filesystem::perms::owner_all);
  std::ofstream(dir / "data/rows.txt") << "42";
  CommandResult r =
      Job({"submit", "--wait", "--submission-id", "wd-1", "--working-dir", dir.string(), "--", "./run.sh"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("rows: 42"), std::string::npos) << r.output;
  // The same files again: the upload is found, not unpacked twice.
  CommandResult again =
      Job({"submit", "--wait", "--submission-id", "wd-2", "--working-dir", dir.string(), "--", "./run.sh"});
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(Status("wd-1")["runtime_env"]["working_dir"], Status("wd-2")["runtime_env"]["working_dir"]);

  // A link out of it is refused before anything is sent.
  std::filesystem::create_symlink("/etc/hostname", dir / "leak");
  CommandResult leak = Job({"submit", "--submission-id", "wd-3", "--working-dir", dir.string(), "--", "true"});
  EXPECT_NE(leak.exit_code, 0);
  EXPECT_NE(leak.output.find("leak is a link to"), std::string::npos) << leak.output;
  EXPECT_NE(Job({"status", "wd-3"}).exit_code, 0);
  // Over the limit (the CLI's config, as the head's): refused, naming the limit.
  std::filesystem::remove(dir / "leak");
  CommandResult big = harness_->Manta({"job", "submit", "--working-dir", dir.string(), "--", "true"},
                                      {{"MANTA_job_working_dir_max_bytes", "10"}});
  EXPECT_NE(big.exit_code, 0);
  EXPECT_NE(big.output.find("more than 10 bytes"), std::string::npos) << big.output;
}

TEST_F(JobCliTest, BadInputIsRefusedByName) {
  ASSERT_EQ(Job({"submit", "--submission-id", "dup-1", "--", "true"}).exit_code, 0);
  CommandResult dup = Job({"submit", "--submission-id", "dup-1", "--", "true"});
  EXPECT_NE(dup.exit_code, 0);
  EXPECT_NE(dup.output.find("'dup-1' exists already"), std::string::npos) << dup.output;
  CommandResult bad_id = Job({"submit", "--submission-id", "../x", "--", "true"});
  EXPECT_NE(bad_id.exit_code, 0);
  EXPECT_NE(bad_id.output.find("'../x'"), std::string::npos) << bad_id.output;
  CommandResult bad_env = Job({"submit", "--runtime-env-json", R"({"pip": ["numpy"]})", "--", "true"});
  EXPECT_NE(bad_env.exit_code, 0);
  EXPECT_NE(bad_env.output.find("'pip' is not supported"), std::string::npos) << bad_env.output;
  CommandResult unknown = Job({"status", "no-such-job"});
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.output.find("'no-such-job'"), std::string::npos) << unknown.output;
}

TEST_F(JobCliTest, TheRestPathsWantTheToken) {
  http::HttpGetOptions options;
  absl::StatusOr<http::HttpReply> anonymous =
      http::HttpRequest("127.0.0.1", DashboardPort(), "POST", "/api/jobs/", R"({"entrypoint": "true"})", options);
  ASSERT_TRUE(anonymous.ok()) << anonymous.status();
  EXPECT_EQ(anonymous->status, 401);
  options.bearer_token = harness_->token();
  absl::StatusOr<http::HttpReply> submitted = http::HttpRequest(
      "127.0.0.1", DashboardPort(), "POST", "/api/jobs/", R"({"entrypoint": "true", "submission_id": "rest-1"})",
      options);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_EQ(submitted->status, 200) << submitted->body;
  EXPECT_EQ(nlohmann::json::parse(submitted->body)["submission_id"], "rest-1");
  absl::StatusOr<http::HttpReply> missing =
      http::HttpRequest("127.0.0.1", DashboardPort(), "POST", "/api/jobs/", R"({"metadata": {}})", options);
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, 400);
  EXPECT_NE(missing->body.find("entrypoint"), std::string::npos) << missing->body;
  ASSERT_TRUE(WaitForStatus("rest-1", "SUCCEEDED"));
  // Uploads: a chunk out of place, an archive altered on the way, a malformed id.
  const std::string zeros(64, '0');
  auto post = [&](const std::string& path, const std::string& body) {
    absl::StatusOr<http::HttpReply> r = http::HttpRequest("127.0.0.1", DashboardPort(), "POST", path, body, options);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : http::HttpReply();
  };
  http::HttpReply misplaced = post("/api/packages/" + zeros + "?offset=5", "x");
  EXPECT_EQ(misplaced.status, 400);
  EXPECT_NE(misplaced.body.find("starts at offset 0"), std::string::npos) << misplaced.body;
  EXPECT_EQ(post("/api/packages/" + zeros + "?offset=0", "x").status, 200);
  http::HttpReply altered = post("/api/packages/" + zeros + "/done", "");
  EXPECT_EQ(altered.status, 400);
  EXPECT_NE(altered.body.find("arrived altered"), std::string::npos) << altered.body;
  EXPECT_EQ(post("/api/packages/../../etc?offset=0", "x").status, 400);

  // The dashboard named by its URL instead of found through the GCS.
  CommandResult by_url = Job({"list", "--address", "http://127.0.0.1:" + std::to_string(DashboardPort())});
  EXPECT_EQ(by_url.exit_code, 0) << by_url.output;
  EXPECT_NE(by_url.output.find("rest-1"), std::string::npos) << by_url.output;
}

}  // namespace
}  // namespace manta::testing
