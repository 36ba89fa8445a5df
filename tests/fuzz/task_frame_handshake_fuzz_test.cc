// Randomized tests of the task channel's handshake (src/task_channel/task_channel*,
// task_channel_security.h) over loopback sockets: the worker's TaskChannelServer,
// under each protection, refusing every connection that does not prove the token
// without ever delivering its pushes, and delivering of a proven connection exactly
// the pushes whose sealed frames arrived intact; and the owner's channel refusing
// impostor workers without ever writing a push to them. No input may crash or hang
// either end. The frame decoding alone: task_frame_fuzz_test.cc.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "src/common/security.h"
#include "src/task_channel/task_channel.h"
#include "src/task_channel/task_channel_internal.h"
#include "src/task_channel/task_channel_security.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/task_frame_fuzz_util.h"
#include "test_util/test_util.h"

namespace manta::core {
namespace {

using task_channel_internal::kHandshakeFrameBytes;
using task_channel_internal::kHeaderBytes;
using task_channel_internal::kMacBytes;
using task_channel_internal::kNonceBytes;

constexpr int64_t kDeadlineMs = 5000;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// ---------------------------------------------------------------------------------
// The worker's end: TaskChannelServer on loopback, played against by raw sockets.

// The bodies of the handshake frames (task_channel_security.h).
constexpr size_t kKeyBytes = 32;  // an X25519 public key
constexpr size_t kChallengeBytes = 1 + kNonceBytes;
constexpr size_t kProofBytes = kNonceBytes + kKeyBytes + kMacBytes;
constexpr size_t kServerProofBytes = kKeyBytes + kMacBytes;

constexpr ChannelProtection kProtections[] = {ChannelProtection::kNone, ChannelProtection::kMac,
                                              ChannelProtection::kEncrypt};

ChannelProtection RandomProtection(std::mt19937_64& rng, uint64_t at_least = 0) {
  return static_cast<ChannelProtection>(fuzz::Uniform(rng, at_least, 2));
}

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

// The owner's side of `fd` until the worker sent `count` handshake frames (or closed,
// or the deadline passed), running the server meanwhile: it must deliver nothing.
// Returns the worker's frames so far; *received holds their bytes.
std::vector<Frame> AwaitHandshakeFrames(TaskChannelServer& server, int fd, size_t count, int64_t deadline_ms,
                                        std::string* received) {
  std::vector<Frame> frames;
  bool closed = false;
  while (frames.size() < count && !closed && NowMs() < deadline_ms) {
    EXPECT_FALSE(server.InputPending());
    closed = DrainSocket(fd, received);
    frames = ParseFrames(*received, kHandshakeFrameBytes, kHandshakeFrameBytes).frames;
  }
  return frames;
}

// Runs the server until it has closed the connection on `fd` (at the latest when it
// reads the owner's end of stream), taking every push it delivers (re-serialized)
// and every byte it sends. False when it neither closed nor served it in time.
bool ServeUntilClosed(TaskChannelServer& server, int fd, int64_t deadline_ms, std::string* received,
                      std::vector<std::string>* delivered) {
  while (NowMs() < deadline_ms) {
    while (server.InputPending()) {
      std::optional<TaskChannelServer::Push> push = server.Next(0);
      EXPECT_TRUE(push.has_value());
      if (!push.has_value()) return false;
      delivered->push_back(push->request->SerializeAsString());
    }
    if (DrainSocket(fd, received) && server.NumConnections() == 0) return true;
  }
  return false;
}

// The kProof frame an owner requiring `minimum` makes for `challenge` with `token`.
std::string ProofFrame(const std::string& token, ChannelProtection minimum, std::string_view challenge) {
  OwnerHandshake owner({token, minimum});
  absl::StatusOr<std::string> body = owner.Prove(challenge);
  EXPECT_TRUE(body.ok()) << body.status();
  std::string frame;
  AppendRawFrame(FrameKind::kProof, body.ok() ? *body : std::string(), &frame);
  return frame;
}

// A proof that does not prove this connection: made with another token; for another
// worker's challenge; for this challenge with another protection in it (a downgrade
// or an upgrade); or recorded on an earlier connection to this server (a replay), when there was one.
std::string WrongProof(std::mt19937_64& rng, const std::string& token, ChannelProtection protection,
                       const std::string& challenge, const std::string& recorded) {
  switch (fuzz::Uniform(rng, 0, 3)) {
    case 0:
      return ProofFrame(NewClusterToken(), protection, challenge);
    case 1:
      break;
    case 2: {
      std::string downgraded = challenge;
      downgraded[0] = static_cast<char>((static_cast<uint8_t>(challenge[0]) + fuzz::Uniform(rng, 1, 2)) % 3);
      return ProofFrame(token, ChannelProtection::kNone, downgraded);
    }
    default:
      if (!recorded.empty()) return recorded;
      break;
  }
  WorkerHandshake other_worker({token, protection});
  return ProofFrame(token, protection, other_worker.challenge());
}

// Pushes as an owner sends them: each serialized, and its frame on the wire (sealed
// with `sealer`, or plain without one), and all of them as plain frames.
struct OwnerPushes {
  std::vector<std::string> messages;
  std::vector<std::string> frames;
  std::string plain;
  std::string Wire() const {
    std::string out;
    for (const std::string& f : frames) out += f;
    return out;
  }
};
OwnerPushes MakePushes(std::mt19937_64& rng, int count, FrameSealer* sealer) {
  OwnerPushes out;
  for (int k = 0; k < count; ++k) {
    rpc::PushTaskRequest push = RandomPush(rng, 256);
    out.messages.push_back(push.SerializeAsString());
    std::string plain;
    AppendFrame(FrameKind::kPush, push, &plain);
    out.plain += plain;
    std::string frame;
    if (sealer != nullptr) sealer->Append(static_cast<uint8_t>(FrameKind::kPush), out.messages.back(), &frame);
    out.frames.push_back(sealer != nullptr ? frame : plain);
  }
  return out;
}

// A sealed push as task_channel_security.h lays it out: [u32 LE length = 1 + body +
// tag][u8 kind][body: in the clear with kMac, encrypted with kEncrypt][16-byte tag].
void ExpectSealedPush(ChannelProtection protection, std::string_view frame, std::string_view body) {
  ASSERT_EQ(frame.size(), kHeaderBytes + body.size() + kFrameTagBytes);
  EXPECT_EQ(task_channel_internal::LoadLe32(frame.data()), 1 + body.size() + kFrameTagBytes);
  EXPECT_EQ(frame[4], static_cast<char>(FrameKind::kPush));
  const std::string_view carried = frame.substr(kHeaderBytes, body.size());
  if (protection == ChannelProtection::kMac) {
    EXPECT_EQ(carried, body);
  }
  // A push body is over 8 bytes (its push_id alone takes about 10): equal by chance never.
  if (protection == ChannelProtection::kEncrypt && body.size() >= 8) {
    EXPECT_NE(carried, body);
  }
}

// The sealed pushes altered as a whole: a frame dropped, replayed later, or swapped
// with the next; or every push sent in the clear, or sealed with the key of the other
// direction (reflected back at the worker).
std::string AlterSealedPushes(std::mt19937_64& rng, const OwnerPushes& pushes, const ChannelKeys& keys) {
  std::vector<std::string> frames = pushes.frames;
  const size_t n = frames.size();
  const size_t i = fuzz::Uniform(rng, 0, n - 1);
  switch (fuzz::Uniform(rng, 0, 4)) {
    case 0:
      frames.erase(frames.begin() + static_cast<ptrdiff_t>(i));
      break;
    case 1:
      frames.insert(frames.begin() + static_cast<ptrdiff_t>(fuzz::Uniform(rng, i + 1, n)), frames[i]);
      break;
    case 2:
      if (n < 2) return pushes.Wire() + frames[0];
      std::swap(frames[i % (n - 1)], frames[i % (n - 1) + 1]);
      break;
    case 3:
      return pushes.plain;
    default: {
      FrameSealer reflected(keys.protection, keys.worker_to_owner);
      std::string out;
      for (const std::string& m : pushes.messages) reflected.Append(static_cast<uint8_t>(FrameKind::kPush), m, &out);
      return out;
    }
  }
  std::string out;
  for (const std::string& f : frames) out += f;
  return out;
}

// What a proven connection without sealing (kNone) delivers of the bytes after the
// proof, by the format: its pushes, up to the first frame that is not a well-formed
// push.
std::vector<std::string> PlainPushesDelivered(std::string_view after_proof, int64_t max_frame) {
  std::vector<std::string> out;
  for (const Frame& f : ParseFrames(after_proof, max_frame, max_frame).frames) {
    rpc::PushTaskRequest push;
    if (f.kind != static_cast<uint8_t>(FrameKind::kPush) || !push.ParseFromString(f.body)) break;
    out.push_back(push.SerializeAsString());
  }
  return out;
}

// How many of the sealed `frames` arrive as sealed: the leading ones that
// `after_proof` holds byte for byte, one after the other from its start. A sealed
// connection delivers exactly those pushes: the first frame altered, dropped,
// replayed, moved or injected fails to open, and nothing after it is delivered.
size_t IntactSealedFrames(const std::vector<std::string>& frames, std::string_view after_proof) {
  size_t pos = 0;
  size_t k = 0;
  while (k < frames.size() && after_proof.substr(pos, frames[k].size()) == frames[k]) pos += frames[k++].size();
  return k;
}

// What the server test carries from one connection to the next: counts showing that
// the interesting cases ran, and the last proof each server accepted.
struct ServerFuzzTally {
  int authenticated = 0;
  int sealed_controls[3] = {0, 0, 0};
  int sealed_cut_short = 0;  // proven sealed connections that delivered only some of their pushes
  std::string recorded[3];   // the last proof each server accepted, replayed later
};

// One owner's connection to `server`, played on a raw socket: the bytes the server
// sent, the exact proof for its challenge, and all the owner sent.
struct OwnerConnection {
  OwnerConnection(TaskChannelServer& server, const std::string& token, ChannelProtection protection)
      : server(server),
        token(token),
        protection(protection),
        sealed(protection != ChannelProtection::kNone),
        fd(ConnectTo(server.port())),
        deadline(NowMs() + kDeadlineMs),
        owner(TaskChannelSecurity{token, protection}) {}

