// Tests of TlsRelay (src/common/rpc/tls_relay.h) behind a TcpAcceptor, wired as
// GrpcServer wires them, with real OpenSSL clients on loopback and certificates made
// by the openssl command. In place of gRPC, an echo thread serves each plaintext end.
// Labelled `integration`: sockets and a subprocess.
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "src/common/rpc/tcp_acceptor.h"
#include "src/common/rpc/tls_relay.h"
#include "test_util/test_util.h"

namespace manta::rpc {
namespace {

using ::manta::testing::TestCertificates;
using ::manta::testing::WaitFor;

constexpr int64_t kDeadlineMs = 10000;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A TLS client with a blocking socket. `cert` empty: no client certificate.
class TlsClient {
 public:
  TlsClient(const TestCertificates& certs, const std::string& cert, const std::string& key, int port,
            const unsigned char* alpn = reinterpret_cast<const unsigned char*>("\x02h2"), unsigned alpn_len = 3) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    if (!cert.empty()) {
      SSL_CTX_use_certificate_chain_file(ctx_, certs.Path(cert).c_str());
      SSL_CTX_use_PrivateKey_file(ctx_, certs.Path(key).c_str(), SSL_FILETYPE_PEM);
    }
    SSL_CTX_load_verify_locations(ctx_, certs.Path("ca.crt").c_str(), nullptr);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    SSL_CTX_set_alpn_protos(ctx_, alpn, alpn_len);
    fd_ = ::manta::testing::ConnectTcp("127.0.0.1", port);
    timeval tv{static_cast<time_t>(kDeadlineMs / 1000), 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    connected_ = SSL_connect(ssl_) == 1;
    ERR_clear_error();
  }
  ~TlsClient() {
    SSL_free(ssl_);
    SSL_CTX_free(ctx_);
    if (fd_ >= 0) close(fd_);
  }
  bool connected() const { return connected_; }
  std::string alpn() const {
    const unsigned char* p = nullptr;
    unsigned len = 0;
    SSL_get0_alpn_selected(ssl_, &p, &len);
    return std::string(reinterpret_cast<const char*>(p), len);
  }
  bool WriteAll(const std::string& data) {
    for (size_t done = 0; done < data.size();) {
      int n = SSL_write(ssl_, data.data() + done, static_cast<int>(std::min<size_t>(data.size() - done, 1 << 20)));
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }
  // Reads exactly `n` bytes, or fewer when the connection ends (or times out).
  std::string Read(size_t n) {
    std::string out(n, '\0');
    size_t got = 0;
    while (got < n) {
      int r = SSL_read(ssl_, out.data() + got, static_cast<int>(n - got));
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    out.resize(got);
    return out;
  }
  // Whether the server ended the connection (rather than the read timing out).
  bool Ended() {
    char c;
    int r = SSL_read(ssl_, &c, 1);
    if (r > 0) return false;
    int error = SSL_get_error(ssl_, r);
    ERR_clear_error();
    return error == SSL_ERROR_ZERO_RETURN || (error == SSL_ERROR_SYSCALL && errno != EAGAIN && errno != EWOULDBLOCK) ||
           error == SSL_ERROR_SSL;
  }
  void Shutdown() {
    SSL_shutdown(ssl_);
    shutdown(fd_, SHUT_WR);
  }

 private:
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
  bool connected_ = false;
};

class TlsRelayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto relay = TlsRelay::Create(ReadFile(certs_.Path("node.crt")), ReadFile(certs_.Path("node.key")),
                                  ReadFile(certs_.Path("ca.crt")));
    ASSERT_TRUE(relay.ok()) << relay.status();
    relay_ = std::move(*relay);
    auto acceptor = TcpAcceptor::Listen("127.0.0.1", 0);
    ASSERT_TRUE(acceptor.ok()) << acceptor.status();
    acceptor_ = std::move(*acceptor);
    relay_->Start([this](int accepted_fd, int grpc_fd) {
      ConnectionRenamed(accepted_fd, grpc_fd);
      std::lock_guard<std::mutex> lock(mu_);
      ready_.push_back(grpc_fd);
      cv_.notify_all();
    });
    acceptor_->Start([this](int fd) { relay_->Add(fd); });
  }
  void TearDown() override {
    if (acceptor_) acceptor_->Stop();
    if (relay_) relay_->Stop();
    for (std::thread& t : echoes_) t.join();
  }

