// StoreServer and ObjectStoreClient over a real Unix socket and memfd arena: the
// server's loop runs on its own thread, clients call from the test thread (or a
// forked child). Covers zero-copy sharing between clients, waiting Gets, one-way
// Seal/Release errors, garbage on the socket and clients that die or go away.
#include "src/object_store/store_server.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "protos/object_store.pb.h"
#include "src/common/util.h"
#include "src/object_store/store_client.h"
#include "tests/object_store/store_server_fixture.h"
#include "tests/test_util/test_util.h"

namespace manta::object_store {
namespace {

using ::testing::HasSubstr;
using manta::testing::WaitFor;

std::string LengthPrefix(uint32_t n) {
  std::string prefix(4, '\0');
  for (int i = 0; i < 4; ++i) prefix[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return prefix;
}

std::string Framed(const std::string& body) { return LengthPrefix(static_cast<uint32_t>(body.size())) + body; }

// A hand-driven connection to the store socket, for exact control over the bytes
// and the order of requests. Every read has a deadline.
class RawConnection {
 public:
  explicit RawConnection(const std::string& socket_path) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_path.c_str(), sizeof(addr.sun_path) - 1);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ADD_FAILURE() << "cannot connect to " << socket_path << ": " << std::strerror(errno);
    }
  }
  ~RawConnection() { close(fd_); }

  bool SendBytes(const std::string& bytes) {
    return send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  bool Send(rpc::StoreRequest request) { return SendBytes(Framed(request.SerializeAsString())); }
  // Sends Connect and reads its reply (closing the arena fd that comes with it).
  bool Connect() {
    rpc::StoreRequest request;
    request.mutable_connect()->set_pid(getpid());
    if (!Send(request)) return false;
    std::optional<rpc::StoreReply> reply = ReadReply();
    return reply.has_value() && reply->has_connect();
  }
  std::optional<rpc::StoreReply> ReadReply() {
    std::string header;
    if (!ReadExact(4, &header)) return std::nullopt;
    uint32_t n = 0;
    for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(static_cast<uint8_t>(header[i])) << (8 * i);
    std::string body;
    rpc::StoreReply reply;
    if (!ReadExact(n, &body) || !reply.ParseFromString(body)) return std::nullopt;
    return reply;
  }
  // True once the server has closed the connection (EOF or reset); other bytes are
  // skipped.
  bool WaitClosed() {
    int64_t deadline = MonotonicMs() + kTimeoutMs;
    char buf[4096];
    while (MonotonicMs() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      ssize_t n = Recv(buf, sizeof(buf));
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return true;
    }
    return false;
  }

 private:
  // recvmsg, closing any descriptor passed along (the arena's, with Connect).
  ssize_t Recv(char* buf, size_t size) {
    char control[CMSG_SPACE(sizeof(int))] = {};
    iovec iov{buf, size};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t n = recvmsg(fd_, &msg, MSG_CMSG_CLOEXEC);
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); n > 0 && c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
        close(fd);
      }
    }
    return n;
  }
  bool ReadExact(size_t n, std::string* out) {
    out->resize(n);
    size_t got = 0;
    int64_t deadline = MonotonicMs() + kTimeoutMs;
    while (got < n) {
      int64_t left = deadline - MonotonicMs();
      pollfd p{fd_, POLLIN, 0};
      if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) {
        ADD_FAILURE() << "no reply within " << kTimeoutMs << " ms";
        return false;
      }
      ssize_t r = Recv(out->data() + got, n - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
    return true;
  }

  int fd_ = -1;
};

ino_t Inode(int fd) {
  struct stat st {};
  EXPECT_EQ(fstat(fd, &st), 0);
  return st.st_ino;
}

