// The "kubernetes" NodeProvider (src/autoscaler/kubernetes_provider.cc) against a fake
// API server: an HttpServer on 127.0.0.1, port 0, that serves the two resources the
// provider touches as the API server does (a Deployment's scale subresource, keeping
// a replica count; a pod's annotations; 404 for what does not exist, 401 without the
// token, 415 for a PATCH that is not a merge patch, 422 for negative replicas) and
// records every request. A test can make it answer anything (a 403, a 500, a bad
// body). MakeKubernetesProvider's own errors need no server.
//
// Threads: the fake's handlers run on the HttpServer's thread and the provider's calls
// block the test's thread until they are answered, so the test reads what the fake
// recorded after each call returns (under the fake's mutex). No sleeps: every wait is
// an HTTP exchange, bounded by the provider's request deadline.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "src/autoscaler/node_provider.h"
#include "src/common/cluster_ca.h"
#include "src/common/http/http_server.h"
#include "src/common/util.h"
#include "test_util/test_util.h"

namespace manta::autoscaler {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

constexpr char kToken[] = "k8s-service-account-token";
constexpr char kNamespace[] = "manta";
constexpr char kDeployment[] = "manta-worker-cpu2";
constexpr char kScalePath[] = "/apis/apps/v1/namespaces/manta/deployments/manta-worker-cpu2/scale";
constexpr char kMergePatch[] = "application/merge-patch+json";
constexpr char kDeletionCost[] = "controller.kubernetes.io/pod-deletion-cost";

struct RecordedRequest {
  std::string method;
  std::string path;
  std::string authorization;
  std::string content_type;
  std::string body;
  bool secure = false;  // it came over TLS
};

// A Kubernetes API "Status" reply.
http::Response StatusReply(int code, const std::string& reason, const std::string& message) {
  http::Response response;
  response.status = code;
  response.content_type = "application/json";
  response.body = json{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"}, {"message", message},
                       {"reason", reason}, {"code", code}}
                      .dump();
  return response;
}

http::Response JsonReply(const json& body) {
  http::Response response;
  response.content_type = "application/json";
  response.body = body.dump();
  return response;
}

// The fake API server. Thread-safe: its handlers run on the server's thread, the
// test calls the rest from its own.
class FakeApiServer {
 public:
  // With `tls` (a server certificate): HTTPS, and plain HTTP from loopback too.
  explicit FakeApiServer(http::HttpTls tls = {}) : tls_(tls.enabled()) {
    http::HttpServer::Options options;
    options.tls = std::move(tls);
    options.idle_timeout_ms = 10000;
    server_ = std::make_unique<http::HttpServer>(options);
    auto serve = [this](const http::Request& r) { return Serve(r); };
    for (const char* method : {"GET", "PATCH", "PUT", "POST", "DELETE"}) {
      server_->Handle(method, "/api/", serve);
      server_->Handle(method, "/apis/", serve);
    }
  }
  ~FakeApiServer() { server_->Stop(); }

  absl::Status Start() { return server_->Start(); }
  int port() const { return server_->port(); }
  std::string url() const {
    return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port());
  }

  void AddDeployment(const std::string& ns, const std::string& name, int64_t replicas) {
    absl::MutexLock lock(&mu_);
    replicas_[ns + "/" + name] = replicas;
  }
  void AddPod(const std::string& ns, const std::string& name) {
    absl::MutexLock lock(&mu_);
    pods_[ns + "/" + name];
  }
  // Every later `method` request whose path contains `path_part` gets this reply (the
  // latest such answer, when several match).
  void Answer(const std::string& method, const std::string& path_part, http::Response response) {
    absl::MutexLock lock(&mu_);
    scripted_.push_back({method, path_part, std::move(response)});
  }

  std::optional<int64_t> Replicas(const std::string& ns, const std::string& name) const {
    absl::MutexLock lock(&mu_);
    auto it = replicas_.find(ns + "/" + name);
    if (it == replicas_.end()) return std::nullopt;
    return it->second;
  }
  std::map<std::string, std::string> Annotations(const std::string& ns, const std::string& pod) const {
    absl::MutexLock lock(&mu_);
    auto it = pods_.find(ns + "/" + pod);
    return it == pods_.end() ? std::map<std::string, std::string>() : it->second;
  }
  std::vector<RecordedRequest> requests() const {
    absl::MutexLock lock(&mu_);
    return requests_;
  }

