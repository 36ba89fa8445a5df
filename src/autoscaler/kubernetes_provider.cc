// The "kubernetes" provider: each node type is a Deployment of worker pods (see
// deploy/kubernetes/), scaled through the API server with the pod's service account.
//
//   Launch:    GET  /apis/apps/v1/namespaces/NS/deployments/D/scale, then
//              PATCH the same path {"spec":{"replicas":N+1}} (merge patch).
//   Terminate: PATCH /api/v1/namespaces/NS/pods/POD with the annotation
//              controller.kubernetes.io/pod-deletion-cost = "-1000", so that the
//              ReplicaSet removes that pod first, then scales the Deployment to N-1.
//              An instance that never became a pod (its launch timed out) scales
//              down by one: the ReplicaSet removes pods not ready first.
//
// A pod names itself: its container runs `manta start --address ... --node-type T
// --instance-id $(POD_NAME)` (the downward API), so the autoscaler adopts it by type.
// Calls are serialized (a read-modify-write of replicas must not interleave).
#include "absl/synchronization/mutex.h"

#include "nlohmann/json.hpp"
#include "src/autoscaler/node_provider.h"
#include "src/common/http/http_get.h"
#include "src/common/json.h"
#include "src/common/network.h"
#include "src/common/util.h"

namespace manta::autoscaler {

namespace {

constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";
constexpr int64_t kRequestTimeoutMs = 10000;

struct ApiServer {
  std::string host;  // numeric IPv4
  int port = 443;
  bool https = true;
};

absl::StatusOr<ApiServer> ParseApiServer(const std::string& url) {
  auto parsed = http::ParseHttpUrl(url);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError("kubernetes provider: api_server: " + std::string(parsed.status().message()));
  }
  auto ip = ResolveIpv4(parsed->host);
  if (!ip.ok()) {
    return absl::InvalidArgumentError("kubernetes provider: api_server: " + std::string(ip.status().message()));
  }
  return ApiServer{*ip, parsed->port, parsed->https};
}

class KubernetesProvider final : public NodeProvider {
 public:
  KubernetesProvider(ProviderConfig config, ApiServer server, std::string token, std::string ca_pem)
      : config_(std::move(config)), server_(std::move(server)) {
    options_.timeout_ms = kRequestTimeoutMs;
    options_.max_bytes = 4 << 20;
    options_.bearer_token = std::move(token);
    if (server_.https) options_.tls.ca_pem = std::move(ca_pem);
  }

  absl::Status Launch(const NodeTypeConfig& type, const std::string& instance_id) override {
    absl::MutexLock lock(&mu_);
    return AddReplicas(type.name, +1);
  }

  absl::Status Terminate(const std::string& node_type, const std::string& instance_id) override {
    absl::MutexLock lock(&mu_);
    if (config_.deployments.count(node_type) == 0) {
      return absl::InvalidArgumentError("kubernetes provider: no Deployment for node type " + node_type);
    }
    // An id that is no pod name (a launch that never became a pod) is not sent in a
    // path: it is taken as a pod that is not there.
    if (IsPodName(instance_id)) {
      nlohmann::json patch = {
          {"metadata", {{"annotations", {{"controller.kubernetes.io/pod-deletion-cost", "-1000"}}}}}};
      auto marked =
          Call("PATCH", "/api/v1/namespaces/" + config_.kube_namespace + "/pods/" + instance_id, DumpJson(patch));
      if (!marked.ok() && !absl::IsNotFound(marked.status())) return marked.status();
    }
    return AddReplicas(node_type, -1);
  }

 private:
  std::string ScalePath(const std::string& node_type) const {
    return "/apis/apps/v1/namespaces/" + config_.kube_namespace + "/deployments/" + config_.deployments.at(node_type) +
           "/scale";
  }

  // A DNS-1123 label, as pod names are.
  static bool IsPodName(const std::string& s) {
    if (s.empty() || s.size() > 253 || s.front() == '-' || s.back() == '-') return false;
    for (char c : s) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return false;
    }
    return true;
  }

