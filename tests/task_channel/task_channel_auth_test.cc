// The task channel's authentication over real loopback sockets: owners without the
// token, pushes before or without a handshake, wrong or oversized proofs, silent
// connections and one host holding every handshake slot are dropped with nothing run;
// an owner writes no push to an impostor or to a worker weaker than it requires; and
// through a relay on the path, pushes and replies cross intact under every protection
// while altered, replayed, reordered, injected or dropped sealed frames are refused.
#include "src/task_channel/task_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "src/common/security.h"
#include "src/task_channel/task_channel_internal.h"
#include "test_util/scoped_network_limits.h"
#include "test_util/test_util.h"
#include "tests/task_channel/task_channel_test_util.h"

namespace manta::core {
namespace {

using std::chrono::milliseconds;

// Drives the server (the test thread plays the worker's execution thread) until
// `done` or 5 s; true when `done`.
template <typename Done>
bool ServeUntil(TaskChannelServer& server, Done done) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    EXPECT_FALSE(server.InputPending()) << "a push got through";
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

TEST_F(TaskChannelTest, OwnerWithAnotherClustersTokenGetsNothingRun) {
  auto stranger = MakeTcpTaskChannel(loop_, Address(), 64 << 20, {NewClusterToken(), ChannelProtection::kMac});
  Recorder rec;
  stranger->Push(MakePush(1), rec.Callback());
  ASSERT_TRUE(ServeUntil(*server_, [&] { return rec.Calls().size() == 1; }));
  EXPECT_EQ(rec.Calls()[0].status.code(), absl::StatusCode::kUnavailable) << rec.Calls()[0].status;
  EXPECT_EQ(server_->NumConnections(), 0u);
  stranger->CancelAll();
}

TEST_F(TaskChannelTest, PushWithoutAHandshakeIsDroppedUnread) {
  int raw = ConnectRaw(server_->port());
  std::string frames;
  AppendFrame(FrameKind::kPush, MakePush(1), &frames);
  SendAll(raw, frames);
  std::atomic<bool> closed{false};
  std::thread reader([&] { closed = ClosedByPeer(raw); });
  EXPECT_TRUE(ServeUntil(*server_, [&] { return closed.load(); }));
  reader.join();
  EXPECT_EQ(server_->NumConnections(), 0u);
  close(raw);
}

TEST_F(TaskChannelTest, WrongProofOrLargeFrameBeforeTheHandshakeIsRefused) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    int raw = ConnectRaw(server_->port());
    std::atomic<bool> done{false};
    std::thread owner([&] {
      FrameKind kind;
      std::string challenge;
      ASSERT_TRUE(ReadRawFrame(raw, &kind, &challenge));
      std::string frame;
      if (attempt == 0) {
        // A proof computed for another connection's challenge (a replay).
        WorkerHandshake other(security_);
        OwnerHandshake owner(security_);
        absl::StatusOr<std::string> proof = owner.Prove(other.challenge());
        ASSERT_TRUE(proof.ok()) << proof.status();
        AppendRawFrame(FrameKind::kProof, *proof, &frame);
      } else {
        AppendRawFrame(FrameKind::kProof, std::string(1000, 'p'), &frame);  // over the 128-byte limit
      }
      SendAll(raw, frame);
      EXPECT_TRUE(ClosedByPeer(raw));
      done = true;
    });
    EXPECT_TRUE(ServeUntil(*server_, [&] { return done.load(); }));
    EXPECT_EQ(server_->NumConnections(), 0u);
    owner.join();
    close(raw);
  }
}

TEST_F(TaskChannelTest, SilentConnectionIsDroppedAtTheHandshakeTimeout) {
  int raw = ConnectRaw(server_->port());
  auto start = std::chrono::steady_clock::now();
  std::atomic<bool> closed{false};
  std::thread reader([&] { closed = ClosedByPeer(raw); });
  EXPECT_TRUE(ServeUntil(*server_, [&] { return closed.load(); }));
  reader.join();
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(kHandshakeTimeoutMs));
  EXPECT_EQ(server_->NumConnections(), 0u);
  close(raw);
}

