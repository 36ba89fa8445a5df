#include "src/task_channel/task_channel.h"

#include "src/task_channel/task_channel_internal.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <glog/logging.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace manta::core {
namespace asio = boost::asio;

using task_channel_internal::Errno;
using task_channel_internal::kHandshakeFrameBytes;
using task_channel_internal::kHeaderBytes;
using task_channel_internal::kMaxBufferedBeforeHandshake;
using task_channel_internal::LoadLe32;
using task_channel_internal::ParseAddress;
using task_channel_internal::SendResult;
using task_channel_internal::SendSome;
using task_channel_internal::TuneSocket;

namespace {
constexpr size_t kReadChunkBytes = 256 * 1024;
}  // namespace

std::string TaskChannelKey(const rpc::Address& worker) {
  std::string worker_id = worker.worker_id();
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : worker_id) {
    hex.push_back(kHex[c >> 4]);
    hex.push_back(kHex[c & 15]);
  }
  return worker.ip_address() + ":" + std::to_string(worker.task_port()) + "@" + hex;
}

std::string TaskChannelAddress(const std::string& key) { return key.substr(0, key.find('@')); }

void AppendFrame(FrameKind kind, const google::protobuf::MessageLite& message, std::string* out) {
  size_t body = message.ByteSizeLong();
  uint32_t length = static_cast<uint32_t>(body + 1);
  size_t offset = out->size();
  out->resize(offset + kHeaderBytes + body);
  auto* p = reinterpret_cast<unsigned char*>(out->data() + offset);
  p[0] = length & 0xff;
  p[1] = (length >> 8) & 0xff;
  p[2] = (length >> 16) & 0xff;
  p[3] = (length >> 24) & 0xff;
  p[4] = static_cast<unsigned char>(kind);
  message.SerializeWithCachedSizesToArray(p + kHeaderBytes);
}

void AppendRawFrame(FrameKind kind, std::string_view body, std::string* out) {
  uint32_t length = static_cast<uint32_t>(body.size() + 1);
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  out->push_back(static_cast<char>(kind));
  out->append(body);
}

absl::Status FrameReader::CheckHeader() {
  if (!error_.ok()) return error_;
  if (buffer_.size() - start_ < 4) return absl::OkStatus();
  uint32_t length = LoadLe32(buffer_.data() + start_);
  if (length == 0 || static_cast<int64_t>(length) > max_frame_bytes_ + 1) {
    error_ = absl::DataLossError("task channel frame of " + std::to_string(length) + " bytes (the limit is " +
                                 std::to_string(max_frame_bytes_) + ")");
  }
  return error_;
}

absl::Status FrameReader::ReadAvailable(int fd, bool* got_bytes) {
  *got_bytes = false;
  if (!error_.ok()) return error_;
  if (start_ > 0 && (start_ == buffer_.size() || start_ >= (1u << 20))) {
    buffer_.erase(0, start_);
    start_ = 0;
  }
  // Until EAGAIN: the loop waits for readability edge-triggered, so bytes left
  // behind would wait for the next arrival.
  char chunk[16 * 1024];
  while (true) {
    // A malformed header stops the reading at once (no garbage is buffered).
    if (absl::Status s = CheckHeader(); !s.ok()) return s;
    // Large frames: read straight into the buffer instead of through `chunk`.
    size_t have = buffer_.size() - start_;
    size_t want = sizeof(chunk);
    bool direct = false;
    if (have >= 4) {
      size_t frame = 4 + static_cast<size_t>(LoadLe32(buffer_.data() + start_));
      if (frame > have + sizeof(chunk)) {
        want = std::min(frame - have, kReadChunkBytes);
        direct = true;
      }
    }
    ssize_t n;
    if (direct) {
      size_t old = buffer_.size();
      buffer_.resize(old + want);
      n = recv(fd, buffer_.data() + old, want, MSG_DONTWAIT);
      buffer_.resize(old + (n > 0 ? static_cast<size_t>(n) : 0));
    } else {
      n = recv(fd, chunk, want, MSG_DONTWAIT);
      if (n > 0) buffer_.append(chunk, static_cast<size_t>(n));
    }
    if (n > 0) {
      *got_bytes = true;
      // Before the handshake a peer has a frame or two of 128 bytes to send: one
      // that streams more is cut off at 1 MiB, instead of being buffered for as long
      // as it keeps the socket readable.
      if (max_frame_bytes_ <= kHandshakeFrameBytes && buffer_.size() - start_ > kMaxBufferedBeforeHandshake) {
        error_ = absl::DataLossError("task channel peer sent more than a handshake before the handshake");
        return error_;
      }
      continue;
    }
    if (n == 0) return absl::UnavailableError("connection closed by the peer");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    return absl::UnavailableError(Errno("reading the task channel"));
  }
  return CheckHeader();
}

