// Randomized tests of the object store protocol (protos/object_store.proto): the
// StoreServer's request framing and message handling, fed random, mutated and
// hand-made byte streams over its real Unix socket (the test thread runs the server's
// loop, so every exchange is deterministic); the ObjectStoreClient's reply decoding,
// against a fake store that answers with malformed replies; and the allocator's size
// rounding near INT64_MAX. No input may crash or wedge either end, make it reserve
// what a length or size field claims, hand out memory outside the arena, or leak
// store memory once the client is gone.
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "protos/object_store.pb.h"
#include "src/common/util.h"
#include "src/object_store/allocator.h"
#include "src/object_store/arena.h"
#include "src/object_store/object_store.h"
#include "src/object_store/store_client.h"
#include "src/object_store/store_server.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/test_util/test_util.h"

namespace manta::object_store {
namespace {

constexpr int64_t kCapacity = 1 << 20;
constexpr int64_t kDeadlineMs = 5000;
constexpr uint32_t kLimit = StoreServer::kMaxFrameBytes;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

std::string Framed(std::string_view body) {
  std::string out(4, '\0');
  fuzz::PutLe(&out, 0, 4, body.size());
  out.append(body);
  return out;
}
std::string Framed(const google::protobuf::MessageLite& message) { return Framed(message.SerializeAsString()); }

// The store's framing ([u32 LE length][message]) applied to a whole byte string:
// complete frames, until one declares more than `limit` bytes or the bytes run out.
struct Frames {
  std::vector<std::string> bodies;
  bool over_limit = false;
  size_t partial_bytes = 0;  // after the last complete frame
};
Frames SplitFrames(std::string_view bytes, uint64_t limit) {
  Frames out;
  size_t pos = 0;
  while (bytes.size() - pos >= 4) {
    uint64_t n = 0;
    for (int i = 0; i < 4; ++i) n |= uint64_t{static_cast<uint8_t>(bytes[pos + i])} << (8 * i);
    if (n > limit) {
      out.over_limit = true;
      return out;
    }
    if (bytes.size() - pos - 4 < n) break;
    out.bodies.emplace_back(bytes.substr(pos + 4, n));
    pos += 4 + n;
  }
  out.partial_bytes = bytes.size() - pos;
  return out;
}

// The 28-byte object ids a request names (what the store may have kept of it).
void CollectIds(const rpc::StoreRequest& r, std::set<std::string>* ids) {
  auto add = [ids](const std::string& id) {
    if (id.size() == ObjectID::kSize) ids->insert(id);
  };
  add(r.create().object_id());
  add(r.seal().object_id());
  add(r.release().object_id());
  add(r.contains().object_id());
  add(r.abort().object_id());
  for (const auto& id : r.get().object_ids()) add(id);
  for (const auto& id : r.delete_().object_ids()) add(id);
}

// Valid requests with the real encoder, about a few ids (so that Create, Seal, Get
// and Release meet), with sizes and timeouts that are sometimes at the boundaries.
class RequestMaker {
 public:
  explicit RequestMaker(std::mt19937_64& rng) : rng_(rng) {
    for (int i = 0; i < 4; ++i) ids_.push_back(RandomId());
  }
  std::string RandomId() {
    std::string id(ObjectID::kSize, '\0');
    for (char& c : id) c = static_cast<char>(rng_());
    return id;
  }
  std::string Id() {
    if (fuzz::OneIn(rng_, 20)) {
      made_malformed_id_ = true;  // the server closes a connection over it
      return fuzz::RandomBytes(rng_, 40);
    }
    return ids_[fuzz::Uniform(rng_, 0, ids_.size() - 1)];
  }
  // Whether an id of the wrong size was made since the last call.
  bool TakeMadeMalformedId() { return std::exchange(made_malformed_id_, false); }
  int64_t Size() {
    if (fuzz::OneIn(rng_, 4)) return static_cast<int64_t>(fuzz::BoundaryValue(rng_, kCapacity));
    return static_cast<int64_t>(fuzz::Uniform(rng_, 0, 4096));
  }
  int64_t TimeoutMs() {
    switch (fuzz::Uniform(rng_, 0, 5)) {
      case 0:
        return -1;
      case 1:
        return static_cast<int64_t>(fuzz::BoundaryValue(rng_, 1000));
      case 2:
        return static_cast<int64_t>(fuzz::Uniform(rng_, 1, 5));
      default:
        return 0;
    }
  }
  rpc::StoreRequest Connect(uint64_t request_id = 0) {
    rpc::StoreRequest r;
    r.set_request_id(request_id);
    r.mutable_connect()->set_pid(static_cast<int32_t>(rng_()));
    r.mutable_connect()->set_name("fuzz");
    return r;
  }
  rpc::StoreRequest Next() {
    rpc::StoreRequest r;
    r.set_request_id(fuzz::OneIn(rng_, 8) ? fuzz::BoundaryValue(rng_, 0) : rng_() >> 8);
    switch (fuzz::Uniform(rng_, 0, 7)) {
      case 0: {
        auto* q = r.mutable_create();
        q->set_object_id(Id());
        q->set_data_size(Size());
        q->set_metadata_size(fuzz::OneIn(rng_, 2) ? 0 : Size());
        q->set_pin_on_seal(fuzz::OneIn(rng_, 2));
        break;
      }
      case 1:
        r.mutable_seal()->set_object_id(Id());
        r.mutable_seal()->set_release(fuzz::OneIn(rng_, 2));
        r.set_no_reply(fuzz::OneIn(rng_, 2));
        break;
      case 2:
        r.mutable_release()->set_object_id(Id());
        r.set_no_reply(fuzz::OneIn(rng_, 2));
        break;
      case 3: {
        const int n = static_cast<int>(fuzz::Uniform(rng_, 0, 5));
        for (int i = 0; i < n; ++i) r.mutable_get()->add_object_ids(Id());
        r.mutable_get()->set_timeout_ms(TimeoutMs());
        break;
      }
      case 4:
        r.mutable_contains()->set_object_id(Id());
        break;
      case 5: {
        const int n = static_cast<int>(fuzz::Uniform(rng_, 0, 5));
        r.mutable_delete_();  // set even when it lists no id
        for (int i = 0; i < n; ++i) r.mutable_delete_()->add_object_ids(Id());
        r.set_no_reply(fuzz::OneIn(rng_, 2));
        break;
      }
      case 6:
        r.mutable_abort()->set_object_id(Id());
        break;
      default:
        r = Connect();
        break;
    }
    return r;
  }

