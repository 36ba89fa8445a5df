// The object data channel on 127.0.0.1: a server over a memfd "arena" with a
// scripted source, and the client that pulls from it.
#include "src/raylet/object_data_channel.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "src/common/security.h"
#include "test_util/test_util.h"

namespace manta::raylet {
namespace {

constexpr int64_t kArenaBytes = 8 << 20;

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
        /*io_timeout_ms=*/500);
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
  ObjectDataClient client(token_, 5000);
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
  ObjectDataClient client(token_, 5000);
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
  ObjectDataClient client(token_, 5000);
  std::vector<uint8_t> got;
  absl::Status s = Pull(client, busy_, &got);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(std::string(s.message()).find("no room"), std::string::npos) << s;
  ASSERT_TRUE(Pull(client, known_, &got).ok());
}

TEST_F(ObjectDataChannelTest, AnIdleConnectionTheServerClosedIsReplaced) {
  ObjectDataClient client(token_, 5000);
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
  ObjectDataClient stranger(NewClusterToken(), 5000);
  std::vector<uint8_t> got;
  absl::Status s = Pull(stranger, known_, &got);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("handshake"), std::string::npos) << s;
  EXPECT_EQ(held_, 0);
}

TEST_F(ObjectDataChannelTest, AServerWithoutTheTokenIsNotBelieved) {
  // A client of another cluster talks to this server: it cannot prove itself, and
  // nothing it did made the server serve anything.
  ObjectDataClient client(token_, 5000);
  auto other = ObjectDataServer::Listen("127.0.0.1", NewClusterToken(), fd_, base_,
                                        [](const ObjectID&) -> std::optional<ServedObject> { return std::nullopt; },
                                        5000);
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

TEST_F(ObjectDataChannelTest, OneHostCannotHoldEveryConnection) {
  auto server = ObjectDataServer::Listen(
      "127.0.0.1", token_, fd_, base_, [](const ObjectID&) -> std::optional<ServedObject> { return std::nullopt; },
      /*io_timeout_ms=*/20000);
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->LimitLoopbackPeersForTesting();
  // Connections from one host that never answer: each is served its nonce.
  std::vector<int> held;
  char nonce[8];
  for (int i = 0; i < ObjectDataServer::kMaxConnectionsPerHost; ++i) {
    held.push_back(ConnectFrom("127.0.0.2", (*server)->port()));
    ASSERT_EQ(recv(held.back(), nonce, sizeof(nonce), MSG_WAITALL), static_cast<ssize_t>(sizeof(nonce))) << i;
  }
  // One more from that host is closed unanswered; another host is still served.
  int refused = ConnectFrom("127.0.0.2", (*server)->port());
  EXPECT_EQ(recv(refused, nonce, sizeof(nonce), 0), 0);
  int other = ConnectFrom("127.0.0.3", (*server)->port());
  EXPECT_EQ(recv(other, nonce, sizeof(nonce), MSG_WAITALL), static_cast<ssize_t>(sizeof(nonce)));
  for (int fd : held) close(fd);
  close(refused);
  close(other);
  (*server)->Stop();
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
  ObjectDataClient client(token_, 5000);
  std::vector<uint8_t> got;
  EXPECT_TRUE(Pull(client, known_, &got).ok());
}

TEST_F(ObjectDataChannelTest, AnAllocationThatFailsFailsThePull) {
  ObjectDataClient client(token_, 5000);
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
  ObjectDataClient client(token_, 5000);
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

}  // namespace
}  // namespace manta::raylet
