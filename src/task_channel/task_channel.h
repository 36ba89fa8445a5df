// The task channel: how an owner pushes tasks to a leased worker and gets their
// results back (ARCHITECTURE.md §5 step 5).
//
// One plain TCP connection per (owner, worker) pair carries length-prefixed frames
// (FrameKind below): PushTaskRequest from owner to worker, PushTaskReply back. It
// replaces gRPC on the task path because a round trip through gRPC's callback API
// costs 8-10 thread switches, and one switch across the two vCPUs of our machines
// costs 50-100 µs. Here nothing sits between the threads that need the bytes:
//
//   - the owner's user thread writes a push straight to the socket (Push);
//   - the worker's execution thread reads it, runs the tasks and writes the replies
//     itself (TaskChannelServer);
//   - on the owner, a thread waiting in Get reads the replies itself (Poll), and the
//     core worker's EventLoop reads them when no such thread does.
//
// Both ends may busy-poll briefly before they sleep, which turns a synchronous task
// into two socket round trips with no thread wake-up at all.
//
// Each connection starts with a handshake in which both ends prove they hold the
// cluster token, without sending it, and agree on keys (task_channel_security.h):
// the worker sends a challenge, the owner its proof, the worker its own proof, which
// the owner checks before it sends any push. Until then frames are at most 128
// bytes, a worker drops a connection that has not proved itself within the
// handshake timeout, and a failed proof closes the connection with a log line
// naming the peer. It costs one round trip per connection, none per task. After it
// every frame is encrypted (with TLS on) or authenticated (without), unless the
// cluster opted out (task_channel_protection=none): a frame altered, replayed,
// reordered or injected in transit closes the connection.
//
// Threading: TaskChannelInterface is thread-safe. Push callbacks run on the thread
// that polled the reply (a user thread in Get, or the loop), or on the loop for
// failures, one at a time per channel and in order; never inline from Push.
// TaskChannelServer belongs to the worker's execution thread, except Send() and
// Wake(), which any thread may call.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "protos/core_worker.pb.h"
#include "src/common/event_loop.h"
#include "src/common/logging.h"
#include "src/common/rpc/client_pool.h"
#include "src/common/rpc/network_limits.h"
#include "src/task_channel/task_channel_security.h"

namespace manta::core {

enum class FrameKind : uint8_t { kPush = 1, kReply = 2, kChallenge = 3, kProof = 4, kServerProof = 5 };

// Appends one frame ([u32 little-endian length of kind + body][u8 kind][body]).
void AppendFrame(FrameKind kind, const google::protobuf::MessageLite& message, std::string* out);
// The same with raw bytes as the body (handshake frames).
void AppendRawFrame(FrameKind kind, std::string_view body, std::string* out);

// Protobuf wire form, for building a PushTaskRequest from specs already serialized
// (push_batch.h) and for appending the push_id to one.
inline void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}
// The tag and length of a length-delimited field (bytes, string, message) `field`.
inline void AppendLengthDelimitedHeader(uint32_t field, uint64_t length, std::string* out) {
  AppendVarint((uint64_t{field} << 3) | 2, out);
  AppendVarint(length, out);
}

// Accumulates bytes read from a socket and cuts them into frames. A malformed
// header (length 0, or over max_frame_bytes) is an error as soon as it is seen,
// wherever it stands in the stream; the reader stays failed.
class FrameReader {
 public:
  explicit FrameReader(int64_t max_frame_bytes) : max_frame_bytes_(max_frame_bytes) {}
  // Changes the limit for the frames not yet checked (after the handshake).
  void set_max_frame_bytes(int64_t max_frame_bytes) { max_frame_bytes_ = max_frame_bytes; }
  // From the next frame on, every frame is opened (checked, and decrypted) by `opener`.
  void set_opener(std::unique_ptr<FrameOpener> opener) { opener_ = std::move(opener); }
  // Reads everything the socket holds now without blocking. Sets *got_bytes.
  // Returns an error at end of stream, on a socket error, or on a malformed header
  // (the frames before it can still be taken with Next).
  absl::Status ReadAvailable(int fd, bool* got_bytes);
  // The next complete frame (opened, with an opener); the view stays valid until the
  // next ReadAvailable. False when no complete frame is buffered, or the next one is
  // malformed or does not open (then error() says so).
  bool Next(FrameKind* kind, std::string_view* body);
  const absl::Status& error() const { return error_; }