 private:
  struct Scripted {
    std::string method;
    std::string path_part;
    http::Response response;
  };

  http::Response Serve(const http::Request& r) {
    absl::MutexLock lock(&mu_);
    requests_.push_back({r.method, r.path, r.Header("Authorization"), r.Header("Content-Type"), r.body, r.secure});
    for (auto s = scripted_.rbegin(); s != scripted_.rend(); ++s) {
      if (s->method == r.method && r.path.find(s->path_part) != std::string::npos) return s->response;
    }
    if (r.Header("Authorization") != std::string("Bearer ") + kToken) {
      return StatusReply(401, "Unauthorized", "Unauthorized");
    }
    if (r.method == "PATCH" && r.Header("Content-Type") != kMergePatch) {
      return StatusReply(415, "UnsupportedMediaType", "the body of the request was in an unknown format");
    }
    // "", "apis", "apps", "v1", "namespaces", NS, "deployments", NAME, "scale"
    // "", "api", "v1", "namespaces", NS, "pods", NAME
    std::vector<std::string> part = absl::StrSplit(r.path, '/');
    if (part.size() == 9 && part[1] == "apis" && part[2] == "apps" && part[3] == "v1" && part[4] == "namespaces" &&
        part[6] == "deployments" && part[8] == "scale") {
      return ServeScale(r, part[5], part[7]);
    }
    if (part.size() == 7 && part[1] == "api" && part[2] == "v1" && part[3] == "namespaces" && part[5] == "pods" &&
        r.method == "PATCH") {
      return PatchPod(r, part[4], part[6]);
    }
    return StatusReply(404, "NotFound", "the server could not find the requested resource");
  }

  // GET or PATCH deployments/NAME/scale (autoscaling/v1 Scale, whose spec.replicas is
  // left out when it is 0, as the API server's omitempty does).
  http::Response ServeScale(const http::Request& r, const std::string& ns, const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = replicas_.find(ns + "/" + name);
    if (it == replicas_.end()) {
      return StatusReply(404, "NotFound", "deployments.apps \"" + name + "\" not found");
    }
    if (r.method == "PATCH") {
      json patch = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
      if (!patch.is_object()) return StatusReply(400, "BadRequest", "not a JSON object");
      if (patch.contains("spec") && patch["spec"].contains("replicas")) {
        const json& want = patch["spec"]["replicas"];
        if (!want.is_number_integer() || want.get<int64_t>() < 0) {
          return StatusReply(422, "Invalid", "spec.replicas: must be greater than or equal to 0");
        }
        it->second = want.get<int64_t>();
      }
    } else if (r.method != "GET") {
      return StatusReply(405, "MethodNotAllowed", "the server does not allow this method");
    }
    json spec = json::object();
    if (it->second != 0) spec["replicas"] = it->second;
    return JsonReply({{"kind", "Scale"}, {"apiVersion", "autoscaling/v1"},
                      {"metadata", {{"name", name}, {"namespace", ns}}}, {"spec", spec},
                      {"status", {{"replicas", it->second}}}});
  }

  http::Response PatchPod(const http::Request& r, const std::string& ns, const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = pods_.find(ns + "/" + name);
    if (it == pods_.end()) return StatusReply(404, "NotFound", "pods \"" + name + "\" not found");
    json patch = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    if (!patch.is_object()) return StatusReply(400, "BadRequest", "not a JSON object");
    const json annotations = patch.value("metadata", json::object()).value("annotations", json::object());
    for (const auto& [key, value] : annotations.items()) {
      if (!value.is_string()) return StatusReply(400, "BadRequest", "an annotation must be a string");
      it->second[key] = value.get<std::string>();
    }
    return JsonReply({{"kind", "Pod"}, {"apiVersion", "v1"},
                      {"metadata", {{"name", name}, {"namespace", ns}, {"annotations", it->second}}}});
  }

  const bool tls_;
  mutable absl::Mutex mu_;
  std::map<std::string, int64_t> replicas_ ABSL_GUARDED_BY(mu_);                       // "ns/name"
  std::map<std::string, std::map<std::string, std::string>> pods_ ABSL_GUARDED_BY(mu_);  // "ns/name"
  std::vector<Scripted> scripted_ ABSL_GUARDED_BY(mu_);
  std::vector<RecordedRequest> requests_ ABSL_GUARDED_BY(mu_);
  // Last: destroyed (its thread joined) before the state its handlers touch.
  std::unique_ptr<http::HttpServer> server_;
};

