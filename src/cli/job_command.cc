// `manta job submit|status|logs|stop|list`: the head dashboard's Jobs API
// (src/dashboard/job_manager.h) over HTTP with the cluster token.
//
// The dashboard is --address when that is a URL (http[s]://host:port), else
// RAY_ADDRESS when that is one, else the one the cluster's head published in its GCS
// (`manta start --head`), the cluster (--address host:port, RAY_ADDRESS, or the head
// started here) joined as the other commands join it: its token and TLS material
// serve for HTTPS too, so any host of the cluster can submit.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "nlohmann/json.hpp"
#include "src/cli/commands.h"
#include "src/cli/session.h"
#include "src/common/config.h"
#include "src/common/http/http_get.h"
#include "src/common/json.h"
#include "src/common/metrics/metrics_endpoint.h"
#include "src/common/rpc/grpc_client.h"
#include "src/common/security.h"
#include "src/common/util.h"
#include "src/jobs/job_record.h"
#include "src/jobs/package.h"

namespace manta::cli {

namespace {

struct DashboardEndpoint {
  std::string host;
  int port = 0;
  std::string token;
  http::HttpTls tls;  // with https: the cluster's CA (and this member's certificate)
};

// The dashboard: --address (or RAY_ADDRESS) when it is a URL; else the one the
// cluster's head published in the GCS (the cluster found as the other commands find
// it, whose token and TLS material then serve here too).
absl::StatusOr<DashboardEndpoint> FindDashboard(const ClusterFlags& flags) {
  std::string address = flags.address;
  if (address.empty()) {
    const char* env = std::getenv("RAY_ADDRESS");
    if (env != nullptr && std::string(env).rfind("http", 0) == 0) address = env;
  }
  const bool given_url = address.rfind("http", 0) == 0;
  std::string url = given_url ? address : "";
  DashboardEndpoint d;
  if (given_url) {
    // (Found in the session of the head started here when nothing names it.)
    absl::StatusOr<std::string> head = LatestHeadAddress();
    absl::StatusOr<std::string> token = FindClusterToken(head.ok() ? *head : "", flags.token_file, TempRoot());
    if (!token.ok()) return token.status();
    d.token = *token;
  } else {
    absl::StatusOr<std::string> gcs = JoinCluster(flags);
    if (!gcs.ok()) return gcs.status();
    absl::StatusOr<std::string> published = jobs::FindDashboardUrl(rpc::MakeChannel(*gcs, 1 << 20));
    if (!published.ok()) return published.status();
    url = *published;
    d.token = rpc::ProcessCredentials().token;
    d.tls = metrics::HttpTlsOf(rpc::ProcessCredentials());
  }
  auto parsed = http::ParseHttpUrl(url);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError("'" + url + "' is not a dashboard address (http[s]://host:port)");
  }
  d.host = parsed->host;
  d.port = parsed->port;
  const bool https = parsed->https;
  if (!https) d.tls = http::HttpTls();
  if (https && d.tls.ca_pem.empty()) {
    return absl::FailedPreconditionError("the dashboard at " + url +
                                         " wants HTTPS: give the cluster's CA (MANTA_TLS_CA), or its GCS address as "
                                         "--address");
  }
  return d;
}

// The reply's JSON for a 200; else an error with the dashboard's message.
absl::StatusOr<nlohmann::json> Call(const DashboardEndpoint& d, const std::string& method, const std::string& path,
                                    const std::string& body = "") {
  http::HttpGetOptions options;
  options.bearer_token = d.token;
  options.tls = d.tls;
  options.timeout_ms = 30000;
  absl::StatusOr<http::HttpReply> reply = http::HttpRequest(d.host, d.port, method, path, body, options);
  if (!reply.ok()) return reply.status();
  nlohmann::json j = ParseJson(reply->body);
  if (reply->status != 200) {
    const std::string message =
        j.is_object() && j.contains("error") ? j["error"].get<std::string>() : reply->status_line;
    return reply->status == 404 ? absl::NotFoundError(message) : absl::InvalidArgumentError(message);
  }
  if (j.is_discarded()) return absl::UnavailableError("the dashboard's reply is not JSON");
  return j;
}

int JobFail(const std::string& what, const absl::Status& s) {
  std::cerr << "manta job " << what << ": " << s.message() << std::endl;
  return 1;
}

// Prints the job's output from *offset on (all of what is there), moving *offset.
void PrintNewOutput(const DashboardEndpoint& d, const std::string& id, int64_t* offset) {
  while (true) {
    absl::StatusOr<nlohmann::json> logs =
        Call(d, "GET", "/api/jobs/" + id + "/logs?offset=" + std::to_string(*offset));
    if (!logs.ok()) return;
    const std::string text = (*logs)["logs"].get<std::string>();
    std::cout << text << std::flush;
    *offset = (*logs)["next_offset"].get<int64_t>();
    if (text.empty()) return;
  }
}

// Polls the job until it ends (printing its new output with `follow`); its exit code.
int WaitForEnd(const DashboardEndpoint& d, const std::string& id, bool follow) {
  int64_t offset = 0;
  while (true) {
    if (follow) PrintNewOutput(d, id, &offset);
    absl::StatusOr<nlohmann::json> job = Call(d, "GET", "/api/jobs/" + id);
    if (!job.ok()) return JobFail("status", job.status());
    std::optional<jobs::JobStatus> status = jobs::ParseStatus((*job)["status"].get<std::string>());
    if (status && jobs::IsTerminal(*status)) {
      if (follow) PrintNewOutput(d, id, &offset);
      std::cout << "job " << id << " " << jobs::StatusName(*status) << ": " << (*job)["message"].get<std::string>()
                << std::endl;
      return *status == jobs::JobStatus::kSucceeded ? 0 : 1;
    }
    usleep(200 * 1000);
  }
}

// Uploads `dir` (packed) to the head in chunks; its path there.
absl::StatusOr<std::string> UploadWorkingDir(const DashboardEndpoint& d, const std::string& dir) {
  absl::StatusOr<Config> config = Config::FromEnvironment();
  if (!config.ok()) return config.status();
  jobs::PackageLimits limits;
  limits.max_bytes = config->job_working_dir_max_bytes;
  limits.max_files = config->job_working_dir_max_files;
  absl::StatusOr<std::string> archive = jobs::PackDirectory(dir, limits);
  if (!archive.ok()) return archive.status();
  const std::string id = jobs::PackageId(*archive);
  constexpr size_t kChunk = 512 * 1024;
  for (size_t offset = 0; offset < archive->size(); offset += kChunk) {
    absl::StatusOr<nlohmann::json> sent =
        Call(d, "POST", "/api/packages/" + id + "?offset=" + std::to_string(offset), archive->substr(offset, kChunk));
    if (!sent.ok()) return sent.status();
  }
  absl::StatusOr<nlohmann::json> done = Call(d, "POST", "/api/packages/" + id + "/done");
  if (!done.ok()) return done.status();
  return (*done)["working_dir"].get<std::string>();
}

}  // namespace

