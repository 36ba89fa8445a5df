// TcpAcceptor: connections handed over, peers described, and what a peer that never
// presents the cluster token can hold (a few connections, for a short time).
#include "src/common/rpc/tcp_acceptor.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>
#include <vector>

#include "test_util/scoped_network_limits.h"
#include "test_util/test_util.h"

namespace manta::rpc {
namespace {

using testing::ScopedNetworkLimits;
using testing::WaitFor;

int Connect(int port) {
  int fd = testing::ConnectTcp("127.0.0.1", port);
  EXPECT_GE(fd, 0);
  return fd;
}

// Whether the other end closed or shut down `fd` (without waiting).
bool Ended(int fd) {
  char c;
  ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

// Plays gRPC: keeps the connections it is given.
struct Taker {
  std::mutex mu;
  std::vector<int> fds;
  void operator()(int fd) {
    std::lock_guard<std::mutex> lock(mu);
    fds.push_back(fd);
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu);
    return fds.size();
  }
  ~Taker() {
    for (int fd : fds) close(fd);
  }
};

TEST(TcpAcceptorTest, HandsOverConnectionsAndNamesTheirPeers) {
  auto acceptor = TcpAcceptor::Listen("127.0.0.1", 0);
  ASSERT_TRUE(acceptor.ok()) << acceptor.status();
  Taker taker;
  (*acceptor)->Start([&taker](int fd) { taker(fd); });
  int client = Connect((*acceptor)->port());
  ASSERT_TRUE(WaitFor([&] { return taker.size() == 1; }, 5000));
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  getsockname(client, reinterpret_cast<sockaddr*>(&local), &len);
  EXPECT_EQ(DescribePeer("fd:" + std::to_string(taker.fds[0])),
            "ipv4:127.0.0.1:" + std::to_string(ntohs(local.sin_port)));
  EXPECT_EQ(DescribePeer("ipv4:10.0.0.1:5"), "ipv4:10.0.0.1:5");
  close(client);
}

TEST(TcpAcceptorTest, AHostGetsAtMostSoManyUnprovenConnections) {
  NetworkLimits limits;
  limits.max_unproven_per_host = 24;  // the configured cap, not the default one
  ScopedNetworkLimits scoped(limits);
  const int cap = static_cast<int>(limits.max_unproven_per_host);
  auto acceptor = TcpAcceptor::Listen("127.0.0.1", 0);
  ASSERT_TRUE(acceptor.ok());
  (*acceptor)->LimitLoopbackPeersForTesting();
  Taker taker;
  (*acceptor)->Start([&taker](int fd) { taker(fd); });
  constexpr int kExtra = 16;
  std::vector<int> clients;
  for (int i = 0; i < cap + kExtra; ++i) clients.push_back(Connect((*acceptor)->port()));
  // The ones over the cap are closed as they are accepted; the others are handed on.
  EXPECT_TRUE(WaitFor(
      [&] {
        int ended = 0;
        for (int fd : clients) ended += Ended(fd) ? 1 : 0;
        return ended == kExtra;
      },
      5000));
  EXPECT_EQ(taker.size(), static_cast<size_t>(cap));
  // A proven connection makes room for another.
  MarkAuthenticated("fd:" + std::to_string(taker.fds[0]));
  int one_more = Connect((*acceptor)->port());
  EXPECT_TRUE(WaitFor([&] { return taker.size() == cap + 1u; }, 5000));
  EXPECT_FALSE(Ended(one_more));
  for (int fd : clients) close(fd);
  close(one_more);
}

TEST(TcpAcceptorTest, LoopbackPeersAreNotCappedByDefault) {
  auto acceptor = TcpAcceptor::Listen("127.0.0.1", 0);
  ASSERT_TRUE(acceptor.ok());
  Taker taker;
  (*acceptor)->Start([&taker](int fd) { taker(fd); });
  std::vector<int> clients;
  for (int i = 0; i < 2 * CurrentNetworkLimits().max_unproven_per_host; ++i) {
    clients.push_back(Connect((*acceptor)->port()));
  }
  EXPECT_TRUE(WaitFor([&] { return taker.size() == clients.size(); }, 5000));
  for (int fd : clients) EXPECT_FALSE(Ended(fd));
  for (int fd : clients) close(fd);
}

TEST(TcpAcceptorTest, UnprovenConnectionsAreShutDownAtTheirDeadline) {
  NetworkLimits limits;
  limits.unproven_timeout_ms = 300;
  ScopedNetworkLimits scoped(limits);
  auto acceptor = TcpAcceptor::Listen("127.0.0.1", 0);
  ASSERT_TRUE(acceptor.ok());
  Taker taker;
  (*acceptor)->Start([&taker](int fd) { taker(fd); });
  int proven = Connect((*acceptor)->port());
  ASSERT_TRUE(WaitFor([&] { return taker.size() == 1; }, 5000));
  MarkAuthenticated("fd:" + std::to_string(taker.fds[0]));
  int silent = Connect((*acceptor)->port());
  ASSERT_TRUE(WaitFor([&] { return taker.size() == 2; }, 5000));
  EXPECT_TRUE(WaitFor([&] { return Ended(silent); }, 5000)) << "the silent connection stayed open";
  EXPECT_FALSE(Ended(proven));
  // The connection taker's own descriptor sees the end too (gRPC would close it).
  EXPECT_TRUE(Ended(taker.fds[1]));
  close(proven);
  close(silent);
}

TEST(TcpAcceptorTest, StoppingReleasesWhatItWatched) {
  auto acceptor = TcpAcceptor::Listen("127.0.0.1", 0);
  ASSERT_TRUE(acceptor.ok());
  Taker taker;
  (*acceptor)->Start([&taker](int fd) { taker(fd); });
  int client = Connect((*acceptor)->port());
  ASSERT_TRUE(WaitFor([&] { return taker.size() == 1; }, 5000));
  (*acceptor)->Stop();
  EXPECT_TRUE(Ended(client));
  close(client);
}

}  // namespace
}  // namespace manta::rpc