 private:
  std::mt19937_64& rng_;
  std::vector<std::string> ids_;
  bool made_malformed_id_ = false;
};

// recv without blocking, closing any descriptor passed along (the arena's, with the
// Connect reply). True at end of stream.
bool Drain(int fd, std::string* out) {
  char buf[16 * 1024];
  char control[CMSG_SPACE(sizeof(int) * 4)];
  while (true) {
    iovec iov{buf, sizeof(buf)};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); n > 0 && c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t fds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t k = 0; k < fds; ++k) {
        int passed;
        std::memcpy(&passed, CMSG_DATA(c) + k * sizeof(int), sizeof(int));
        close(passed);
      }
    }
    if (n > 0) {
      out->append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) return true;
    return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
  }
}

int64_t NowMs() { return MonotonicMs(); }

// ---------------------------------------------------------------------------------
// The server side.

class StoreProtocolFuzzTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto arena = Arena::Create(kCapacity);
    ASSERT_TRUE(arena.ok()) << arena.status();
    arena_ = std::move(*arena);
    ObjectStoreOptions options;
    options.create_timeout_ms = 60000;  // a waiting Create ends with its client, not by time
    store_ = std::make_unique<ObjectStore>(loop_, arena_->capacity(), options, nullptr, arena_->base());
    StoreServerOptions server_options;
    server_options.connect_timeout_ms = 60000;
    server_ = std::make_unique<StoreServer>(loop_, *store_, *arena_, dir_.path() + "/store.sock", server_options);
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override {
    server_->Stop();
    loop_.RunUntilIdle();
  }

  struct Outcome {
    std::string replies;        // every byte the server sent
    bool closed_early = false;  // it closed before the client ended its side
    bool closed = false;        // it closed at all (within the deadline)
  };

  // One connection: sends `bytes`, runs the server's loop until it has handled them,
  // then ends the client's side and runs the loop until the server closes too. The
  // server's handling of the bytes runs under an allocation cap proportional to them.
  Outcome Exchange(std::string_view bytes) {
    Outcome out;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, server_->socket_path().c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
    const int64_t deadline = NowMs() + kDeadlineMs;
    {
      fuzz::AllocationCap cap(4 * bytes.size() + (1 << 20));
      size_t sent = 0;
      while (sent < bytes.size() && NowMs() < deadline) {
        ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
          sent += static_cast<size_t>(n);
        } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          break;  // the server closed the connection
        }
        loop_.RunUntilIdle();
        if (Drain(fd, &out.replies)) break;
      }
      loop_.RunUntilIdle();
      out.closed = out.closed_early = Drain(fd, &out.replies);
      shutdown(fd, SHUT_WR);
      while (!out.closed && NowMs() < deadline) {
        loop_.RunUntilIdle();
        out.closed = Drain(fd, &out.replies);
      }
      while (server_->num_clients() > 0 && NowMs() < deadline) loop_.RunUntilIdle();
      EXPECT_EQ(cap.refused(), 0) << "the server asked for " << cap.largest_request() << " bytes at once";
    }
    close(fd);
    return out;
  }

  // Deletes `ids` as the raylet would and checks that nothing of the client is left:
  // no memory, no objects, no waiting creations.
  void ExpectStoreEmptyAfterDeleting(const std::set<std::string>& ids) {
    std::vector<ObjectID> objects;
    for (const std::string& id : ids) objects.push_back(ObjectID::FromBinary(id));
    store_->Delete(objects);
    loop_.RunUntilIdle();
    ObjectStoreStats stats = store_->Stats();
    EXPECT_EQ(stats.used_bytes, 0);
    EXPECT_EQ(stats.num_objects, 0);
    EXPECT_EQ(stats.num_pending_creates, 0);
    EXPECT_EQ(server_->num_clients(), 0u);
  }

  // The replies of one exchange, checked for framing; every one must answer a
  // request that was sent (by request_id).
  std::vector<rpc::StoreReply> ParseReplies(const Outcome& out, const std::set<uint64_t>& sent_ids) {
    Frames frames = SplitFrames(out.replies, std::numeric_limits<uint32_t>::max());
    EXPECT_EQ(frames.partial_bytes, 0u) << "a torn reply";
    std::vector<rpc::StoreReply> replies;
    for (const std::string& body : frames.bodies) {
      rpc::StoreReply reply;
      EXPECT_TRUE(reply.ParseFromString(body)) << fuzz::Hex(body);
      EXPECT_TRUE(sent_ids.count(reply.request_id())) << "a reply to request " << reply.request_id();
      replies.push_back(std::move(reply));
    }
    return replies;
  }

  manta::testing::TempDir dir_;
  EventLoop loop_;
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<ObjectStore> store_;
  std::unique_ptr<StoreServer> server_;
};

