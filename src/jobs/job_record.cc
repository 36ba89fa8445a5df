#include "src/jobs/job_record.h"

#include <utility>

#include "protos/gcs.grpc.pb.h"
#include "src/common/json.h"
#include "src/common/rpc/call_with_token.h"
#include "src/common/security.h"

namespace manta::jobs {

namespace {

constexpr const char* kStatusNames[] = {"PENDING", "RUNNING", "STOPPED", "SUCCEEDED", "FAILED"};

absl::Status FromGrpc(const grpc::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  return absl::UnavailableError(what + ": the GCS did not answer (" + s.error_message() + ")");
}

// `field` of `j` as a T, or InvalidArgument naming it.
template <typename T>
absl::Status Read(const nlohmann::json& j, const char* field, T* out) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  try {
    *out = it->get<T>();
  } catch (const nlohmann::json::exception&) {
    return absl::InvalidArgumentError(std::string("job record field '") + field + "' has the wrong type");
  }
  return absl::OkStatus();
}

}  // namespace

const char* StatusName(JobStatus status) { return kStatusNames[static_cast<int>(status)]; }

std::optional<JobStatus> ParseStatus(const std::string& name) {
  for (int i = 0; i < 5; ++i) {
    if (name == kStatusNames[i]) return static_cast<JobStatus>(i);
  }
  return std::nullopt;
}

bool IsTerminal(JobStatus status) {
  return status == JobStatus::kStopped || status == JobStatus::kSucceeded || status == JobStatus::kFailed;
}

nlohmann::json JobRecord::ToJson() const {
  nlohmann::json j = {{"type", "SUBMISSION"},
                      {"job_id", nullptr},
                      {"submission_id", submission_id},
                      {"entrypoint", entrypoint},
                      {"status", StatusName(status)},
                      {"message", message},
                      {"start_time", start_time_ms},
                      {"end_time", end_time_ms},
                      {"metadata", metadata},
                      {"runtime_env", runtime_env},
                      {"log_path", log_path},
                      {"supervisor_pid", supervisor_pid},
                      {"entrypoint_pid", entrypoint_pid}};
  j["driver_exit_code"] = driver_exit_code ? nlohmann::json(*driver_exit_code) : nlohmann::json(nullptr);
  return j;
}

absl::StatusOr<JobRecord> JobRecord::FromJson(const std::string& text) {
  nlohmann::json j = ParseJson(text);
  if (!j.is_object()) return absl::InvalidArgumentError("a job record is not a JSON object");
  JobRecord r;
  std::string status;
  int exit_code = 0;
  for (absl::Status s : {Read(j, "submission_id", &r.submission_id), Read(j, "entrypoint", &r.entrypoint),
                         Read(j, "status", &status), Read(j, "message", &r.message),
                         Read(j, "start_time", &r.start_time_ms), Read(j, "end_time", &r.end_time_ms),
                         Read(j, "metadata", &r.metadata), Read(j, "log_path", &r.log_path),
                         Read(j, "supervisor_pid", &r.supervisor_pid), Read(j, "entrypoint_pid", &r.entrypoint_pid),
                         Read(j, "driver_exit_code", &exit_code)}) {
    if (!s.ok()) return s;
  }
  std::optional<JobStatus> parsed = ParseStatus(status);
  if (!parsed) return absl::InvalidArgumentError("job record status '" + status + "' is not a job status");
  r.status = *parsed;
  if (j.contains("driver_exit_code") && !j["driver_exit_code"].is_null()) r.driver_exit_code = exit_code;
  if (j.contains("runtime_env") && j["runtime_env"].is_object()) r.runtime_env = j["runtime_env"];
  if (r.submission_id.empty()) return absl::InvalidArgumentError("a job record has no submission_id");
  return r;
}

absl::Status CheckSubmissionId(const std::string& id) {
  if (id.empty() || id.size() > 128) {
    return absl::InvalidArgumentError("a submission id has 1 to 128 characters, not " + std::to_string(id.size()));
  }
  if (id[0] == '.') return absl::InvalidArgumentError("a submission id may not start with '.': '" + id + "'");
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.';
    if (!ok) {
      return absl::InvalidArgumentError("a submission id is made of letters, digits, '_', '-' and '.': '" + id +
                                        "' is not");
    }
  }
  return absl::OkStatus();
}