int RunJobSubmit(const ClusterFlags& flags, const JobSubmission& submission) {
  absl::StatusOr<DashboardEndpoint> d = FindDashboard(flags);
  if (!d.ok()) return JobFail("submit", d.status());
  nlohmann::json body = {{"entrypoint", submission.entrypoint}};
  if (!submission.submission_id.empty()) body["submission_id"] = submission.submission_id;
  for (const auto& [field, text] : {std::pair<const char*, std::string>{"runtime_env", submission.runtime_env_json},
                                    {"metadata", submission.metadata_json}}) {
    if (text.empty()) continue;
    nlohmann::json j = ParseJson(text);
    if (!j.is_object()) {
      return JobFail("submit", absl::InvalidArgumentError(std::string(field) + " is not a JSON object"));
    }
    body[field] = j;
  }
  if (!submission.working_dir.empty()) {
    absl::StatusOr<std::string> uploaded = UploadWorkingDir(*d, submission.working_dir);
    if (!uploaded.ok()) return JobFail("submit", uploaded.status());
    if (!body.contains("runtime_env")) body["runtime_env"] = nlohmann::json::object();
    body["runtime_env"]["working_dir"] = *uploaded;
  }
  absl::StatusOr<nlohmann::json> reply = Call(*d, "POST", "/api/jobs/", DumpJson(body));
  if (!reply.ok()) return JobFail("submit", reply.status());
  const std::string id = (*reply)["submission_id"].get<std::string>();
  std::cout << id << std::endl;
  return submission.wait ? WaitForEnd(*d, id, /*follow=*/true) : 0;
}

int RunJobCommand(const ClusterFlags& flags, const std::string& command, const std::string& id, bool follow) {
  absl::StatusOr<DashboardEndpoint> d = FindDashboard(flags);
  if (!d.ok()) return JobFail(command, d.status());
  if (command == "list") {
    absl::StatusOr<nlohmann::json> all = Call(*d, "GET", "/api/jobs/");
    if (!all.ok()) return JobFail(command, all.status());
    std::printf("%-32s %-10s %s\n", "SUBMISSION_ID", "STATUS", "ENTRYPOINT");
    for (const nlohmann::json& job : *all) {
      std::printf("%-32s %-10s %s\n", job["submission_id"].get<std::string>().c_str(),
                  job["status"].get<std::string>().c_str(), job["entrypoint"].get<std::string>().c_str());
    }
    return 0;
  }
  if (command == "logs" && follow) {
    WaitForEnd(*d, id, /*follow=*/true);
    return 0;
  }
  const std::string path = "/api/jobs/" + id + (command == "logs" ? "/logs" : command == "stop" ? "/stop" : "");
  absl::StatusOr<nlohmann::json> reply = Call(*d, command == "stop" ? "POST" : "GET", path);
  if (!reply.ok()) return JobFail(command, reply.status());
  if (command == "logs") {
    std::cout << (*reply)["logs"].get<std::string>() << std::flush;
  } else if (command == "stop") {
    std::cout << ((*reply)["stopped"].get<bool>() ? "stopping " + id : id + " is not running") << std::endl;
  } else {
    std::cout << DumpJson(*reply, 2) << std::endl;
  }
  return 0;
}

}  // namespace manta::cli