using ::manta::testing::ScopedEnv;

NodeTypeConfig Type(const std::string& name) {
  NodeTypeConfig type;
  type.name = name;
  type.resources["CPU"] = 2;
  type.max_workers = 10;
  return type;
}

class KubernetesProviderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    token_file_ = dir_.path() + "/token";
    // As the kubelet writes it: with a trailing newline, which is not part of the token.
    ASSERT_TRUE(WriteFileAtomic(token_file_, std::string(kToken) + "\n", 0600).ok());
    absl::Status started = api_.Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  ProviderConfig Config() const {
    ProviderConfig config;
    config.type = "kubernetes";
    config.api_server = api_.url();
    config.kube_namespace = kNamespace;
    config.token_file = token_file_;
    config.deployments["cpu2"] = kDeployment;
    return config;
  }

  // A provider of Config(), or null after failing the test.
  std::unique_ptr<NodeProvider> MakeProvider(const ProviderConfig& config) {
    auto provider = MakeKubernetesProvider(config);
    EXPECT_TRUE(provider.ok()) << provider.status();
    return provider.ok() ? std::move(*provider) : nullptr;
  }

  // The calls made, as "METHOD path".
  std::vector<std::string> Calls() const {
    std::vector<std::string> out;
    for (const RecordedRequest& r : api_.requests()) out.push_back(r.method + " " + r.path);
    return out;
  }

  testing::TempDir dir_;
  std::string token_file_;
  FakeApiServer api_;
};

TEST_F(KubernetesProviderTest, LaunchScalesTheDeploymentUpByOneWithTheTokenAndAMergePatch) {
  api_.AddDeployment(kNamespace, kDeployment, 2);
  auto provider = MakeProvider(Config());
  ASSERT_NE(provider, nullptr);

  absl::Status launched = provider->Launch(Type("cpu2"), "manta-0a1b2c");

  ASSERT_TRUE(launched.ok()) << launched;
  EXPECT_EQ(api_.Replicas(kNamespace, kDeployment), 3);
  const std::string scale = kScalePath;
  EXPECT_THAT(Calls(), ::testing::ElementsAre("GET " + scale, "PATCH " + scale));
  const std::vector<RecordedRequest> requests = api_.requests();
  ASSERT_EQ(requests.size(), 2u);
  for (const RecordedRequest& r : requests) {
    EXPECT_EQ(r.authorization, std::string("Bearer ") + kToken) << r.method;
    EXPECT_FALSE(r.secure) << "http:// means no TLS";
  }
  EXPECT_EQ(requests[1].content_type, kMergePatch);
  EXPECT_EQ(json::parse(requests[1].body), json({{"spec", {{"replicas", 3}}}}));
}

TEST_F(KubernetesProviderTest, LaunchFromZeroReplicasWhoseScaleLeavesOutTheCount) {
  api_.AddDeployment(kNamespace, kDeployment, 0);
  auto provider = MakeProvider(Config());
  ASSERT_NE(provider, nullptr);

  ASSERT_TRUE(provider->Launch(Type("cpu2"), "manta-1").ok());
  ASSERT_TRUE(provider->Launch(Type("cpu2"), "manta-2").ok());

  EXPECT_EQ(api_.Replicas(kNamespace, kDeployment), 2);
}

