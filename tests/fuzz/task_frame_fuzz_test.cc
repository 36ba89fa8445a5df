// Randomized tests of the task channel's frame decoding (src/core_worker/task_channel*):
// FrameReader fed random, mutated and hand-made byte streams through a socketpair,
// compared against the frame format written down in task_channel.h; the worker's
// TaskChannelServer refusing every connection that does not prove the token, without
// ever delivering its pushes; and the owner's channel refusing impostor workers
// without ever writing a push to them. No input may crash, hang, reserve what a length
// field claims instead of what arrived, or be decoded differently from the format.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "src/common/security.h"
#include "src/core_worker/task_channel.h"
#include "src/core_worker/task_channel_internal.h"
#include "tests/fuzz/fuzz_util.h"
#include "test_util/test_util.h"

namespace manta::core {
namespace {

using task_channel_internal::HandshakeMac;
using task_channel_internal::kHandshakeFrameBytes;
using task_channel_internal::kNonceBytes;

constexpr int64_t kDeadlineMs = 5000;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Frame {
  uint8_t kind = 0;
  std::string body;
  bool operator==(const Frame& o) const { return kind == o.kind && body == o.body; }
};

// The frame format of task_channel.h applied to a whole byte string: [u32 LE length
// of kind + body][u8 kind][body]. The first frame may be at most `first_limit` bytes
// long, the later ones `rest_limit` (the reader's limit rises once the handshake is
// done). Stops at the first malformed header (length 0, or above the limit + 1) or
// where the bytes run out.
struct Parsed {
  std::vector<Frame> frames;
  bool malformed = false;
};
Parsed ParseFrames(std::string_view bytes, int64_t first_limit, int64_t rest_limit) {
  Parsed out;
  size_t pos = 0;
  while (bytes.size() - pos >= 4) {
    const int64_t limit = out.frames.empty() ? first_limit : rest_limit;
    const uint32_t length = task_channel_internal::LoadLe32(bytes.data() + pos);
    if (length == 0 || static_cast<int64_t>(length) > limit + 1) {
      out.malformed = true;
      break;
    }
    if (bytes.size() - pos - 4 < length) break;
    out.frames.push_back({static_cast<uint8_t>(bytes[pos + 4]), std::string(bytes.substr(pos + 5, length - 1))});
    pos += 4 + length;
  }
  return out;
}

rpc::PushTaskRequest RandomPush(std::mt19937_64& rng, size_t max_arg_bytes) {
  rpc::PushTaskRequest push;
  push.set_intended_worker_id(fuzz::RandomBytes(rng, 28));
  push.set_push_id(rng());
  const int tasks = static_cast<int>(fuzz::Uniform(rng, 0, 3));
  for (int i = 0; i < tasks; ++i) {
    rpc::TaskSpec* spec = push.add_tasks();
    spec->set_task_id(fuzz::RandomBytes(rng, 24));
    spec->set_function_name("f" + std::to_string(rng() % 1000));
    spec->set_num_returns(static_cast<int32_t>(fuzz::Uniform(rng, 0, 3)));
    if (fuzz::OneIn(rng, 2)) spec->add_args()->set_data(fuzz::RandomBytes(rng, max_arg_bytes));
  }
  return push;
}

rpc::PushTaskReply RandomReply(std::mt19937_64& rng, size_t max_bytes) {
  rpc::PushTaskReply reply;
  reply.set_push_id(rng());
  reply.set_done(fuzz::OneIn(rng, 2));
  const int results = static_cast<int>(fuzz::Uniform(rng, 0, 3));
  for (int i = 0; i < results; ++i) {
    rpc::TaskResult* r = reply.add_results();
    r->set_task_id(fuzz::RandomBytes(rng, 24));
    r->set_run_us(static_cast<int64_t>(rng() >> 1));
    r->add_returns()->set_data(fuzz::RandomBytes(rng, max_bytes));
  }
  return reply;
}

// A valid stream built with the real encoders: pushes, replies and raw (handshake)
// frames, each body at most `max_body` bytes. `messages` receives each protobuf body.
std::string ValidStream(std::mt19937_64& rng, size_t max_body, std::vector<std::string>* messages) {
  std::string out;
  const size_t data_bytes = std::min<size_t>(max_body, 2048);  // large frames are tested on their own
  const int frames = static_cast<int>(fuzz::Uniform(rng, 1, 6));
  for (int i = 0; i < frames; ++i) {
    std::string frame;
    switch (fuzz::Uniform(rng, 0, 3)) {
      case 0: {
        rpc::PushTaskRequest push = RandomPush(rng, data_bytes / 2);
        AppendFrame(FrameKind::kPush, push, &frame);
        break;
      }
      case 1: {
        rpc::PushTaskReply reply = RandomReply(rng, data_bytes / 2);
        AppendFrame(FrameKind::kReply, reply, &frame);
        break;
      }
      default: {
        static constexpr FrameKind kKinds[] = {FrameKind::kChallenge, FrameKind::kProof, FrameKind::kServerProof};
        AppendRawFrame(kKinds[fuzz::Uniform(rng, 0, 2)], fuzz::RandomBytes(rng, std::min<size_t>(data_bytes, 96)),
                       &frame);
        break;
      }
    }
    if (frame.size() - 5 > max_body) continue;  // keep the valid stream within the limit
    if (messages != nullptr) messages->push_back(frame.substr(5));
    out += frame;
  }
  return out;
}

class SocketPair {
 public:
  SocketPair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds_), 0); }
  ~SocketPair() {
    CloseWriter();
    close(fds_[1]);
  }
  int reader() const { return fds_[1]; }
  // Sends all of `bytes` (small enough for the socket buffer).
  void Send(std::string_view bytes) {
    ASSERT_EQ(send(fds_[0], bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }
  void CloseWriter() {
    if (fds_[0] >= 0) close(fds_[0]);
    fds_[0] = -1;
  }

 private:
  int fds_[2] = {-1, -1};
};

// What a FrameReader made of a stream fed in random pieces.
struct Decoded {
  std::vector<Frame> frames;
  absl::Status error;  // reader.error() at the end
  bool end_of_stream = false;
};

// Feeds `input` to a FrameReader in pieces of random sizes, taking frames after each
// read as the server does (raising the limit to `rest_limit` after the first frame,
// as after the proof), then closes the writer. Checks the reader's contract on the
// way: a read error is DataLoss (malformed) or, only at the end, Unavailable.
Decoded FeedReader(std::mt19937_64& rng, std::string_view input, int64_t first_limit, int64_t rest_limit) {
  Decoded out;
  SocketPair pair;
  FrameReader reader(first_limit);
  auto take = [&] {
    FrameKind kind;
    std::string_view body;
    while (reader.Next(&kind, &body)) {
      out.frames.push_back({static_cast<uint8_t>(kind), std::string(body)});
      if (out.frames.size() == 1) reader.set_max_frame_bytes(rest_limit);
    }
  };
  size_t sent = 0;
  while (sent < input.size()) {
    const size_t n = fuzz::Uniform(rng, 1, std::min<size_t>(input.size() - sent, 8192));
    pair.Send(input.substr(sent, n));
    sent += n;
    bool got = false;
    absl::Status s = reader.ReadAvailable(pair.reader(), &got);
    take();
    if (!s.ok()) {
      EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
      break;
    }
    EXPECT_TRUE(got);
  }
  pair.CloseWriter();
  bool got = false;
  absl::Status s = reader.ReadAvailable(pair.reader(), &got);
  take();
  out.end_of_stream = absl::IsUnavailable(s);
  if (reader.error().ok()) {
    EXPECT_TRUE(out.end_of_stream) << s;
  }
  out.error = reader.error();
  return out;
}

// Runs one stream through FeedReader, compares it with the format and returns it.
Decoded CheckStream(std::mt19937_64& rng, const std::string& input, int64_t first_limit, int64_t rest_limit) {
  Decoded decoded;
  {
    // The reader's buffer grows with what arrived: never with what a header claims.
    fuzz::AllocationCap cap(2 * input.size() + (1 << 20));
    decoded = FeedReader(rng, input, first_limit, rest_limit);
    EXPECT_EQ(cap.refused(), 0) << "largest request " << cap.largest_request();
  }
  Parsed expected = ParseFrames(input, first_limit, rest_limit);
  EXPECT_EQ(decoded.frames, expected.frames);
  EXPECT_EQ(decoded.error.code(), expected.malformed ? absl::StatusCode::kDataLoss : absl::StatusCode::kOk)
      << decoded.error;
  // What the two ends do with a frame next: parse it. Nothing may crash there either.
  for (const Frame& f : decoded.frames) {
    rpc::PushTaskRequest push;
    rpc::PushTaskReply reply;
    if (f.kind == static_cast<uint8_t>(FrameKind::kPush)) (void)push.ParseFromString(f.body);
    if (f.kind == static_cast<uint8_t>(FrameKind::kReply)) (void)reply.ParseFromString(f.body);
  }
  return decoded;
}

TEST(TaskFrameFuzzTest, RandomAndMutatedStreamsDecodeAsTheFormatSays) {
  const int64_t iterations = fuzz::Iterations(30000);
  std::mt19937_64 rng = fuzz::TestRng(iterations);
  fuzz::QuietLogs quiet;
  const std::string donor = ValidStream(rng, 512, nullptr);
  for (int64_t i = 0; i < iterations && !::testing::Test::HasFailure(); ++i) {
    // Before the handshake (128 bytes, then the real limit), or after it.
    const bool handshake = fuzz::OneIn(rng, 2);
    const int64_t rest_limit = fuzz::OneIn(rng, 2) ? (64 << 20) : fuzz::Uniform(rng, 1, 4096);
    const int64_t first_limit = handshake ? kHandshakeFrameBytes : rest_limit;
    std::string input;
    std::vector<std::string> bodies;
    const uint64_t mode = fuzz::Uniform(rng, 0, 9);
    if (mode == 0) {
      input = fuzz::RandomBytes(rng, 2048);
    } else {
      input = ValidStream(rng, static_cast<size_t>(std::min<int64_t>(first_limit, rest_limit)), &bodies);
      if (mode == 1) {
        // A header rewritten to a boundary length: 0, 1, the limit and around it, 2^32-1.
        Parsed frames = ParseFrames(input, first_limit, rest_limit);
        size_t pos = 0;
        const size_t target = fuzz::Uniform(rng, 0, frames.frames.size());
        for (size_t k = 0; k < target && k < frames.frames.size(); ++k) pos += 5 + frames.frames[k].body.size();
        fuzz::PutLe(&input, pos, 4, fuzz::BoundaryValue(rng, static_cast<uint64_t>(rest_limit) + 1));
      } else if (mode >= 5) {
        input = fuzz::Mutate(rng, input, donor);
      }
    }
    SCOPED_TRACE("iteration " + std::to_string(i) + " limits " + std::to_string(first_limit) + "/" +
                 std::to_string(rest_limit) + " input " + fuzz::Hex(input));
    const Decoded decoded = CheckStream(rng, input, first_limit, rest_limit);
    if (mode >= 2 && mode <= 4) {
      // Unmutated: every frame comes out whole, and a push or reply parses back into
      // the message that was encoded.
      ASSERT_TRUE(decoded.error.ok()) << decoded.error;
      ASSERT_EQ(decoded.frames.size(), bodies.size());
      for (size_t k = 0; k < bodies.size(); ++k) {
        const Frame& f = decoded.frames[k];
        EXPECT_EQ(f.body, bodies[k]);
        rpc::PushTaskRequest push;
        rpc::PushTaskReply reply;
        if (f.kind == static_cast<uint8_t>(FrameKind::kPush)) {
          ASSERT_TRUE(push.ParseFromString(f.body));
          EXPECT_EQ(push.SerializeAsString(), bodies[k]);
        }
        if (f.kind == static_cast<uint8_t>(FrameKind::kReply)) {
          ASSERT_TRUE(reply.ParseFromString(f.body));
          EXPECT_EQ(reply.SerializeAsString(), bodies[k]);
        }
      }
    }
  }
}

TEST(TaskFrameFuzzTest, LengthsAtAndAroundTheLimit) {
  for (int64_t limit : {kHandshakeFrameBytes, int64_t{1} << 20}) {
    SCOPED_TRACE("limit " + std::to_string(limit));
    // A body of exactly `limit` bytes is a frame; one byte more is refused.
    for (int64_t body : {int64_t{0}, int64_t{1}, limit - 1, limit, limit + 1}) {
      std::string frame;
      AppendRawFrame(FrameKind::kProof, std::string(static_cast<size_t>(body), 'b'), &frame);
      SocketPair pair;
      FrameReader reader(limit);
      absl::Status status;
      for (size_t sent = 0; sent < frame.size() && status.ok(); sent += 4096) {
        pair.Send(std::string_view(frame).substr(sent, 4096));
        bool got = false;
        status = reader.ReadAvailable(pair.reader(), &got);
      }
      FrameKind kind;
      std::string_view view;
      if (body <= limit) {
        EXPECT_TRUE(status.ok()) << status;
        ASSERT_TRUE(reader.Next(&kind, &view)) << body;
        EXPECT_EQ(kind, FrameKind::kProof);
        EXPECT_EQ(view.size(), static_cast<size_t>(body));
      } else {
        EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << body;
        EXPECT_FALSE(reader.Next(&kind, &view));
      }
    }
    // A bad header is an error as soon as its four bytes are in, before any body.
    for (uint64_t length : {uint64_t{0}, static_cast<uint64_t>(limit) + 2, uint64_t{0x7fffffff},
                            uint64_t{0x80000000}, uint64_t{0xffffffff}}) {
      std::string header(4, '\0');
      fuzz::PutLe(&header, 0, 4, length);
      SocketPair pair;
      FrameReader reader(limit);
      pair.Send(header);
      bool got = false;
      EXPECT_EQ(reader.ReadAvailable(pair.reader(), &got).code(), absl::StatusCode::kDataLoss) << length;
      // And it stays failed: a good frame after it is never taken.
      std::string good;
      AppendRawFrame(FrameKind::kChallenge, "x", &good);
      pair.Send(good);
      EXPECT_EQ(reader.ReadAvailable(pair.reader(), &got).code(), absl::StatusCode::kDataLoss);
      FrameKind kind;
      std::string_view view;
      EXPECT_FALSE(reader.Next(&kind, &view));
      EXPECT_EQ(reader.error().code(), absl::StatusCode::kDataLoss);
    }
  }
}

TEST(TaskFrameFuzzTest, AHugeDeclaredFrameReservesOnlyWhatArrived) {
  // The largest frame the limit allows, announced, then trickled in: the buffer grows
  // with the bytes, not with the announcement.
  const int64_t limit = 64 << 20;
  std::string header(5, '\0');
  fuzz::PutLe(&header, 0, 4, static_cast<uint64_t>(limit) + 1);
  header[4] = static_cast<char>(FrameKind::kPush);
  SocketPair pair;
  FrameReader reader(limit);
  fuzz::AllocationCap cap(1 << 20);
  pair.Send(header);
  bool got = false;
  ASSERT_TRUE(reader.ReadAvailable(pair.reader(), &got).ok());
  const std::string piece(4096, 'p');
  for (int i = 0; i < 32; ++i) {
    pair.Send(piece);
    ASSERT_TRUE(reader.ReadAvailable(pair.reader(), &got).ok());
  }
  FrameKind kind;
  std::string_view body;
  EXPECT_FALSE(reader.Next(&kind, &body));
  pair.CloseWriter();
  EXPECT_EQ(reader.ReadAvailable(pair.reader(), &got).code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(reader.Next(&kind, &body));
  EXPECT_EQ(cap.refused(), 0) << "largest request " << cap.largest_request();
}

TEST(TaskFrameFuzzTest, TheLimitRisesOnlyForFramesAfterTheProof) {
  // Before the proof a 1000-byte frame is refused; right behind the proof (in the
  // same read) it is taken once the limit has risen.
  std::string proof;
  AppendRawFrame(FrameKind::kProof, std::string(64, 'p'), &proof);
  std::string big;
  AppendRawFrame(FrameKind::kPush, std::string(1000, 'x'), &big);
  std::mt19937_64 rng(1);
  Decoded refused = FeedReader(rng, big + proof, kHandshakeFrameBytes, 1 << 20);
  EXPECT_TRUE(refused.frames.empty());
  EXPECT_EQ(refused.error.code(), absl::StatusCode::kDataLoss);
  Decoded taken = FeedReader(rng, proof + big, kHandshakeFrameBytes, 1 << 20);
  ASSERT_EQ(taken.frames.size(), 2u);
  EXPECT_EQ(taken.frames[1].body, std::string(1000, 'x'));
  EXPECT_TRUE(taken.error.ok()) << taken.error;
}

// ---------------------------------------------------------------------------------
// The worker's end: TaskChannelServer on loopback, played against by raw sockets.

int ConnectTo(int port) {
  int fd = manta::testing::ConnectTcp("127.0.0.1", port);
  EXPECT_GE(fd, 0);
  return fd;
}

// Reads what `fd` holds now into *out without blocking. True at end of stream.
bool DrainSocket(int fd, std::string* out) {
  char buf[4096];
  while (true) {
    ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      out->append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) return true;
    return errno == ECONNRESET || errno == EPIPE;
  }
}

TEST(TaskFrameFuzzTest, TheServerClosesEveryUnprovenConnectionAndDeliversNothingFromIt) {
  const int64_t iterations = fuzz::Iterations(1500);
  std::mt19937_64 rng = fuzz::TestRng(iterations);
  const std::string token = NewClusterToken();
  const int64_t max_frame = 1 << 20;
  auto listening = TaskChannelServer::Listen("127.0.0.1", max_frame, token, kDeadlineMs);
  ASSERT_TRUE(listening.ok()) << listening.status();
  std::unique_ptr<TaskChannelServer> server = std::move(*listening);
  fuzz::QuietLogs quiet;  // the server logs every connection it drops
  int authenticated = 0;
  for (int64_t i = 0; i < iterations && !::testing::Test::HasFailure(); ++i) {
    int fd = ConnectTo(server->port());
    // The challenge comes first.
    std::string received;
    Parsed from_server;
    const int64_t deadline = NowMs() + kDeadlineMs;
    while (from_server.frames.empty() && NowMs() < deadline) {
      EXPECT_FALSE(server->InputPending());
      DrainSocket(fd, &received);
      from_server = ParseFrames(received, kHandshakeFrameBytes, kHandshakeFrameBytes);
    }
    ASSERT_EQ(from_server.frames.size(), 1u);
    ASSERT_EQ(from_server.frames[0].kind, static_cast<uint8_t>(FrameKind::kChallenge));
    const std::string nonce = from_server.frames[0].body;
    ASSERT_EQ(nonce.size(), kNonceBytes);

    std::string owner_nonce(kNonceBytes, '\0');
    for (char& c : owner_nonce) c = static_cast<char>(rng());
    std::string proof;
    AppendRawFrame(FrameKind::kProof, owner_nonce + HandshakeMac(token, "owner", nonce, owner_nonce), &proof);
    std::string pushes;
    const int num_pushes = static_cast<int>(fuzz::Uniform(rng, 0, 3));
    for (int k = 0; k < num_pushes; ++k) AppendFrame(FrameKind::kPush, RandomPush(rng, 256), &pushes);
    std::string payload;
    switch (fuzz::Uniform(rng, 0, 5)) {
      case 0:
        payload = fuzz::RandomBytes(rng, 512);
        break;
      case 1: {  // a proof made with another token, or for another nonce (a replay)
        const std::string other = fuzz::OneIn(rng, 2) ? NewClusterToken() : token;
        const std::string other_nonce = other == token ? std::string(kNonceBytes, 'x') : nonce;
        payload.clear();
        AppendRawFrame(FrameKind::kProof, owner_nonce + HandshakeMac(other, "owner", other_nonce, owner_nonce),
                       &payload);
        payload += pushes;
        break;
      }
      case 2:  // pushes with no handshake at all
        payload = pushes;
        break;
      case 3:  // the right proof, unchanged: the control case
        payload = proof + pushes;
        break;
      default:
        payload = fuzz::Mutate(rng, proof + pushes, pushes);
        break;
    }
    SCOPED_TRACE("iteration " + std::to_string(i) + " payload " + fuzz::Hex(payload));
    if (!payload.empty()) {
      ASSERT_EQ(send(fd, payload.data(), payload.size(), MSG_NOSIGNAL), static_cast<ssize_t>(payload.size()));
    }
    shutdown(fd, SHUT_WR);  // the server sees the end of stream: it closes every connection

    // Serve until the server has closed this connection.
    std::vector<std::string> delivered;
    bool closed = false;
    while (!closed && NowMs() < deadline) {
      while (server->InputPending()) {
        std::optional<TaskChannelServer::Push> push = server->Next(0);
        ASSERT_TRUE(push.has_value());
        delivered.push_back(push->request->SerializeAsString());
      }
      closed = DrainSocket(fd, &received) && server->NumConnections() == 0;
    }
    ASSERT_TRUE(closed) << "the server neither closed nor served the connection";
    close(fd);

    // What should have happened, by the format: only a connection that starts with
    // the exact proof is authenticated; it gets the server's proof and its pushes, up
    // to the first frame that is not a well-formed push.
    const bool proven = payload.compare(0, proof.size(), proof) == 0;
    std::vector<std::string> expected;
    if (proven) {
      ++authenticated;
      Parsed frames = ParseFrames(std::string_view(payload).substr(proof.size()), max_frame, max_frame);
      for (const Frame& f : frames.frames) {
        rpc::PushTaskRequest push;
        if (f.kind != static_cast<uint8_t>(FrameKind::kPush) || !push.ParseFromString(f.body)) break;
        expected.push_back(push.SerializeAsString());
      }
    }
    EXPECT_EQ(delivered, expected);
    from_server = ParseFrames(received, kHandshakeFrameBytes, kHandshakeFrameBytes);
    ASSERT_EQ(from_server.frames.size(), proven ? 2u : 1u);
    if (proven) {
      EXPECT_EQ(from_server.frames[1].kind, static_cast<uint8_t>(FrameKind::kServerProof));
      EXPECT_EQ(from_server.frames[1].body, HandshakeMac(token, "worker", nonce, owner_nonce));
    }
  }
  EXPECT_GT(authenticated, 0) << "the control case never ran: raise MANTA_FUZZ_ITERATIONS";
}

// ---------------------------------------------------------------------------------
// The owner's end: a TcpTaskChannel connecting to an impostor that does not hold the
// token (the test plays it with a raw listening socket).

// Every callback of one push.
struct PushResult {
  void Record(const absl::Status& status) {
    std::lock_guard<std::mutex> lock(mu);
    statuses.push_back(status);
    cv.notify_all();
  }
  bool WaitForOne() {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::milliseconds(kDeadlineMs), [&] { return !statuses.empty(); });
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<absl::Status> statuses;
};

// Reads from `fd` until `done(bytes)` or end of stream, within the deadline.
bool ReadUntil(int fd, std::string* bytes, int64_t deadline_ms, const std::function<bool()>& done) {
  while (!done()) {
    const int64_t left = deadline_ms - NowMs();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    if (DrainSocket(fd, bytes)) return true;
  }
  return true;
}

TEST(TaskFrameFuzzTest, TheOwnerNeverWritesAPushToAnImpostorWorker) {
  const int64_t iterations = fuzz::Iterations(800);
  std::mt19937_64 rng = fuzz::TestRng(iterations);
  fuzz::QuietLogs quiet;
  const std::string token = NewClusterToken();
  int port = 0;
  int listener = manta::testing::ListenOnLoopback(&port);
  ASSERT_GE(listener, 0);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  EventLoop loop;
  std::thread loop_thread([&] { loop.Run(); });

  for (int64_t i = 0; i < iterations && !::testing::Test::HasFailure(); ++i) {
    std::shared_ptr<TaskChannelInterface> channel = MakeTcpTaskChannel(loop, address, 1 << 20, token);
    auto result = std::make_shared<PushResult>();
    rpc::PushTaskRequest push = RandomPush(rng, 64);
    channel->Push(push, [result](const absl::Status& s, rpc::PushTaskReply&&) { result->Record(s); });
    const int64_t deadline = NowMs() + kDeadlineMs;
    pollfd p{listener, POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, kDeadlineMs), 1);
    int conn = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    ASSERT_GE(conn, 0);

    // The impostor: garbage; a mutated challenge and proof; or a real challenge, then
    // (once the owner answered it) a proof that is not the right one.
    std::string from_owner;
    std::string sent;
    const std::string nonce(kNonceBytes, 's');
    std::string challenge;
    AppendRawFrame(FrameKind::kChallenge, nonce, &challenge);
    auto forge = [&](const std::string& owner_nonce) {
      std::string proof;
      AppendRawFrame(FrameKind::kServerProof, HandshakeMac(token, "worker", nonce, owner_nonce), &proof);
      return proof;
    };
    switch (fuzz::Uniform(rng, 0, 2)) {
      case 0:
        sent = fuzz::RandomBytes(rng, 300);
        break;
      case 1:  // the owner's nonce is not known yet: this proof cannot be right
        sent = fuzz::Mutate(rng, challenge + forge(std::string(kNonceBytes, '?')), challenge);
        break;
      default: {
        ASSERT_EQ(send(conn, challenge.data(), challenge.size(), MSG_NOSIGNAL), static_cast<ssize_t>(challenge.size()));
        // A well-formed challenge: the owner answers with its nonce and proof.
        ASSERT_TRUE(ReadUntil(conn, &from_owner, deadline, [&] {
          return !ParseFrames(from_owner, kHandshakeFrameBytes, kHandshakeFrameBytes).frames.empty();
        }));
        Parsed answer = ParseFrames(from_owner, kHandshakeFrameBytes, kHandshakeFrameBytes);
        ASSERT_EQ(answer.frames.size(), 1u);
        const std::string valid = forge(answer.frames[0].body.substr(0, kNonceBytes));
        sent = fuzz::Mutate(rng, valid);
        // Whatever the mutation left, the impostor never sends the valid proof whole.
        if (sent.compare(0, valid.size(), valid) == 0) sent = valid.substr(0, valid.size() - 1);
        break;
      }
    }
    SCOPED_TRACE("iteration " + std::to_string(i) + " impostor sent " + fuzz::Hex(sent));
    if (!sent.empty()) send(conn, sent.data(), sent.size(), MSG_NOSIGNAL);
    shutdown(conn, SHUT_WR);

    ASSERT_TRUE(result->WaitForOne()) << "the push neither failed nor succeeded";
    EXPECT_FALSE(result->statuses[0].ok());
    ASSERT_TRUE(ReadUntil(conn, &from_owner, deadline, [] { return false; })) << "the owner kept the connection";
    // Nothing but (at most) the owner's proof ever reached the impostor.
    Parsed frames = ParseFrames(from_owner, kHandshakeFrameBytes, kHandshakeFrameBytes);
    EXPECT_FALSE(frames.malformed);
    EXPECT_LE(frames.frames.size(), 1u);
    for (const Frame& f : frames.frames) EXPECT_EQ(f.kind, static_cast<uint8_t>(FrameKind::kProof));
    close(conn);
    channel->CancelAll();
  }
  loop.Stop();
  loop_thread.join();
  close(listener);
}

}  // namespace
}  // namespace manta::core