TEST_F(StoreProtocolFuzzTest, RandomAndMutatedRequestStreams) {
  fuzz::QuietLogs quiet;
  const int64_t iterations = fuzz::Iterations(8000);
  std::mt19937_64 rng = fuzz::TestRng(iterations);
  RequestMaker maker(rng);
  int valid_runs = 0;
  for (int64_t i = 0; i < iterations && !HasFailure(); ++i) {
    // A valid stream: Connect (usually first), then requests.
    std::vector<std::string> frames;
    const bool starts_with_connect = !fuzz::OneIn(rng, 10);
    if (starts_with_connect) frames.push_back(Framed(maker.Connect(rng())));
    const int n = static_cast<int>(fuzz::Uniform(rng, 0, 8));
    for (int k = 0; k < n; ++k) frames.push_back(Framed(maker.Next()));
    std::string valid;
    for (const std::string& f : frames) valid += f;
    const bool all_ids_well_formed = !maker.TakeMadeMalformedId();

    std::string payload;
    const uint64_t mode = fuzz::Uniform(rng, 0, 9);
    switch (mode) {
      case 0:  // random bytes, after a Connect half the time (to get past it)
        payload = (fuzz::OneIn(rng, 2) ? Framed(maker.Connect()) : "") + fuzz::RandomBytes(rng, 1024);
        break;
      case 1: {  // one frame's length set to a boundary: 0, the limit and around it, 2^32-1
        payload = valid;
        size_t pos = 0;
        const size_t target = fuzz::Uniform(rng, 0, frames.size());
        for (size_t k = 0; k < target && k < frames.size(); ++k) pos += frames[k].size();
        fuzz::PutLe(&payload, pos, 4, fuzz::BoundaryValue(rng, kLimit));
        break;
      }
      case 2: {  // one message's bytes mutated, its frame length kept right
        payload.clear();
        const size_t target = fuzz::Uniform(rng, 0, frames.size());
        for (size_t k = 0; k < frames.size(); ++k) {
          payload += k == target ? Framed(fuzz::Mutate(rng, frames[k].substr(4))) : frames[k];
        }
        break;
      }
      case 3:
      case 4:
      case 5:
        payload = fuzz::Mutate(rng, valid, frames.empty() ? "" : frames.back());
        break;
      default:
        payload = valid;
        break;
    }
    // Unchanged, starting with Connect, naming only well-formed ids: all served.
    const bool is_valid = mode >= 6 && starts_with_connect && all_ids_well_formed;
    rpc::StoreRequest sentinel;
    sentinel.set_request_id((uint64_t{1} << 63) | static_cast<uint64_t>(i));
    sentinel.mutable_contains()->set_object_id(maker.RandomId());
    const std::string stream = payload + Framed(sentinel);
    SCOPED_TRACE("iteration " + std::to_string(i) + " mode " + std::to_string(mode) + " payload " +
                 fuzz::Hex(payload, 256));

    Outcome out = Exchange(stream);
    ASSERT_TRUE(out.closed) << "the server neither answered nor closed";

    // What the server could have read: the frames up to the first over the limit.
    Frames sent = SplitFrames(stream, kLimit);
    std::set<uint64_t> sent_ids;
    std::set<std::string> ids;
    for (const std::string& body : sent.bodies) {
      rpc::StoreRequest r;
      if (!r.ParseFromString(body)) continue;
      sent_ids.insert(r.request_id());
      CollectIds(r, &ids);
    }
    std::vector<rpc::StoreReply> replies = ParseReplies(out, sent_ids);
    bool sentinel_answered = false;
    for (const rpc::StoreReply& r : replies) sentinel_answered |= r.request_id() == sentinel.request_id();
    if (sent.over_limit) {
      // A declared length over the limit closes the connection before its body.
      EXPECT_TRUE(out.closed_early);
      EXPECT_FALSE(sentinel_answered);
    }
    if (is_valid) {
      ++valid_runs;
      EXPECT_FALSE(out.closed_early);
      EXPECT_TRUE(sentinel_answered);
    }
    ExpectStoreEmptyAfterDeleting(ids);
  }
  EXPECT_GT(valid_runs, 0);
}