  // The challenge comes first, announcing the server's protection; then makes the
  // exact kProof frame for it.
  void ReadChallenge() {
    std::vector<Frame> from_server = AwaitHandshakeFrames(server, fd, 1, deadline, &received);
    ASSERT_EQ(from_server.size(), 1u);
    ASSERT_EQ(from_server[0].kind, static_cast<uint8_t>(FrameKind::kChallenge));
    challenge = from_server[0].body;
    ASSERT_EQ(challenge.size(), kChallengeBytes);
    ASSERT_EQ(challenge[0], static_cast<char>(protection));
    absl::StatusOr<std::string> proof_body = owner.Prove(challenge);
    ASSERT_TRUE(proof_body.ok()) << proof_body.status();
    ASSERT_EQ(proof_body->size(), kProofBytes);
    AppendRawFrame(FrameKind::kProof, *proof_body, &proof);
  }

  // Modes 0 to 3, which do not prove the connection (unless a mutation leaves the
  // proof whole): random bytes; a wrong proof, then pushes; pushes with no handshake
  // at all; or the proof and pushes mutated. `recorded` is a proof this server
  // accepted before (or empty).
  void SendUnproven(std::mt19937_64& rng, uint64_t mode, const std::string& recorded) {
    pushes = MakePushes(rng, static_cast<int>(fuzz::Uniform(rng, 0, 3)), nullptr);
    if (mode == 0) sent = fuzz::RandomBytes(rng, 512);
    if (mode == 1) sent = WrongProof(rng, token, protection, challenge, recorded) + pushes.plain;
    if (mode == 2) sent = pushes.plain;  // pushes with no handshake at all
    if (mode == 3) sent = fuzz::Mutate(rng, proof + pushes.plain, pushes.plain);
    if (!sent.empty()) {
      ASSERT_EQ(send(fd, sent.data(), sent.size(), MSG_NOSIGNAL), static_cast<ssize_t>(sent.size()));
    }
  }

