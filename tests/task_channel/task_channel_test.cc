// The task channel over real loopback sockets: pushes and their (early and final)
// replies in order, replies read by the loop or by a polling thread exactly once,
// large frames, a dead or absent worker, cancellation, malformed bytes from either
// side (the reader drops the connection and keeps serving the others), a server out
// of descriptors, and FrameReader on a socketpair. The handshake and attacks on it:
// task_channel_auth_test.cc.
#include "src/task_channel/task_channel.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "src/task_channel/task_channel_internal.h"
#include "tests/task_channel/task_channel_test_util.h"

namespace manta::core {
namespace {

using std::chrono::milliseconds;

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
  // The count drops once the callback has returned, just after it recorded the call.
  EXPECT_TRUE(manta::testing::WaitFor([&] { return channel_->InFlight() == 0; }, 5000));
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

TEST_F(TaskChannelTest, QueuedPushesAreWrittenInOrderByFlush) {
  // What a submitter does under its lock: queue, then Flush once it has let go.
  Recorder first, a, b;
  channel_->Push(MakePush(1), first.Callback());  // connected and shaken hands
  TaskChannelServer::Push opening = NextPush();
  ASSERT_TRUE(server_->Send(opening.connection, ReplyFrames(opening.request->push_id(), {"task-0"}, true)));
  ASSERT_TRUE(first.WaitFor(1));
  // The first push leaves the count just after its callback has run.
  ASSERT_TRUE(manta::testing::WaitFor([&] { return channel_->InFlight() == 0; }, 5000));
  channel_->QueuePush(MakePush(1).SerializeAsString(), a.Callback());
  channel_->QueuePush(MakePush(2).SerializeAsString(), b.Callback());
  EXPECT_EQ(channel_->InFlight(), 2);
  channel_->Flush();
  TaskChannelServer::Push pa = NextPush();
  TaskChannelServer::Push pb = NextPush();
  ASSERT_EQ(pa.request->tasks_size(), 1);
  ASSERT_EQ(pb.request->tasks_size(), 2);
  EXPECT_LT(pa.request->push_id(), pb.request->push_id());
  ASSERT_TRUE(server_->Send(pb.connection, ReplyFrames(pb.request->push_id(), {"task-0", "task-1"}, true) +
                                               ReplyFrames(pa.request->push_id(), {"task-0"}, true)));
  ASSERT_TRUE(a.WaitFor(1));
  ASSERT_TRUE(b.WaitFor(1));
  EXPECT_EQ(b.Calls()[0].reply.results_size(), 2);
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
  // The count drops once the callback has returned, just after it recorded the call.
  EXPECT_TRUE(manta::testing::WaitFor([&] { return channel_->InFlight() == 0; }, 5000));
}

TEST_F(TaskChannelTest, SpinsBeginningAndEndingWhileTheLoopReadsLoseNoReply) {
  // A thread that spins (BeginSpin/EndSpin, as a Get does) re-arms the socket while
  // the loop re-arms it after each event: whichever arming lands last must reflect
  // the last state, else the socket stays unwatched with nobody spinning and a reply
  // sits unread (a driver's Get hung so on a TLS cluster). Each round the spinner
  // spins while replies stream in through the loop, then stops at a random moment;
  // one more reply must then reach the loop.
  std::atomic<bool> stop{false};
  enum { kSpin, kPauseAsked, kPaused };
  std::atomic<int> state{kSpin};
  std::thread spinner([&] {
    while (!stop) {
      int expected = kPauseAsked;
      if (state.compare_exchange_strong(expected, kPaused) || expected == kPaused) {
        std::this_thread::yield();
        continue;
      }
      channel_->BeginSpin();
      channel_->EndSpin();
    }
  });
  auto answer = [&](Recorder& r) {
    channel_->Push(MakePush(1), r.Callback());
    TaskChannelServer::Push push = NextPush();
    return server_->Send(push.connection, ReplyFrames(push.request->push_id(), {"t"}, true));
  };
  const auto until = std::chrono::steady_clock::now() + milliseconds(2000);
  int rounds = 0;
  bool lost = false;
  while (!lost && std::chrono::steady_clock::now() < until && rounds < 100000) {
    ++rounds;
    for (int i = 0; i < 3; ++i) {
      Recorder streamed;
      ASSERT_TRUE(answer(streamed));
      ASSERT_TRUE(streamed.WaitFor(1));
    }
    state = kPauseAsked;
    while (state.load() != kPaused) std::this_thread::yield();
    Recorder after;
    ASSERT_TRUE(answer(after));
    lost = !after.WaitFor(1, 2000);
    state = kSpin;
  }
  stop = true;
  spinner.join();
  EXPECT_FALSE(lost) << "a reply was never read, after " << rounds << " rounds";
  EXPECT_GT(rounds, 10);
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

// Shutdown waits until no push is in flight, then lets the loop run what was
// posted meanwhile: a push's last callback (which may post a retry) must still
// count as in flight while it runs, or the loop may stop before the retry.
TEST_F(TaskChannelTest, APushCountsAsInFlightUntilItsLastCallbackReturns) {
  std::atomic<int64_t> in_flight_when_done{-1};
  std::atomic<int64_t> in_flight_when_failed{-1};
  Recorder rec;
  channel_->Push(MakePush(1), [&](const absl::Status& s, rpc::PushTaskReply&& r) {
    in_flight_when_done = channel_->InFlight();
    rec.Callback()(s, std::move(r));
  });
  TaskChannelServer::Push push = NextPush();
  ASSERT_TRUE(server_->Send(push.connection, ReplyFrames(push.request->push_id(), {"task-0"}, true)));
  ASSERT_TRUE(rec.WaitFor(1));
  channel_->Push(MakePush(1), [&](const absl::Status& s, rpc::PushTaskReply&& r) {
    in_flight_when_failed = channel_->InFlight();
    rec.Callback()(s, std::move(r));
  });
  NextPush();
  server_.reset();  // the worker is gone: the push fails
  ASSERT_TRUE(rec.WaitFor(2));
  EXPECT_TRUE(rec.Calls()[0].status.ok());
  EXPECT_FALSE(rec.Calls()[1].status.ok());
  EXPECT_EQ(in_flight_when_done.load(), 1);
  EXPECT_EQ(in_flight_when_failed.load(), 1);
  // The count drops once the callback has returned, just after it recorded the call.
  EXPECT_TRUE(manta::testing::WaitFor([&] { return channel_->InFlight() == 0; }, 5000));
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
  // The count drops once the callback has returned, just after it recorded the call.
  EXPECT_TRUE(manta::testing::WaitFor([&] { return channel_->InFlight() == 0; }, 5000));
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

}  // namespace
}  // namespace manta::core
