// Helpers shared by the task channel's socket tests (task_channel_test.cc,
// task_channel_auth_test.cc): a recorder of the channel's callbacks, pushes and reply
// frames to send, raw sockets that play either end byte by byte, and TaskChannelTest,
// a server on loopback with an owner's channel to it (the test thread plays the worker).
#pragma once

#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "src/common/security.h"
#include "src/task_channel/task_channel.h"
#include "src/task_channel/task_channel_internal.h"
#include "test_util/test_util.h"

namespace manta::core {

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
    return cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return calls.size() >= n; });
  }
  std::vector<Call> Calls() {
    std::lock_guard<std::mutex> lock(mu);
    return calls;
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Call> calls;
};

// A push of `num_tasks` tasks of "f" for "worker", each with an argument of `arg_bytes`
// bytes (none when 0) filled with one letter per task.
inline rpc::PushTaskRequest MakePush(int num_tasks, size_t arg_bytes = 0) {
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

// One reply frame for push `push_id`: a result for each of `task_ids`, and `done`.
inline std::string ReplyFrames(uint64_t push_id, const std::vector<std::string>& task_ids, bool done) {
  rpc::PushTaskReply reply;
  reply.set_push_id(push_id);
  reply.set_done(done);
  for (const std::string& id : task_ids) reply.add_results()->set_task_id(id);
  std::string frames;
  AppendFrame(FrameKind::kReply, reply, &frames);
  return frames;
}

// A raw TCP client or server for sending bytes that are not what the peer expects.
inline int ConnectRaw(int port) {
  int fd = manta::testing::ConnectTcp("127.0.0.1", port);
  EXPECT_GE(fd, 0);
  return fd;
}

// Reads one whole frame from a blocking socket (5 s at most). False at end of stream.
inline bool ReadRawFrame(int fd, FrameKind* kind, std::string* body) {
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  char header[5];
  if (recv(fd, header, 5, MSG_WAITALL) != 5) return false;
  uint32_t length = task_channel_internal::LoadLe32(header);
  *kind = static_cast<FrameKind>(static_cast<unsigned char>(header[4]));
  body->assign(length - 1, '\0');
  return length == 1 || recv(fd, body->data(), length - 1, MSG_WAITALL) == static_cast<ssize_t>(length - 1);
}

// Sends all of `bytes` at once (small enough for the socket buffer).
inline void SendAll(int fd, const std::string& bytes) {
  ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

// The next push `server` receives (the test thread plays the worker).
inline TaskChannelServer::Push NextPush(TaskChannelServer& server) {
  std::optional<TaskChannelServer::Push> push = server.Next(0);
  EXPECT_TRUE(push.has_value());
  return push.value_or(TaskChannelServer::Push{});
}

// True when the peer closed `fd` (end of stream) within 5 s, whatever it sent before.
inline bool ClosedByPeer(int fd) {
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  char buf[256];
  while (true) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0) return true;
    if (n < 0) return errno == ECONNRESET;
  }
}

// A worker's server on loopback that authenticates (kMac) with a short handshake
// timeout, and an owner's channel to it driven by a loop thread.
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

}  // namespace manta::core