TEST_F(KubernetesProviderTest, TerminateAnnotatesThePodThenScalesDown) {
  api_.AddDeployment(kNamespace, kDeployment, 3);
  api_.AddPod(kNamespace, "manta-worker-cpu2-7d4f9-x2x7k");
  api_.AddPod(kNamespace, "manta-worker-cpu2-7d4f9-q9zpl");
  auto provider = MakeProvider(Config());
  ASSERT_NE(provider, nullptr);

  absl::Status terminated = provider->Terminate("cpu2", "manta-worker-cpu2-7d4f9-x2x7k");

  ASSERT_TRUE(terminated.ok()) << terminated;
  EXPECT_EQ(api_.Replicas(kNamespace, kDeployment), 2);
  EXPECT_EQ(api_.Annotations(kNamespace, "manta-worker-cpu2-7d4f9-x2x7k"),
            (std::map<std::string, std::string>{{kDeletionCost, "-1000"}}));
  EXPECT_TRUE(api_.Annotations(kNamespace, "manta-worker-cpu2-7d4f9-q9zpl").empty());
  // The pod is marked before the scale-down, so that the ReplicaSet removes that one.
  const std::string scale = kScalePath;
  EXPECT_THAT(Calls(), ::testing::ElementsAre("PATCH /api/v1/namespaces/manta/pods/manta-worker-cpu2-7d4f9-x2x7k",
                                              "GET " + scale, "PATCH " + scale));
  const std::vector<RecordedRequest> requests = api_.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].authorization, std::string("Bearer ") + kToken);
  EXPECT_EQ(requests[0].content_type, kMergePatch);
  EXPECT_EQ(json::parse(requests[0].body), json({{"metadata", {{"annotations", {{kDeletionCost, "-1000"}}}}}}));
  EXPECT_EQ(json::parse(requests[2].body), json({{"spec", {{"replicas", 2}}}}));
}

TEST_F(KubernetesProviderTest, TerminateOfAnInstanceThatIsNoPodStillScalesDown) {
  // A launch that timed out: the autoscaler's id never became a pod's name.
  api_.AddDeployment(kNamespace, kDeployment, 2);
  auto provider = MakeProvider(Config());
  ASSERT_NE(provider, nullptr);

  absl::Status terminated = provider->Terminate("cpu2", "manta-5e6f7a");

  ASSERT_TRUE(terminated.ok()) << terminated;
  EXPECT_EQ(api_.Replicas(kNamespace, kDeployment), 1);
  EXPECT_EQ(Calls().front(), "PATCH /api/v1/namespaces/manta/pods/manta-5e6f7a");
  EXPECT_EQ(Calls().size(), 3u);
}

TEST_F(KubernetesProviderTest, ReplicasNeverGoBelowZero) {
  api_.AddDeployment(kNamespace, kDeployment, 0);
  auto provider = MakeProvider(Config());
  ASSERT_NE(provider, nullptr);

  absl::Status terminated = provider->Terminate("cpu2", "manta-5e6f7a");

  ASSERT_TRUE(terminated.ok()) << terminated;
  EXPECT_EQ(api_.Replicas(kNamespace, kDeployment), 0);
  const std::vector<RecordedRequest> requests = api_.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(json::parse(requests[2].body), json({{"spec", {{"replicas", 0}}}}));
}

TEST_F(KubernetesProviderTest, ForbiddenScaleIsAnErrorNamingTheCall) {
  api_.AddDeployment(kNamespace, kDeployment, 1);
  api_.Answer("GET", "/scale", StatusReply(403, "Forbidden", "cannot get resource deployments/scale"));
  auto provider = MakeProvider(Config());
  ASSERT_NE(provider, nullptr);

  absl::Status launched = provider->Launch(Type("cpu2"), "manta-1");

  EXPECT_FALSE(launched.ok());
  EXPECT_THAT(launched.message(), HasSubstr(std::string("GET ") + kScalePath));
  EXPECT_THAT(launched.message(), HasSubstr("403"));
  EXPECT_EQ(Calls().size(), 1u) << "nothing is patched after a failed read";
  EXPECT_EQ(api_.Replicas(kNamespace, kDeployment), 1);
}

TEST_F(KubernetesProviderTest, FailingScalePatchIsAnErrorNamingTheCall) {
  api_.AddDeployment(kNamespace, kDeployment, 1);
  api_.Answer("PATCH", "/scale", StatusReply(500, "InternalError", "etcdserver: request timed out"));
  auto provider = MakeProvider(Config());
  ASSERT_NE(provider, nullptr);

  absl::Status launched = provider->Launch(Type("cpu2"), "manta-1");

  EXPECT_FALSE(launched.ok());
  EXPECT_THAT(launched.message(), HasSubstr(std::string("PATCH ") + kScalePath));
  EXPECT_THAT(launched.message(), HasSubstr("500"));
  EXPECT_EQ(api_.Replicas(kNamespace, kDeployment), 1);
}