// A connection to 127.0.0.1:`port` from `source` (another loopback address).
int ConnectFrom(const std::string& source, int port) {
  int fd = manta::testing::ConnectTcpFrom(source, "127.0.0.1", port);
  EXPECT_GE(fd, 0) << source;
  return fd;
}

TEST(TaskChannelLimitsTest, OneHostCannotHoldEveryHandshakeSlot) {
  rpc::NetworkLimits limits;
  limits.max_unproven_per_host = 20;  // the configured cap, not the default one
  manta::testing::ScopedNetworkLimits scoped(limits);
  const size_t cap = static_cast<size_t>(limits.max_unproven_per_host);
  auto server =
      TaskChannelServer::Listen("127.0.0.1", 64 << 20, {NewClusterToken(), ChannelProtection::kMac}, 30000);
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->LimitLoopbackPeersForTesting();
  // `cap` connections from one host that never answer the challenge: each gets one.
  std::vector<int> idle;
  for (size_t i = 0; i < cap; ++i) {
    idle.push_back(ConnectFrom("127.0.0.2", (*server)->port()));
    ASSERT_TRUE(ServeUntil(**server, [&] { return (*server)->NumConnections() == idle.size(); }));
    FrameKind kind;
    std::string nonce;
    ASSERT_TRUE(ReadRawFrame(idle.back(), &kind, &nonce));
    EXPECT_EQ(kind, FrameKind::kChallenge);
  }
  // The next from that host is closed unanswered; another host is still served.
  int refused = ConnectFrom("127.0.0.2", (*server)->port());
  std::atomic<bool> closed{false};
  std::thread reader([&] { closed = ClosedByPeer(refused); });
  EXPECT_TRUE(ServeUntil(**server, [&] { return closed.load(); }));
  reader.join();
  int other = ConnectFrom("127.0.0.3", (*server)->port());
  ASSERT_TRUE(ServeUntil(**server, [&] { return (*server)->NumConnections() == cap + 1; }));
  FrameKind kind;
  std::string nonce;
  ASSERT_TRUE(ReadRawFrame(other, &kind, &nonce));
  EXPECT_EQ(kind, FrameKind::kChallenge);
  for (int fd : idle) close(fd);
  close(refused);
  close(other);
}

TEST_F(TaskChannelTest, ImpostorWorkerGetsNoPushBytes) {
  // Something listening where a worker was, without the token.
  int port = 0;
  int listener = manta::testing::ListenOnLoopback(&port);
  ASSERT_GE(listener, 0);
  auto channel = MakeTcpTaskChannel(loop_, "127.0.0.1:" + std::to_string(port), 1 << 20, security_);
  Recorder rec;
  channel->Push(MakePush(1, 100), rec.Callback());
  int conn = accept(listener, nullptr, nullptr);
  ASSERT_GE(conn, 0);
  std::string challenge;
  AppendRawFrame(FrameKind::kChallenge, "\x01" + std::string(32, 's'), &challenge);
  SendAll(conn, challenge);
  FrameKind kind;
  std::string proof;
  ASSERT_TRUE(ReadRawFrame(conn, &kind, &proof));
  EXPECT_EQ(kind, FrameKind::kProof);
  EXPECT_EQ(proof.find(token_), std::string::npos);  // the token itself never travels
  std::string fake;
  AppendRawFrame(FrameKind::kServerProof, std::string(64, 'f'), &fake);
  SendAll(conn, fake);
  ASSERT_TRUE(rec.WaitFor(1));
  EXPECT_NE(rec.Calls()[0].status.message().find("handshake"), std::string::npos) << rec.Calls()[0].status;
  // Nothing but the proof ever reached the impostor: the push was never written.
  timeval timeout{2, 0};
  setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  char byte;
  EXPECT_LE(recv(conn, &byte, 1, 0), 0);
  close(conn);
  close(listener);
  channel->CancelAll();
}

// ---------------------------------------------------------------------------------
// An attacker on the path: a relay between owner and worker that forwards whole
// frames, and lets a test alter, repeat, reorder, drop or inject them.