 private:
  absl::Status CheckHeader();
  int64_t max_frame_bytes_;
  std::string buffer_;
  size_t start_ = 0;
  absl::Status error_;
  std::unique_ptr<FrameOpener> opener_;
};

// Called once per reply of a push (reply.done() on the last), or once with an error
// status when the push cannot complete: Unavailable when the worker or the
// connection died, FailedPrecondition when the owner refused the worker's protection
// (weaker than its own setting; no worker of that cluster will do better). Must be
// thread-safe.
using PushCallback = std::function<void(const absl::Status& status, rpc::PushTaskReply&& reply)>;

class TaskChannelInterface {
 public:
  virtual ~TaskChannelInterface() = default;
  // "ip:task_port" of the worker.
  virtual const std::string& address() const = 0;
  // Sends `request`, a serialized PushTaskRequest without its push_id (assigned and
  // appended here). Never blocks on the peer: what the socket cannot take now is
  // written from the loop when it can.
  virtual void PushSerialized(std::string request, PushCallback callback) = 0;
  // The same, but the bytes wait for Flush() (or for the loop, when the socket was
  // full already): a caller that must push in order under its own lock queues the
  // push there and writes after letting go. REQUIRES: Flush() follows.
  virtual void QueuePush(std::string request, PushCallback callback) {
    PushSerialized(std::move(request), std::move(callback));
  }
  // Writes what QueuePush left, as far as the socket takes it now. Any thread.
  virtual void Flush() {}
  void Push(const rpc::PushTaskRequest& request, PushCallback callback) {
    PushSerialized(request.SerializeAsString(), std::move(callback));
  }
  // Reads and dispatches the replies that have arrived, without blocking. Returns
  // true when it read anything. Any thread.
  virtual bool Poll() = 0;
  // Pushes sent and not yet done or failed.
  virtual int64_t InFlight() const = 0;
  // Closes the channel: every push in flight fails with `why` (after the replies
  // already received), later ones at once.
  virtual void Close(const absl::Status& why) = 0;
  // Close(CANCELLED): shutdown.
  virtual void CancelAll() = 0;
  // The connection failed or was cancelled: every later push fails.
  virtual bool IsClosed() const = 0;
  // A thread that busy-polls this channel for replies (Poll) brackets its spin with
  // these: meanwhile the event loop is not woken for the channel's replies (that
  // wake-up, a third busy thread on two cores, cost a synchronous task about a
  // third of its rate). REQUIRES: every BeginSpin is followed by one EndSpin, which
  // lets the loop read the channel again. Any thread.
  virtual void BeginSpin() {}
  virtual void EndSpin() {}
};

// Channels by TaskChannelKey(): one per worker process, so a new worker that
// happens to reuse a dead one's port never gets the dead one's channel.
using TaskChannelPool = rpc::ClientPool<TaskChannelInterface>;
// "ip:task_port@<worker id hex>" of a leased worker's address.
std::string TaskChannelKey(const rpc::Address& worker);
// The "ip:task_port" part of a key.
std::string TaskChannelAddress(const std::string& key);
// The pool's channel to `worker`, filed under the worker's node (so that every
// channel to a node declared dead can be closed at once: RemoveGroup(node_id)).
inline std::shared_ptr<TaskChannelInterface> ChannelTo(TaskChannelPool& pool, const rpc::Address& worker) {
  return pool.Get(TaskChannelKey(worker), worker.node_id());
}

// The TCP implementation; `address` is "ip:task_port". Connects (and shakes hands
// with the token, requiring at least the protection of `security`) on the first Push.
std::shared_ptr<TaskChannelInterface> MakeTcpTaskChannel(EventLoop& loop, const std::string& address,
                                                         int64_t max_frame_bytes,
                                                         const TaskChannelSecurity& security);

