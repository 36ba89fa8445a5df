// Job records (src/jobs/job_record.h): their JSON (Ray's JobDetails names) both ways,
// refusals of records that are not ones, submission ids.
#include "src/jobs/job_record.h"

#include <gtest/gtest.h>

namespace manta::jobs {
namespace {

TEST(JobRecordTest, RoundTripsThroughJsonWithRaysFieldNames) {
  JobRecord r;
  r.submission_id = "mantasubmit_0123456789abcdef";
  r.entrypoint = "./driver --rows 10";
  r.status = JobStatus::kSucceeded;
  r.message = "the entrypoint exited with code 0";
  r.start_time_ms = 1700000000000;
  r.end_time_ms = 1700000001234;
  r.driver_exit_code = 0;
  r.metadata = {{"owner", "ana"}};
  r.runtime_env = {{"env_vars", {{"ROWS", "10"}}}};
  r.log_path = "/tmp/x/job-driver.log";
  r.supervisor_pid = 42;
  r.entrypoint_pid = 43;
  const nlohmann::json j = r.ToJson();
  EXPECT_EQ(j["type"], "SUBMISSION");
  EXPECT_TRUE(j["job_id"].is_null());
  EXPECT_EQ(j["status"], "SUCCEEDED");
  EXPECT_EQ(j["start_time"], 1700000000000);
  EXPECT_EQ(j["driver_exit_code"], 0);
  absl::StatusOr<JobRecord> back = JobRecord::FromJson(j.dump());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ToJson(), j);
}

TEST(JobRecordTest, NoExitCodeUntilTheEntrypointExited) {
  JobRecord r;
  r.submission_id = "a";
  EXPECT_TRUE(r.ToJson()["driver_exit_code"].is_null());
  absl::StatusOr<JobRecord> back = JobRecord::FromJson(r.ToJson().dump());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->driver_exit_code.has_value());
  EXPECT_EQ(back->status, JobStatus::kPending);
}

TEST(JobRecordTest, RefusesWhatIsNotARecord) {
  EXPECT_EQ(JobRecord::FromJson("not json").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(JobRecord::FromJson("[1]").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(JobRecord::FromJson(R"({"status": "RUNNING"})").status().code(), absl::StatusCode::kInvalidArgument);
  absl::Status wrong_type =
      JobRecord::FromJson(R"({"submission_id": "a", "status": "PENDING", "end_time": "x"})").status();
  EXPECT_NE(wrong_type.message().find("end_time"), std::string::npos) << wrong_type;
  absl::Status bad_status = JobRecord::FromJson(R"({"submission_id": "a", "status": "DONE"})").status();
  EXPECT_NE(bad_status.message().find("'DONE'"), std::string::npos) << bad_status;
}

TEST(JobRecordTest, StatusNamesAndTheEnded) {
  for (JobStatus s : {JobStatus::kPending, JobStatus::kRunning, JobStatus::kStopped, JobStatus::kSucceeded,
                      JobStatus::kFailed}) {
    EXPECT_EQ(ParseStatus(StatusName(s)), s);
  }
  EXPECT_FALSE(IsTerminal(JobStatus::kPending));
  EXPECT_FALSE(IsTerminal(JobStatus::kRunning));
  EXPECT_TRUE(IsTerminal(JobStatus::kStopped));
  EXPECT_TRUE(IsTerminal(JobStatus::kSucceeded));
  EXPECT_TRUE(IsTerminal(JobStatus::kFailed));
  EXPECT_FALSE(ParseStatus("pending").has_value());
}

TEST(JobRecordTest, SubmissionIds) {
  EXPECT_TRUE(CheckSubmissionId("nightly-etl_2026.12.03").ok());
  EXPECT_FALSE(CheckSubmissionId("").ok());
  EXPECT_FALSE(CheckSubmissionId(std::string(129, 'a')).ok());
  EXPECT_FALSE(CheckSubmissionId(".hidden").ok());
  EXPECT_FALSE(CheckSubmissionId("../etc").ok());
  EXPECT_FALSE(CheckSubmissionId("a b").ok());
  EXPECT_NE(CheckSubmissionId("a/b").message().find("'a/b'"), std::string::npos);
  const std::string id = NewSubmissionId();
  EXPECT_EQ(id.rfind("mantasubmit_", 0), 0u);
  EXPECT_EQ(id.size(), std::string("mantasubmit_").size() + 16);
  EXPECT_TRUE(CheckSubmissionId(id).ok());
  EXPECT_NE(NewSubmissionId(), id);
}

}  // namespace
}  // namespace manta::jobs