class FrameRelay {
 public:
  // What goes on in place of the `index`th frame (0-based) of one direction.
  using Edit = std::function<std::vector<std::string>(size_t index, const std::string& frame)>;
  static std::vector<std::string> PassThrough(size_t, const std::string& frame) { return {frame}; }

  FrameRelay(int worker_port, Edit to_worker, Edit to_owner)
      : worker_port_(worker_port), to_worker_(std::move(to_worker)), to_owner_(std::move(to_owner)) {
    listener_ = manta::testing::ListenOnLoopback(&port_);
    EXPECT_GE(listener_, 0);
    thread_ = std::thread([this] { Run(); });
  }
  ~FrameRelay() {
    stop_ = true;
    thread_.join();
    close(listener_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // Every byte forwarded to the worker so far.
  std::string SentToWorker() {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_to_worker_;
  }

 private:
  struct Direction {
    int from = -1;
    int to = -1;
    Edit* edit = nullptr;
    std::string buffer;
    size_t frames = 0;
  };

  void Run() {
    int owner = -1;
    while (!stop_ && owner < 0) {
      pollfd p{listener_, POLLIN, 0};
      if (poll(&p, 1, 20) == 1) owner = accept(listener_, nullptr, nullptr);
    }
    if (owner < 0) return;
    int worker = manta::testing::ConnectTcp("127.0.0.1", worker_port_);
    Direction up{owner, worker, &to_worker_, {}, 0};
    Direction down{worker, owner, &to_owner_, {}, 0};
    while (!stop_ && worker >= 0) {
      pollfd fds[2] = {{owner, POLLIN, 0}, {worker, POLLIN, 0}};
      if (poll(fds, 2, 20) <= 0) continue;
      if ((fds[0].revents && !Forward(up, true)) || (fds[1].revents && !Forward(down, false))) break;
    }
    // One side left: so does the other.
    close(owner);
    if (worker >= 0) close(worker);
  }

  // Reads what `d.from` sent and forwards its whole frames, edited. False at the end.
  bool Forward(Direction& d, bool upstream) {
    char chunk[64 * 1024];
    ssize_t n = recv(d.from, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    d.buffer.append(chunk, static_cast<size_t>(n));
    while (d.buffer.size() >= 4) {
      size_t length = 4 + task_channel_internal::LoadLe32(d.buffer.data());
      if (d.buffer.size() < length) break;
      std::string frame = d.buffer.substr(0, length);
      d.buffer.erase(0, length);
      for (const std::string& out : (*d.edit)(d.frames++, frame)) {
        if (send(d.to, out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size())) return false;
        if (upstream) {
          std::lock_guard<std::mutex> lock(mu_);
          sent_to_worker_ += out;
        }
      }
    }
    return true;
  }

  const int worker_port_;
  Edit to_worker_;
  Edit to_owner_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string sent_to_worker_;
  std::thread thread_;
};

// A task channel whose server and owner use `protection`, through a relay.
class ProtectedChannelTest : public ::testing::TestWithParam<ChannelProtection> {
 protected:
  void SetUp() override {
    auto server = TaskChannelServer::Listen("127.0.0.1", 64 << 20, security_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    loop_thread_ = std::thread([this] { loop_.Run(); });
  }
  void TearDown() override {
    if (channel_) channel_->CancelAll();
    channel_.reset();
    relay_.reset();
    loop_.Stop();
    loop_thread_.join();
  }
  void Connect(FrameRelay::Edit to_worker, FrameRelay::Edit to_owner = FrameRelay::PassThrough) {
    relay_ = std::make_unique<FrameRelay>(server_->port(), std::move(to_worker), std::move(to_owner));
    channel_ = MakeTcpTaskChannel(loop_, relay_->address(), 64 << 20, security_);
  }
  // Serves (the test thread plays the worker) until the server has no connection
  // left and `pushes` callbacks ran, or 5 s; returns the pushes it received.
  std::vector<TaskChannelServer::Push> ServeUntilClosed(Recorder& rec, size_t pushes) {
    std::vector<TaskChannelServer::Push> received;
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < until) {
      while (server_->InputPending()) received.push_back(*server_->Next(0));
      if (server_->NumConnections() == 0 && rec.Calls().size() >= pushes) break;
      std::this_thread::sleep_for(milliseconds(1));
    }
    EXPECT_EQ(server_->NumConnections(), 0u) << "the worker kept the connection";
    return received;
  }

  const std::string token_ = NewClusterToken();
  const TaskChannelSecurity security_{token_, GetParam()};
  EventLoop loop_;
  std::thread loop_thread_;
  std::unique_ptr<TaskChannelServer> server_;
  std::unique_ptr<FrameRelay> relay_;
  std::shared_ptr<TaskChannelInterface> channel_;
};

INSTANTIATE_TEST_SUITE_P(EveryProtection, ProtectedChannelTest,
                         ::testing::Values(ChannelProtection::kNone, ChannelProtection::kMac,
                                           ChannelProtection::kEncrypt),
                         [](const auto& info) { return std::string(ChannelProtectionName(info.param)); });

// Sealed channels only: the attacks below pass unnoticed on kNone (that is its point).
class SealedChannelTest : public ProtectedChannelTest {};
INSTANTIATE_TEST_SUITE_P(Sealed, SealedChannelTest,
                         ::testing::Values(ChannelProtection::kMac, ChannelProtection::kEncrypt),
                         [](const auto& info) { return std::string(ChannelProtectionName(info.param)); });

TEST_P(ProtectedChannelTest, PushesAndRepliesCrossIntactAndOnlyEncryptionHidesThem) {
  Connect(FrameRelay::PassThrough);
  const std::string marker = "secret-argument-" + SecureRandomHex(8);
  rpc::PushTaskRequest request = MakePush(1);
  request.mutable_tasks(0)->add_args()->set_data(marker);
  request.mutable_tasks(0)->add_args()->set_data(std::string(3 << 20, 'L'));  // a large frame too
  Recorder rec;
  channel_->Push(request, rec.Callback());
  TaskChannelServer::Push push = NextPush(*server_);
  ASSERT_EQ(push.request->tasks(0).args_size(), 2);
  EXPECT_EQ(push.request->tasks(0).args(0).data(), marker);
  EXPECT_EQ(push.request->tasks(0).args(1).data().size(), 3u << 20);
  std::string result(2 << 20, 'R');
  rpc::PushTaskReply reply;
  reply.set_push_id(push.request->push_id());
  reply.set_done(true);
  reply.add_results()->set_task_id(result);
  std::string frames;
  AppendFrame(FrameKind::kReply, reply, &frames);
  ASSERT_TRUE(server_->Send(push.connection, frames));
  ASSERT_TRUE(rec.WaitFor(1));
  ASSERT_TRUE(rec.Calls()[0].status.ok()) << rec.Calls()[0].status;
  EXPECT_EQ(rec.Calls()[0].reply.results(0).task_id(), result);
  const bool visible = relay_->SentToWorker().find(marker) != std::string::npos;
  EXPECT_EQ(visible, GetParam() != ChannelProtection::kEncrypt);
}

// Flips one byte in the body of frame `index`.
FrameRelay::Edit Alter(size_t index) {
  return [index](size_t i, const std::string& frame) -> std::vector<std::string> {
    if (i != index) return {frame};
    std::string altered = frame;
    altered[task_channel_internal::kHeaderBytes + 2] ^= 0x20;
    return {altered};
  };
}

TEST_P(SealedChannelTest, AnAlteredPushClosesTheConnectionUnread) {
  Connect(Alter(1));  // frame 0 is the proof; frame 1 the first push
  Recorder rec;
  channel_->Push(MakePush(1, 64), rec.Callback());
  EXPECT_TRUE(ServeUntilClosed(rec, 1).empty());
  ASSERT_EQ(rec.Calls().size(), 1u);
  EXPECT_EQ(rec.Calls()[0].status.code(), absl::StatusCode::kUnavailable) << rec.Calls()[0].status;
}

TEST_P(SealedChannelTest, AReplayedPushRunsOnceAndClosesTheConnection) {
  Connect([](size_t i, const std::string& frame) -> std::vector<std::string> {
    if (i == 1) return {frame, frame};
    return {frame};
  });
  Recorder rec;
  channel_->Push(MakePush(1), rec.Callback());
  std::vector<TaskChannelServer::Push> received = ServeUntilClosed(rec, 1);
  EXPECT_EQ(received.size(), 1u);
  ASSERT_EQ(rec.Calls().size(), 1u);
  EXPECT_FALSE(rec.Calls()[0].status.ok());
}

TEST_P(SealedChannelTest, ReorderedOrInjectedPushesAreRefused) {
  for (int attack = 0; attack < 3; ++attack) {
    SCOPED_TRACE(attack == 0 ? "reordered" : attack == 1 ? "injected" : "dropped");
    std::string held;
    Connect([attack, &held](size_t i, const std::string& frame) -> std::vector<std::string> {
      if (attack == 0 && i == 1) {  // the first push goes after the second
        held = frame;
        return {};
      }
      if (attack == 0 && i == 2) return {frame, held};
      if (attack == 1 && i == 1) {  // a push of the attacker's own goes first
        std::string forged;
        AppendFrame(FrameKind::kPush, MakePush(1), &forged);
        return {forged, frame};
      }
      if (attack == 2 && i == 1) return {};  // the first push never arrives
      return {frame};
    });
    Recorder rec;
    channel_->Push(MakePush(1), rec.Callback());
    channel_->Push(MakePush(1), rec.Callback());
    EXPECT_TRUE(ServeUntilClosed(rec, 2).empty());
    ASSERT_EQ(rec.Calls().size(), 2u);
    for (const auto& call : rec.Calls()) EXPECT_EQ(call.status.code(), absl::StatusCode::kUnavailable) << call.status;
    channel_->CancelAll();
    relay_.reset();
  }
}

TEST_P(SealedChannelTest, AnAlteredReplyFailsThePush) {
  Connect(FrameRelay::PassThrough, Alter(2));  // challenge, server proof, then the reply
  Recorder rec;
  channel_->Push(MakePush(1), rec.Callback());
  TaskChannelServer::Push push = NextPush(*server_);
  ASSERT_TRUE(server_->Send(push.connection, ReplyFrames(push.request->push_id(), {"task-0"}, true)));
  ASSERT_TRUE(rec.WaitFor(1));
  EXPECT_EQ(rec.Calls()[0].status.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(rec.Calls()[0].status.message().find("failed authentication"), std::string::npos)
      << rec.Calls()[0].status;
}

TEST_F(TaskChannelTest, AnOwnerRefusesAWorkerWeakerThanItRequiresAndAcceptsAStrongerOne) {
  // The fixture's worker authenticates (kMac).
  auto demanding = MakeTcpTaskChannel(loop_, Address(), 64 << 20, {token_, ChannelProtection::kEncrypt});
  Recorder refused;
  demanding->Push(MakePush(1), refused.Callback());
  ASSERT_TRUE(ServeUntil(*server_, [&] { return refused.Calls().size() == 1; }));
  EXPECT_NE(refused.Calls()[0].status.message().find("'mac', weaker than the 'encrypt'"), std::string::npos)
      << refused.Calls()[0].status;
  demanding->CancelAll();
  auto lenient = MakeTcpTaskChannel(loop_, Address(), 64 << 20, {token_, ChannelProtection::kNone});
  Recorder served;
  lenient->Push(MakePush(1), served.Callback());
  TaskChannelServer::Push push = NextPush();
  ASSERT_TRUE(server_->Send(push.connection, ReplyFrames(push.request->push_id(), {"task-0"}, true)));
  ASSERT_TRUE(served.WaitFor(1));
  EXPECT_TRUE(served.Calls()[0].status.ok()) << served.Calls()[0].status;
  lenient->CancelAll();
}

}  // namespace
}  // namespace manta::core