  // The proven path: the exact proof, then (once the server proved itself too) the
  // pushes, sealed unless the protection is kNone; unchanged in the control case.
  void SendProven(std::mt19937_64& rng) {
    ASSERT_EQ(send(fd, proof.data(), proof.size(), MSG_NOSIGNAL), static_cast<ssize_t>(proof.size()));
    std::vector<Frame> from_server = AwaitHandshakeFrames(server, fd, 2, deadline, &received);
    ASSERT_EQ(from_server.size(), 2u) << "no server proof after the right proof";
    ChannelKeys keys;
    ASSERT_TRUE(owner.Check(from_server[1].body, &keys).ok());
    std::unique_ptr<FrameSealer> sealer;
    if (sealed) sealer = std::make_unique<FrameSealer>(protection, keys.owner_to_worker);
    pushes = MakePushes(rng, static_cast<int>(fuzz::Uniform(rng, 1, 4)), sealer.get());
    for (size_t k = 0; sealed && k < pushes.frames.size(); ++k) {
      ExpectSealedPush(protection, pushes.frames[k], pushes.messages[k]);
    }
    control = fuzz::OneIn(rng, 4);
    std::string after;
    if (control) {
      after = pushes.Wire();
    } else if (sealed && fuzz::OneIn(rng, 3)) {
      after = AlterSealedPushes(rng, pushes, keys);
    } else {
      after = fuzz::Mutate(rng, pushes.Wire(), pushes.plain);
    }
    if (!after.empty()) {
      ASSERT_EQ(send(fd, after.data(), after.size(), MSG_NOSIGNAL), static_cast<ssize_t>(after.size()));
    }
    sent = proof + after;
  }

