// The object data channel on 127.0.0.1: a server over a memfd "arena" with a
// scripted source, and the client that pulls from it.
#include "src/raylet/object_data_channel.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "src/common/security.h"
#include "src/task_channel/task_channel_security.h"
#include "src/common/util.h"
#include "test_util/test_util.h"

namespace manta::raylet {
namespace {

constexpr int64_t kArenaBytes = 8 << 20;

ObjectDataLimits Limits(int64_t io_timeout_ms) {
  ObjectDataLimits limits;
  limits.io_timeout_ms = io_timeout_ms;
  limits.connect_timeout_ms = 5000;
  return limits;
}

class ObjectDataChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fd_ = memfd_create("data_channel_test", MFD_CLOEXEC);
    ASSERT_GE(fd_, 0);
    ASSERT_EQ(ftruncate(fd_, kArenaBytes), 0);
    base_ = static_cast<uint8_t*>(mmap(nullptr, kArenaBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0));
    ASSERT_NE(base_, MAP_FAILED);
    for (int64_t i = 0; i < kArenaBytes; ++i) base_[i] = static_cast<uint8_t>(i * 7 + 3);
    auto server = ObjectDataServer::Listen(
        "127.0.0.1", token_, fd_, base_,
        [this](const ObjectID& id) -> std::optional<ServedObject> {
          if (id == busy_) {
            ServedObject busy;
            busy.busy = true;
            return busy;
          }
          if (id != known_ && id != small_) return std::nullopt;
          ++held_;
          if (id == small_) return ServedObject{0, 1000, 0, [this] { --held_; }};
          return ServedObject{1000, 5 << 20, 100, [this] { --held_; }};
        },
        Limits(500));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    address_ = "127.0.0.1:" + std::to_string(server_->port());
  }
  void TearDown() override {
    if (server_) server_->Stop();
    munmap(base_, kArenaBytes);
    close(fd_);
  }

  // Pulls `id` into `out` with `client`.
  absl::Status Pull(ObjectDataClient& client, const ObjectID& id, std::vector<uint8_t>* out,
                    std::shared_ptr<ObjectDataClient::Fetch> fetch = std::make_shared<ObjectDataClient::Fetch>()) {
    return client.Run(address_, id, 5000,
                      [out](int64_t data_size, int64_t metadata_size) -> absl::StatusOr<uint8_t*> {
                        out->assign(static_cast<size_t>(data_size + metadata_size), 0);
                        return out->data();
                      },
                      fetch);
  }

  static ObjectDataLimits SealingLimits() {
    ObjectDataLimits limits = Limits(5000);
    limits.encrypt = true;
    return limits;
  }
  // A server that seals, serving known_ as the arena's bytes from 1000 on.
  absl::StatusOr<std::unique_ptr<ObjectDataServer>> SealingServer(int64_t data_size, int64_t metadata_size) {
    return ObjectDataServer::Listen(
        "127.0.0.1", token_, fd_, base_,
        [this, data_size, metadata_size](const ObjectID& id) -> std::optional<ServedObject> {
          if (id != known_) return std::nullopt;
          return ServedObject{1000, data_size, metadata_size, [] {}};
        },
        SealingLimits());
  }

  int RawConnect() {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    return fd;
  }

  const std::string token_ = NewClusterToken();
  const ObjectID known_ = ObjectID::FromRandom();
  const ObjectID small_ = ObjectID::FromRandom();  // fits in the socket's buffers
  const ObjectID busy_ = ObjectID::FromRandom();   // here, not readable now
  std::atomic<int> held_{0};
  int fd_ = -1;
  uint8_t* base_ = nullptr;
  std::unique_ptr<ObjectDataServer> server_;
  std::string address_;
};