// The worker's end: a listening socket and the owners' connections, read by the
// execution thread.
class TaskChannelServer {
 public:
  // Listens on `ip`, on a free port; owners must prove they hold the token within
  // `handshake_timeout_ms` of connecting (< 0: the process's unproven_timeout_ms,
  // network_limits.h). Frames are protected as `security` says. Connections still
  // in their handshake at once, from one remote host and from all together, are
  // capped as NetworkLimits say; more are closed as they come, so that strangers
  // cannot take every descriptor of a worker, and one host cannot keep the others
  // out. Loopback peers count only towards the total (every local process shares
  // that address), as in the gRPC acceptor.
  static absl::StatusOr<std::unique_ptr<TaskChannelServer>> Listen(const std::string& ip, int64_t max_frame_bytes,
                                                                   const TaskChannelSecurity& security,
                                                                   int64_t handshake_timeout_ms = -1);
  ~TaskChannelServer();
  TaskChannelServer(const TaskChannelServer&) = delete;
  TaskChannelServer& operator=(const TaskChannelServer&) = delete;

  int port() const { return port_; }

  struct Push {
    int64_t connection = 0;
    std::shared_ptr<const rpc::PushTaskRequest> request;
  };
  // The next push, in arrival order. Reads the sockets, busy-polling them for
  // `spin_us` before it sleeps; returns nullopt once Wake() was called (also when
  // called before). Execution thread only.
  std::optional<Push> Next(int64_t spin_us);
  // Whether a push is buffered or readable right now. Execution thread only.
  bool InputPending();
  // Queues `frames` for a connection and writes what the socket takes now, never
  // blocking: the rest goes out from Next()/InputPending() as the owner reads. False
  // when the owner is gone. Any thread; Sends to one connection keep their order.
  bool Send(int64_t connection, const std::string& frames);
  // Waits up to `timeout_ms` for queued replies to go out (before the worker exits).
  void FlushAll(int64_t timeout_ms);
  // Makes Next() return. Any thread.
  void Wake();
  // Connections open now (tests).
  size_t NumConnections() const;
  // Tests: count loopback peers per host like remote ones (127.0.0.2 and 127.0.0.3
  // are then two hosts). REQUIRES: before the first Next()/InputPending().
  void LimitLoopbackPeersForTesting() { limit_loopback_ = true; }

 private:
  struct Connection;
  TaskChannelServer(int listen_fd, int wake_fd, int port, int64_t max_frame_bytes, TaskChannelSecurity security,
                    int64_t handshake_timeout_ms, const rpc::NetworkLimits& limits);
  // Accepts and reads whatever is ready (poll timeout in ms: 0 = do not wait).
  void PollSockets(int timeout_ms);
  void Accept();
  // Registers an accepted connection, or returns null when its host (or everyone)
  // has too many in their handshake.
  std::shared_ptr<Connection> Admit(int fd);
  void ReadConnection(const std::shared_ptr<Connection>& c);
  // The owner's proof; false (after closing the connection) when it is wrong.
  bool CheckProof(const std::shared_ptr<Connection>& c, FrameKind kind, std::string_view body);
  // Queues `frames` (sealed, once the handshake is done) and writes what the socket
  // takes; `then_seal_with` becomes the connection's sealer after these frames.
  bool Queue(Connection& c, std::string_view frames, std::unique_ptr<FrameSealer> then_seal_with = nullptr);
  // Ms until the earliest handshake deadline (-1: none).
  int MsToNextHandshakeDeadline() const;
  // Closes connections whose handshake deadline passed.
  void ExpireHandshakes();
  void Close(int64_t connection, const absl::Status& why);

  const int listen_fd_;
  const int wake_fd_;
  const int port_;
  const int64_t max_frame_bytes_;
  const TaskChannelSecurity security_;
  const int64_t handshake_timeout_ms_;
  const int64_t accept_pause_ms_;
  const size_t max_pending_handshakes_;
  const size_t max_pending_handshakes_per_host_;
  LogRateLimiter refusals_;
  bool limit_loopback_ = false;
  std::atomic<bool> woken_{false};
  // Accepting resumes at this time after running out of descriptors (EMFILE).
  int64_t accept_paused_until_us_ = 0;
  std::deque<Push> ready_;
  int64_t next_connection_ = 1;
  mutable absl::Mutex mu_;  // Send runs on other threads
  absl::flat_hash_map<int64_t, std::shared_ptr<Connection>> connections_ ABSL_GUARDED_BY(mu_);
};

}  // namespace manta::core
