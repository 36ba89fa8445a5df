// Randomized tests of the object store protocol (protos/object_store.proto) at the
// client: the ObjectStoreClient's reply decoding, against a fake store on a Unix
// socket that answers with plausible, mutated and random replies and length headers
// at boundaries. No reply may crash the client, make it throw or reserve what a length
// or size field claims, or hand out memory outside the arena the store sent. The
// server's side: store_protocol_fuzz_test.cc.
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "protos/object_store.pb.h"
#include "src/common/util.h"
#include "src/object_store/arena.h"
#include "src/object_store/store_client.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/store_protocol_fuzz_util.h"
#include "tests/test_util/test_util.h"

namespace manta::object_store {
namespace {

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

// The fake's answer to the client's Connect: usually right; sometimes a bad capacity,
// a bad frame, or no memory. Unless the reply is one whole frame the client waits for
// more of it: the fake then closes at once.
FakeStore::Script ConnectScript(std::mt19937_64& rng) {
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
  const Frames connect_frames = SplitFrames(script.connect_reply, std::numeric_limits<uint32_t>::max());
  script.close_after_connect = connect_frames.bodies.empty() || connect_frames.partial_bytes > 0;
  return script;
}

// Makes one call of the client, chosen by `call` (Create, Get, Contains, Seal, Abort,
// Release, Delete), about `id` (`get_ids` for Get), and checks that every buffer it
// hands out lies inside its arena.
void CallClient(ObjectStoreClient& c, uint64_t call, const std::string& id, const std::vector<ObjectID>& get_ids,
                int64_t data_size) {
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

TEST(StoreClientFuzzTest, MalformedRepliesAreErrorsNotCrashesOrHugeAllocations) {
  fuzz::QuietLogs quiet;
  const int64_t iterations = fuzz::Iterations(1000);
  std::mt19937_64 rng = fuzz::TestRng(iterations);
  manta::testing::TempDir dir;
  FakeStore fake(dir.path() + "/fake.sock");
  RequestMaker maker(rng);
  int connected = 0;
  for (int64_t i = 0; i < iterations && !::testing::Test::HasFailure(); ++i) {
    FakeStore::Script script = ConnectScript(rng);
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
          CallClient(c, call, id, get_ids, data_size);
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