TEST_F(ObjectDataChannelTest, AnObjectArrivesByteForByteAndItsReferenceIsGivenBack) {
  ObjectDataClient client(token_, Limits(5000));
  std::vector<uint8_t> got;
  ASSERT_TRUE(Pull(client, known_, &got).ok());
  ASSERT_EQ(got.size(), static_cast<size_t>((5 << 20) + 100));
  EXPECT_EQ(std::memcmp(got.data(), base_ + 1000, got.size()), 0);
  EXPECT_TRUE(testing::WaitFor([&] { return held_ == 0; }, 5000));
  EXPECT_EQ(server_->bytes_served(), static_cast<int64_t>(got.size()));
  // The connection is reused for the next pull, and an unknown object is NOT_FOUND.
  EXPECT_EQ(Pull(client, ObjectID::FromRandom(), &got).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(Pull(client, known_, &got).ok());
}

TEST_F(ObjectDataChannelTest, TheServerHoldsAnObjectUntilTheClientHasEveryByte) {
  // sendfile() returns once the kernel has the pages, before the client reads them:
  // the object must stay held (its pages unchanged) until the client says so.
  ObjectDataClient client(token_, Limits(5000));
  std::atomic<bool> allocating{false}, go_on{false};
  std::vector<uint8_t> got;
  std::thread puller([&] {
    absl::Status s = client.Run(address_, small_, 5000,
                                [&](int64_t d, int64_t m) -> absl::StatusOr<uint8_t*> {
                                  allocating = true;
                                  while (!go_on) std::this_thread::yield();
                                  got.resize(d + m);
                                  return got.data();
                                },
                                std::make_shared<ObjectDataClient::Fetch>());
    EXPECT_TRUE(s.ok()) << s;
  });
  ASSERT_TRUE(testing::WaitFor([&] { return allocating && server_->bytes_served() == 1000; }, 5000));
  EXPECT_FALSE(testing::WaitFor([&] { return held_ == 0; }, 300)) << "let go before the client read the bytes";
  go_on = true;
  puller.join();
  EXPECT_TRUE(testing::WaitFor([&] { return held_ == 0; }, 5000));
  EXPECT_EQ(std::memcmp(got.data(), base_, 1000), 0);
}

TEST_F(ObjectDataChannelTest, ABusyObjectIsResourceExhaustedAndTheConnectionGoesOn) {
  ObjectDataClient client(token_, Limits(5000));
  std::vector<uint8_t> got;
  absl::Status s = Pull(client, busy_, &got);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(std::string(s.message()).find("no room"), std::string::npos) << s;
  ASSERT_TRUE(Pull(client, known_, &got).ok());
}

TEST_F(ObjectDataChannelTest, AnIdleConnectionTheServerClosedIsReplaced) {
  ObjectDataClient client(token_, Limits(5000));
  std::vector<uint8_t> got;
  ASSERT_TRUE(Pull(client, known_, &got).ok());  // its connection stays open, idle, in the client
  // The server closes it after io_timeout_ms (500 here) of silence; the client's next
  // pull finds it dead and asks on a new one.
  ASSERT_TRUE(testing::WaitFor([&] { return server_->num_connections() == 0; }, 5000));
  absl::Status s = Pull(client, known_, &got);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(std::memcmp(got.data(), base_ + 1000, got.size()), 0);
}

TEST_F(ObjectDataChannelTest, AClientWithoutTheTokenIsRefused) {
  ObjectDataClient stranger(NewClusterToken(), Limits(5000));
  std::vector<uint8_t> got;
  absl::Status s = Pull(stranger, known_, &got);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("handshake"), std::string::npos) << s;
  EXPECT_EQ(held_, 0);
}

TEST_F(ObjectDataChannelTest, AServerWithoutTheTokenIsNotBelieved) {
  // A client of another cluster talks to this server: it cannot prove itself, and
  // nothing it did made the server serve anything.
  ObjectDataClient client(token_, Limits(5000));
  auto other = ObjectDataServer::Listen("127.0.0.1", NewClusterToken(), fd_, base_,
                                        [](const ObjectID&) -> std::optional<ServedObject> { return std::nullopt; },
                                        Limits(5000));
  ASSERT_TRUE(other.ok());
  std::vector<uint8_t> got;
  absl::Status s = client.Run("127.0.0.1:" + std::to_string((*other)->port()), known_, 5000,
                              [&got](int64_t d, int64_t m) -> absl::StatusOr<uint8_t*> {
                                got.resize(d + m);
                                return got.data();
                              },
                              std::make_shared<ObjectDataClient::Fetch>());
  EXPECT_FALSE(s.ok());
}

