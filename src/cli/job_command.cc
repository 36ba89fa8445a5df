// `manta job submit|status|logs|stop|list`: the head dashboard's Jobs API
// (src/dashboard/job_manager.h) over HTTP with the cluster token.
//
// The dashboard is --address when that is a URL (http://host:port), else RAY_ADDRESS
// when that is one, else the dashboard of the cluster's head session on this machine
// (the cluster found as the other commands find it). The token: --token-file,
// $MANTA_CLUSTER_TOKEN_FILE, $MANTA_CLUSTER_TOKEN, or that session's.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "nlohmann/json.hpp"
#include "src/cli/commands.h"
#include "src/common/http/http_get.h"
#include "src/common/security.h"
#include "src/common/util.h"
#include "src/jobs/job_record.h"

namespace manta::cli {

namespace {

struct Dashboard {
  std::string host;
  int port = 0;
  std::string token;
};

// host and port of "http://host:port[/]"; false when `url` is not one.
bool ParseUrl(const std::string& url, std::string* host, int* port) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) return false;
  std::string rest = url.substr(scheme.size());
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos) return false;
  *host = rest.substr(0, colon);
  *port = std::atoi(rest.substr(colon + 1).c_str());
  return *port > 0 && *port < 65536;
}

absl::StatusOr<Dashboard> FindDashboard(const ClusterFlags& flags) {
  Dashboard d;
  std::string url = flags.address;
  if (url.empty()) {
    const char* env = std::getenv("RAY_ADDRESS");
    if (env != nullptr && std::string(env).rfind("http://", 0) == 0) url = env;
  }
  if (!url.empty() && url.rfind("http", 0) == 0) {
    if (!ParseUrl(url, &d.host, &d.port)) {
      return absl::InvalidArgumentError("'" + url + "' is not a dashboard address (http://host:port)");
    }
    absl::StatusOr<std::string> token = FindClusterToken("", flags.token_file, TempRoot());
    if (!token.ok()) return token.status();
    d.token = *token;
    return d;
  }
  absl::StatusOr<std::string> gcs = JoinCluster(flags);
  if (!gcs.ok()) return gcs.status();
  std::string session_dir;
  absl::StatusOr<std::string> token = FindClusterToken(*gcs, flags.token_file, TempRoot(), &session_dir);
  if (!token.ok()) return token.status();
  d.token = *token;
  absl::StatusOr<std::string> port = ReadFile(session_dir + "/dashboard.ready");
  if (session_dir.empty() || !port.ok()) {
    return absl::NotFoundError("the cluster at " + *gcs +
                               " has no dashboard on this machine (started with --dashboard-port 0?); give "
                               "--address http://<head>:<dashboard port>");
  }
  d.host = "127.0.0.1";
  d.port = std::atoi(port->c_str());
  return d;
}

// The reply's JSON for a 200; else an error with the dashboard's message.
absl::StatusOr<nlohmann::json> Call(const Dashboard& d, const std::string& method, const std::string& path,
                                    const std::string& body = "") {
  http::HttpGetOptions options;
  options.bearer_token = d.token;
  options.timeout_ms = 30000;
  absl::StatusOr<http::HttpReply> reply = http::HttpRequest(d.host, d.port, method, path, body, options);
  if (!reply.ok()) return reply.status();
  nlohmann::json j = nlohmann::json::parse(reply->body, nullptr, /*allow_exceptions=*/false);
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

// Polls the job until it ends (printing its new log lines with `follow`); its exit code.
int WaitForEnd(const Dashboard& d, const std::string& id, bool follow) {
  size_t printed = 0;
  while (true) {
    if (follow) {
      absl::StatusOr<nlohmann::json> logs = Call(d, "GET", "/api/jobs/" + id + "/logs");
      if (logs.ok()) {
        const std::string text = (*logs)["logs"].get<std::string>();
        if (text.size() > printed) std::cout << text.substr(printed) << std::flush;
        printed = std::max(printed, text.size());
      }
    }
    absl::StatusOr<nlohmann::json> job = Call(d, "GET", "/api/jobs/" + id);
    if (!job.ok()) return JobFail("status", job.status());
    std::optional<jobs::JobStatus> status = jobs::ParseStatus((*job)["status"].get<std::string>());
    if (status && jobs::IsTerminal(*status)) {
      if (follow) {
        absl::StatusOr<nlohmann::json> logs = Call(d, "GET", "/api/jobs/" + id + "/logs");
        if (logs.ok() && (*logs)["logs"].get<std::string>().size() > printed) {
          std::cout << (*logs)["logs"].get<std::string>().substr(printed) << std::flush;
        }
      }
      std::cout << "job " << id << " " << jobs::StatusName(*status) << ": " << (*job)["message"].get<std::string>()
                << std::endl;
      return *status == jobs::JobStatus::kSucceeded ? 0 : 1;
    }
    usleep(200 * 1000);
  }
}

}  // namespace

int RunJobSubmit(const ClusterFlags& flags, const JobSubmission& submission) {
  absl::StatusOr<Dashboard> d = FindDashboard(flags);
  if (!d.ok()) return JobFail("submit", d.status());
  nlohmann::json body = {{"entrypoint", submission.entrypoint}};
  if (!submission.submission_id.empty()) body["submission_id"] = submission.submission_id;
  for (const auto& [field, text] : {std::pair<const char*, std::string>{"runtime_env", submission.runtime_env_json},
                                    {"metadata", submission.metadata_json}}) {
    if (text.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) {
      return JobFail("submit", absl::InvalidArgumentError(std::string(field) + " is not a JSON object"));
    }
    body[field] = j;
  }
  absl::StatusOr<nlohmann::json> reply = Call(*d, "POST", "/api/jobs/", body.dump());
  if (!reply.ok()) return JobFail("submit", reply.status());
  const std::string id = (*reply)["submission_id"].get<std::string>();
  std::cout << id << std::endl;
  return submission.wait ? WaitForEnd(*d, id, /*follow=*/true) : 0;
}

int RunJobCommand(const ClusterFlags& flags, const std::string& command, const std::string& id, bool follow) {
  absl::StatusOr<Dashboard> d = FindDashboard(flags);
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
    std::cout << reply->dump(2) << std::endl;
  }
  return 0;
}

}  // namespace manta::cli
