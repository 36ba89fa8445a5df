// The task channel over real loopback sockets: pushes and their (early and final)
// replies in order, replies read by the loop or by a polling thread exactly once,
// large frames, a dead or absent worker, cancellation, and malformed bytes from
// either side (the reader drops the connection and keeps serving the others).
#include "src/task_channel/task_channel.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "gtest/gtest.h"
#include "src/common/security.h"
#include "src/task_channel/task_channel_internal.h"
#include "test_util/test_util.h"

namespace manta::core {
namespace {

using std::chrono::milliseconds;

// Every callback of the channel, recorded in the order it ran.
struct Recorder {
  struct Call {
    absl::Status status;
    rpc::PushTaskReply reply;
  };
  PushCallback Callback() {
    return [this](const absl::Status& status, rpc::PushTaskReply&& reply) {
      std::lock_guard<std::mutex> lock(mu);
      calls.push_back({status, std::move(reply)});
      cv.notify_all();
    };
  }
  bool WaitFor(size_t n, int64_t timeout_ms = 5000) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, milliseconds(timeout_ms), [&] { return calls.size() >= n; });
  }
  std::vector<Call> Calls() {
    std::lock_guard<std::mutex> lock(mu);
    return calls;
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Call> calls;
};

rpc::PushTaskRequest MakePush(int num_tasks, size_t arg_bytes = 0) {
  rpc::PushTaskRequest push;
  push.set_intended_worker_id("worker");
  for (int i = 0; i < num_tasks; ++i) {
    rpc::TaskSpec* spec = push.add_tasks();
    spec->set_task_id("task-" + std::to_string(i));
    spec->set_function_name("f");
    if (arg_bytes > 0) spec->add_args()->set_data(std::string(arg_bytes, static_cast<char>('a' + i % 26)));
  }
  return push;
}

std::string ReplyFrames(uint64_t push_id, const std::vector<std::string>& task_ids, bool done) {
  rpc::PushTaskReply reply;
  reply.set_push_id(push_id);
  reply.set_done(done);
  for (const std::string& id : task_ids) reply.add_results()->set_task_id(id);
  std::string frames;
  AppendFrame(FrameKind::kReply, reply, &frames);
  return frames;
}

// A raw TCP client or server for sending bytes that are not what the peer expects.
int ConnectRaw(int port) {
  int fd = manta::testing::ConnectTcp("127.0.0.1", port);
  EXPECT_GE(fd, 0);
  return fd;
}

// Reads one whole frame from a blocking socket (5 s at most). False at end of stream.
bool ReadRawFrame(int fd, FrameKind* kind, std::string* body) {
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  char header[5];
  if (recv(fd, header, 5, MSG_WAITALL) != 5) return false;
  uint32_t length = task_channel_internal::LoadLe32(header);
  *kind = static_cast<FrameKind>(static_cast<unsigned char>(header[4]));
  body->assign(length - 1, '\0');
  return length == 1 || recv(fd, body->data(), length - 1, MSG_WAITALL) == static_cast<ssize_t>(length - 1);
}

void SendAll(int fd, const std::string& bytes) {
  ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

// Plays the owner's half of the handshake on a raw socket with `security`. Returns
// whether the worker proved itself back; then *keys are the connection's keys.
bool RawOwnerHandshake(int fd, const TaskChannelSecurity& security, ChannelKeys* keys) {
  FrameKind kind;
  std::string challenge;
  if (!ReadRawFrame(fd, &kind, &challenge) || kind != FrameKind::kChallenge) return false;
  OwnerHandshake owner(security);
  absl::StatusOr<std::string> proof = owner.Prove(challenge);
  if (!proof.ok()) return false;
  std::string frame;
  AppendRawFrame(FrameKind::kProof, *proof, &frame);
  SendAll(fd, frame);
  std::string server_proof;
  return ReadRawFrame(fd, &kind, &server_proof) && kind == FrameKind::kServerProof &&
         owner.Check(server_proof, keys).ok();
}

// `frames` (plain) as the owner sends them on a connection with `keys`.
std::string SealedByOwner(const ChannelKeys& keys, const std::string& frames) {
  if (keys.protection == ChannelProtection::kNone) return frames;
  FrameSealer sealer(keys.protection, keys.owner_to_worker);
  std::string sealed;
  sealer.SealFrames(frames, &sealed);
  return sealed;
}

// The next push `server` receives (the test thread plays the worker).
TaskChannelServer::Push NextPush(TaskChannelServer& server) {
  std::optional<TaskChannelServer::Push> push = server.Next(0);
  EXPECT_TRUE(push.has_value());
  return push.value_or(TaskChannelServer::Push{});
}

// True when the peer closed `fd` (end of stream) within 5 s, whatever it sent before.
bool ClosedByPeer(int fd) {
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  char buf[256];
  while (true) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0) return true;
    if (n < 0) return errno == ECONNRESET;
  }
}

class TaskChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = TaskChannelServer::Listen("127.0.0.1", 64 << 20, security_, kHandshakeTimeoutMs);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    loop_thread_ = std::thread([this] { loop_.Run(); });
    channel_ = MakeTcpTaskChannel(loop_, Address(), 64 << 20, security_);
  }
  void TearDown() override {
    if (channel_) channel_->CancelAll();
    channel_.reset();
    loop_.Stop();
    loop_thread_.join();
  }
  std::string Address() const { return "127.0.0.1:" + std::to_string(server_->port()); }

  // The next push the server receives (the test thread plays the worker).
  TaskChannelServer::Push NextPush() { return core::NextPush(*server_); }

  static constexpr int64_t kHandshakeTimeoutMs = 300;
  const std::string token_ = NewClusterToken();
  const TaskChannelSecurity security_{token_, ChannelProtection::kMac};
  EventLoop loop_;
  std::thread loop_thread_;
  std::unique_ptr<TaskChannelServer> server_;
  std::shared_ptr<TaskChannelInterface> channel_;
};

TEST_F(TaskChannelTest, EarlyAndFinalRepliesArriveInOrder) {
  Recorder rec;
  channel_->Push(MakePush(3), rec.Callback());
  TaskChannelServer::Push push = NextPush();
  ASSERT_EQ(push.request->tasks_size(), 3);
  EXPECT_EQ(push.request->intended_worker_id(), "worker");
  EXPECT_EQ(channel_->InFlight(), 1);
  // An early reply with the first result, then the rest with done, in one write.
  std::string bytes = ReplyFrames(push.request->push_id(), {"task-0"}, false) +
                      ReplyFrames(push.request->push_id(), {"task-1", "task-2"}, true);
  ASSERT_TRUE(server_->Send(push.connection, bytes));
  ASSERT_TRUE(rec.WaitFor(2));
  auto calls = rec.Calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_TRUE(calls[0].status.ok());
  EXPECT_FALSE(calls[0].reply.done());
  ASSERT_EQ(calls[0].reply.results_size(), 1);
  EXPECT_EQ(calls[0].reply.results(0).task_id(), "task-0");
  EXPECT_TRUE(calls[1].reply.done());
  EXPECT_EQ(calls[1].reply.results_size(), 2);
  EXPECT_EQ(channel_->InFlight(), 0);
}

TEST_F(TaskChannelTest, ASerializedPushGetsItsPushIdAppendedAndArrivesWhole) {
  // What the submitters send: the request's bytes with no push_id; the channel adds it.
  Recorder rec;
  channel_->PushSerialized(MakePush(2, 100).SerializeAsString(), rec.Callback());
  TaskChannelServer::Push push = NextPush();
  EXPECT_NE(push.request->push_id(), 0u);
  ASSERT_EQ(push.request->tasks_size(), 2);
  EXPECT_EQ(push.request->tasks(1).task_id(), "task-1");
  EXPECT_EQ(push.request->tasks(1).args(0).data(), std::string(100, 'b'));
  ASSERT_TRUE(server_->Send(push.connection, ReplyFrames(push.request->push_id(), {"task-0", "task-1"}, true)));
  ASSERT_TRUE(rec.WaitFor(1));
  EXPECT_TRUE(rec.Calls()[0].status.ok());
  EXPECT_EQ(rec.Calls()[0].reply.results_size(), 2);
}