bool FrameReader::Next(FrameKind* kind, std::string_view* body) {
  if (!CheckHeader().ok()) return false;
  size_t have = buffer_.size() - start_;
  if (have < kHeaderBytes) return false;
  uint32_t length = LoadLe32(buffer_.data() + start_);
  if (have < 4 + static_cast<size_t>(length)) return false;
  char* frame = buffer_.data() + start_;
  start_ += 4 + length;
  *kind = static_cast<FrameKind>(static_cast<unsigned char>(frame[4]));
  if (opener_ == nullptr) {
    *body = std::string_view(frame + kHeaderBytes, length - 1);
    return true;
  }
  if (!opener_->Open(frame, 4 + static_cast<size_t>(length), body)) {
    error_ = absl::DataLossError(
        "a task channel frame failed authentication (altered, replayed, reordered or injected in transit)");
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Owner side

namespace {

// States: not connected (fd_ < 0) -> connecting (fd_ >= 0, !connected_; pushes are
// buffered) -> connected (the loop watches for the worker's frames) -> authenticated
// (the handshake is done: pushes are written) -> closed (status_ not OK; the pushes
// in flight are failed by the reader at end of stream, or at once when there is no
// socket).
class TcpTaskChannel final : public TaskChannelInterface, public std::enable_shared_from_this<TcpTaskChannel> {
 public:
  TcpTaskChannel(EventLoop& loop, std::string address, int64_t max_frame_bytes, TaskChannelSecurity security)
      : loop_(loop), io_(*static_cast<asio::io_context*>(loop.native_handle())), address_(std::move(address)),
        max_frame_bytes_(max_frame_bytes), security_(std::move(security)), reader_(kHandshakeFrameBytes) {}

  ~TcpTaskChannel() override {
    if (descriptor_) {
      descriptor_.reset();  // closes epfd_
    } else if (epfd_ >= 0) {
      close(epfd_);
    }
    if (fd_ >= 0) close(fd_);
  }

  const std::string& address() const override { return address_; }

  void PushSerialized(std::string request, PushCallback callback) override {
    Enqueue(std::move(request), std::move(callback), /*write=*/true);
  }

  void QueuePush(std::string request, PushCallback callback) override {
    Enqueue(std::move(request), std::move(callback), /*write=*/false);
  }

  void Flush() override {
    absl::MutexLock lock(&mu_);
    WriteNowLocked();
  }

  void Enqueue(std::string request, PushCallback callback, bool write) {
    absl::Status failed;
    {
      absl::MutexLock lock(&mu_);
      if (status_.ok() && fd_ < 0) status_ = StartConnect();
      // The push_id field takes at most 11 bytes more, the frame's kind one.
      if (status_.ok() && static_cast<int64_t>(request.size()) + 12 > max_frame_bytes_) {
        failed = absl::InvalidArgumentError("a push of " + std::to_string(request.size()) +
                                            " bytes is over the task channel's frame limit of " +
                                            std::to_string(max_frame_bytes_) + " bytes");
      } else if (status_.ok()) {
        uint64_t push_id = next_push_id_++;
        AppendVarint(uint64_t{3} << 3, &request);  // PushTaskRequest.push_id, a varint
        AppendVarint(push_id, &request);
        pushes_.emplace(push_id, std::make_shared<PushCallback>(std::move(callback)));
        if (sealer_ != nullptr) {
          sealer_->Append(static_cast<uint8_t>(FrameKind::kPush), request, &out_);
        } else {
          AppendRawFrame(FrameKind::kPush, request, &out_);
        }
        if (write) WriteNowLocked();
        return;
      } else {
        failed = status_;
      }
    }
    loop_.Post("TaskChannel.PushFailed", [callback = std::move(callback), failed] { callback(failed, {}); });
  }

  bool Poll() override {
    // Only one thread reads at a time; a thread that finds the channel busy leaves
    // a request, which the reader honours before it lets go (no bytes are stranded:
    // the loop's wait is edge-triggered).
    poll_requested_.store(true, std::memory_order_release);
    bool any = false;
    while (true) {
      if (!read_mu_.TryLock()) return any;
      while (poll_requested_.exchange(false, std::memory_order_acq_rel)) any |= ReadAndDispatch();
      read_mu_.Unlock();
      if (!poll_requested_.load(std::memory_order_acquire)) return any;
    }
  }

  int64_t InFlight() const override {
    absl::MutexLock lock(&mu_);
    // A push whose last callback is still running counts: shutdown waits for what
    // that callback posts to the loop.
    return static_cast<int64_t>(pushes_.size()) + running_callbacks_.load();
  }

  bool IsClosed() const override {
    absl::MutexLock lock(&mu_);
    return !status_.ok();
  }

  void Close(const absl::Status& why) override {
    std::vector<std::shared_ptr<PushCallback>> orphans;
    absl::Status reason;
    {
      absl::MutexLock lock(&mu_);
      if (status_.ok()) status_ = why;
      reason = status_;
      if (fd_ >= 0) {
        // The reader (the loop, or a polling thread) sees the end of the stream and
        // fails what is in flight, in order with the replies before it.
        shutdown(fd_, SHUT_RDWR);
      } else {
        for (auto& [id, cb] : pushes_) orphans.push_back(std::move(cb));
        pushes_.clear();
        running_callbacks_.fetch_add(static_cast<int64_t>(orphans.size()));
      }
    }
    for (auto& cb : orphans) {
      loop_.Post("TaskChannel.Closed", [self = shared_from_this(), cb, reason] {
        (*cb)(reason, {});
        self->running_callbacks_.fetch_sub(1);
      });
    }
  }

  void CancelAll() override {
    Close(absl::CancelledError("task channel to " + address_ + ": the owner is shutting down"));
  }

  void BeginSpin() override {
    if (spinners_.fetch_add(1, std::memory_order_acq_rel) == 0) Rearm();
  }
  void EndSpin() override {
    if (spinners_.fetch_sub(1, std::memory_order_acq_rel) == 1) Rearm();
  }

 private:
  // Starts a non-blocking connect; the loop finishes it. REQUIRES: mu_ held.
  absl::Status StartConnect() {
    sockaddr_in addr;
    absl::Status parsed = ParseAddress(address_, &addr);
    if (!parsed.ok()) return parsed;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return absl::UnavailableError(Errno("socket"));
    TuneSocket(fd);
    int r = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    if (r < 0 && errno != EINPROGRESS) {
      absl::Status s = absl::UnavailableError(Errno("connecting the task channel to the worker at " + address_));
      close(fd);
      return s;
    }
    // The socket is watched through an epoll set of its own (the loop watches that
    // set), so that its readiness can be switched off while a thread spins on it
    // (BeginSpin) without a trip through the loop.
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLONESHOT;  // nothing until Watch arms it
    if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
      absl::Status s = absl::UnavailableError(Errno("watching the task channel to " + address_));
      if (epfd >= 0) close(epfd);
      close(fd);
      return s;
    }
    fd_ = fd;
    epfd_ = epfd;
    connected_ = r == 0;
    connected_flag_.store(connected_, std::memory_order_release);
    loop_.Post("TaskChannel.Watch", [self = shared_from_this()] { self->Watch(); });
    return absl::OkStatus();
  }

  // Arms the socket in its epoll set (one-shot) for what is wanted now: its connect
  // finishing; else replies (unless a thread spins on the channel) and room to write
  // (while bytes wait). Any thread.
  //
  // What is wanted is read under arm_mu_: two threads re-arming at once (the loop
  // after an event, a spinning thread's EndSpin) then apply their views in the order
  // they read them, so the last arming sees the last state. (Read before the lock,
  // an older view could land last: a reply left unread with nobody spinning.)
  void Rearm() {
    absl::MutexLock lock(&arm_mu_);
    uint32_t events = 0;
    if (!connected_flag_.load(std::memory_order_acquire)) {
      events = EPOLLOUT;
    } else {
      if (spinners_.load(std::memory_order_acquire) == 0) events |= EPOLLIN | EPOLLRDHUP;
      if (want_write_.load(std::memory_order_acquire)) events |= EPOLLOUT;
    }
    if (epfd_ < 0 || closed_.load(std::memory_order_acquire)) return;
    epoll_event ev{};
    ev.events = events | EPOLLONESHOT;
    epoll_ctl(epfd_, EPOLL_CTL_MOD, fd_, &ev);
  }

  // Writes what the socket takes. Returns true when bytes remain (EAGAIN).
  // REQUIRES: mu_ held, authenticated_.
  // Writes what the socket takes now, unless the loop waits to write the rest.
  void WriteNowLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (status_.ok() && fd_ >= 0 && authenticated_ && !want_write_.load(std::memory_order_relaxed) && WriteSome()) {
      want_write_.store(true, std::memory_order_release);
      Rearm();
    }
  }

  bool WriteSome() {
    switch (SendSome(fd_, &out_, &out_offset_)) {
      case SendResult::kAllSent:
        return false;
      case SendResult::kWouldBlock:
        return true;
      case SendResult::kFailed:
        // The reader sees the shut-down socket and fails the pushes in flight.
        if (status_.ok()) status_ = absl::UnavailableError(Errno("writing to the worker at " + address_));
        shutdown(fd_, SHUT_RDWR);
        out_.clear();
        out_offset_ = 0;
        return false;
    }
    return false;
  }

  // Loop thread: the socket may take more bytes.
  void OnWritable() {
    absl::MutexLock lock(&mu_);
    if (!authenticated_ || !WriteSome()) want_write_.store(false, std::memory_order_release);
  }

  // Loop thread: takes over the socket's epoll set; finishes the connect if needed.
  void Watch() {
    descriptor_ = std::make_unique<asio::posix::stream_descriptor>(io_, epfd_);
    WaitAndRearm();
  }

  // Loop thread: waits for the socket's epoll set to turn readable, and arms the
  // socket in it. The wait comes first: an event the arming brings then ends it.
  void WaitAndRearm() {
    if (!wait_queued_) {
      wait_queued_ = true;
      descriptor_->async_wait(asio::posix::stream_descriptor::wait_read,
                              [self = shared_from_this()](const boost::system::error_code& ec) {
                                self->wait_queued_ = false;
                                if (!ec) self->OnEvents();
                              });
    }
    Rearm();
  }

  // Loop thread: the socket's epoll set is readable.
  void OnEvents() {
    while (true) {
      epoll_event events[4];
      int n = epoll_wait(epfd_, events, 4, 0);
      uint32_t got = 0;
      for (int i = 0; i < n; ++i) got |= events[i].events;
      if (got != 0) {
        if (!connected_flag_.load(std::memory_order_acquire)) {
          OnConnected();
        } else {
          if (got & EPOLLOUT) OnWritable();
          if (got & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) Poll();
        }
      }
      if (closed_.load(std::memory_order_acquire)) return;
      WaitAndRearm();
      // An event a spinning thread's Rearm made while no wait was queued brought no
      // new edge to the loop: look for one before leaving.
      pollfd p{epfd_, POLLIN, 0};
      if (poll(&p, 1, 0) <= 0) return;
    }
  }

  // Loop thread: the connect finished, one way or the other.
  void OnConnected() {
    absl::Status failure;
    {
      absl::MutexLock lock(&mu_);
      int error = 0;
      socklen_t len = sizeof(error);
      if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &len) != 0) error = errno;
      if (!status_.ok()) {
        failure = status_;
      } else if (error != 0) {
        status_ = absl::UnavailableError("connecting the task channel to the worker at " + address_ + ": " +
                                         std::strerror(error));
        failure = status_;
      } else {
        connected_ = true;  // pushes wait for the handshake, which the worker starts
        connected_flag_.store(true, std::memory_order_release);
      }
    }
    if (!failure.ok()) {
      absl::MutexLock reading(&read_mu_);
      FailAll(failure);
    }
  }

  // One frame of the handshake from the worker: its challenge, then its proof.
  // REQUIRES: read_mu_ held.
  absl::Status Handshake(int fd, FrameKind kind, std::string_view body) {
    if (kind == FrameKind::kChallenge && handshake_ == nullptr) {
      handshake_ = std::make_unique<OwnerHandshake>(security_);
      absl::StatusOr<std::string> proof = handshake_->Prove(body);
      if (!proof.ok()) return proof.status();
      std::string frame;
      AppendRawFrame(FrameKind::kProof, *proof, &frame);
      // Nothing was written on this socket yet, so it takes these few bytes at once.
      if (send(fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(frame.size())) {
        return absl::UnavailableError(Errno("sending the handshake"));
      }
      return absl::OkStatus();
    }
    if (kind != FrameKind::kServerProof || handshake_ == nullptr) {
      return absl::PermissionDeniedError("the handshake failed: the peer does not hold this cluster's token");
    }
    ChannelKeys keys;
    if (absl::Status checked = handshake_->Check(body, &keys); !checked.ok()) return checked;
    handshake_.reset();
    handshake_done_ = true;
    const bool sealed = keys.protection != ChannelProtection::kNone;
    reader_.set_max_frame_bytes(max_frame_bytes_ + (sealed ? static_cast<int64_t>(kFrameTagBytes) : 0));
    if (sealed) reader_.set_opener(std::make_unique<FrameOpener>(keys.protection, keys.worker_to_owner));
    absl::MutexLock lock(&mu_);
    if (sealed) {
      sealer_ = std::make_unique<FrameSealer>(keys.protection, keys.owner_to_worker);
      // The pushes made before the handshake wait in out_ as plain frames.
      std::string plain;
      plain.swap(out_);
      sealer_->SealFrames(plain, &out_);
    }
    authenticated_ = true;
    if (!want_write_.load(std::memory_order_relaxed) && WriteSome()) {
      want_write_.store(true, std::memory_order_release);
      Rearm();
    }
    return absl::OkStatus();
  }

  // REQUIRES: read_mu_ held.
  bool ReadAndDispatch() {
    int fd;
    {
      absl::MutexLock lock(&mu_);
      if (!connected_) return false;  // nothing to read before the connect finished
      fd = fd_;
    }
    if (closed_.load(std::memory_order_acquire)) return false;
    bool got = false;
    absl::Status read_status = reader_.ReadAvailable(fd, &got);
    FrameKind kind;
    std::string_view body;
    while (reader_.Next(&kind, &body)) {
      if (!handshake_done_) {
        read_status = Handshake(fd, kind, body);
        if (!read_status.ok()) break;
        continue;
      }
      rpc::PushTaskReply reply;
      if (kind != FrameKind::kReply || !reply.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
        read_status = absl::DataLossError("malformed reply frame from the worker at " + address_);
        break;
      }
      std::shared_ptr<PushCallback> callback;
      {
        absl::MutexLock lock(&mu_);
        auto it = pushes_.find(reply.push_id());
        if (it == pushes_.end()) continue;  // cancelled meanwhile
        callback = it->second;
        if (reply.done()) {
          pushes_.erase(it);
          running_callbacks_.fetch_add(1);
        }
      }
      absl::Status status = reply.error().empty()
                                ? absl::OkStatus()
                                : absl::UnavailableError("the worker at " + address_ + " refused the push: " +
                                                         reply.error());
      const bool last = reply.done();
      (*callback)(status, std::move(reply));
      if (last) running_callbacks_.fetch_sub(1);
    }
    if (read_status.ok() && !reader_.error().ok()) read_status = reader_.error();
    if (!read_status.ok()) FailAll(read_status);
    return got;
  }

  // The connection is gone: every push in flight fails. REQUIRES: read_mu_ held.
  void FailAll(const absl::Status& read_status) {
    std::vector<std::shared_ptr<PushCallback>> callbacks;
    absl::Status why;
    {
      absl::MutexLock lock(&mu_);
      if (status_.ok()) {
        // A worker refused for its protection stays a FailedPrecondition: retrying
        // elsewhere cannot help (TaskChannelInterface::Push).
        status_ = absl::Status(absl::IsFailedPrecondition(read_status) ? absl::StatusCode::kFailedPrecondition
                                                                        : absl::StatusCode::kUnavailable,
                               "task channel to the worker at " + address_ + ": " + std::string(read_status.message()));
      }
      why = status_;
      for (auto& [id, cb] : pushes_) callbacks.push_back(std::move(cb));
      pushes_.clear();
      running_callbacks_.fetch_add(static_cast<int64_t>(callbacks.size()));
      if (fd_ >= 0) shutdown(fd_, SHUT_RDWR);
      closed_.store(true, std::memory_order_release);
    }
    if (!callbacks.empty()) VLOG(1) << why << ": failing " << callbacks.size() << " push(es)";
    for (auto& cb : callbacks) {
      (*cb)(why, {});
      running_callbacks_.fetch_sub(1);
    }
  }

  EventLoop& loop_;
  asio::io_context& io_;
  const std::string address_;
  const int64_t max_frame_bytes_;
  const TaskChannelSecurity security_;

  mutable absl::Mutex mu_;
  int fd_ = -1;
  bool connected_ = false;
  bool authenticated_ = false;  // pushes are written only once the handshake is done
  absl::Status status_;  // not OK once the channel failed or was closed
  uint64_t next_push_id_ = 1;
  absl::flat_hash_map<uint64_t, std::shared_ptr<PushCallback>> pushes_;
  // Callbacks of pushes taken out of pushes_ that have not returned yet.
  std::atomic<int64_t> running_callbacks_{0};
  std::string out_;  // bytes the socket did not take yet (plain frames until authenticated_)
  size_t out_offset_ = 0;
  std::unique_ptr<FrameSealer> sealer_;  // once authenticated_, unless the protection is kNone
  int epfd_ = -1;  // the socket's own epoll set, which the loop watches (StartConnect)
  std::atomic<bool> connected_flag_{false};  // connected_, for Rearm without mu_
  std::atomic<bool> want_write_{false};      // bytes wait for room in the socket
  std::atomic<int> spinners_{0};             // threads between BeginSpin and EndSpin
  absl::Mutex arm_mu_;                       // one epoll_ctl at a time, after the closed_ check

  absl::Mutex read_mu_;  // one reader at a time
  FrameReader reader_ ABSL_GUARDED_BY(read_mu_);
  std::unique_ptr<OwnerHandshake> handshake_ ABSL_GUARDED_BY(read_mu_);
  bool handshake_done_ ABSL_GUARDED_BY(read_mu_) = false;
  std::atomic<bool> poll_requested_{false};
  std::atomic<bool> closed_{false};

  std::unique_ptr<asio::posix::stream_descriptor> descriptor_;  // on epfd_; loop thread
  bool wait_queued_ = false;                                    // loop thread
};

}  // namespace

std::shared_ptr<TaskChannelInterface> MakeTcpTaskChannel(EventLoop& loop, const std::string& address,
                                                         int64_t max_frame_bytes,
                                                         const TaskChannelSecurity& security) {
  return std::make_shared<TcpTaskChannel>(loop, address, max_frame_bytes, security);
}

}  // namespace manta::core