  absl::Status AddReplicas(const std::string& node_type, int delta) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (config_.deployments.count(node_type) == 0) {
      return absl::InvalidArgumentError("kubernetes provider: no Deployment for node type " + node_type);
    }
    auto scale = Call("GET", ScalePath(node_type), "");
    if (!scale.ok()) return scale.status();
    // A Scale: {"spec": {"replicas": N}}, the count left out when it is 0.
    const nlohmann::json spec = scale->is_object() ? scale->value("spec", nlohmann::json::object()) : nlohmann::json();
    if (!spec.is_object() || (spec.contains("replicas") && !spec.at("replicas").is_number_integer())) {
      return absl::UnavailableError("kubernetes API GET " + ScalePath(node_type) + ": not a Scale");
    }
    const int64_t replicas = spec.value("replicas", int64_t{0});
    const int64_t want = std::max<int64_t>(0, replicas + delta);
    nlohmann::json patch = {{"spec", {{"replicas", want}}}};
    auto patched = Call("PATCH", ScalePath(node_type), DumpJson(patch));
    return patched.ok() ? absl::OkStatus() : patched.status();
  }

  // The reply's JSON; NotFound for a 404, Unavailable naming the call otherwise.
  absl::StatusOr<nlohmann::json> Call(const std::string& method, const std::string& path, const std::string& body) {
    http::HttpGetOptions options = options_;
    if (method == "PATCH") options.content_type = "application/merge-patch+json";
    auto reply = http::HttpRequest(server_.host, server_.port, method, path, body, options);
    if (!reply.ok()) return reply.status();
    if (reply->status == 404) return absl::NotFoundError(method + " " + path + ": 404");
    if (reply->status == 401 || reply->status == 403) {
      return absl::PermissionDeniedError("kubernetes API " + method + " " + path + ": " + reply->status_line + ": " +
                                         reply->body.substr(0, 300));
    }
    if (reply->status < 200 || reply->status >= 300) {
      return absl::UnavailableError("kubernetes API " + method + " " + path + ": " + reply->status_line + ": " +
                                    reply->body.substr(0, 300));
    }
    nlohmann::json j = ParseJson(reply->body);
    if (j.is_discarded()) return absl::UnavailableError("kubernetes API " + method + " " + path + ": not JSON");
    return j;
  }

  ProviderConfig config_;
  ApiServer server_;
  http::HttpGetOptions options_;
  absl::Mutex mu_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<NodeProvider>> MakeKubernetesProvider(const ProviderConfig& config) {
  std::string url = config.api_server;
  if (url.empty()) {
    const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
    const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
    if (host == nullptr) {
      return absl::InvalidArgumentError(
          "kubernetes provider: no api_server in the config and not in a pod (KUBERNETES_SERVICE_HOST unset)");
    }
    url = std::string("https://") + host + ":" + (port != nullptr ? port : "443");
  }
  auto server = ParseApiServer(url);
  if (!server.ok()) return server.status();
  const std::string token_file =
      config.token_file.empty() ? std::string(kServiceAccountDir) + "/token" : config.token_file;
  auto token = ReadFile(token_file);
  if (!token.ok()) {
    return absl::InvalidArgumentError("kubernetes provider: token " + token_file + ": " +
                                      std::string(token.status().message()));
  }
  while (!token->empty() && (token->back() == '\n' || token->back() == '\r')) token->pop_back();
  if (token->empty()) return absl::InvalidArgumentError("kubernetes provider: token " + token_file + " is empty");
  std::string ca_pem;
  if (server->https) {
    const std::string ca_file = config.ca_file.empty() ? std::string(kServiceAccountDir) + "/ca.crt" : config.ca_file;
    auto ca = ReadFile(ca_file);
    if (!ca.ok()) {
      return absl::InvalidArgumentError("kubernetes provider: CA " + ca_file + ": " +
                                        std::string(ca.status().message()));
    }
    // An empty CA would turn HTTPS into plain HTTP (HttpRequest speaks TLS when it
    // has a CA), with the token in the clear.
    if (ca->find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
      return absl::InvalidArgumentError("kubernetes provider: CA " + ca_file + " holds no certificate");
    }
    ca_pem = std::move(*ca);
  }
  return std::unique_ptr<NodeProvider>(
      std::make_unique<KubernetesProvider>(config, std::move(*server), std::move(*token), std::move(ca_pem)));
}

}  // namespace manta::autoscaler