TEST_F(KubernetesProviderTest, ForbiddenPodPatchIsAnErrorAndScalesNothingDown) {
  api_.AddDeployment(kNamespace, kDeployment, 2);
  api_.AddPod(kNamespace, "manta-worker-cpu2-7d4f9-x2x7k");
  api_.Answer("PATCH", "/pods/", StatusReply(403, "Forbidden", "cannot patch resource pods"));
  auto provider = MakeProvider(Config());
  ASSERT_NE(provider, nullptr);

  absl::Status terminated = provider->Terminate("cpu2", "manta-worker-cpu2-7d4f9-x2x7k");

  EXPECT_FALSE(terminated.ok());
  EXPECT_THAT(terminated.message(), HasSubstr("PATCH /api/v1/namespaces/manta/pods/manta-worker-cpu2-7d4f9-x2x7k"));
  EXPECT_THAT(terminated.message(), HasSubstr("403"));
  EXPECT_EQ(Calls().size(), 1u);
  EXPECT_EQ(api_.Replicas(kNamespace, kDeployment), 2);
}

TEST_F(KubernetesProviderTest, RejectedTokenIsAnError) {
  api_.AddDeployment(kNamespace, kDeployment, 1);
  ASSERT_TRUE(WriteFileAtomic(token_file_, "an-expired-token\n", 0600).ok());
  auto provider = MakeProvider(Config());
  ASSERT_NE(provider, nullptr);

  absl::Status launched = provider->Launch(Type("cpu2"), "manta-1");

  EXPECT_FALSE(launched.ok());
  EXPECT_THAT(launched.message(), HasSubstr("401"));
  EXPECT_EQ(api_.requests().at(0).authorization, "Bearer an-expired-token");
  EXPECT_EQ(api_.Replicas(kNamespace, kDeployment), 1);
}

TEST_F(KubernetesProviderTest, NodeTypeWithoutDeploymentIsAnError) {
  api_.AddDeployment(kNamespace, kDeployment, 1);
  auto provider = MakeProvider(Config());
  ASSERT_NE(provider, nullptr);

  absl::Status launched = provider->Launch(Type("gpu1"), "manta-1");
  absl::Status terminated = provider->Terminate("gpu1", "manta-1");

  EXPECT_TRUE(absl::IsInvalidArgument(launched)) << launched;
  EXPECT_THAT(launched.message(), HasSubstr("gpu1"));
  EXPECT_TRUE(absl::IsInvalidArgument(terminated)) << terminated;
  EXPECT_THAT(terminated.message(), HasSubstr("gpu1"));
  for (const std::string& call : Calls()) EXPECT_THAT(call, ::testing::Not(HasSubstr("/deployments/")));
  EXPECT_EQ(api_.Replicas(kNamespace, kDeployment), 1);
}

TEST_F(KubernetesProviderTest, DeploymentMissingFromTheClusterIsNotFound) {
  // The config names it, the namespace has none.
  auto provider = MakeProvider(Config());
  ASSERT_NE(provider, nullptr);

  absl::Status launched = provider->Launch(Type("cpu2"), "manta-1");

  EXPECT_TRUE(absl::IsNotFound(launched)) << launched;
  EXPECT_THAT(launched.message(), HasSubstr(kScalePath));
  EXPECT_EQ(Calls().size(), 1u);
}

TEST_F(KubernetesProviderTest, ConcurrentLaunchesEachAddOne) {
  // Each Launch reads and then writes the count: they must not interleave.
  api_.AddDeployment(kNamespace, kDeployment, 0);
  auto provider = MakeProvider(Config());
  ASSERT_NE(provider, nullptr);
  constexpr int kThreads = 8;
  std::vector<absl::Status> results(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] { results[i] = provider->Launch(Type("cpu2"), "manta-" + std::to_string(i)); });
  }
  for (std::thread& t : threads) t.join();

  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(api_.Replicas(kNamespace, kDeployment), kThreads);
}