TEST_F(StoreProtocolFuzzTest, CreateSizesNearInt64MaxAreRefusedWithoutAllocating) {
  fuzz::QuietLogs quiet;
  struct Case {
    int64_t data_size;
    int64_t metadata_size;
    absl::StatusCode code;
  };
  const int64_t capacity = arena_->capacity();
  const Case cases[] = {
      {0, 0, absl::StatusCode::kOk},
      {capacity, 0, absl::StatusCode::kOk},
      {capacity - 1, 1, absl::StatusCode::kOk},
      {capacity, 1, absl::StatusCode::kResourceExhausted},
      {capacity + 1, 0, absl::StatusCode::kResourceExhausted},
      {kInt64Max - 63, 0, absl::StatusCode::kResourceExhausted},  // rounds to the largest multiple of 64
      {kInt64Max, 0, absl::StatusCode::kResourceExhausted},
      {0, kInt64Max, absl::StatusCode::kResourceExhausted},
      {kInt64Max, 1, absl::StatusCode::kResourceExhausted},  // the sum overflows
      {kInt64Max, kInt64Max, absl::StatusCode::kResourceExhausted},
      {int64_t{1} << 62, int64_t{1} << 62, absl::StatusCode::kResourceExhausted},
      {-1, 0, absl::StatusCode::kInvalidArgument},
      {0, -1, absl::StatusCode::kInvalidArgument},
      {std::numeric_limits<int64_t>::min(), kInt64Max, absl::StatusCode::kInvalidArgument},
  };
  std::mt19937_64 rng(7);
  RequestMaker maker(rng);
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.data_size) + " + " + std::to_string(c.metadata_size));
    rpc::StoreRequest create;
    create.set_request_id(42);
    create.mutable_create()->set_object_id(maker.RandomId());
    create.mutable_create()->set_data_size(c.data_size);
    create.mutable_create()->set_metadata_size(c.metadata_size);
    rpc::StoreRequest sentinel;
    sentinel.set_request_id(43);
    sentinel.mutable_contains()->set_object_id(maker.RandomId());
    Outcome out = Exchange(Framed(maker.Connect(0)) + Framed(create) + Framed(sentinel));
    ASSERT_TRUE(out.closed);
    EXPECT_FALSE(out.closed_early);
    std::vector<rpc::StoreReply> replies = ParseReplies(out, {0, 42, 43});
    bool answered = false;
    for (const rpc::StoreReply& r : replies) {
      if (r.request_id() != 42) continue;
      answered = true;
      EXPECT_EQ(r.code(), static_cast<int32_t>(c.code)) << r.message();
      if (c.code == absl::StatusCode::kOk) {
        EXPECT_EQ(r.create().offset(), 0);
      }
    }
    EXPECT_TRUE(answered);
    ExpectStoreEmptyAfterDeleting({create.create().object_id()});
  }
}