TEST_F(StoreServerTest, SecondClientSeesTheSameMemory) {
  auto writer = Connect();
  auto reader = Connect();
  ASSERT_TRUE(writer && reader);
  EXPECT_EQ(writer->arena().capacity(), arena_->capacity());
  // Both map the server's memfd, not a copy of it.
  EXPECT_EQ(Inode(writer->arena().fd()), Inode(arena_->fd()));
  EXPECT_EQ(Inode(reader->arena().fd()), Inode(arena_->fd()));

  ObjectID id = ObjectID::FromRandom();
  constexpr int64_t kData = 2 << 20;
  constexpr int64_t kMeta = 24;
  absl::StatusOr<uint8_t*> data = writer->Create(id, kData, kMeta);
  ASSERT_TRUE(data.ok()) << data.status();
  for (int64_t i = 0; i < kData + kMeta; ++i) (*data)[i] = static_cast<uint8_t>(i * 13 + 1);
  ASSERT_TRUE(writer->Seal(id).ok());  // one-way

  auto got = reader->Get({id}, kTimeoutMs);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->at(0).has_value());
  const ObjectBuffer& buf = *got->at(0);
  ASSERT_EQ(buf.data_size, kData);
  ASSERT_EQ(buf.metadata_size, kMeta);
  EXPECT_EQ(std::memcmp(buf.data, *data, kData), 0);
  EXPECT_EQ(std::memcmp(buf.metadata, *data + kData, kMeta), 0);
  int64_t offset = *data - writer->arena().base();
  EXPECT_EQ(buf.data - reader->arena().base(), offset);
  EXPECT_EQ(std::memcmp(arena_->base() + offset, *data, kData), 0);
  // Zero copy: a store through one mapping shows in the other (tests only: sealed
  // objects are immutable by contract).
  (*data)[100] ^= 0xff;
  EXPECT_EQ(buf.data[100], (*data)[100]);

  EXPECT_EQ(RefCount(id), 1);
  EXPECT_TRUE(reader->Release(id, /*wait=*/true).ok());
  EXPECT_EQ(RefCount(id), 0);
}

TEST_F(StoreServerTest, ErrorsReachTheClient) {
  auto client = Connect();
  ASSERT_TRUE(client);
  ObjectID id = ObjectID::FromRandom();
  ASSERT_TRUE(client->Create(id, 10).ok());
  EXPECT_EQ(client->Create(id, 10).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(client->Create(ObjectID::FromRandom(), kCapacity + 1).status().code(),
            absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(client->Seal(id, true, /*wait=*/true).ok());
  EXPECT_EQ(client->Seal(id, true, /*wait=*/true).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(client->Abort(id).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(client->Release(id, /*wait=*/true).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(client->TakeAsyncError().ok());
}

// Seal without `release` keeps the creator's reference until it calls Release.
TEST_F(StoreServerTest, CreatorReleasesAfterSealWithoutRelease) {
  auto client = Connect();
  ASSERT_TRUE(client);
  ObjectID id = ObjectID::FromRandom();
  ASSERT_TRUE(client->Create(id, 10).ok());
  ASSERT_TRUE(client->Seal(id, /*release=*/false, /*wait=*/true).ok());
  EXPECT_EQ(RefCount(id), 1);
  EXPECT_TRUE(client->Release(id, /*wait=*/true).ok());
  EXPECT_EQ(RefCount(id), 0);
}

TEST_F(StoreServerTest, AbortFreesTheObject) {
  auto client = Connect();
  ASSERT_TRUE(client);
  ObjectID id = ObjectID::FromRandom();
  ASSERT_TRUE(client->Create(id, 1 << 20).ok());
  EXPECT_EQ(UsedBytes(), 1 << 20);
  ASSERT_TRUE(client->Abort(id).ok());
  EXPECT_EQ(UsedBytes(), 0);
  EXPECT_EQ(client->Contains(id).value_or(true), false);
}

// The Contains reply overtaking the Get's proves the Get is parked on the server
// when the other client seals.
TEST_F(StoreServerTest, GetWaitsForSealFromAnotherClient) {
  auto writer = Connect();
  ASSERT_TRUE(writer);
  ObjectID id = ObjectID::FromRandom();
  absl::StatusOr<uint8_t*> data = writer->Create(id, 64);
  ASSERT_TRUE(data.ok());

  RawConnection raw(socket_path());
  ASSERT_TRUE(raw.Connect());
  rpc::StoreRequest get;
  get.set_request_id(1);
  get.mutable_get()->add_object_ids(id.Binary());
  get.mutable_get()->set_timeout_ms(kTimeoutMs);
  rpc::StoreRequest contains;
  contains.set_request_id(2);
  contains.mutable_contains()->set_object_id(id.Binary());
  ASSERT_TRUE(raw.Send(get));
  ASSERT_TRUE(raw.Send(contains));
  std::optional<rpc::StoreReply> reply = raw.ReadReply();
  ASSERT_TRUE(reply.has_value());
  ASSERT_EQ(reply->request_id(), 2u);
  EXPECT_FALSE(reply->contains().has_object());

  ASSERT_TRUE(writer->Seal(id).ok());
  reply = raw.ReadReply();
  ASSERT_TRUE(reply.has_value());
  ASSERT_EQ(reply->request_id(), 1u);
  ASSERT_EQ(reply->get().objects_size(), 1);
  EXPECT_TRUE(reply->get().objects(0).found());
  EXPECT_EQ(reply->get().objects(0).offset(), *data - writer->arena().base());
  EXPECT_EQ(RefCount(id), 1);
}

TEST_F(StoreServerTest, BlockingGetReturnsOnceSealed) {
  auto writer = Connect();
  auto reader = Connect();
  ASSERT_TRUE(writer && reader);
  ObjectID id = ObjectID::FromRandom();
  absl::StatusOr<uint8_t*> data = writer->Create(id, 8);
  ASSERT_TRUE(data.ok());
  std::memcpy(*data, "manta!!!", 8);

  auto get = std::async(std::launch::async, [&] { return reader->Get({id}, kTimeoutMs); });
  ASSERT_TRUE(writer->Seal(id).ok());
  ASSERT_EQ(get.wait_for(std::chrono::milliseconds(kTimeoutMs)), std::future_status::ready);
  auto got = get.get();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->at(0).has_value());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(got->at(0)->data), 8), "manta!!!");
}

TEST_F(StoreServerTest, GetTimesOutWithoutSeal) {
  auto writer = Connect();
  auto reader = Connect();
  ASSERT_TRUE(writer && reader);
  ObjectID id = ObjectID::FromRandom();
  ASSERT_TRUE(writer->Create(id, 8).ok());
  auto start = std::chrono::steady_clock::now();
  auto got = reader->Get({id, ObjectID::FromRandom()}, 50);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(50));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_FALSE(got->at(0).has_value());
  EXPECT_FALSE(got->at(1).has_value());
  // 0 = don't wait.
  got = reader->Get({id}, 0);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->at(0).has_value());
}

