// Job submissions (`manta job`, the dashboard's /api/jobs, as Ray's Jobs API): a
// command the head runs under a supervisor, and its record.
//
// A record is kept in the GCS's internal KV (namespace kJobsNamespace, key = the
// submission id, value = the record as JSON with the field names of Ray's
// JobDetails), so that it outlives the GCS (Redis keeps it), the supervisor and the
// dashboard. JobStore reads and writes them with the cluster token.
//
// Who writes a record: the dashboard creates it (PENDING) and marks it FAILED when
// the supervisor dies without saying how the job ended; the supervisor marks it
// RUNNING, then SUCCEEDED, FAILED or STOPPED. Only one of them writes at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/channel.h"
#include "nlohmann/json.hpp"

namespace manta::jobs {

inline constexpr char kJobsNamespace[] = "job_submissions";

enum class JobStatus { kPending, kRunning, kStopped, kSucceeded, kFailed };

// "PENDING", "RUNNING", ... (Ray's names).
const char* StatusName(JobStatus status);
std::optional<JobStatus> ParseStatus(const std::string& name);
// STOPPED, SUCCEEDED and FAILED: the job has ended.
bool IsTerminal(JobStatus status);

struct JobRecord {
  std::string submission_id;
  std::string entrypoint;  // run by /bin/sh -c on the head
  JobStatus status = JobStatus::kPending;
  std::string message;  // why it is in its status, for people
  int64_t start_time_ms = 0;  // Unix ms; 0: not yet
  int64_t end_time_ms = 0;
  std::optional<int> driver_exit_code;  // the entrypoint's, once it exited
  std::map<std::string, std::string> metadata;
  nlohmann::json runtime_env = nlohmann::json::object();  // env_vars, working_dir (on the head)
  std::string log_path;  // the entrypoint's stdout and stderr, on the head
  int64_t supervisor_pid = 0;
  int64_t entrypoint_pid = 0;

  // Ray's JobDetails fields (type "SUBMISSION", job_id null, ...) and Manta's own.
  nlohmann::json ToJson() const;
  // InvalidArgument naming the field for a record that is not one.
  static absl::StatusOr<JobRecord> FromJson(const std::string& text);
};

// A submission id given by a user: 1 to 128 of [A-Za-z0-9_.-], not starting with '.'.
absl::Status CheckSubmissionId(const std::string& id);
// A fresh one: "mantasubmit_" and 16 random hex digits.
std::string NewSubmissionId();

// The records in the GCS, over `gcs` with the cluster token (AttachClusterToken).
// Each call blocks for at most deadline_s. Any thread.
class JobStore {
 public:
  explicit JobStore(std::shared_ptr<grpc::Channel> gcs, int64_t deadline_s = 10);

  // AlreadyExists when a record has that submission id.
  absl::Status Create(const JobRecord& record);
  absl::Status Update(const JobRecord& record);
  // NotFound naming the id.
  absl::StatusOr<JobRecord> Get(const std::string& submission_id);
  // Every record, by submission id (records that do not parse are left out).
  absl::StatusOr<std::vector<JobRecord>> List();

 private:
  absl::Status Put(const JobRecord& record, bool overwrite);

  std::shared_ptr<grpc::Channel> gcs_;
  int64_t deadline_s_;
};

// Where the cluster's dashboard (and its Jobs API) is, as `manta start --head`
// publishes it in the GCS's internal KV ("dashboard"/"url"): a URL such as
// https://10.0.0.5:8265/ . Publish: at start; Find: NotFound when the head runs none.
absl::Status PublishDashboardUrl(const std::shared_ptr<grpc::Channel>& gcs, const std::string& url);
absl::StatusOr<std::string> FindDashboardUrl(const std::shared_ptr<grpc::Channel>& gcs);

}  // namespace manta::jobs