std::string NewSubmissionId() { return "mantasubmit_" + SecureRandomHex(8); }

JobStore::JobStore(std::shared_ptr<grpc::Channel> gcs, int64_t deadline_s)
    : gcs_(std::move(gcs)), deadline_s_(deadline_s) {}

absl::Status JobStore::Put(const JobRecord& record, bool overwrite) {
  auto stub = rpc::InternalKVGcsService::NewStub(gcs_);
  rpc::InternalKVPutRequest request;
  request.set_namespace_(kJobsNamespace);
  request.set_key(record.submission_id);
  request.set_value(DumpJson(record.ToJson()));
  request.set_overwrite(overwrite);
  rpc::InternalKVPutReply reply;
  grpc::Status s =
      rpc::CallWithToken(*stub, &rpc::InternalKVGcsService::Stub::InternalKVPut, request, &reply, deadline_s_);
  if (!s.ok()) return FromGrpc(s, "recording job " + record.submission_id);
  if (!overwrite && !reply.added()) {
    return absl::AlreadyExistsError("a job with submission id '" + record.submission_id + "' exists already");
  }
  return absl::OkStatus();
}

absl::Status JobStore::Create(const JobRecord& record) { return Put(record, /*overwrite=*/false); }

absl::Status JobStore::Update(const JobRecord& record) { return Put(record, /*overwrite=*/true); }

absl::StatusOr<JobRecord> JobStore::Get(const std::string& submission_id) {
  auto stub = rpc::InternalKVGcsService::NewStub(gcs_);
  rpc::InternalKVGetRequest request;
  request.set_namespace_(kJobsNamespace);
  request.set_key(submission_id);
  rpc::InternalKVGetReply reply;
  grpc::Status s =
      rpc::CallWithToken(*stub, &rpc::InternalKVGcsService::Stub::InternalKVGet, request, &reply, deadline_s_);
  if (!s.ok()) return FromGrpc(s, "reading job " + submission_id);
  if (!reply.found()) return absl::NotFoundError("no job has submission id '" + submission_id + "'");
  return JobRecord::FromJson(reply.value());
}

absl::StatusOr<std::vector<JobRecord>> JobStore::List() {
  auto stub = rpc::InternalKVGcsService::NewStub(gcs_);
  rpc::InternalKVKeysRequest request;
  request.set_namespace_(kJobsNamespace);
  rpc::InternalKVKeysReply keys;
  grpc::Status s =
      rpc::CallWithToken(*stub, &rpc::InternalKVGcsService::Stub::InternalKVKeys, request, &keys, deadline_s_);
  if (!s.ok()) return FromGrpc(s, "listing jobs");
  std::vector<JobRecord> records;
  for (const std::string& key : keys.results()) {
    absl::StatusOr<JobRecord> record = Get(key);
    if (record.ok()) records.push_back(std::move(*record));
  }
  return records;
}

absl::Status PublishDashboardUrl(const std::shared_ptr<grpc::Channel>& gcs, const std::string& url) {
  auto stub = rpc::InternalKVGcsService::NewStub(gcs);
  rpc::InternalKVPutRequest request;
  request.set_namespace_("dashboard");
  request.set_key("url");
  request.set_value(url);
  request.set_overwrite(true);
  rpc::InternalKVPutReply reply;
  return FromGrpc(rpc::CallWithToken(*stub, &rpc::InternalKVGcsService::Stub::InternalKVPut, request, &reply, 10),
                  "publishing the dashboard's address");
}

absl::StatusOr<std::string> FindDashboardUrl(const std::shared_ptr<grpc::Channel>& gcs) {
  auto stub = rpc::InternalKVGcsService::NewStub(gcs);
  rpc::InternalKVGetRequest request;
  request.set_namespace_("dashboard");
  request.set_key("url");
  rpc::InternalKVGetReply reply;
  grpc::Status s = rpc::CallWithToken(*stub, &rpc::InternalKVGcsService::Stub::InternalKVGet, request, &reply, 10);
  if (!s.ok()) return FromGrpc(s, "finding the dashboard");
  if (!reply.found() || reply.value().empty()) {
    return absl::NotFoundError("the cluster's head runs no dashboard (it was started with --dashboard-port 0?)");
  }
  return reply.value();
}

}  // namespace manta::jobs