  // The next plaintext end handed over, or -1 after the deadline.
  int NextReady() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::milliseconds(kDeadlineMs), [this] { return taken_ < ready_.size(); })) {
      return -1;
    }
    return ready_[taken_++];
  }
  size_t num_ready() {
    std::lock_guard<std::mutex> lock(mu_);
    return ready_.size();
  }
  // Serves `fd` as gRPC would be, by echoing; closes it when the peer's side ends.
  void Echo(int fd) {
    echoes_.emplace_back([fd] {
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      std::vector<char> buffer(64 << 10);
      while (true) {
        ssize_t n = read(fd, buffer.data(), buffer.size());
        if (n <= 0) break;
        for (ssize_t done = 0; done < n;) {
          ssize_t w = write(fd, buffer.data() + done, static_cast<size_t>(n - done));
          if (w <= 0) break;
          done += w;
        }
      }
      close(fd);
    });
  }
  bool RelayEmpties() {
    return WaitFor([this] { return relay_->num_connections() == 0; }, kDeadlineMs);
  }

  TestCertificates certs_;
  std::unique_ptr<TlsRelay> relay_;
  std::unique_ptr<TcpAcceptor> acceptor_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> ready_;
  size_t taken_ = 0;
  std::vector<std::thread> echoes_;
};

TEST_F(TlsRelayTest, RelaysBulkDataBothWaysOnSeveralConnections) {
  constexpr int kClients = 4;
  constexpr size_t kBytes = 4 << 20;  // each way, many times the relay's buffers
  std::vector<std::unique_ptr<TlsClient>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<TlsClient>(certs_, "node.crt", "node.key", acceptor_->port()));
    ASSERT_TRUE(clients.back()->connected());
    EXPECT_EQ(clients.back()->alpn(), "h2") << "gRPC clients require HTTP/2 by ALPN";
    int fd = NextReady();
    ASSERT_GE(fd, 0) << "the handshake did not complete";
    // gRPC knows the connection by its own end, and sees the peer's real address.
    EXPECT_EQ(DescribePeer("fd:" + std::to_string(fd)).rfind("ipv4:127.0.0.1:", 0), 0u)
        << DescribePeer("fd:" + std::to_string(fd));
    Echo(fd);
  }
  std::mt19937_64 rng(1);
  std::vector<std::string> sent(kClients);
  std::vector<std::thread> writers;
  for (int i = 0; i < kClients; ++i) {
    sent[i].resize(kBytes);
    for (char& c : sent[i]) c = static_cast<char>(rng());
    // Writes and reads at once: the echo cannot take everything before it is read.
    writers.emplace_back([&, i] { EXPECT_TRUE(clients[i]->WriteAll(sent[i])); });
  }
  for (int i = 0; i < kClients; ++i) {
    std::string got = clients[i]->Read(kBytes);
    EXPECT_EQ(got.size(), kBytes);
    EXPECT_TRUE(got == sent[i]) << "client " << i << " got back other bytes";
  }
  for (std::thread& t : writers) t.join();
  // The peer closing ends the plaintext side, and the relay lets go of both.
  for (auto& client : clients) client->Shutdown();
  EXPECT_TRUE(RelayEmpties());
}

TEST_F(TlsRelayTest, GrpcClosingItsEndClosesThePeers) {
  TlsClient client(certs_, "node.crt", "node.key", acceptor_->port());
  ASSERT_TRUE(client.connected());
  int fd = NextReady();
  ASSERT_GE(fd, 0);
  const std::string reply = "last words";
  ASSERT_EQ(write(fd, reply.data(), reply.size()), static_cast<ssize_t>(reply.size()));
  close(fd);
  EXPECT_EQ(client.Read(reply.size()), reply) << "what gRPC wrote before closing is delivered";
  EXPECT_TRUE(client.Ended());
  EXPECT_TRUE(RelayEmpties());
}