TEST_F(TaskChannelTest, APushOverTheFrameLimitFailsAloneAndTheChannelGoesOn) {
  auto small = MakeTcpTaskChannel(loop_, Address(), /*max_frame_bytes=*/4096, security_);
  Recorder big, next;
  small->Push(MakePush(1, 8000), big.Callback());
  ASSERT_TRUE(big.WaitFor(1));
  EXPECT_EQ(big.Calls()[0].status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(big.Calls()[0].status.message().find("frame limit of 4096"), std::string::npos)
      << big.Calls()[0].status;
  small->Push(MakePush(1), next.Callback());
  TaskChannelServer::Push push = NextPush();
  ASSERT_EQ(push.request->tasks_size(), 1);
  ASSERT_TRUE(server_->Send(push.connection, ReplyFrames(push.request->push_id(), {"task-0"}, true)));
  ASSERT_TRUE(next.WaitFor(1));
  EXPECT_TRUE(next.Calls()[0].status.ok());
  small->CancelAll();
}

TEST_F(TaskChannelTest, PipelinedPushesGetTheirOwnReplies) {
  Recorder a, b;
  channel_->Push(MakePush(1), a.Callback());
  channel_->Push(MakePush(1), b.Callback());
  TaskChannelServer::Push first = NextPush();
  TaskChannelServer::Push second = NextPush();
  EXPECT_NE(first.request->push_id(), second.request->push_id());
  EXPECT_EQ(first.connection, second.connection);
  // Answered in reverse: each callback gets its own push's reply.
  ASSERT_TRUE(server_->Send(second.connection, ReplyFrames(second.request->push_id(), {"second"}, true)));
  ASSERT_TRUE(server_->Send(first.connection, ReplyFrames(first.request->push_id(), {"first"}, true)));
  ASSERT_TRUE(a.WaitFor(1));
  ASSERT_TRUE(b.WaitFor(1));
  EXPECT_EQ(a.Calls()[0].reply.results(0).task_id(), "first");
  EXPECT_EQ(b.Calls()[0].reply.results(0).task_id(), "second");
}

TEST_F(TaskChannelTest, RepliesPolledByManyThreadsAreDispatchedOnce) {
  // The loop watches the socket while several threads poll it too; every reply
  // must reach its callback exactly once and in order.
  constexpr int kPushes = 300;
  std::atomic<int> calls{0};
  std::atomic<bool> out_of_order{false};
  std::atomic<int> last{-1};
  for (int i = 0; i < kPushes; ++i) {
    channel_->Push(MakePush(1), [&, i](const absl::Status& s, rpc::PushTaskReply&&) {
      EXPECT_TRUE(s.ok()) << s;
      if (last.exchange(i) != i - 1) out_of_order = true;
      ++calls;
    });
  }
  std::atomic<bool> stop{false};
  std::vector<std::thread> pollers;
  for (int t = 0; t < 3; ++t) {
    pollers.emplace_back([&] {
      while (!stop) channel_->Poll();
    });
  }
  for (int i = 0; i < kPushes; ++i) {
    TaskChannelServer::Push push = NextPush();
    ASSERT_TRUE(server_->Send(push.connection, ReplyFrames(push.request->push_id(), {"t"}, true)));
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (calls < kPushes && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(milliseconds(1));
  stop = true;
  for (auto& t : pollers) t.join();
  EXPECT_EQ(calls.load(), kPushes);
  EXPECT_FALSE(out_of_order.load());
  EXPECT_EQ(channel_->InFlight(), 0);
}

TEST_F(TaskChannelTest, LargeFramesCrossIntactBothWays) {
  // 40 tasks of 256 KiB each: a 10 MiB push, more than the socket buffers take at
  // once, so the owner finishes writing from the loop.
  Recorder rec;
  channel_->Push(MakePush(40, 256 * 1024), rec.Callback());
  TaskChannelServer::Push push = NextPush();
  ASSERT_EQ(push.request->tasks_size(), 40);
  for (int i = 0; i < 40; ++i) {
    const std::string& data = push.request->tasks(i).args(0).data();
    ASSERT_EQ(data.size(), 256u * 1024);
    EXPECT_EQ(data.find_first_not_of(static_cast<char>('a' + i % 26)), std::string::npos);
  }
  rpc::PushTaskReply reply;
  reply.set_push_id(push.request->push_id());
  reply.set_done(true);
  reply.add_results()->add_returns()->set_data(std::string(8 << 20, 'z'));
  std::string frames;
  AppendFrame(FrameKind::kReply, reply, &frames);
  // More than the socket takes at once: the rest goes out as the worker's thread
  // polls (as its execution loop does between tasks).
  ASSERT_TRUE(server_->Send(push.connection, frames));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!rec.WaitFor(1, 1) && std::chrono::steady_clock::now() < deadline) server_->InputPending();
  auto calls = rec.Calls();
  ASSERT_EQ(calls.size(), 1u);
  ASSERT_TRUE(calls[0].status.ok()) << calls[0].status;
  EXPECT_EQ(calls[0].reply.results(0).returns(0).data(), std::string(8 << 20, 'z'));
}

TEST_F(TaskChannelTest, WorkerDeathFailsPushesInFlightAndLaterOnes) {
  Recorder rec;
  channel_->Push(MakePush(2), rec.Callback());
  NextPush();
  server_.reset();  // the worker process is gone: its sockets close
  ASSERT_TRUE(rec.WaitFor(1));
  auto calls = rec.Calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].status.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(calls[0].status.message().find("127.0.0.1"), std::string::npos) << calls[0].status;
  // A push on the dead channel fails too, on the loop (never inline in Push).
  Recorder later;
  std::atomic<std::thread::id> ran_on{};
  channel_->Push(MakePush(1), [&](const absl::Status& s, rpc::PushTaskReply&& r) {
    ran_on = std::this_thread::get_id();
    later.Callback()(s, std::move(r));
  });
  ASSERT_TRUE(later.WaitFor(1));
  EXPECT_FALSE(later.Calls()[0].status.ok());
  EXPECT_NE(ran_on.load(), std::this_thread::get_id());
}

TEST_F(TaskChannelTest, NoWorkerListeningFailsThePushWithTheAddress) {
  int port = server_->port();
  server_.reset();
  auto channel = MakeTcpTaskChannel(loop_, "127.0.0.1:" + std::to_string(port), 1 << 20, security_);
  Recorder rec;
  channel->Push(MakePush(1), rec.Callback());
  ASSERT_TRUE(rec.WaitFor(1));
  absl::Status s = rec.Calls()[0].status;
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("127.0.0.1:" + std::to_string(port)), std::string::npos) << s;
}

