// HttpServer with TLS (src/common/http/http_server.h) and HttpGet over HTTPS
// (http_get.h), on 127.0.0.1 with certificates of a cluster CA the test makes: what
// a request learns about its peer, which certificates are refused, and who counts
// as a member (MemberRequest). Refusing plain HTTP from another host needs a second
// host: tests/multihost/security_test.cc.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/common/cluster_ca.h"
#include "src/common/http/http_get.h"
#include "src/common/http/http_server.h"

namespace manta::http {
namespace {

constexpr int64_t kLifetimeS = 3600;

// A member's certificate and key from `ca`, naming `ips`.
HttpTls Member(const ClusterCa& ca, const std::vector<std::string>& ips) {
  auto keys = NewKeyPair();
  EXPECT_TRUE(keys.ok()) << keys.status();
  auto cert = ca.Issue(keys->public_key_der, ips, kLifetimeS);
  EXPECT_TRUE(cert.ok()) << cert.status();
  return {*cert, keys->private_key_pem, ca.cert_pem()};
}

class HttpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ca = ClusterCa::Create(kLifetimeS);
    ASSERT_TRUE(ca.ok()) << ca.status();
    ca_.emplace(std::move(*ca));
    auto other = ClusterCa::Create(kLifetimeS);
    ASSERT_TRUE(other.ok()) << other.status();
    other_ca_.emplace(std::move(*other));
  }

  void StartServer(const HttpTls& tls) {
    HttpServer::Options options;
    options.tls = tls;
    options.idle_timeout_ms = 5000;
    server_ = std::make_unique<HttpServer>(options);
    server_->Handle("GET", "/who", [](const Request& r) {
      Response response;
      response.body = absl::StrCat("secure=", r.secure, " certified=", r.client_certified, " loopback=", r.loopback);
      return response;
    });
    absl::Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  absl::StatusOr<std::string> Who(const HttpTls& tls) {
    HttpGetOptions options;
    options.timeout_ms = 5000;
    options.tls = tls;
    return HttpGet("127.0.0.1", server_->port(), "/who", options);
  }

  std::optional<ClusterCa> ca_;
  std::optional<ClusterCa> other_ca_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpsTest, HttpsWithAndWithoutAClientCertificateAndPlainHttpFromLoopback) {
  StartServer(Member(*ca_, {"127.0.0.1"}));
  auto anonymous = Who({"", "", ca_->cert_pem()});
  ASSERT_TRUE(anonymous.ok()) << anonymous.status();
  EXPECT_EQ(*anonymous, "secure=1 certified=0 loopback=1");
  auto member = Who(Member(*ca_, {"127.0.0.1"}));
  ASSERT_TRUE(member.ok()) << member.status();
  EXPECT_EQ(*member, "secure=1 certified=1 loopback=1");
  auto plain = Who({});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(*plain, "secure=0 certified=0 loopback=1");
  // Many in a row: each connection is closed with close_notify, so none is cut short.
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Who(Member(*ca_, {"127.0.0.1"})).ok()) << i;
}

TEST_F(HttpsTest, AClientCertificateOfAnotherCaFailsTheHandshake) {
  StartServer(Member(*ca_, {"127.0.0.1"}));
  HttpTls stranger = Member(*other_ca_, {"127.0.0.1"});
  stranger.ca_pem = ca_->cert_pem();  // it trusts the server, the server does not trust it
  auto reply = Who(stranger);
  ASSERT_FALSE(reply.ok());
  EXPECT_NE(reply.status().message().find("https://127.0.0.1:"), std::string::npos) << reply.status();
  // The server goes on serving members.
  EXPECT_TRUE(Who(Member(*ca_, {"127.0.0.1"})).ok());
}

TEST_F(HttpsTest, TheClientChecksTheServersCaAndAddress) {
  StartServer(Member(*ca_, {"127.0.0.1"}));
  auto wrong_ca = Who({"", "", other_ca_->cert_pem()});
  ASSERT_FALSE(wrong_ca.ok());
  EXPECT_NE(wrong_ca.status().message().find("TLS handshake"), std::string::npos) << wrong_ca.status();
  server_->Stop();
  StartServer(Member(*ca_, {"10.1.2.3"}));
  auto wrong_name = Who({"", "", ca_->cert_pem()});
  ASSERT_FALSE(wrong_name.ok());
  EXPECT_NE(wrong_name.status().message().find("IP address mismatch"), std::string::npos) << wrong_name.status();
}

TEST_F(HttpsTest, TlsMaterialThatDoesNotLoadIsAClearError) {
  HttpServer::Options options;
  options.tls = {"not a certificate", "not a key", "not a CA"};
  HttpServer server(options);
  absl::Status started = server.Start();
  EXPECT_EQ(started.code(), absl::StatusCode::kInvalidArgument) << started;
  EXPECT_NE(started.message().find("HTTPS certificate does not load"), std::string::npos) << started;
  HttpTls mismatched = Member(*ca_, {"127.0.0.1"});
  mismatched.key_pem = Member(*ca_, {"127.0.0.1"}).key_pem;
  options.tls = mismatched;
  HttpServer other(options);
  started = other.Start();
  EXPECT_EQ(started.code(), absl::StatusCode::kInvalidArgument) << started;
  EXPECT_NE(started.message().find("HTTPS key"), std::string::npos) << started;
}

TEST(MemberRequestTest, LoopbackACertificateOrTheTokenAndNothingElse) {
  const std::string token(64, 'a');
  Request remote;
  remote.remote_address = "198.51.100.11:40000";
  EXPECT_FALSE(MemberRequest(remote, token));
  Request loopback = remote;
  loopback.loopback = true;
  EXPECT_TRUE(MemberRequest(loopback, token));
  Request certified = remote;
  certified.client_certified = true;
  EXPECT_TRUE(MemberRequest(certified, token));
  Request bearer = remote;
  bearer.headers = {{"authorization", "bearer  " + token + " "}};
  EXPECT_TRUE(MemberRequest(bearer, token));
  EXPECT_FALSE(MemberRequest(bearer, ""));  // no token configured: no bearer passes
  Request wrong = remote;
  wrong.headers = {{"Authorization", "Bearer " + std::string(64, 'b')}};
  EXPECT_FALSE(MemberRequest(wrong, token));
  Request basic = remote;
  basic.headers = {{"Authorization", "Basic " + token}};
  EXPECT_FALSE(MemberRequest(basic, token));
  Request empty = remote;
  empty.headers = {{"Authorization", "Bearer "}};
  EXPECT_FALSE(MemberRequest(empty, token));
  Response refused = Unauthorized("a scrape");
  EXPECT_EQ(refused.status, 401);
  EXPECT_NE(refused.body.find("a scrape from another host needs the cluster token"), std::string::npos);
  ASSERT_EQ(refused.headers.size(), 1u);
  EXPECT_EQ(refused.headers[0].first, "WWW-Authenticate");
}

}  // namespace
}  // namespace manta::http