TEST_F(StoreProtocolFuzzTest, AFrameOverTheLimitClosesTheConnectionBeforeItsBody) {
  fuzz::QuietLogs quiet;
  std::mt19937_64 rng(8);
  RequestMaker maker(rng);
  for (uint64_t length : {uint64_t{kLimit} + 1, uint64_t{0x7fffffff}, uint64_t{0xffffffff}}) {
    std::string header(4, '\0');
    fuzz::PutLe(&header, 0, 4, length);
    Outcome out = Exchange(Framed(maker.Connect()) + header);
    EXPECT_TRUE(out.closed_early) << length;
  }
}

TEST_F(StoreProtocolFuzzTest, APartialFrameReservesOnlyWhatArrived) {
  // The largest frame allowed, announced and then trickled in: the server's buffer
  // grows with the bytes (the cap in Exchange is proportional to them), and the
  // connection stays open until the client goes.
  fuzz::QuietLogs quiet;
  std::mt19937_64 rng(9);
  RequestMaker maker(rng);
  std::string header(4, '\0');
  fuzz::PutLe(&header, 0, 4, kLimit);
  Outcome out = Exchange(Framed(maker.Connect()) + header + std::string(100 << 10, 'x'));
  EXPECT_TRUE(out.closed);
  EXPECT_FALSE(out.closed_early);
}

TEST_F(StoreProtocolFuzzTest, GetWithAHugeTimeoutWaitsForTheObject) {
  // A timeout too large for the clock's nanoseconds (over ~292 years) must still
  // mean "wait", not "give up at once".
  fuzz::QuietLogs quiet;
  std::mt19937_64 rng(10);
  RequestMaker maker(rng);
  for (int64_t timeout_ms : {int64_t{9300000000000}, int64_t{1} << 62, kInt64Max}) {
    SCOPED_TRACE(timeout_ms);
    const std::string id = maker.RandomId();
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, server_->socket_path().c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    rpc::StoreRequest get;
    get.set_request_id(1);
    get.mutable_get()->add_object_ids(id);
    get.mutable_get()->set_timeout_ms(timeout_ms);
    rpc::StoreRequest sentinel;
    sentinel.set_request_id(2);
    sentinel.mutable_contains()->set_object_id(id);
    std::string bytes = Framed(maker.Connect()) + Framed(get) + Framed(sentinel);
    ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
    std::string replies;
    // Everything ready runs, expired timers included: the Get must still wait.
    for (int round = 0; round < 3; ++round) {
      loop_.RunUntilIdle();
      ASSERT_FALSE(Drain(fd, &replies));
    }
    Frames frames = SplitFrames(replies, kLimit);
    ASSERT_EQ(frames.bodies.size(), 2u);  // Connect and the sentinel; no Get yet
    rpc::StoreReply reply;
    ASSERT_TRUE(reply.ParseFromString(frames.bodies[1]));
    EXPECT_EQ(reply.request_id(), 2u);
    // The object appears: the Get completes with it.
    rpc::StoreRequest create;
    create.set_request_id(3);
    create.mutable_create()->set_object_id(id);
    create.mutable_create()->set_data_size(8);
    rpc::StoreRequest seal;
    seal.set_request_id(4);
    seal.mutable_seal()->set_object_id(id);
    seal.mutable_seal()->set_release(true);
    bytes = Framed(create) + Framed(seal);
    ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
    loop_.RunUntilIdle();
    ASSERT_FALSE(Drain(fd, &replies));
    bool found = false;
    for (const std::string& body : SplitFrames(replies, kLimit).bodies) {
      ASSERT_TRUE(reply.ParseFromString(body));
      if (reply.request_id() == 1) found = reply.get().objects_size() == 1 && reply.get().objects(0).found();
    }
    EXPECT_TRUE(found);
    close(fd);
    const int64_t deadline = NowMs() + kDeadlineMs;
    while (server_->num_clients() > 0 && NowMs() < deadline) loop_.RunUntilIdle();
    ExpectStoreEmptyAfterDeleting({id});
  }
}

// ---------------------------------------------------------------------------------
// The allocator's rounding.