  // Checks what the server `delivered` and sent against what should have happened:
  // only a connection that starts with the exact proof is authenticated; it gets the
  // server's proof, and then delivers by the plain format (kNone) or exactly the
  // pushes whose sealed frames arrived intact. Pushes sent along with the proof are
  // plain (there were no keys yet): sealed, none opens.
  void ExpectOutcome(uint64_t mode, int64_t max_frame, const std::vector<std::string>& delivered,
                     ServerFuzzTally* tally) {
    const size_t index = static_cast<size_t>(protection);
    const bool proven = sent.compare(0, proof.size(), proof) == 0;
    const std::string_view after_proof = proven ? std::string_view(sent).substr(proof.size()) : std::string_view();
    std::vector<std::string> expected;
    if (proven && !sealed) expected = PlainPushesDelivered(after_proof, max_frame);
    if (proven && sealed && mode > 3) {
      const size_t intact = IntactSealedFrames(pushes.frames, after_proof);
      expected.assign(pushes.messages.begin(), pushes.messages.begin() + static_cast<ptrdiff_t>(intact));
      if (intact < pushes.frames.size()) ++tally->sealed_cut_short;
      if (control) ++tally->sealed_controls[index];
    }
    if (control) {
      EXPECT_EQ(expected, pushes.messages);
    }
    EXPECT_EQ(delivered, expected);
    const std::vector<Frame> from_server = ParseFrames(received, kHandshakeFrameBytes, kHandshakeFrameBytes).frames;
    ASSERT_EQ(from_server.size(), proven ? 2u : 1u);
    if (proven) {
      ++tally->authenticated;
      tally->recorded[index] = proof;
      EXPECT_EQ(from_server[1].kind, static_cast<uint8_t>(FrameKind::kServerProof));
      EXPECT_EQ(from_server[1].body.size(), kServerProofBytes);
      ChannelKeys keys;
      EXPECT_TRUE(owner.Check(from_server[1].body, &keys).ok());
      EXPECT_EQ(keys.protection, protection);
    }
  }

