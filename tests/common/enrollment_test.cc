// The cluster's own CA (src/common/cluster_ca.h) and certificate enrollment
// (src/common/enrollment.h): an EnrollmentServer behind a real listening socket on
// 127.0.0.1, members enrolling with and without the token, and the attacks the
// protocol must turn away (replayed proofs, a server without the token, trickled
// bytes, too many at once).
#include <gtest/gtest.h>
#include <openssl/x509v3.h>
#include <openssl/pem.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "src/common/blocking_socket.h"
#include "src/common/cluster_ca.h"
#include "src/common/cluster_tls.h"
#include "src/common/enrollment.h"
#include "src/common/security.h"
#include "src/common/util.h"
#include "test_util/test_util.h"

namespace manta {
namespace {

// Whether the PEM certificate names `ip` in its subjectAltName.
bool Names(const std::string& cert_pem, const std::string& ip) {
  BIO* bio = BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (cert == nullptr) return false;
  bool named = X509_check_ip_asc(cert, ip.c_str(), 0) == 1;
  X509_free(cert);
  return named;
}

TEST(ClusterCaTest, IssuesCertificatesThatVerifyAndNameTheAddresses) {
  auto ca = ClusterCa::Create(3600);
  ASSERT_TRUE(ca.ok()) << ca.status();
  auto key = NewPrivateKeyPem();
  ASSERT_TRUE(key.ok());
  auto public_key = PublicKeyDer(*key);
  ASSERT_TRUE(public_key.ok());
  auto cert = ca->Issue(*public_key, {"198.51.100.7", "127.0.0.1"}, 600);
  ASSERT_TRUE(cert.ok()) << cert.status();
  EXPECT_TRUE(VerifyCertificate(*cert, ca->cert_pem()).ok());
  EXPECT_EQ(*CertificatePublicKeyDer(*cert), *public_key);
  EXPECT_TRUE(Names(*cert, "198.51.100.7"));
  EXPECT_TRUE(Names(*cert, "127.0.0.1"));
  EXPECT_FALSE(Names(*cert, "198.51.100.8"));
  auto expiry = CertificateNotAfter(*cert);
  ASSERT_TRUE(expiry.ok());
  EXPECT_NEAR(static_cast<double>(*expiry), static_cast<double>(time(nullptr) + 600), 5.0);

  // Another CA's certificate does not verify; a reloaded CA issues as the first.
  auto other = ClusterCa::Create(3600);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(VerifyCertificate(*cert, other->cert_pem()).ok());
  auto reloaded = ClusterCa::Load(ca->cert_pem(), ca->key_pem());
  ASSERT_TRUE(reloaded.ok()) << reloaded.status();
  auto again = reloaded->Issue(*public_key, {"10.0.0.1"}, 600);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(VerifyCertificate(*again, ca->cert_pem()).ok());
  EXPECT_FALSE(ClusterCa::Load(ca->cert_pem(), other->key_pem()).ok());
}

TEST(ClusterCaTest, RefusesBadNamesAndKeys) {
  auto ca = ClusterCa::Create(3600);
  ASSERT_TRUE(ca.ok());
  auto public_key = PublicKeyDer(*NewPrivateKeyPem());
  ASSERT_TRUE(public_key.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(ca->Issue(*public_key, {"node-1"}, 600).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ca->Issue(*public_key, {}, 600).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      ca->Issue(*public_key, std::vector<std::string>(ClusterCa::kMaxNames + 1, "10.0.0.1"), 600).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ca->Issue("not a key", {"10.0.0.1"}, 600).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ca->Issue(*public_key + "x", {"10.0.0.1"}, 600).status()));
}

TEST(ClusterTlsTest, TlsIsDueAcrossHostsByDefaultAndWhenAskedFor) {
  EXPECT_EQ(*ParseClusterTlsMode("auto"), ClusterTlsMode::kAuto);
  EXPECT_EQ(*ParseClusterTlsMode("on"), ClusterTlsMode::kOn);
  EXPECT_EQ(*ParseClusterTlsMode("off"), ClusterTlsMode::kOff);
  auto bad = ParseClusterTlsMode("yes");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("'auto', 'on' or 'off'"), std::string::npos);
  EXPECT_FALSE(TlsDueFor(ClusterTlsMode::kAuto, "127.0.0.1"));
  EXPECT_FALSE(TlsDueFor(ClusterTlsMode::kAuto, "localhost"));
  EXPECT_TRUE(TlsDueFor(ClusterTlsMode::kAuto, "198.51.100.10"));
  EXPECT_TRUE(TlsDueFor(ClusterTlsMode::kAuto, "0.0.0.0"));
  EXPECT_TRUE(TlsDueFor(ClusterTlsMode::kOn, "127.0.0.1"));
  EXPECT_FALSE(TlsDueFor(ClusterTlsMode::kOff, "198.51.100.10"));
  // A member's certificate names the address it reaches the GCS from, those it
  // gives, and loopback; once each, no wildcard.
  std::vector<std::string> names = MemberAddresses("127.0.0.1", {"198.51.100.20", "0.0.0.0", "198.51.100.20"});
  EXPECT_EQ(names, (std::vector<std::string>{"127.0.0.1", "198.51.100.20"}));
}

TEST(ClusterTlsTest, AHeadsSessionHoldsItsCaAndCertificatePrivately) {
  testing::TempDir session;
  ASSERT_TRUE(MakeHeadTls(session.path(), {"198.51.100.10", "127.0.0.1"}, 3600).ok());
  const SessionTlsFiles files = SessionTlsPaths(session.path());
  const std::string ca = *ReadFile(files.member.ca_file);
  EXPECT_TRUE(VerifyCertificate(*ReadFile(files.member.cert_file), ca).ok());
  EXPECT_TRUE(ReadSecretFile(files.ca_key).ok()) << "the CA key is not 0600";
  EXPECT_TRUE(ReadSecretFile(files.member.key_file).ok()) << "the node key is not 0600";
  EXPECT_TRUE(ClusterCa::Load(ca, *ReadSecretFile(files.ca_key)).ok());
  // A process of that node takes them (no MANTA_TLS_* set here).
  rpc::Credentials credentials = rpc::TokenCredentials(NewClusterToken());
  ASSERT_TRUE(AddSessionTls(session.path(), &credentials).ok());
  EXPECT_TRUE(credentials.tls());
  EXPECT_EQ(credentials.tls_ca, ca);
}

// An EnrollmentServer behind a listening socket on 127.0.0.1.
class EnrollmentTest : public ::testing::Test {
 protected:
  void Start(EnrollmentServer::Options options = {}) {
    auto ca = ClusterCa::Create(3600);
    ASSERT_TRUE(ca.ok());
    ca_pem_ = ca->cert_pem();
    server_ = std::make_unique<EnrollmentServer>(std::move(*ca), token_, options);
    listen_fd_ = testing::ListenOnLoopback(&port_);
    ASSERT_GE(listen_fd_, 0);
    accept_thread_ = std::thread([this] {
      while (true) {
        int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) return;
        server_->Serve(fd);
      }
    });
  }
  void TearDown() override {
    if (listen_fd_ >= 0) {
      shutdown(listen_fd_, SHUT_RDWR);
      close(listen_fd_);
    }
    if (accept_thread_.joinable()) accept_thread_.join();
    server_.reset();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  const std::string token_ = NewClusterToken();
  std::string ca_pem_;
  std::unique_ptr<EnrollmentServer> server_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread accept_thread_;
};

TEST_F(EnrollmentTest, AMemberWithTheTokenGetsACertificateForItsOwnKey) {
  Start();
  auto member = Enroll(address(), token_, {"198.51.100.20"}, 5000);
  ASSERT_TRUE(member.ok()) << member.status();
  EXPECT_EQ(member->ca_pem, ca_pem_);
  EXPECT_TRUE(VerifyCertificate(member->cert_pem, ca_pem_).ok());
  EXPECT_EQ(*CertificatePublicKeyDer(member->cert_pem), *PublicKeyDer(member->key_pem));
  // The address asked for, and the one the server saw the member at.
  EXPECT_TRUE(Names(member->cert_pem, "198.51.100.20"));
  EXPECT_TRUE(Names(member->cert_pem, "127.0.0.1"));
  EXPECT_EQ(server_->num_issued(), 1);
  // Keys are the member's own: a second enrollment has another.
  auto second = Enroll(address(), token_, {"198.51.100.20"}, 5000);
  ASSERT_TRUE(second.ok());
  EXPECT_NE(second->key_pem, member->key_pem);
}

TEST_F(EnrollmentTest, AMemberWithoutTheTokenGetsNothing) {
  Start();
  auto member = Enroll(address(), NewClusterToken(), {"198.51.100.20"}, 5000);
  ASSERT_FALSE(member.ok());
  // The server proves itself first: the member sees it is not its cluster's.
  EXPECT_TRUE(absl::IsUnauthenticated(member.status())) << member.status();
  EXPECT_TRUE(testing::WaitFor([&] { return server_->num_issued() == 0; }, 1000));
  EXPECT_EQ(server_->num_issued(), 0);
}

// A member's first message, as Enroll sends it.
std::string Hello(const std::string& public_key, const std::string& names) {
  std::string hello(kEnrollMagic, kEnrollMagicBytes);
  std::string nonce(32, '\0');
  FillSecureRandom(reinterpret_cast<uint8_t*>(nonce.data()), nonce.size());
  hello += nonce;
  hello.push_back(static_cast<char>(public_key.size() & 0xff));
  hello.push_back(static_cast<char>(public_key.size() >> 8));
  hello += public_key;
  hello.push_back(static_cast<char>(names.size() & 0xff));
  hello.push_back(static_cast<char>(names.size() >> 8));
  hello += names;
  return hello;
}

std::string ClientProof(const std::string& token, const std::string& server_nonce, const std::string& hello) {
  return HmacSha256(token, "manta enroll v1 client" + server_nonce + Sha256(hello));
}

TEST_F(EnrollmentTest, AProofFromAnEarlierExchangeIsRefused) {
  Start();
  const std::string hello = Hello(*PublicKeyDer(*NewPrivateKeyPem()), "10.0.0.9");
  // An eavesdropper saw one exchange: its hello and the member's proof.
  std::string seen_nonce;
  std::string seen_proof;
  {
    int fd = testing::ConnectTcp("127.0.0.1", port_);
    SetBlockingTimeouts(fd, 5000);
    ASSERT_TRUE(WriteAll(fd, hello.data(), hello.size()).ok());
    char challenge[64];
    ASSERT_TRUE(ReadExact(fd, challenge, sizeof(challenge)).ok());
    seen_nonce.assign(challenge, 32);
    seen_proof = ClientProof(token_, seen_nonce, hello);
    close(fd);  // the member gave up before proving (or the eavesdropper cut it off)
  }
  // Replaying the same hello and proof: the server's new nonce makes it worthless.
  int fd = testing::ConnectTcp("127.0.0.1", port_);
  SetBlockingTimeouts(fd, 5000);
  ASSERT_TRUE(WriteAll(fd, hello.data(), hello.size()).ok());
  char challenge[64];
  ASSERT_TRUE(ReadExact(fd, challenge, sizeof(challenge)).ok());
  EXPECT_NE(std::string(challenge, 32), seen_nonce);
  ASSERT_TRUE(WriteAll(fd, seen_proof.data(), seen_proof.size()).ok());
  char byte;
  EXPECT_FALSE(ReadExact(fd, &byte, 1).ok());  // closed without a reply
  close(fd);
  EXPECT_EQ(server_->num_issued(), 0);
}

TEST_F(EnrollmentTest, AServerWithoutTheTokenIsNotBelieved) {
  // A stranger listening where the member expects the GCS answers with made-up bytes.
  int port = 0;
  int listen_fd = testing::ListenOnLoopback(&port);
  std::thread fake([listen_fd] {
    int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    std::string made_up(64, 'x');
    char buf[4096];
    [[maybe_unused]] ssize_t n = recv(fd, buf, sizeof(buf), 0);
    [[maybe_unused]] ssize_t w = send(fd, made_up.data(), made_up.size(), MSG_NOSIGNAL);
    close(fd);
  });
  auto member = Enroll("127.0.0.1:" + std::to_string(port), token_, {"10.0.0.9"}, 5000);
  fake.join();
  close(listen_fd);
  EXPECT_TRUE(absl::IsUnauthenticated(member.status())) << member.status();
}

TEST_F(EnrollmentTest, TrickledBytesMeetOneDeadlineForTheWholeExchange) {
  EnrollmentServer::Options options;
  options.timeout_ms = 400;
  Start(options);
  const std::string hello = Hello(*PublicKeyDer(*NewPrivateKeyPem()), "10.0.0.9");
  int fd = testing::ConnectTcp("127.0.0.1", port_);
  const int64_t start = MonotonicMs();
  bool closed = false;
  // One byte every 50 ms would keep a per-read timeout of 400 ms waiting for ever.
  for (size_t i = 0; i < hello.size() && MonotonicMs() - start < 5000; ++i) {
    if (send(fd, &hello[i], 1, MSG_NOSIGNAL) != 1) {
      closed = true;
      break;
    }
    char byte;
    if (recv(fd, &byte, 1, MSG_DONTWAIT) == 0) {
      closed = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const int64_t took = MonotonicMs() - start;
  close(fd);
  EXPECT_TRUE(closed);
  EXPECT_LT(took, 2000);
  EXPECT_EQ(server_->num_issued(), 0);
}

TEST_F(EnrollmentTest, MoreThanTheCapAtOnceAreClosedAtOnce) {
  EnrollmentServer::Options options;
  options.max_concurrent = 1;
  options.timeout_ms = 3000;
  Start(options);
  int silent = testing::ConnectTcp("127.0.0.1", port_);  // holds the one slot
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        int probe = testing::ConnectTcp("127.0.0.1", port_);
        char byte;
        timeval tv{0, 200000};
        setsockopt(probe, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        bool refused = recv(probe, &byte, 1, 0) == 0;
        close(probe);
        return refused;
      },
      2000));
  close(silent);
  // Once the slot is free again, members get certificates.
  EXPECT_TRUE(testing::WaitFor([&] { return Enroll(address(), token_, {"10.0.0.9"}, 2000).ok(); }, 5000));
}

}  // namespace
}  // namespace manta