TEST(AllocatorFuzzTest, RoundUpNeverOverflowsAndNeverShrinks) {
  constexpr int64_t kLargest = kInt64Max / Allocator::kAlignment * Allocator::kAlignment;
  for (int64_t size : {std::numeric_limits<int64_t>::min(), int64_t{-1}, int64_t{0}}) {
    EXPECT_EQ(Allocator::RoundUp(size), Allocator::kAlignment);
  }
  // Everything above the largest multiple of 64 below it saturates to it.
  for (int64_t d = 0; d < 2 * Allocator::kAlignment - 1; ++d) {
    EXPECT_EQ(Allocator::RoundUp(kInt64Max - d), kLargest) << d;
  }
  const int64_t iterations = fuzz::Iterations(200000);
  std::mt19937_64 rng = fuzz::TestRng(iterations);
  for (int64_t i = 0; i < iterations && !::testing::Test::HasFailure(); ++i) {
    const int64_t size = fuzz::OneIn(rng, 2) ? static_cast<int64_t>(fuzz::BoundaryValue(rng, kCapacity))
                                             : static_cast<int64_t>(rng() >> fuzz::Uniform(rng, 1, 63));
    const int64_t rounded = Allocator::RoundUp(size);
    ASSERT_EQ(rounded % Allocator::kAlignment, 0) << size;
    ASSERT_GT(rounded, 0) << size;
    if (size > kLargest) {
      ASSERT_EQ(rounded, kLargest) << size;  // saturated: larger than any arena
    } else if (size > 0) {
      ASSERT_GE(rounded, size);
      ASSERT_LT(rounded - size, Allocator::kAlignment) << size;
    }
  }
}

TEST(AllocatorFuzzTest, HugeRequestsFailAndLeaveTheAllocatorIntact) {
  const int64_t iterations = fuzz::Iterations(20000);
  std::mt19937_64 rng = fuzz::TestRng(iterations);
  Allocator allocator(kCapacity);
  std::map<int64_t, int64_t> live;  // offset -> rounded size
  for (int64_t i = 0; i < iterations && !::testing::Test::HasFailure(); ++i) {
    if (!live.empty() && fuzz::OneIn(rng, 2)) {
      auto it = live.begin();
      std::advance(it, fuzz::Uniform(rng, 0, live.size() - 1));
      allocator.Free(it->first);
      live.erase(it);
    } else {
      const int64_t size = fuzz::OneIn(rng, 3) ? static_cast<int64_t>(fuzz::BoundaryValue(rng, kCapacity))
                                               : static_cast<int64_t>(fuzz::Uniform(rng, 0, kCapacity / 16));
      std::optional<int64_t> offset = allocator.Allocate(size);
      if (size > kCapacity) {
        ASSERT_FALSE(offset.has_value()) << size;
      }
      if (offset) {
        const int64_t rounded = Allocator::RoundUp(size);
        ASSERT_TRUE(RangeWithin(*offset, rounded, allocator.capacity())) << *offset << " + " << rounded;
        ASSERT_EQ(*offset % Allocator::kAlignment, 0);
        ASSERT_EQ(allocator.BlockSize(*offset), rounded);
        // No overlap with a live block.
        auto next = live.lower_bound(*offset);
        if (next != live.end()) {
          ASSERT_LE(*offset + rounded, next->first);
        }
        if (next != live.begin()) {
          ASSERT_LE(std::prev(next)->first + std::prev(next)->second, *offset);
        }
        live.emplace(*offset, rounded);
      }
    }
    int64_t total = 0;
    for (const auto& [offset, size] : live) total += size;
    ASSERT_EQ(allocator.allocated_bytes(), total);
    ASSERT_EQ(allocator.free_bytes(), allocator.capacity() - total);
  }
}

// ---------------------------------------------------------------------------------
// The client side: ObjectStoreClient against a fake store sending malformed replies.

class FakeStore {
 public:
  // What the fake answers on the next connection: `connect_reply` (with the arena's
  // descriptor unless !send_fd), then `reply(request)` to the next request; then it
  // closes the connection.
  struct Script {
    std::string connect_reply;
    bool send_fd = true;
    bool close_after_connect = false;
    std::function<std::string(const rpc::StoreRequest&)> reply;
  };