  TaskChannelServer& server;
  const std::string& token;
  const ChannelProtection protection;
  const bool sealed;
  const int fd;
  const int64_t deadline;
  OwnerHandshake owner;
  std::string received;   // every byte the server sent
  std::string challenge;  // the body of its kChallenge frame
  std::string proof;      // the exact kProof frame for the challenge
  std::string sent;       // every byte the owner sent
  OwnerPushes pushes;     // what the owner means to send after its proof
  bool control = false;   // the proven pushes were sent unchanged
};

TEST(TaskFrameFuzzTest, TheServerClosesEveryUnprovenConnectionAndDeliversNothingFromIt) {
  const int64_t iterations = fuzz::Iterations(1500);
  std::mt19937_64 rng = fuzz::TestRng(iterations);
  const std::string token = NewClusterToken();
  const int64_t max_frame = 1 << 20;
  std::vector<std::unique_ptr<TaskChannelServer>> servers;  // one per protection, kProtections' order
  for (ChannelProtection protection : kProtections) {
    auto listening = TaskChannelServer::Listen("127.0.0.1", max_frame, {token, protection}, kDeadlineMs);
    ASSERT_TRUE(listening.ok()) << listening.status();
    servers.push_back(std::move(*listening));
  }
  fuzz::QuietLogs quiet;  // the server logs every connection it drops
  ServerFuzzTally tally;
  for (int64_t i = 0; i < iterations && !::testing::Test::HasFailure(); ++i) {
    const ChannelProtection protection = RandomProtection(rng);
    const size_t index = static_cast<size_t>(protection);
    TaskChannelServer& server = *servers[index];
    SCOPED_TRACE("iteration " + std::to_string(i) + " protection " + ChannelProtectionName(protection));
    OwnerConnection conn(server, token, protection);
    ASSERT_NO_FATAL_FAILURE(conn.ReadChallenge());

    // All the owner sends: unproven (modes 0 to 3) or proven (4 to 6).
    const uint64_t mode = fuzz::Uniform(rng, 0, 6);
    if (mode <= 3) {
      ASSERT_NO_FATAL_FAILURE(conn.SendUnproven(rng, mode, tally.recorded[index]));
    } else {
      ASSERT_NO_FATAL_FAILURE(conn.SendProven(rng));
    }
    SCOPED_TRACE("mode " + std::to_string(mode) + " sent " + fuzz::Hex(conn.sent, 256));
    shutdown(conn.fd, SHUT_WR);  // the server sees the end of stream: it closes every connection

    std::vector<std::string> delivered;
    ASSERT_TRUE(ServeUntilClosed(server, conn.fd, conn.deadline, &conn.received, &delivered))
        << "the server neither closed nor served the connection";
    close(conn.fd);
    ASSERT_NO_FATAL_FAILURE(conn.ExpectOutcome(mode, max_frame, delivered, &tally));
  }
  EXPECT_GT(tally.authenticated, 0) << "the control case never ran: raise MANTA_FUZZ_ITERATIONS";
  EXPECT_GT(tally.sealed_cut_short, 0) << "no sealed frame was ever refused: raise MANTA_FUZZ_ITERATIONS";
  for (ChannelProtection protection : {ChannelProtection::kMac, ChannelProtection::kEncrypt}) {
    EXPECT_GT(tally.sealed_controls[static_cast<size_t>(protection)], 0)
        << "the sealed control case never ran for " << ChannelProtectionName(protection)
        << ": raise MANTA_FUZZ_ITERATIONS";
  }
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

// The worker's end of one connection from the owner, played by an impostor that does
// not hold the token: it models its frames on `worker`, a real worker that does.
struct Impostor {
  Impostor(int conn, int64_t deadline, WorkerHandshake& worker, const std::string& challenge, bool downgrade)
      : conn(conn), deadline(deadline), worker(worker), challenge(challenge), downgrade(downgrade) {}

  // What the impostor sends in `mode`: 0, garbage; 1, a mutated challenge and server
  // proof; 2, a real challenge, then (once the owner answered it) a server proof that
  // is not the right one. Sends the challenge of mode 2 itself; leaves in `sent` the
  // bytes the test sends last.
  void Prepare(std::mt19937_64& rng, uint64_t mode, const std::string& token) {
    switch (mode) {
      case 0:
        sent = fuzz::RandomBytes(rng, 300);
        break;
      case 1: {
        // The owner's proof is not known yet: a server proof recorded from another
        // handshake with this challenge cannot be right.
        OwnerHandshake other({token, ChannelProtection::kNone});
        absl::StatusOr<std::string> other_proof = other.Prove(worker.challenge());
        ASSERT_TRUE(other_proof.ok()) << other_proof.status();
        ChannelKeys keys;
        absl::StatusOr<std::string> recorded = worker.Answer(*other_proof, &keys);
        ASSERT_TRUE(recorded.ok()) << recorded.status();
        std::string server_proof;
        AppendRawFrame(FrameKind::kServerProof, *recorded, &server_proof);
        sent = fuzz::Mutate(rng, challenge + server_proof, challenge);
        break;
      }
      default: {
        ASSERT_EQ(send(conn, challenge.data(), challenge.size(), MSG_NOSIGNAL), static_cast<ssize_t>(challenge.size()));
        // A well-formed challenge: the owner answers with its proof, unless the
        // protection announced is weaker than it requires (then it closes).
        ASSERT_TRUE(ReadUntil(conn, &from_owner, deadline, [&] {
          return !ParseFrames(from_owner, kHandshakeFrameBytes, kHandshakeFrameBytes).frames.empty();
        }));
        Parsed answer = ParseFrames(from_owner, kHandshakeFrameBytes, kHandshakeFrameBytes);
        if (downgrade) {
          EXPECT_TRUE(answer.frames.empty()) << "the owner proved itself to a worker weaker than it requires";
          break;
        }
        ASSERT_EQ(answer.frames.size(), 1u);
        // The owner's proof convinces a real worker: what that worker answers is the
        // valid server proof, which the impostor mutates.
        ChannelKeys keys;
        absl::StatusOr<std::string> valid_body = worker.Answer(answer.frames[0].body, &keys);
        ASSERT_TRUE(valid_body.ok()) << valid_body.status();
        ASSERT_EQ(valid_body->size(), kServerProofBytes);
        std::string valid;
        AppendRawFrame(FrameKind::kServerProof, *valid_body, &valid);
        sent = fuzz::Mutate(rng, valid);
        // Whatever the mutation left, the impostor never sends the valid proof whole.
        if (sent.compare(0, valid.size(), valid) == 0) sent = valid.substr(0, valid.size() - 1);
        break;
      }
    }
  }

  const int conn;
  const int64_t deadline;
  WorkerHandshake& worker;
  const std::string& challenge;  // `worker`'s kChallenge frame
  const bool downgrade;          // `worker` announces less than the owner requires
  std::string from_owner;        // every byte the owner sent
  std::string sent;              // the bytes the impostor sends last
};

// Nothing but (at most) the owner's proof ever reached the impostor: no push, sealed
// or not.
void ExpectNothingButTheOwnersProof(const std::string& from_owner) {
  Parsed frames = ParseFrames(from_owner, kHandshakeFrameBytes, kHandshakeFrameBytes);
  EXPECT_FALSE(frames.malformed);
  EXPECT_LE(frames.frames.size(), 1u);
  for (const Frame& f : frames.frames) {
    EXPECT_EQ(f.kind, static_cast<uint8_t>(FrameKind::kProof));
    EXPECT_EQ(f.body.size(), kProofBytes);
  }
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
    const ChannelProtection required = RandomProtection(rng);
    std::shared_ptr<TaskChannelInterface> channel = MakeTcpTaskChannel(loop, address, 1 << 20, {token, required});
    auto result = std::make_shared<PushResult>();
    rpc::PushTaskRequest push = RandomPush(rng, 64);
    channel->Push(push, [result](const absl::Status& s, rpc::PushTaskReply&&) { result->Record(s); });
    const int64_t deadline = NowMs() + kDeadlineMs;
    pollfd p{listener, POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, kDeadlineMs), 1);
    int conn = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    ASSERT_GE(conn, 0);

    // The impostor models its frames on a real worker holding the token, which
    // announces at least the protection the owner requires, or now and then a weaker
    // one (a downgrade: the owner must refuse it before it proves anything).
    const bool downgrade = required != ChannelProtection::kNone && fuzz::OneIn(rng, 6);
    const ChannelProtection announced =
        downgrade ? static_cast<ChannelProtection>(fuzz::Uniform(rng, 0, static_cast<uint64_t>(required) - 1))
                  : RandomProtection(rng, static_cast<uint64_t>(required));
    WorkerHandshake worker({token, announced});
    std::string challenge;
    AppendRawFrame(FrameKind::kChallenge, worker.challenge(), &challenge);
    ASSERT_EQ(worker.challenge().size(), kChallengeBytes);

    Impostor impostor(conn, deadline, worker, challenge, downgrade);
    const uint64_t mode = fuzz::Uniform(rng, 0, 2);
    ASSERT_NO_FATAL_FAILURE(impostor.Prepare(rng, mode, token));
    const std::string& sent = impostor.sent;
    SCOPED_TRACE("iteration " + std::to_string(i) + " owner requires " + ChannelProtectionName(required) +
                 ", worker announces " + ChannelProtectionName(announced) + "; impostor sent " + fuzz::Hex(sent));
    if (!sent.empty()) send(conn, sent.data(), sent.size(), MSG_NOSIGNAL);
    shutdown(conn, SHUT_WR);

    ASSERT_TRUE(result->WaitForOne()) << "the push neither failed nor succeeded";
    EXPECT_FALSE(result->statuses[0].ok());
    if (downgrade && mode == 2) {
      EXPECT_NE(result->statuses[0].message().find("weaker"), std::string_view::npos) << result->statuses[0];
    }
    ASSERT_TRUE(ReadUntil(conn, &impostor.from_owner, deadline, [] { return false; }))
        << "the owner kept the connection";
    ExpectNothingButTheOwnersProof(impostor.from_owner);
    close(conn);
    channel->CancelAll();
  }
  loop.Stop();
  loop_thread.join();
  close(listener);
}

}  // namespace
}  // namespace manta::core
