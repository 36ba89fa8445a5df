// JobStore (src/jobs/job_record.h) on a real cluster's GCS and Redis: a record made,
// refused again under the same id, updated, listed, and still there after the GCS
// was killed and started again against the same Redis; a job running meanwhile; a
// restarted dashboard with jobs of its predecessor.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <fstream>

#include "src/common/process.h"
#include "src/common/rpc/grpc_client.h"
#include "src/common/util.h"
#include "src/jobs/job_record.h"
#include "tests/integration/cluster_harness.h"
#include "tests/test_util/test_util.h"

namespace manta::jobs {
namespace {

JobRecord NewRecord(const std::string& id) {
  JobRecord r;
  r.submission_id = id;
  r.entrypoint = "echo hello";
  r.metadata = {{"team", "data"}};
  r.start_time_ms = 1700000000000;
  return r;
}

TEST(JobStoreTest, RecordsAreKeptInTheGcsAndOutliveItsRestart) {
  manta::testing::ClusterHarness harness;
  harness.StartHead({"--dashboard-port", "0"});
  JobStore store(rpc::MakeChannel(harness.gcs_address(), 64 << 20));

  ASSERT_TRUE(store.Create(NewRecord("etl-1")).ok());
  absl::Status again = store.Create(NewRecord("etl-1"));
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
  EXPECT_NE(again.message().find("'etl-1'"), std::string::npos) << again;

  JobRecord running = NewRecord("etl-1");
  running.status = JobStatus::kRunning;
  running.supervisor_pid = 1234;
  ASSERT_TRUE(store.Update(running).ok());
  ASSERT_TRUE(store.Create(NewRecord("etl-2")).ok());

  absl::StatusOr<JobRecord> got = store.Get("etl-1");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->status, JobStatus::kRunning);
  EXPECT_EQ(got->supervisor_pid, 1234);
  EXPECT_EQ(got->metadata.at("team"), "data");
  EXPECT_EQ(store.Get("nope").status().code(), absl::StatusCode::kNotFound);

  absl::StatusOr<std::vector<JobRecord>> all = store.List();
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<std::string> ids;
  for (const JobRecord& r : *all) ids.push_back(r.submission_id);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{"etl-1", "etl-2"}));

  // Redis keeps them: a new GCS serves the same records.
  absl::StatusOr<pid_t> restarted = harness.RestartGcs();
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  JobStore after(rpc::MakeChannel(harness.gcs_address(), 64 << 20));
  absl::StatusOr<JobRecord> kept = after.Get("etl-1");
  EXPECT_TRUE(manta::testing::WaitFor(
      [&] {
        kept = after.Get("etl-1");
        return kept.ok();
      },
      30000))
      << kept.status();
  EXPECT_EQ(kept->status, JobStatus::kRunning);
  EXPECT_EQ(kept->entrypoint, "echo hello");
}

// A job that runs while the GCS is killed and started again: its supervisor records
// how it ended once the GCS is back, and `manta job` finds it.
TEST(JobStoreTest, AJobRunningAcrossAGcsRestartHasItsEndRecorded) {
  manta::testing::ClusterHarness harness;
  harness.StartHead();
  const std::string marker = harness.temp_root() + "/job-started";
  manta::testing::CommandResult submitted = harness.Manta(
      {"job", "submit", "--submission-id", "across", "--", "touch " + marker + "; sleep 3; echo done"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  ASSERT_TRUE(manta::testing::WaitForFile(marker, 30000));
  absl::StatusOr<pid_t> restarted = harness.RestartGcs();
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  std::string status;
  EXPECT_TRUE(manta::testing::WaitFor(
      [&] {
        manta::testing::CommandResult r = harness.Manta({"job", "status", "across"});
        nlohmann::json j = nlohmann::json::parse(r.output, nullptr, false);
        status = j.is_object() ? j.value("status", "") : r.output;  // the GCS may not answer yet
        return status == "SUCCEEDED";
      },
      60000))
      << status;
  EXPECT_EQ(harness.Manta({"job", "logs", "across"}).output, "done\n");
}

std::string JobStatusOf(manta::testing::ClusterHarness& harness, const std::string& id) {
  manta::testing::CommandResult r = harness.Manta({"job", "status", id});
  nlohmann::json j = nlohmann::json::parse(r.output, nullptr, false);
  return j.is_object() ? j.value("status", "") + ": " + j.value("message", "") : r.output;
}

std::vector<std::string> CommandLineOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::vector<std::string> argv;
  for (std::string arg; std::getline(in, arg, '\0');) argv.push_back(arg);
  return argv;
}

// The head's dashboard dies and a new one starts: it fails the job whose supervisor
// died meanwhile, and can stop the one whose supervisor still runs.
TEST(JobStoreTest, ARestartedDashboardFailsOrphansAndStopsItsPredecessorsJobs) {
  manta::testing::ClusterHarness harness;
  harness.StartHead();
  for (const char* id : {"kept", "orphan"}) {
    ASSERT_EQ(harness.Manta({"job", "submit", "--submission-id", id, "--", "sleep 300"}).exit_code, 0);
    ASSERT_TRUE(manta::testing::WaitFor([&] { return JobStatusOf(harness, id).rfind("RUNNING", 0) == 0; }, 30000));
  }
  JobStore store(rpc::MakeChannel(harness.gcs_address(), 64 << 20));
  absl::StatusOr<JobRecord> orphan = store.Get("orphan");
  ASSERT_TRUE(orphan.ok());
  std::vector<pid_t> dashboards = harness.Pids("dashboard");
  ASSERT_EQ(dashboards.size(), 1u);
  std::vector<std::string> argv = CommandLineOf(dashboards[0]);
  const std::string port = *ReadFile(harness.HeadSessionDir() + "/dashboard.ready");
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == "--port") argv[i + 1] = std::to_string(std::atoi(port.c_str()));  // the port it was on
  }
  kill(dashboards[0], SIGKILL);
  ASSERT_TRUE(WaitForExit(dashboards[0], 10000));
  kill(static_cast<pid_t>(orphan->supervisor_pid), SIGKILL);
  kill(-static_cast<pid_t>(orphan->entrypoint_pid), SIGKILL);

  ProcessOptions again;
  again.argv = argv;
  absl::StatusOr<pid_t> dashboard = StartProcess(again);
  ASSERT_TRUE(dashboard.ok()) << dashboard.status();
  EXPECT_TRUE(manta::testing::WaitFor([&] { return JobStatusOf(harness, "orphan").rfind("FAILED", 0) == 0; }, 30000))
      << JobStatusOf(harness, "orphan");
  EXPECT_NE(JobStatusOf(harness, "orphan").find("supervisor is gone"), std::string::npos);
  manta::testing::CommandResult stop = harness.Manta({"job", "stop", "kept"});
  EXPECT_NE(stop.output.find("stopping kept"), std::string::npos) << stop.output;
  EXPECT_TRUE(manta::testing::WaitFor([&] { return JobStatusOf(harness, "kept").rfind("STOPPED", 0) == 0; }, 30000))
      << JobStatusOf(harness, "kept");
  kill(*dashboard, SIGTERM);
  EXPECT_TRUE(WaitForExit(*dashboard, 30000));
}

}  // namespace
}  // namespace manta::jobs