  explicit FakeStore(const std::string& path) : path_(path) {
    listener_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(listener_, 4), 0);
    memfd_ = memfd_create("fuzz_store", MFD_CLOEXEC);
    EXPECT_EQ(ftruncate(memfd_, kCapacity), 0);
  }
  ~FakeStore() {
    close(listener_);
    close(memfd_);
  }
  const std::string& path() const { return path_; }

  // Serves one connection on a thread; Join() waits for it.
  void ServeOne(Script script) {
    thread_ = std::thread([this, script = std::move(script)] { Serve(script); });
  }
  void Join() { thread_.join(); }

 private:
  // Reads one request frame (blocking, 5 s at most). False at end of stream.
  static bool ReadFrame(int fd, std::string* body) {
    uint8_t header[4];
    if (recv(fd, header, 4, MSG_WAITALL) != 4) return false;
    uint32_t n = header[0] | (header[1] << 8) | (header[2] << 16) | (uint32_t{header[3]} << 24);
    if (n > (1 << 20)) return false;
    body->assign(n, '\0');
    return n == 0 || recv(fd, body->data(), n, MSG_WAITALL) == static_cast<ssize_t>(n);
  }

  void Serve(const Script& script) {
    pollfd p{listener_, POLLIN, 0};
    if (poll(&p, 1, kDeadlineMs) != 1) return;
    int conn = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) return;
    timeval timeout{kDeadlineMs / 1000, 0};
    setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    std::string body;
    if (ReadFrame(conn, &body)) {
      char control[CMSG_SPACE(sizeof(int))] = {};
      iovec iov{const_cast<char*>(script.connect_reply.data()), script.connect_reply.size()};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      if (script.send_fd) {
        msg.msg_control = control;
        msg.msg_controllen = sizeof(control);
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(c), &memfd_, sizeof(int));
      }
      if (!script.connect_reply.empty()) sendmsg(conn, &msg, MSG_NOSIGNAL);
      rpc::StoreRequest request;
      if (!script.close_after_connect && ReadFrame(conn, &body) && request.ParseFromString(body)) {
        std::string reply = script.reply(request);
        send(conn, reply.data(), reply.size(), MSG_NOSIGNAL);
      }
    }
    shutdown(conn, SHUT_RDWR);
    close(conn);
  }

  std::string path_;
  int listener_ = -1;
  int memfd_ = -1;
  std::thread thread_;
};

// A reply the real store could send to `request`, with field values drawn from
// boundaries (offsets and sizes outside the arena, negative ones, wrong counts).
rpc::StoreReply PlausibleReply(std::mt19937_64& rng, const rpc::StoreRequest& request) {
  auto value = [&rng] {
    return fuzz::OneIn(rng, 2) ? static_cast<int64_t>(fuzz::BoundaryValue(rng, kCapacity))
                               : static_cast<int64_t>(fuzz::Uniform(rng, 0, kCapacity));
  };
  rpc::StoreReply reply;
  reply.set_request_id(fuzz::OneIn(rng, 8) ? rng() : request.request_id());
  if (fuzz::OneIn(rng, 6)) {
    reply.set_code(fuzz::OneIn(rng, 2) ? static_cast<int32_t>(rng()) : static_cast<int32_t>(fuzz::Uniform(rng, 1, 16)));
    reply.set_message(fuzz::RandomBytes(rng, 32));
  }
  if (request.has_create()) reply.mutable_create()->set_offset(value());
  if (request.has_contains()) reply.mutable_contains()->set_has_object(fuzz::OneIn(rng, 2));
  if (request.has_get()) {
    int n = request.get().object_ids_size();
    if (fuzz::OneIn(rng, 6)) n = static_cast<int>(fuzz::Uniform(rng, 0, 4));
    for (int i = 0; i < n; ++i) {
      rpc::StoreObject* o = reply.mutable_get()->add_objects();
      o->set_found(!fuzz::OneIn(rng, 4));
      o->set_offset(value());
      o->set_data_size(value());
      o->set_metadata_size(fuzz::OneIn(rng, 2) ? 0 : value());
    }
  }
  return reply;
}

// The bytes a fake store answers `request` with: plausible replies, mutated ones,
// random bytes, and length headers at boundaries; sometimes a late error of an
// earlier one-way request first.
std::string MalformedReply(std::mt19937_64& rng, const rpc::StoreRequest& request) {
  std::string out;
  if (fuzz::OneIn(rng, 6)) {
    rpc::StoreReply late;
    late.set_request_id(request.request_id() - 1);
    late.set_code(static_cast<int32_t>(absl::StatusCode::kNotFound));
    out += Framed(late);
  }
  const std::string plausible = Framed(PlausibleReply(rng, request));
  switch (fuzz::Uniform(rng, 0, 5)) {
    case 0:
      return out + fuzz::RandomBytes(rng, 256);
    case 1: {
      std::string framed = plausible;
      fuzz::PutLe(&framed, 0, 4, fuzz::BoundaryValue(rng, kLimit));
      return out + framed;
    }
    case 2:
      return out + fuzz::Mutate(rng, plausible);
    default:
      return out + plausible;
  }
}

// Checks that a buffer the client returned lies inside its arena.
void ExpectInArena(const ObjectStoreClient& client, const uint8_t* data, int64_t size) {
  const uint8_t* base = client.arena().base();
  const int64_t capacity = client.arena().capacity();
  ASSERT_TRUE(data >= base && data <= base + capacity) << "an object outside the arena";
  EXPECT_TRUE(RangeWithin(data - base, size, capacity)) << (data - base) << " + " << size;
}