TEST_F(StoreServerTest, ContainsAndDelete) {
  auto writer = Connect();
  auto other = Connect();
  ASSERT_TRUE(writer && other);
  ObjectID id = ObjectID::FromRandom();
  EXPECT_EQ(other->Contains(id).value_or(true), false);
  Put(*writer, id, 4096, 1);
  EXPECT_EQ(other->Contains(id).value_or(false), true);
  EXPECT_TRUE(other->Delete({id, ObjectID::FromRandom()}).ok());
  EXPECT_EQ(other->Contains(id).value_or(true), false);
  EXPECT_EQ(writer->Contains(id).value_or(true), false);
  EXPECT_EQ(UsedBytes(), 0);
}

TEST_F(StoreServerTest, OneWayErrorsComeBackThroughTakeAsyncError) {
  auto client = Connect();
  ASSERT_TRUE(client);
  EXPECT_TRUE(client->Seal(ObjectID::FromRandom()).ok());  // sent, not answered yet
  // The next synchronous call reads the late error on its way.
  EXPECT_TRUE(client->Contains(ObjectID::FromRandom()).ok());
  absl::Status error = client->TakeAsyncError();
  EXPECT_EQ(error.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(error.message()), HasSubstr("Seal"));
  EXPECT_TRUE(client->TakeAsyncError().ok());
  // The connection still works.
  ObjectID id = ObjectID::FromRandom();
  Put(*client, id, 10, 1);
  EXPECT_EQ(client->Contains(id).value_or(false), true);
}

// One-way Deletes and Aborts get no reply (a reply would sit in front of the next
// call's answer).
TEST_F(StoreServerTest, OneWayDeleteAndAbortAreNotAnswered) {
  RawConnection raw(socket_path());
  ASSERT_TRUE(raw.Connect());
  rpc::StoreRequest del;
  del.set_request_id(1);
  del.set_no_reply(true);
  del.mutable_delete_()->add_object_ids(ObjectID::FromRandom().Binary());
  rpc::StoreRequest contains;
  contains.set_request_id(2);
  contains.mutable_contains()->set_object_id(ObjectID::FromRandom().Binary());
  ASSERT_TRUE(raw.Send(del));
  ASSERT_TRUE(raw.Send(contains));
  std::optional<rpc::StoreReply> reply = raw.ReadReply();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->request_id(), 2u);
}