// A connection to 127.0.0.1:`port` from `source` (another loopback address), whose
// reads give up after 5 s.
int ConnectFrom(const std::string& source, int port) {
  int fd = testing::ConnectTcpFrom(source, "127.0.0.1", port);
  EXPECT_GE(fd, 0) << source;
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  return fd;
}

// The channel's handshake messages: a length byte and the body.
bool SendHandshake(int fd, const std::string& body) {
  std::string message(1, static_cast<char>(body.size()));
  message += body;
  return send(fd, message.data(), message.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(message.size());
}
bool ReadHandshake(int fd, std::string* body) {
  unsigned char n = 0;
  if (recv(fd, &n, 1, MSG_WAITALL) != 1) return false;
  body->resize(n);
  return n == 0 || recv(fd, body->data(), n, MSG_WAITALL) == n;
}
core::TaskChannelSecurity Plain(const std::string& token) {
  return {token, core::ChannelProtection::kNone, "object channel"};
}

// A server that answers nothing about objects (for the tests of its caps).
std::unique_ptr<ObjectDataServer> EmptyServer(const std::string& token, int fd, uint8_t* base,
                                              const ObjectDataLimits& limits) {
  auto server = ObjectDataServer::Listen(
      "127.0.0.1", token, fd, base, [](const ObjectID&) -> std::optional<ServedObject> { return std::nullopt; },
      limits);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

// A connection from `source` that got the server's challenge (and proves the token
// when `prove`); -1 when the server closed it unanswered.
int HoldFrom(const std::string& source, int port, const std::string& token, bool prove) {
  int fd = ConnectFrom(source, port);
  std::string challenge, answer;
  core::OwnerHandshake handshake(Plain(token));
  core::ChannelKeys keys;
  bool held = ReadHandshake(fd, &challenge);
  if (held && prove) {
    auto proof = handshake.Prove(challenge);
    held = proof.ok() && SendHandshake(fd, *proof) && ReadHandshake(fd, &answer) && handshake.Check(answer, &keys).ok();
  }
  if (!held) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST_F(ObjectDataChannelTest, StrangersInTheirHandshakeAreCappedAndDelayNobodyWithTheToken) {
  ObjectDataLimits limits = Limits(20000);
  limits.handshake_timeout_ms = 20000;
  limits.max_unproven_per_host = 8;
  limits.max_unproven = 10;
  auto server = EmptyServer(token_, fd_, base_, limits);
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  // One host fills its share of connections that never prove anything.
  std::vector<int> held;
  for (int i = 0; i < 8; ++i) {
    held.push_back(HoldFrom("127.0.0.2", port, token_, false));
    ASSERT_GE(held.back(), 0) << i;
  }
  EXPECT_EQ(HoldFrom("127.0.0.2", port, token_, false), -1) << "a ninth from the same host was let in";
  // Another host with the token is served meanwhile.
  int proven = HoldFrom("127.0.0.3", port, token_, true);
  EXPECT_GE(proven, 0);
  // Strangers from more hosts meet the cap on all of them together.
  held.push_back(HoldFrom("127.0.0.4", port, token_, false));
  held.push_back(HoldFrom("127.0.0.5", port, token_, false));
  EXPECT_GE(held.back(), 0);
  EXPECT_EQ(HoldFrom("127.0.0.6", port, token_, false), -1) << "past the cap on all hosts";
  for (int fd : held) close(fd);
  close(proven);
  // Once they are gone, strangers' slots are free again.
  EXPECT_TRUE(testing::WaitFor([&] { return server->num_connections() == 0; }, 5000));
  int again = HoldFrom("127.0.0.6", port, token_, false);
  EXPECT_GE(again, 0);
  close(again);
  server->Stop();
}

TEST_F(ObjectDataChannelTest, OneHostCannotHoldEveryProvenConnection) {
  auto server = EmptyServer(token_, fd_, base_, Limits(20000));
  ASSERT_NE(server, nullptr);
  server->LimitLoopbackPeersForTesting();
  std::vector<int> held;
  for (int i = 0; i < ObjectDataServer::kMaxConnectionsPerHost; ++i) {
    held.push_back(HoldFrom("127.0.0.2", server->port(), token_, true));
    ASSERT_GE(held.back(), 0) << i;
  }
  // One more from that host is closed unanswered; another host is still served.
  EXPECT_EQ(HoldFrom("127.0.0.2", server->port(), token_, true), -1);
  int other = HoldFrom("127.0.0.3", server->port(), token_, true);
  EXPECT_GE(other, 0);
  for (int fd : held) close(fd);
  close(other);
  server->Stop();
}

TEST_F(ObjectDataChannelTest, TrickledBytesMeetTheHandshakeDeadline) {
  ObjectDataLimits limits = Limits(20000);
  limits.handshake_timeout_ms = 600;
  auto server = EmptyServer(token_, fd_, base_, limits);
  ASSERT_NE(server, nullptr);
  int fd = HoldFrom("127.0.0.2", server->port(), token_, false);
  ASSERT_GE(fd, 0);
  // One byte every 100 ms: each read would wait less than any per-read timeout.
  const int64_t start = MonotonicMs();
  bool closed = false;
  for (int i = 0; i < 64 && !closed && MonotonicMs() - start < 5000; ++i) {
    const char byte = 'x';
    if (send(fd, &byte, 1, MSG_NOSIGNAL) != 1) closed = true;
    char c;
    if (recv(fd, &c, 1, MSG_DONTWAIT) == 0) closed = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(closed);
  EXPECT_LT(MonotonicMs() - start, 2500);
  close(fd);
  server->Stop();
}

TEST_F(ObjectDataChannelTest, ARefusingChannelIsReportedAsRefused) {
  // Strangers from this host hold every handshake slot it has: this node's own
  // pull is refused, and the fetch says so (the object manager then uses gRPC).
  std::vector<int> held;
  for (int i = 0; i < ObjectDataLimits().max_unproven_per_host; ++i) {
    held.push_back(HoldFrom("127.0.0.1", server_->port(), token_, false));
    ASSERT_GE(held.back(), 0) << i;
  }
  ObjectDataClient client(token_, Limits(5000));
  auto fetch = std::make_shared<ObjectDataClient::Fetch>();
  std::vector<uint8_t> got;
  absl::Status s = Pull(client, known_, &got, fetch);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_TRUE(fetch->channel_refused());
  for (int fd : held) close(fd);
  // A pull that fails for another reason is not a refusal.
  // (A fetch is one pull: each try gets its own, until the strangers' slots are free.)
  std::shared_ptr<ObjectDataClient::Fetch> missing;
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        missing = std::make_shared<ObjectDataClient::Fetch>();
        return Pull(client, ObjectID::FromRandom(), &got, missing).code() == absl::StatusCode::kNotFound;
      },
      5000));
  EXPECT_FALSE(missing->channel_refused());
}

// A server that proves the token, announces `bytes` and sends one byte every 20 ms.
void TrickleServer(int listen_fd, const std::string& token, uint64_t bytes, std::atomic<bool>* stop) {
  int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return;
  core::WorkerHandshake handshake(Plain(token));
  core::ChannelKeys keys;
  std::string proof;
  char id[ObjectID::kSize];
  if (SendHandshake(fd, handshake.challenge()) && ReadHandshake(fd, &proof)) {
    auto answer = handshake.Answer(proof, &keys);
    if (answer.ok() && SendHandshake(fd, *answer) && recv(fd, id, sizeof(id), MSG_WAITALL) == sizeof(id)) {
      char header[17] = {1};
      for (int i = 0; i < 8; ++i) header[1 + i] = static_cast<char>((bytes >> (8 * i)) & 0xff);
      (void)send(fd, header, sizeof(header), MSG_NOSIGNAL);
      while (!*stop && send(fd, "x", 1, MSG_NOSIGNAL) == 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  close(fd);
}

TEST_F(ObjectDataChannelTest, ASlowServerCannotHoldATransferForEver) {
  int port = 0;
  int listen_fd = testing::ListenOnLoopback(&port);
  ASSERT_GE(listen_fd, 0);
  std::atomic<bool> stop{false};
  std::thread trickle(TrickleServer, listen_fd, token_, uint64_t{1} << 20, &stop);
  ObjectDataLimits limits = Limits(500);
  limits.min_bytes_per_s = 1 << 20;  // 1 MiB: a deadline of 0.5 s + 1 s
  ObjectDataClient client(token_, limits);
  std::vector<uint8_t> got;
  const int64_t start = MonotonicMs();
  absl::Status s = client.Run("127.0.0.1:" + std::to_string(port), known_, 500,
                              [&got](int64_t d, int64_t m) -> absl::StatusOr<uint8_t*> {
                                got.resize(d + m);
                                return got.data();
                              },
                              std::make_shared<ObjectDataClient::Fetch>());
  const int64_t took = MonotonicMs() - start;
  stop = true;
  trickle.join();
  close(listen_fd);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_NE(std::string(s.message()).find("deadline"), std::string::npos) << s;
  EXPECT_GE(took, 1400);
  EXPECT_LT(took, 4000);
}

TEST_F(ObjectDataChannelTest, GarbageAndSilenceCloseTheConnectionAndTheServerGoesOn) {
  int garbage = RawConnect();
  std::string junk(4096, 'x');
  (void)send(garbage, junk.data(), junk.size(), MSG_NOSIGNAL);
  int silent = RawConnect();
  char buf[64];
  // Both are closed by the server: the garbage fails the MAC, the silence times out.
  EXPECT_TRUE(testing::WaitFor([&] { return recv(garbage, buf, sizeof(buf), MSG_DONTWAIT) == 0; }, 10000));
  EXPECT_TRUE(testing::WaitFor([&] { return recv(silent, buf, sizeof(buf), MSG_DONTWAIT) == 0; }, 10000));
  close(garbage);
  close(silent);
  ObjectDataClient client(token_, Limits(5000));
  std::vector<uint8_t> got;
  EXPECT_TRUE(Pull(client, known_, &got).ok());
}

TEST_F(ObjectDataChannelTest, AnAllocationThatFailsFailsThePull) {
  ObjectDataClient client(token_, Limits(5000));
  absl::Status s = client.Run(address_, known_, 5000,
                              [](int64_t, int64_t) -> absl::StatusOr<uint8_t*> {
                                return absl::AlreadyExistsError("already here");
                              },
                              std::make_shared<ObjectDataClient::Fetch>());
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  std::vector<uint8_t> got;
  EXPECT_TRUE(Pull(client, known_, &got).ok()) << "the client recovers with a fresh connection";
}

TEST_F(ObjectDataChannelTest, CancelEndsAPullInProgress) {
  // The client blocks in the allocation; a cancel from another thread ends it.
  ObjectDataClient client(token_, Limits(5000));
  auto fetch = std::make_shared<ObjectDataClient::Fetch>();
  std::atomic<bool> allocating{false};
  std::vector<uint8_t> got;
  std::thread puller([&] {
    absl::Status s = client.Run(address_, known_, 5000,
                                [&](int64_t d, int64_t m) -> absl::StatusOr<uint8_t*> {
                                  allocating = true;
                                  while (!fetch->cancelled()) std::this_thread::yield();
                                  got.resize(d + m);
                                  return got.data();
                                },
                                fetch);
    EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  });
  ASSERT_TRUE(testing::WaitFor([&] { return allocating.load(); }, 5000));
  fetch->Cancel();
  puller.join();
}

TEST_F(ObjectDataChannelTest, WithEncryptionEveryByteArrivesSealedAndOpened) {
  const ObjectDataLimits limits = SealingLimits();
  auto server = SealingServer(5 << 20, 100);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = "127.0.0.1:" + std::to_string((*server)->port());
  ObjectDataClient client(token_, limits);
  std::vector<uint8_t> got;
  for (int round = 0; round < 2; ++round) {  // the second on the idle connection
    absl::Status s = client.Run(address, known_, 5000,
                                [&got](int64_t d, int64_t m) -> absl::StatusOr<uint8_t*> {
                                  got.assign(static_cast<size_t>(d + m), 0);
                                  return got.data();
                                },
                                std::make_shared<ObjectDataClient::Fetch>());
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_EQ(got.size(), size_t{(5 << 20) + 100});
    EXPECT_EQ(std::memcmp(got.data(), base_ + 1000, got.size()), 0);
  }
  EXPECT_EQ((*server)->num_connections(), 1u);
  // A client that requires encryption refuses a server that does not encrypt (the
  // object manager then pulls over gRPC, with TLS).
  auto fetch = std::make_shared<ObjectDataClient::Fetch>();
  absl::Status refused = Pull(client, known_, &got, fetch);
  EXPECT_TRUE(absl::IsUnavailable(refused)) << refused;
  EXPECT_TRUE(fetch->channel_refused());
  (*server)->Stop();
}

TEST_F(ObjectDataChannelTest, WithEncryptionNothingOfTheObjectCrossesReadable) {
  // The bytes on the wire, as a relay sees them: a pattern of the object's must not
  // appear in them.
  const ObjectDataLimits limits = SealingLimits();
  std::memset(base_ + 1000, 'Q', 1 << 20);
  auto server = SealingServer(1 << 20, 0);
  ASSERT_TRUE(server.ok());
  int port = 0;
  int relay_fd = testing::ListenOnLoopback(&port);
  std::string seen;
  std::thread relay([&] {
    int in = accept4(relay_fd, nullptr, nullptr, SOCK_CLOEXEC);
    int out = testing::ConnectTcp("127.0.0.1", (*server)->port());
    if (in < 0 || out < 0) return;
    pollfd fds[2] = {{in, POLLIN, 0}, {out, POLLIN, 0}};
    char buf[65536];
    for (bool open = true; open && poll(fds, 2, 5000) > 0;) {
      for (int i = 0; i < 2 && open; ++i) {
        if ((fds[i].revents & (POLLIN | POLLHUP)) == 0) continue;
        ssize_t n = recv(fds[i].fd, buf, sizeof(buf), 0);
        if (n <= 0) open = false;
        if (n > 0 && i == 1) seen.append(buf, static_cast<size_t>(n));
        if (n > 0) (void)send(fds[1 - i].fd, buf, static_cast<size_t>(n), MSG_NOSIGNAL);
      }
    }
    close(in);
    close(out);
  });
  {
    ObjectDataClient client(token_, limits);
    std::vector<uint8_t> got;
    absl::Status s = client.Run("127.0.0.1:" + std::to_string(port), known_, 5000,
                                [&got](int64_t d, int64_t m) -> absl::StatusOr<uint8_t*> {
                                  got.assign(static_cast<size_t>(d + m), 0);
                                  return got.data();
                                },
                                std::make_shared<ObjectDataClient::Fetch>());
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(got, std::vector<uint8_t>(1 << 20, 'Q'));
  }  // the client closes its connection: the relay ends
  relay.join();
  close(relay_fd);
  EXPECT_GT(seen.size(), size_t{1} << 20);
  EXPECT_EQ(seen.find(std::string(64, 'Q')), std::string::npos) << "object bytes crossed in the clear";
  (*server)->Stop();
}

}  // namespace
}  // namespace manta::raylet