TEST_F(TaskChannelTest, CancelAllFailsPushesAsCancelled) {
  Recorder rec;
  channel_->Push(MakePush(1), rec.Callback());
  NextPush();
  channel_->CancelAll();
  EXPECT_TRUE(channel_->IsClosed());
  ASSERT_TRUE(rec.WaitFor(1));
  EXPECT_EQ(rec.Calls()[0].status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(channel_->InFlight(), 0);
  // Later pushes fail at once.
  Recorder later;
  channel_->Push(MakePush(1), later.Callback());
  ASSERT_TRUE(later.WaitFor(1));
  EXPECT_EQ(later.Calls()[0].status.code(), absl::StatusCode::kCancelled);
}

TEST_F(TaskChannelTest, RefusedPushFailsWithTheWorkersReason) {
  Recorder rec;
  channel_->Push(MakePush(1), rec.Callback());
  TaskChannelServer::Push push = NextPush();
  rpc::PushTaskReply reply;
  reply.set_push_id(push.request->push_id());
  reply.set_done(true);
  reply.set_error("meant for another worker");
  std::string frames;
  AppendFrame(FrameKind::kReply, reply, &frames);
  ASSERT_TRUE(server_->Send(push.connection, frames));
  ASSERT_TRUE(rec.WaitFor(1));
  EXPECT_NE(rec.Calls()[0].status.message().find("meant for another worker"), std::string::npos);
}

TEST_F(TaskChannelTest, ServerDropsAConnectionSendingGarbageAndServesOthers) {
  int raw = ConnectRaw(server_->port());
  // A length header far beyond the limit, then junk.
  const char junk[] = "\xff\xff\xff\x7f\x01garbage";
  ASSERT_EQ(send(raw, junk, sizeof(junk) - 1, 0), static_cast<ssize_t>(sizeof(junk) - 1));
  // A well-formed owner still gets served.
  Recorder rec;
  channel_->Push(MakePush(1), rec.Callback());
  TaskChannelServer::Push push = NextPush();
  ASSERT_TRUE(server_->Send(push.connection, ReplyFrames(push.request->push_id(), {"x"}, true)));
  ASSERT_TRUE(rec.WaitFor(1));
  EXPECT_TRUE(rec.Calls()[0].status.ok());
  // The garbage sender was dropped: after the challenge its socket reads end of stream.
  EXPECT_TRUE(ClosedByPeer(raw));
  close(raw);
  EXPECT_EQ(server_->NumConnections(), 1u);
}

TEST_F(TaskChannelTest, OwnerFailsPushesWhenTheWorkerSendsGarbage) {
  // A fake "worker" that answers a push with bytes that are not a reply frame.
  int port = 0;
  int listener = manta::testing::ListenOnLoopback(&port);
  ASSERT_GE(listener, 0);
  auto channel = MakeTcpTaskChannel(loop_, "127.0.0.1:" + std::to_string(port), 1 << 20, security_);
  Recorder rec;
  channel->Push(MakePush(1), rec.Callback());
  int conn = accept(listener, nullptr, nullptr);
  ASSERT_GE(conn, 0);
  // It knows the token: the handshake passes.
  WorkerHandshake worker(security_);
  std::string challenge;
  AppendRawFrame(FrameKind::kChallenge, worker.challenge(), &challenge);
  SendAll(conn, challenge);
  FrameKind kind;
  std::string proof;
  ASSERT_TRUE(ReadRawFrame(conn, &kind, &proof));
  ASSERT_EQ(kind, FrameKind::kProof);
  ChannelKeys keys;
  absl::StatusOr<std::string> answer = worker.Answer(proof, &keys);
  ASSERT_TRUE(answer.ok()) << answer.status();
  std::string server_proof;
  AppendRawFrame(FrameKind::kServerProof, *answer, &server_proof);
  SendAll(conn, server_proof);
  rpc::PushTaskRequest wrong_kind;  // a push frame where a reply belongs, sealed as a reply would be
  std::string frames;
  FrameSealer sealer(keys.protection, keys.worker_to_owner);
  sealer.Append(static_cast<uint8_t>(FrameKind::kPush), wrong_kind.SerializeAsString(), &frames);
  ASSERT_EQ(send(conn, frames.data(), frames.size(), 0), static_cast<ssize_t>(frames.size()));
  ASSERT_TRUE(rec.WaitFor(1));
  absl::Status s = rec.Calls()[0].status;
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("malformed"), std::string::npos) << s;
  close(conn);
  close(listener);
}