// Many one-way Seals and Releases in a row (the server reads them in batches).
TEST_F(StoreServerTest, PipelinedSealsAndReleases) {
  auto writer = Connect();
  auto reader = Connect();
  ASSERT_TRUE(writer && reader);
  std::vector<ObjectID> ids;
  for (int i = 0; i < 300; ++i) {
    ids.push_back(ObjectID::FromRandom());
    absl::StatusOr<uint8_t*> data = writer->Create(ids.back(), 100);
    ASSERT_TRUE(data.ok()) << data.status();
    std::memset(*data, i & 0xff, 100);
  }
  for (const ObjectID& id : ids) ASSERT_TRUE(writer->Seal(id).ok());
  auto got = reader->Get(ids, kTimeoutMs);
  ASSERT_TRUE(got.ok()) << got.status();
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_TRUE(got->at(i).has_value()) << i;
    EXPECT_EQ(got->at(i)->data[99], static_cast<uint8_t>(i & 0xff));
  }
  for (const ObjectID& id : ids) ASSERT_TRUE(reader->Release(id).ok());
  EXPECT_TRUE(reader->Contains(ids[0]).value_or(false));  // a round trip after them
  EXPECT_TRUE(writer->TakeAsyncError().ok());
  EXPECT_TRUE(reader->TakeAsyncError().ok());
  auto total_refs = [&] {
    return OnLoop([&] {
      int64_t n = 0;
      for (const ObjectID& id : ids) n += store_->RefCount(id);
      return n;
    });
  };
  // The client may keep the store references of a few released objects for re-use.
  EXPECT_LT(total_refs(), static_cast<int64_t>(ids.size()));
  reader.reset();
  EXPECT_TRUE(WaitFor([&] { return total_refs() == 0; }, kTimeoutMs));
}

// Frames arriving one byte at a time, and frames much larger than one read.
TEST_F(StoreServerTest, FramesSplitAcrossReads) {
  auto writer = Connect();
  ASSERT_TRUE(writer);
  ObjectID id = ObjectID::FromRandom();
  Put(*writer, id, 10, 1);

  RawConnection raw(socket_path());
  rpc::StoreRequest connect;
  connect.mutable_connect()->set_pid(getpid());
  rpc::StoreRequest contains;
  contains.set_request_id(3);
  contains.mutable_contains()->set_object_id(id.Binary());
  std::string bytes = Framed(connect.SerializeAsString()) + Framed(contains.SerializeAsString());
  for (char byte : bytes) ASSERT_TRUE(raw.SendBytes(std::string(1, byte)));
  std::optional<rpc::StoreReply> reply = raw.ReadReply();
  ASSERT_TRUE(reply.has_value());
  EXPECT_TRUE(reply->has_connect());
  reply = raw.ReadReply();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->request_id(), 3u);
  EXPECT_TRUE(reply->contains().has_object());

  // A Get of 50,000 ids is a ~1.5 MB request and reply.
  std::vector<ObjectID> ids(50000);
  for (auto& other : ids) other = ObjectID::FromRandom();
  ids[12345] = id;
  auto got = writer->Get(ids, 0);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), ids.size());
  size_t found = 0;
  for (const auto& o : *got) found += o.has_value();
  EXPECT_EQ(found, 1u);
  EXPECT_TRUE(got->at(12345).has_value());
}

TEST_F(StoreServerTest, DestroyedClientReleasesItsReferences) {
  auto writer = Connect();
  auto reader = Connect();
  ASSERT_TRUE(writer && reader);
  ObjectID a = ObjectID::FromRandom();
  ObjectID b = ObjectID::FromRandom();
  Put(*writer, a, 1000, 1);
  Put(*writer, b, 1000, 2);
  ASSERT_TRUE(reader->Get({a, b}, kTimeoutMs).ok());
  ASSERT_TRUE(reader->Get({a}, kTimeoutMs).ok());
  EXPECT_GE(RefCount(a), 1);
  EXPECT_EQ(RefCount(b), 1);
  reader.reset();
  EXPECT_TRUE(WaitFor([&] { return RefCount(a) == 0 && RefCount(b) == 0; }, kTimeoutMs));
  EXPECT_TRUE(WaitFor([&] { return NumClients() == 1; }, kTimeoutMs));
  EXPECT_TRUE(writer->Delete({a, b}).ok());
  EXPECT_EQ(UsedBytes(), 0);
}

// A client process that dies between Create and Seal leaks neither memory nor the id.
class KilledClientTest : public StoreServerTest, public ::testing::WithParamInterface<bool> {};

