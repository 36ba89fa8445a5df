// Randomized tests of the task channel's frame decoding (src/task_channel/task_channel*):
// FrameReader fed random, mutated and hand-made byte streams through a socketpair, in
// pieces of random sizes, compared against the frame format written down in
// task_channel.h, before the handshake's limit and after it. No input may crash, hang,
// reserve what a length field claims instead of what arrived, or be decoded
// differently from the format. The handshake: task_frame_handshake_fuzz_test.cc.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "src/task_channel/task_channel.h"
#include "src/task_channel/task_channel_internal.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/task_frame_fuzz_util.h"

namespace manta::core {
namespace {

using task_channel_internal::kHandshakeFrameBytes;

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

}  // namespace
}  // namespace manta::core