// A TLS fake, its server certificate naming 127.0.0.1, from a CA of the test's.
class KubernetesProviderTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ca = ClusterCa::Create(3600);
    ASSERT_TRUE(ca.ok()) << ca.status();
    auto keys = NewKeyPair();
    ASSERT_TRUE(keys.ok()) << keys.status();
    auto cert = ca->Issue(keys->public_key_der, {"127.0.0.1"}, 3600);
    ASSERT_TRUE(cert.ok()) << cert.status();
    api_ = std::make_unique<FakeApiServer>(http::HttpTls{*cert, keys->private_key_pem, ca->cert_pem()});
    absl::Status started = api_->Start();
    ASSERT_TRUE(started.ok()) << started;
    api_->AddDeployment(kNamespace, kDeployment, 1);
    token_file_ = dir_.path() + "/token";
    ca_file_ = dir_.path() + "/ca.crt";
    ASSERT_TRUE(WriteFileAtomic(token_file_, kToken, 0600).ok());
    ASSERT_TRUE(WriteFileAtomic(ca_file_, ca->cert_pem(), 0644).ok());
  }

  ProviderConfig Config() const {
    ProviderConfig config;
    config.type = "kubernetes";
    config.api_server = "https://127.0.0.1:" + std::to_string(api_->port());
    config.kube_namespace = kNamespace;
    config.token_file = token_file_;
    config.ca_file = ca_file_;
    config.deployments["cpu2"] = kDeployment;
    return config;
  }

  testing::TempDir dir_;
  std::string token_file_;
  std::string ca_file_;
  std::unique_ptr<FakeApiServer> api_;
};

TEST_F(KubernetesProviderTlsTest, HttpsApiServerIsVerifiedWithTheCaFile) {
  auto provider = MakeKubernetesProvider(Config());
  ASSERT_TRUE(provider.ok()) << provider.status();

  absl::Status launched = (*provider)->Launch(Type("cpu2"), "manta-1");

  ASSERT_TRUE(launched.ok()) << launched;
  EXPECT_EQ(api_->Replicas(kNamespace, kDeployment), 2);
  for (const RecordedRequest& r : api_->requests()) EXPECT_TRUE(r.secure) << r.method << " " << r.path;
}

TEST_F(KubernetesProviderTlsTest, ServerOfAnotherCaIsRefusedBeforeTheTokenIsSent) {
  auto other = ClusterCa::Create(3600);
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE(WriteFileAtomic(ca_file_, other->cert_pem(), 0644).ok());
  auto provider = MakeKubernetesProvider(Config());
  ASSERT_TRUE(provider.ok()) << provider.status();

  absl::Status launched = (*provider)->Launch(Type("cpu2"), "manta-1");

  EXPECT_FALSE(launched.ok());
  EXPECT_TRUE(api_->requests().empty());
  EXPECT_EQ(api_->Replicas(kNamespace, kDeployment), 1);
}

TEST_F(KubernetesProviderTlsTest, InAPodTheDefaultApiServerIsHttpsToTheServiceHost) {
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "127.0.0.1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", std::to_string(api_->port()).c_str());
  ProviderConfig config = Config();
  config.api_server.clear();
  auto provider = MakeKubernetesProvider(config);
  ASSERT_TRUE(provider.ok()) << provider.status();

  absl::Status launched = (*provider)->Launch(Type("cpu2"), "manta-1");

  ASSERT_TRUE(launched.ok()) << launched;
  EXPECT_EQ(api_->Replicas(kNamespace, kDeployment), 2);
  ASSERT_FALSE(api_->requests().empty());
  EXPECT_TRUE(api_->requests().front().secure);
}

// Disabled until kubernetes_provider.cc refuses a CA file it reads nothing from (an
// empty file, a folder): HttpRequest speaks HTTPS only when tls.ca_pem is not empty,
// so the provider now sends its bearer token in clear text to an https:// api_server
// (the TLS fake answers plain HTTP from loopback too).
TEST_F(KubernetesProviderTlsTest, EmptyCaFileIsAnErrorNotPlainHttp) {
  ASSERT_TRUE(WriteFileAtomic(ca_file_, "", 0644).ok());
  for (const std::string& ca_file : {ca_file_, dir_.path()}) {
    ProviderConfig config = Config();
    config.ca_file = ca_file;
    auto provider = MakeKubernetesProvider(config);
    EXPECT_FALSE(provider.ok()) << "the CA file " << ca_file << " holds no certificate, and is accepted";
    if (provider.ok()) (void)(*provider)->Launch(Type("cpu2"), "manta-1");
  }
  for (const RecordedRequest& r : api_->requests()) {
    EXPECT_TRUE(r.secure) << r.method << " " << r.path << " went in clear text, with " << r.authorization;
  }
}