TEST_P(KilledClientTest, UnsealedObjectOfDeadClientIsFreed) {
  bool sigkill = GetParam();
  auto survivor = Connect();  // also warms up everything the child uses
  ASSERT_TRUE(survivor);
  ObjectID id = ObjectID::FromRandom();
  constexpr int64_t kSize = 1 << 20;
  int to_parent[2];
  int to_child[2];
  ASSERT_EQ(pipe2(to_parent, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(to_child, O_CLOEXEC), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: only the calling thread exists; leave with _exit, never via gtest.
    close(to_parent[0]);
    close(to_child[1]);
    auto client = ObjectStoreClient::Connect(socket_path());
    if (!client.ok()) _exit(2);
    auto data = (*client)->Create(id, kSize);
    if (!data.ok()) _exit(3);
    std::memset(*data, 0xab, kSize);
    char c = 'c';
    if (write(to_parent[1], &c, 1) != 1) _exit(4);
    // Wait for the parent's go (or SIGKILL), then leave without sealing.
    ssize_t n;
    do {
      n = read(to_child[0], &c, 1);
    } while (n < 0 && errno == EINTR);
    _exit(0);
  }
  close(to_parent[1]);
  close(to_child[0]);
  pollfd p{to_parent[0], POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, kTimeoutMs), 1) << "the child did not create its object";
  char created = 0;
  EXPECT_EQ(read(to_parent[0], &created, 1), 1);
  close(to_parent[0]);
  EXPECT_EQ(created, 'c');
  EXPECT_EQ(UsedBytes(), kSize);
  if (sigkill) {
    EXPECT_EQ(kill(pid, SIGKILL), 0);
  } else {
    char go = 'g';
    EXPECT_EQ(write(to_child[1], &go, 1), 1);
  }
  close(to_child[1]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  if (sigkill) {
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  } else {
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }

  EXPECT_TRUE(WaitFor([&] { return UsedBytes() == 0; }, kTimeoutMs)) << UsedBytes() << " bytes leaked";
  EXPECT_TRUE(WaitFor([&] { return NumClients() == 1; }, kTimeoutMs));
  // The id is free again.
  EXPECT_TRUE(survivor->Create(id, 10).ok());
}

INSTANTIATE_TEST_SUITE_P(KillOrExit, KilledClientTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "SigKill" : "Exit"; });

// ---- Garbage on the socket -------------------------------------------------------------

struct GarbageCase {
  std::string name;
  bool connect_first;
  std::string bytes;
};

std::string RequestBytes(const std::function<void(rpc::StoreRequest&)>& fill) {
  rpc::StoreRequest request;
  request.set_request_id(7);
  fill(request);
  return Framed(request.SerializeAsString());
}

std::vector<GarbageCase> GarbageCases() {
  std::mt19937 rng(42);
  std::string noise(4096, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  return {
      {"RandomBytes", false, noise},
      {"RandomBytesAfterConnect", true, noise},
      {"LengthOverLimit", true, LengthPrefix(StoreServer::kMaxFrameBytes + 1) + "abc"},
      {"HugeLength", true, LengthPrefix(0xffffffffu)},
      {"UnparsableBody", true, Framed("\xff\xff\xff\xff\x0f")},
      {"RequestBeforeConnect", false,
       RequestBytes([](auto& r) { r.mutable_contains()->set_object_id(ObjectID::FromRandom().Binary()); })},
      {"EmptyRequest", true, RequestBytes([](auto&) {})},
      {"MalformedObjectId", true, RequestBytes([](auto& r) { r.mutable_create()->set_object_id("short"); })},
  };
}

class GarbageTest : public StoreServerTest, public ::testing::WithParamInterface<GarbageCase> {};

TEST_P(GarbageTest, ClosesOnlyThatConnection) {
  const GarbageCase& c = GetParam();
  if (c.name.rfind("RandomBytes", 0) == 0) {
    // Precondition of the fixed noise: its length prefix is over the limit, so the
    // server cannot be left waiting for the rest of a frame.
    uint32_t n = 0;
    for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(static_cast<uint8_t>(c.bytes[i])) << (8 * i);
    ASSERT_GT(n, StoreServer::kMaxFrameBytes);
  }
  auto good = Connect();
  ASSERT_TRUE(good);
  ObjectID held = ObjectID::FromRandom();
  Put(*good, held, 1000, 5);
  ASSERT_TRUE(good->Get({held}, kTimeoutMs).ok());

  RawConnection bad(socket_path());
  if (c.connect_first) {
    ASSERT_TRUE(bad.Connect());
    // An unsealed object of the bad client, which must be aborted with it.
    rpc::StoreRequest create;
    create.set_request_id(1);
    create.mutable_create()->set_object_id(ObjectID::FromRandom().Binary());
    create.mutable_create()->set_data_size(4096);
    ASSERT_TRUE(bad.Send(create));
    std::optional<rpc::StoreReply> reply = bad.ReadReply();
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->code(), 0);
  }
  EXPECT_TRUE(WaitFor([&] { return NumClients() == 2; }, kTimeoutMs));
  ASSERT_TRUE(bad.SendBytes(c.bytes));
  EXPECT_TRUE(bad.WaitClosed()) << "the server kept the connection";
  EXPECT_TRUE(WaitFor([&] { return NumClients() == 1; }, kTimeoutMs));
  EXPECT_EQ(UsedBytes(), 1024);  // only `held`

  // The good client is unaffected: its reference, reads and writes.
  EXPECT_EQ(RefCount(held), 1);
  EXPECT_EQ(good->Contains(held).value_or(false), true);
  ObjectID fresh = ObjectID::FromRandom();
  Put(*good, fresh, 100, 6);
  auto got = good->Get({fresh}, kTimeoutMs);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->at(0).has_value());
  EXPECT_EQ(got->at(0)->data[0], 6);
  EXPECT_TRUE(good->TakeAsyncError().ok());
}