TEST_F(TaskChannelTest, RunningOutOfDescriptorsPausesAcceptsWithoutSpinningAndResumes) {
  // Lower the soft limit to what is open now plus a few, and take those few.
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  int open_now = 0;
  for (int fd = 0; fd < 4096; ++fd) open_now += fcntl(fd, F_GETFD) != -1 ? 1 : 0;
  rlimit low = old;
  low.rlim_cur = static_cast<rlim_t>(open_now + 16);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> fillers;
  for (int fd; (fd = dup(0)) >= 0;) fillers.push_back(fd);
  ASSERT_EQ(errno, EMFILE);
  close(fillers.back());  // one descriptor for the client's socket
  fillers.pop_back();
  int raw = ConnectRaw(server_->port());  // queued by the kernel; the server cannot accept it

  std::atomic<bool> got_push{false};
  std::thread worker([&] {
    std::optional<TaskChannelServer::Push> push = server_->Next(0);
    got_push = push.has_value();
  });
  timespec cpu0{}, cpu1{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu0);
  std::this_thread::sleep_for(milliseconds(400));
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu1);
  const double cpu_ms = (cpu1.tv_sec - cpu0.tv_sec) * 1e3 + (cpu1.tv_nsec - cpu0.tv_nsec) / 1e6;
  EXPECT_LT(cpu_ms, 150) << "the server busy-looped while out of descriptors";
  EXPECT_FALSE(got_push.load());

  // Descriptors back: the waiting connection is accepted and served.
  for (int fd : fillers) close(fd);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  ChannelKeys keys;
  ASSERT_TRUE(RawOwnerHandshake(raw, security_, &keys));
  std::string frames;
  AppendFrame(FrameKind::kPush, MakePush(1), &frames);
  frames = SealedByOwner(keys, frames);
  ASSERT_EQ(send(raw, frames.data(), frames.size(), 0), static_cast<ssize_t>(frames.size()));
  worker.join();
  EXPECT_TRUE(got_push.load());
  close(raw);
}

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
  auto server =
      TaskChannelServer::Listen("127.0.0.1", 64 << 20, {NewClusterToken(), ChannelProtection::kMac}, 30000);
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->LimitLoopbackPeersForTesting();
  // 64 connections from one host that never answer the challenge: each gets one.
  std::vector<int> idle;
  for (int i = 0; i < 64; ++i) {
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
  ASSERT_TRUE(ServeUntil(**server, [&] { return (*server)->NumConnections() == 65u; }));
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

TEST_F(TaskChannelTest, WakeMakesNextReturn) {
  std::thread waker([this] {
    std::this_thread::sleep_for(milliseconds(20));
    server_->Wake();
  });
  EXPECT_FALSE(server_->Next(0).has_value());
  waker.join();
  // A Wake before Next counts too.
  server_->Wake();
  EXPECT_FALSE(server_->Next(100).has_value());
}

TEST(FrameReaderTest, AMalformedHeaderAfterAGoodFrameIsAnErrorAtOnce) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  rpc::PushTaskReply reply;
  reply.set_push_id(1);
  std::string bytes;
  AppendFrame(FrameKind::kReply, reply, &bytes);
  bytes.append("\xff\xff\xff\xff\x01", 5);
  ASSERT_EQ(send(fds[0], bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  FrameReader reader(1 << 20);
  bool got = false;
  reader.ReadAvailable(fds[1], &got).IgnoreError();
  FrameKind kind;
  std::string_view body;
  EXPECT_TRUE(reader.Next(&kind, &body));  // the good frame still comes out
  EXPECT_FALSE(reader.Next(&kind, &body));
  EXPECT_EQ(reader.error().code(), absl::StatusCode::kDataLoss);
  close(fds[0]);
  close(fds[1]);
}

TEST(FrameReaderTest, BeforeTheHandshakeAFloodOfShortFramesIsCutOffAtOneMebibyte) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
  int buffer = 4 << 20;
  setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
  setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
  std::string frames;
  while (frames.size() < (2u << 20)) AppendRawFrame(FrameKind::kProof, std::string(100, 'p'), &frames);
  size_t sent = 0;
  while (sent < frames.size()) {
    ssize_t n = send(fds[0], frames.data() + sent, frames.size() - sent, 0);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  ASSERT_GT(sent, size_t{1} << 20) << "the socket pair holds too little for this test";
  FrameReader reader(128);  // the limit before the handshake
  bool got = false;
  absl::Status s = reader.ReadAvailable(fds[1], &got);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(std::string(s.message()).find("before the handshake"), std::string::npos) << s;
  // Once past the handshake the same frames are just frames.
  FrameReader proven(64 << 20);
  int again[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, again), 0);
  setsockopt(again[0], SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
  setsockopt(again[1], SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
  ssize_t n = send(again[0], frames.data(), sent, 0);
  ASSERT_GT(n, 0);
  EXPECT_TRUE(proven.ReadAvailable(again[1], &got).ok());
  for (int fd : {fds[0], fds[1], again[0], again[1]}) close(fd);
}

TEST(FrameReaderTest, FramesSplitAcrossReadsAreReassembled) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  rpc::PushTaskReply reply;
  reply.set_push_id(7);
  reply.add_results()->set_task_id(std::string(5000, 't'));
  std::string frames;
  AppendFrame(FrameKind::kReply, reply, &frames);
  AppendFrame(FrameKind::kReply, reply, &frames);
  FrameReader reader(1 << 20);
  FrameKind kind;
  std::string_view body;
  int complete = 0;
  for (size_t sent = 0; sent < frames.size();) {
    size_t n = std::min<size_t>(777, frames.size() - sent);
    ASSERT_EQ(send(fds[0], frames.data() + sent, n, 0), static_cast<ssize_t>(n));
    sent += n;
    bool got = false;
    ASSERT_TRUE(reader.ReadAvailable(fds[1], &got).ok());
    EXPECT_TRUE(got);
    while (reader.Next(&kind, &body)) {
      rpc::PushTaskReply parsed;
      ASSERT_TRUE(parsed.ParseFromArray(body.data(), static_cast<int>(body.size())));
      EXPECT_EQ(kind, FrameKind::kReply);
      EXPECT_EQ(parsed.push_id(), 7u);
      EXPECT_EQ(parsed.results(0).task_id().size(), 5000u);
      ++complete;
    }
  }
  EXPECT_EQ(complete, 2);
  close(fds[0]);
  bool got = false;
  EXPECT_EQ(reader.ReadAvailable(fds[1], &got).code(), absl::StatusCode::kUnavailable);  // end of stream
  close(fds[1]);
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
    Direction up{owner, worker, &to_worker_};
    Direction down{worker, owner, &to_owner_};
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