// Disabled until kubernetes_provider.cc reads replicas without throwing: a reply that
// is JSON but not a Scale now throws nlohmann::json::type_error out of Launch.
TEST_F(KubernetesProviderTest, ScaleReplyThatIsNoScaleIsAnError) {
  api_.AddDeployment(kNamespace, kDeployment, 1);
  auto provider = MakeProvider(Config());
  ASSERT_NE(provider, nullptr);
  for (const char* body : {"[]", R"({"spec": "none"})", R"({"spec": {"replicas": "3"}})"}) {
    http::Response reply;
    reply.content_type = "application/json";
    reply.body = body;
    api_.Answer("GET", "/scale", reply);
    absl::Status launched = absl::UnknownError("Launch threw");
    EXPECT_NO_THROW(launched = provider->Launch(Type("cpu2"), "manta-1")) << body;
    EXPECT_FALSE(launched.ok()) << body;
  }
  EXPECT_EQ(api_.Replicas(kNamespace, kDeployment), 1);
}

// MakeKubernetesProvider's errors (no server is asked).
class MakeKubernetesProviderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    token_file_ = dir_.path() + "/token";
    ASSERT_TRUE(WriteFileAtomic(token_file_, kToken, 0600).ok());
  }
  ProviderConfig Config(const std::string& api_server) const {
    ProviderConfig config;
    config.type = "kubernetes";
    config.api_server = api_server;
    config.kube_namespace = kNamespace;
    config.token_file = token_file_;
    config.deployments["cpu2"] = kDeployment;
    return config;
  }

  testing::TempDir dir_;
  std::string token_file_;
};

TEST_F(MakeKubernetesProviderTest, MissingTokenFileIsAnErrorNamingIt) {
  ProviderConfig config = Config("http://127.0.0.1:8080");
  config.token_file = dir_.path() + "/no-such-token";

  auto provider = MakeKubernetesProvider(config);

  EXPECT_TRUE(absl::IsInvalidArgument(provider.status())) << provider.status();
  EXPECT_THAT(provider.status().message(), HasSubstr(config.token_file));
}

TEST_F(MakeKubernetesProviderTest, ApiServerWithoutHttpOrHttpsIsAnError) {
  for (const char* url : {"ftp://127.0.0.1:21", "127.0.0.1:6443", "tcp://127.0.0.1:6443"}) {
    auto provider = MakeKubernetesProvider(Config(url));
    EXPECT_TRUE(absl::IsInvalidArgument(provider.status())) << url << ": " << provider.status();
    EXPECT_THAT(provider.status().message(), HasSubstr("api_server")) << url;
  }
}

TEST_F(MakeKubernetesProviderTest, ApiServerWithABadPortIsAnError) {
  for (const char* url : {"http://127.0.0.1:0", "http://127.0.0.1:70000", "https://127.0.0.1:port"}) {
    auto provider = MakeKubernetesProvider(Config(url));
    EXPECT_TRUE(absl::IsInvalidArgument(provider.status())) << url << ": " << provider.status();
  }
}

TEST_F(MakeKubernetesProviderTest, HttpsWithoutAReadableCaIsAnErrorNamingIt) {
  ProviderConfig config = Config("https://127.0.0.1:6443");
  config.ca_file = dir_.path() + "/no-such-ca.crt";

  auto provider = MakeKubernetesProvider(config);

  EXPECT_TRUE(absl::IsInvalidArgument(provider.status())) << provider.status();
  EXPECT_THAT(provider.status().message(), HasSubstr(config.ca_file));
}

TEST_F(MakeKubernetesProviderTest, HttpNeedsNoCa) {
  ProviderConfig config = Config("http://127.0.0.1:8080/");
  config.ca_file = dir_.path() + "/no-such-ca.crt";

  auto provider = MakeKubernetesProvider(config);

  EXPECT_TRUE(provider.ok()) << provider.status();
}

TEST_F(MakeKubernetesProviderTest, NoApiServerOutsideAPodIsAnError) {
  ScopedEnv host("KUBERNETES_SERVICE_HOST", nullptr);

  auto provider = MakeKubernetesProvider(Config(""));

  EXPECT_TRUE(absl::IsInvalidArgument(provider.status())) << provider.status();
  EXPECT_THAT(provider.status().message(), HasSubstr("KUBERNETES_SERVICE_HOST"));
}

}  // namespace
}  // namespace manta::autoscaler