TEST_F(StoreServerTest, ADroppedClientSeesItClosedThoughAChildHoldsACopyOfTheSocket) {
  RawConnection idle(socket_path());
  EXPECT_TRUE(WaitFor([&] { return NumClients() == 1; }, kTimeoutMs));
  // A child started now holds a copy of every descriptor of this process, the
  // server's end of `idle` among them (as a worker once held its raylet's).
  pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  ASSERT_GT(child, 0);
  // The server drops the client that never sent Connect: shut down, the socket
  // closes for the client though the child's copy stays open.
  EXPECT_TRUE(idle.WaitClosed()) << "the drop did not reach the client";
  EXPECT_EQ(NumClients(), 0u);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

TEST_F(StoreServerTest, SocketIsPrivateToThisUser) {
  struct stat st {};
  ASSERT_EQ(stat(socket_path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600);
  EXPECT_EQ(st.st_uid, geteuid());
}

TEST_F(StoreServerTest, ClientThatNeverSendsConnectIsDropped) {
  RawConnection idle(socket_path());
  EXPECT_TRUE(WaitFor([&] { return NumClients() == 1; }, kTimeoutMs));
  EXPECT_TRUE(idle.WaitClosed());
  EXPECT_EQ(NumClients(), 0u);
  // A client that does connect stays.
  auto client = Connect();
  ASSERT_TRUE(client);
  std::this_thread::sleep_for(std::chrono::milliseconds(2 * kConnectTimeoutMs));
  EXPECT_TRUE(client->Contains(ObjectID::FromRandom()).ok());
}

TEST_F(StoreServerTest, PartialFrameIsNotAnsweredAndTheRestIsServed) {
  RawConnection raw(socket_path());
  ASSERT_TRUE(raw.Connect());
  // A frame announced at the limit, of which only a little arrives.
  ASSERT_TRUE(raw.SendBytes(LengthPrefix(StoreServer::kMaxFrameBytes) + std::string(1000, 'x')));
  auto client = Connect();
  ASSERT_TRUE(client);
  EXPECT_TRUE(client->Contains(ObjectID::FromRandom()).ok());
  EXPECT_EQ(NumClients(), 2u);
}

class OtherUserStoreServerTest : public StoreServerTest {
 protected:
  // This test's processes play another user: the server serves uid + 1 only.
  OtherUserStoreServerTest() { allowed_uid_ = geteuid() + 1; }
};

TEST_F(OtherUserStoreServerTest, ClientOfAnotherUserIsRefusedBeforeConnect) {
  RawConnection stranger(socket_path());
  rpc::StoreRequest request;
  request.mutable_connect()->set_pid(getpid());
  stranger.Send(request);
  EXPECT_TRUE(stranger.WaitClosed());
  EXPECT_EQ(NumClients(), 0u);
  auto client = ObjectStoreClient::Connect(socket_path());
  EXPECT_FALSE(client.ok());
}

INSTANTIATE_TEST_SUITE_P(Frames, GarbageTest, ::testing::ValuesIn(GarbageCases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace manta::object_store