TEST(StoreClientFuzzTest, MalformedRepliesAreErrorsNotCrashesOrHugeAllocations) {
  fuzz::QuietLogs quiet;
  const int64_t iterations = fuzz::Iterations(1000);
  std::mt19937_64 rng = fuzz::TestRng(iterations);
  manta::testing::TempDir dir;
  FakeStore fake(dir.path() + "/fake.sock");
  RequestMaker maker(rng);
  int connected = 0;
  for (int64_t i = 0; i < iterations && !::testing::Test::HasFailure(); ++i) {
    // Connect: usually right; sometimes a bad capacity, a bad frame, or no memory.
    rpc::StoreReply connect;
    connect.mutable_connect()->set_capacity_bytes(kCapacity);
    FakeStore::Script script;
    script.connect_reply = Framed(connect);
    if (fuzz::OneIn(rng, 8)) {
      connect.mutable_connect()->set_capacity_bytes(static_cast<int64_t>(fuzz::BoundaryValue(rng, kCapacity)));
      script.connect_reply = Framed(connect);
      if (fuzz::OneIn(rng, 2)) script.connect_reply = fuzz::Mutate(rng, script.connect_reply);
      if (fuzz::OneIn(rng, 4)) script.send_fd = false;
    }
    // Unless the Connect reply is one whole frame the client waits for more of it:
    // the fake then closes at once.
    const Frames connect_frames = SplitFrames(script.connect_reply, std::numeric_limits<uint32_t>::max());
    script.close_after_connect = connect_frames.bodies.empty() || connect_frames.partial_bytes > 0;
    // Drawn now: the fake's thread must not share `rng` with this one.
    std::vector<std::string> replies;  // what the fake sent, for the failure message
    script.reply = [reply_seed = rng(), &replies](const rpc::StoreRequest& request) {
      std::mt19937_64 reply_rng(reply_seed);
      replies.push_back(MalformedReply(reply_rng, request));
      return replies.back();
    };
    SCOPED_TRACE("iteration " + std::to_string(i) + " connect reply " + fuzz::Hex(script.connect_reply));
    const uint64_t call = fuzz::Uniform(rng, 0, 6);
    const std::string id = maker.RandomId();
    std::vector<ObjectID> get_ids{ObjectID::FromBinary(id), ObjectID::FromBinary(maker.RandomId())};
    if (fuzz::OneIn(rng, 3)) get_ids.push_back(get_ids[0]);
    const int64_t data_size = fuzz::OneIn(rng, 3) ? (2 << 20) + 1 : static_cast<int64_t>(fuzz::Uniform(rng, 0, 4096));
    fake.ServeOne(std::move(script));
    {
      // Bounded by what the fake sends (a few hundred bytes), not by what it claims.
      fuzz::AllocationCap cap(4 << 20);
      try {
        auto client = ObjectStoreClient::Connect(fake.path());
        if (client.ok()) {
          ++connected;
          ObjectStoreClient& c = **client;
          // Never more than the memory the store sent: past its end a page kills.
          EXPECT_LE(c.arena().capacity(), kCapacity);
          switch (call) {
            case 0: {
              absl::StatusOr<uint8_t*> data = c.Create(ObjectID::FromBinary(id), data_size, 0);
              if (data.ok()) ExpectInArena(c, *data, data_size);
              break;
            }
            case 1: {
              auto got = c.Get(get_ids, 0);
              if (got.ok()) {
                EXPECT_EQ(got->size(), get_ids.size());
                for (const auto& b : *got) {
                  if (!b.has_value()) continue;
                  ExpectInArena(c, b->data, b->data_size);
                  ExpectInArena(c, b->metadata, b->metadata_size);
                }
              }
              break;
            }
            case 2:
              (void)c.Contains(ObjectID::FromBinary(id));
              break;
            case 3:
              (void)c.Seal(ObjectID::FromBinary(id), true, /*wait=*/true);
              break;
            case 4:
              (void)c.Abort(ObjectID::FromBinary(id));
              break;
            case 5:
              (void)c.Release(ObjectID::FromBinary(id), /*wait=*/true);
              break;
            default:
              (void)c.Delete({ObjectID::FromBinary(id)}, /*wait=*/true);
              break;
          }
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "the client threw " << e.what();
      }
      EXPECT_EQ(cap.refused(), 0) << "the client asked for " << cap.largest_request() << " bytes at once";
    }
    fake.Join();
    if (::testing::Test::HasFailure()) {
      for (const std::string& r : replies) ADD_FAILURE() << "reply " << fuzz::Hex(r, 256);
    }
  }
  EXPECT_GT(connected, 0);
}

}  // namespace
}  // namespace manta::object_store
