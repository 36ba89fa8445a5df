// Randomized tests of the object store protocol (protos/object_store.proto) at the
// server: the StoreServer's request framing and message handling, fed random, mutated
// and hand-made byte streams over its real Unix socket (the test thread runs the
// server's loop, so every exchange is deterministic); and the allocator's size
// rounding near INT64_MAX. No input may crash or wedge the server, make it reserve
// what a length or size field claims, hand out memory outside the arena, or leak
// store memory once the client is gone. The client's side: store_client_fuzz_test.cc.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "protos/object_store.pb.h"
#include "src/common/util.h"
#include "src/object_store/allocator.h"
#include "src/object_store/arena.h"
#include "src/object_store/object_store.h"
#include "src/object_store/store_server.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/store_protocol_fuzz_util.h"
#include "tests/test_util/test_util.h"

namespace manta::object_store {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

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

// The bytes sent in `mode` for the valid stream `frames` (`valid` is all of them):
// 0, random bytes; 1, one frame's length set to a boundary; 2, one message mutated;
// 3 to 5, the whole stream mutated; otherwise the valid stream unchanged.
std::string MakePayload(std::mt19937_64& rng, uint64_t mode, RequestMaker& maker,
                        const std::vector<std::string>& frames, const std::string& valid) {
  std::string payload;
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
  return payload;
}

// What the server could have read of `stream`: the frames up to the first over the
// limit. Adds the request ids of those that parse to *sent_ids, the object ids they
// name to *ids.
Frames ReadableRequests(const std::string& stream, std::set<uint64_t>* sent_ids, std::set<std::string>* ids) {
  Frames sent = SplitFrames(stream, kLimit);
  for (const std::string& body : sent.bodies) {
    rpc::StoreRequest r;
    if (!r.ParseFromString(body)) continue;
    sent_ids->insert(r.request_id());
    CollectIds(r, ids);
  }
  return sent;
}

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

    const uint64_t mode = fuzz::Uniform(rng, 0, 9);
    const std::string payload = MakePayload(rng, mode, maker, frames, valid);
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

    std::set<uint64_t> sent_ids;
    std::set<std::string> ids;
    Frames sent = ReadableRequests(stream, &sent_ids, &ids);
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

}  // namespace
}  // namespace manta::object_store