// A peer whose handshake fails after the relay started watching it, while the
// acceptor still holds a duplicate of its socket (it is unproven): events for the
// closed connection must stop, and later connections must be served.
TEST_F(TlsRelayTest, FailedHandshakesOfUnprovenPeersLeaveNothingBehind) {
  auto round_trip = [this] {
    TlsClient good(certs_, "node.crt", "node.key", acceptor_->port());
    ASSERT_TRUE(good.connected());
    int fd = NextReady();
    ASSERT_GE(fd, 0);
    Echo(fd);
    ASSERT_TRUE(good.WriteAll(std::string(4096, 'e')));
    EXPECT_EQ(good.Read(4096), std::string(4096, 'e'));
    good.Shutdown();
  };
  for (int i = 0; i < 20; ++i) {
    int fd = ::manta::testing::ConnectTcp("127.0.0.1", acceptor_->port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(WaitFor([this] { return relay_->num_connections() == 1; }, kDeadlineMs));  // watched
    const std::string plaintext = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    ASSERT_EQ(write(fd, plaintext.data(), plaintext.size()), static_cast<ssize_t>(plaintext.size()));
    ASSERT_TRUE(RelayEmpties());
    close(fd);
    round_trip();
    ASSERT_TRUE(RelayEmpties());
  }
  // 20 refused and 20 served connections wake the relay a few times each, not the
  // thousands of times a second a stale registration would.
  EXPECT_LT(relay_->num_wakeups(), 2000u);
}

TEST_F(TlsRelayTest, GrpcsLastWordsArriveWhileThePeerIsStillSending) {
  TlsClient client(certs_, "node.crt", "node.key", acceptor_->port());
  ASSERT_TRUE(client.connected());
  int fd = NextReady();
  ASSERT_GE(fd, 0);
  // The peer sends more than gRPC reads, until everything between them is full.
  // (Its writes fail once the relay closes: no SIGPIPE for this test process.)
  signal(SIGPIPE, SIG_IGN);
  std::thread writer([&] { client.WriteAll(std::string(8 << 20, 'x')); });
  EXPECT_TRUE(WaitFor(
      [fd] {
        int queued = 0;
        return ioctl(fd, FIONREAD, &queued) == 0 && queued >= 100000;
      },
      kDeadlineMs));
  const std::string reply = "last words";
  ASSERT_EQ(write(fd, reply.data(), reply.size()), static_cast<ssize_t>(reply.size()));
  close(fd);
  EXPECT_EQ(client.Read(reply.size()), reply);
  EXPECT_TRUE(client.Ended());
  client.Shutdown();
  writer.join();
  EXPECT_TRUE(RelayEmpties());
}

TEST_F(TlsRelayTest, PeersWithoutACertificateOfTheClusterCaAreRefused) {
  {
    TlsClient no_certificate(certs_, "", "", acceptor_->port());
    // TLS 1.3 lets the client finish before the server has checked its certificate:
    // the refusal shows as the connection ending.
    EXPECT_TRUE(!no_certificate.connected() || no_certificate.Ended());
  }
  {
    TlsClient other_ca(certs_, "other.crt", "other.key", acceptor_->port());
    EXPECT_TRUE(!other_ca.connected() || other_ca.Ended());
  }
  {
    // A client that does not speak HTTP/2 is no gRPC client.
    TlsClient http1(certs_, "node.crt", "node.key", acceptor_->port(),
                    reinterpret_cast<const unsigned char*>("\x08http/1.1"), 9);
    EXPECT_FALSE(http1.connected());
  }
  EXPECT_TRUE(RelayEmpties());
  EXPECT_EQ(num_ready(), 0u) << "a refused peer reached gRPC";
  // Plaintext spoken to a TLS port goes nowhere either.
  int fd = ::manta::testing::ConnectTcp("127.0.0.1", acceptor_->port());
  ASSERT_GE(fd, 0);
  const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  ASSERT_EQ(write(fd, preface.data(), preface.size()), static_cast<ssize_t>(preface.size()));
  timeval tv{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  EXPECT_TRUE(WaitFor(
      [fd] {
        char buffer[256];  // a TLS alert may come first
        ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
      },
      kDeadlineMs))
      << "the relay kept a connection that spoke plaintext";
  close(fd);
  EXPECT_TRUE(RelayEmpties());
  EXPECT_EQ(num_ready(), 0u);
}

TEST_F(TlsRelayTest, AfterStopHandoffsNoConnectionReachesGrpc) {
  relay_->StopHandoffs();
  TlsClient client(certs_, "node.crt", "node.key", acceptor_->port());
  EXPECT_TRUE(!client.connected() || client.Ended());
  EXPECT_TRUE(RelayEmpties());
  EXPECT_EQ(num_ready(), 0u);
}

TEST(TlsRelayCreateTest, UnusableMaterialIsNamed) {
  TestCertificates certs;
  const std::string cert = ReadFile(certs.Path("node.crt"));
  const std::string key = ReadFile(certs.Path("node.key"));
  const std::string ca = ReadFile(certs.Path("ca.crt"));
  auto no_cert = TlsRelay::Create("not a certificate", key, ca);
  ASSERT_FALSE(no_cert.ok());
  EXPECT_NE(no_cert.status().message().find("TLS certificate"), std::string::npos) << no_cert.status();
  auto wrong_key = TlsRelay::Create(cert, ReadFile(certs.Path("other.key")), ca);
  ASSERT_FALSE(wrong_key.ok());
  EXPECT_NE(wrong_key.status().message().find("does not match"), std::string::npos) << wrong_key.status();
  auto no_ca = TlsRelay::Create(cert, key, "");
  ASSERT_FALSE(no_ca.ok());
  EXPECT_NE(no_ca.status().message().find("CA"), std::string::npos) << no_ca.status();
  EXPECT_TRUE(TlsRelay::Create(cert, key, ca).ok());
}

}  // namespace
}  // namespace manta::rpc
