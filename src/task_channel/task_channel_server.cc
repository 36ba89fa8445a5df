// TaskChannelServer: the worker's end of the task channel (task_channel.h).
#include <fcntl.h>
#include <glog/logging.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "src/common/logging.h"
#include "src/task_channel/task_channel.h"
#include "src/common/metrics/metrics_proto.h"
#include "src/task_channel/task_channel_internal.h"

namespace manta::core {

using task_channel_internal::Errno;
using task_channel_internal::kHandshakeFrameBytes;
using task_channel_internal::ParseAddress;
using task_channel_internal::PeerName;
using task_channel_internal::SendResult;
using task_channel_internal::SendSome;
using task_channel_internal::TuneSocket;

namespace {

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

struct TaskChannelServer::Connection {
  Connection(int64_t id_in, int fd_in, std::string host_in, int64_t handshake_deadline_us_in)
      : id(id_in),
        fd(fd_in),
        host(std::move(host_in)),
        reader(kHandshakeFrameBytes),
        handshake_deadline_us(handshake_deadline_us_in) {}
  ~Connection() { close(fd); }

  // Sends what the socket takes now. False when the owner is gone.
  // REQUIRES: write_mu held.
  bool WriteSome() {
    if (SendSome(fd, &out, &out_offset) == SendResult::kFailed) {
      VLOG(1) << "task channel " << id << ": " << Errno("send");
      broken = true;
      shutdown(fd, SHUT_RDWR);
      out.clear();
      out_offset = 0;
      has_output.store(false, std::memory_order_release);
      return false;
    }
    has_output.store(!out.empty(), std::memory_order_release);
    return true;
  }

  const int64_t id;
  const int fd;
  const std::string host;  // the peer's IP address; "" for loopback peers when they are not limited
  FrameReader reader;  // execution thread
  // The handshake (execution thread), whether the owner proved it holds the token,
  // and by when it must.
  std::unique_ptr<WorkerHandshake> handshake;
  bool authenticated = false;
  const int64_t handshake_deadline_us;
  absl::Mutex write_mu;
  bool broken ABSL_GUARDED_BY(write_mu) = false;
  // Once authenticated, unless the protection is kNone.
  std::unique_ptr<FrameSealer> sealer ABSL_GUARDED_BY(write_mu);
  std::string out ABSL_GUARDED_BY(write_mu);  // replies the socket did not take yet
  size_t out_offset ABSL_GUARDED_BY(write_mu) = 0;
  std::atomic<bool> has_output{false};
};

absl::StatusOr<std::unique_ptr<TaskChannelServer>> TaskChannelServer::Listen(const std::string& ip,
                                                                             int64_t max_frame_bytes,
                                                                             const TaskChannelSecurity& security,
                                                                             int64_t handshake_timeout_ms) {
  if (absl::Status s = CheckTokenFormat(security.token); !s.ok()) {
    return absl::InvalidArgumentError("the task channel needs the cluster token: " + std::string(s.message()));
  }
  sockaddr_in addr;
  absl::Status parsed = ParseAddress(ip + ":1", &addr);
  if (!parsed.ok()) return absl::InvalidArgumentError("cannot listen for tasks on " + ip + ": not an IPv4 address");
  addr.sin_port = 0;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::UnavailableError(Errno("socket"));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0 || listen(fd, 128) < 0) {
    absl::Status s = absl::UnavailableError(Errno("listening for tasks on " + ip));
    close(fd);
    return s;
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake < 0) {
    close(fd);
    return absl::UnavailableError(Errno("eventfd"));
  }
  return std::unique_ptr<TaskChannelServer>(
      new TaskChannelServer(fd, wake, ntohs(addr.sin_port), max_frame_bytes, security, handshake_timeout_ms,
                            rpc::CurrentNetworkLimits()));
}

TaskChannelServer::TaskChannelServer(int listen_fd, int wake_fd, int port, int64_t max_frame_bytes,
                                     TaskChannelSecurity security, int64_t handshake_timeout_ms,
                                     const rpc::NetworkLimits& limits)
    : listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      port_(port),
      max_frame_bytes_(max_frame_bytes),
      security_(std::move(security)),
      handshake_timeout_ms_(handshake_timeout_ms >= 0 ? handshake_timeout_ms : limits.unproven_timeout_ms),
      accept_pause_ms_(limits.accept_pause_ms),
      max_pending_handshakes_(static_cast<size_t>(limits.max_unproven)),
      max_pending_handshakes_per_host_(static_cast<size_t>(limits.max_unproven_per_host)) {}

TaskChannelServer::~TaskChannelServer() {
  close(listen_fd_);
  close(wake_fd_);
}

void TaskChannelServer::Wake() {
  woken_.store(true, std::memory_order_release);
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
}

size_t TaskChannelServer::NumConnections() const {
  absl::MutexLock lock(&mu_);
  return connections_.size();
}

std::optional<TaskChannelServer::Push> TaskChannelServer::Next(int64_t spin_us) {
  const int64_t spin_until = spin_us > 0 ? NowUs() + spin_us : 0;
  while (true) {
    if (!ready_.empty()) {
      Push push = std::move(ready_.front());
      ready_.pop_front();
      return push;
    }
    if (woken_.exchange(false, std::memory_order_acq_rel)) return std::nullopt;
    const bool spinning = spin_until != 0 && NowUs() < spin_until;
    PollSockets(spinning ? 0 : -1);
    // Spin politely: a thread runnable on this CPU (perhaps the owner) goes first.
    if (spinning && ready_.empty()) sched_yield();
  }
}

bool TaskChannelServer::InputPending() {
  if (!ready_.empty()) return true;
  PollSockets(0);
  return !ready_.empty();
}

void TaskChannelServer::PollSockets(int timeout_ms) {
  std::vector<std::shared_ptr<Connection>> connections;
  {
    absl::MutexLock lock(&mu_);
    connections.reserve(connections_.size());
    for (const auto& [id, c] : connections_) connections.push_back(c);
  }
  std::vector<pollfd> fds(2 + connections.size());
  // While accepting is paused (out of descriptors) the listening socket is not
  // watched: it would stay readable and turn the wait into a busy loop.
  const int64_t now_us = NowUs();
  const bool accept_paused = now_us < accept_paused_until_us_;
  fds[0] = {accept_paused ? -1 : listen_fd_, POLLIN, 0};
  if (accept_paused) {
    const int resume_ms = static_cast<int>((accept_paused_until_us_ - now_us + 999) / 1000);
    timeout_ms = timeout_ms < 0 ? resume_ms : std::min(timeout_ms, resume_ms);
  }
  fds[1] = {wake_fd_, POLLIN, 0};
  for (size_t i = 0; i < connections.size(); ++i) {
    short events = POLLIN;
    // Replies the owner has not taken yet go out as soon as it reads.
    if (connections[i]->has_output.load(std::memory_order_acquire)) events |= POLLOUT;
    fds[2 + i] = {connections[i]->fd, events, 0};
  }
  if (int handshake_ms = MsToNextHandshakeDeadline(); handshake_ms >= 0) {
    timeout_ms = timeout_ms < 0 ? handshake_ms : std::min(timeout_ms, handshake_ms);
  }
  int n = poll(fds.data(), fds.size(), timeout_ms);
  // After the reads: an owner whose proof waited in the socket while a long task ran
  // is not timed out.
  struct ExpireAfterReads {
    TaskChannelServer* server;
    ~ExpireAfterReads() { server->ExpireHandshakes(); }
  } expire{this};
  if (n <= 0) return;
  if (fds[1].revents & POLLIN) {
    uint64_t count;  // drained here, so that a Wake() cannot leave it readable
    [[maybe_unused]] ssize_t r = read(wake_fd_, &count, sizeof(count));
  }
  if (fds[0].revents & POLLIN) Accept();
  for (size_t i = 0; i < connections.size(); ++i) {
    const short revents = fds[2 + i].revents;
    if (revents & POLLOUT) {
      absl::MutexLock lock(&connections[i]->write_mu);
      if (!connections[i]->broken) connections[i]->WriteSome();
    }
    if (revents & (POLLIN | POLLHUP | POLLERR)) ReadConnection(connections[i]);
  }
}

void TaskChannelServer::Accept() {
  while (true) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors or memory: stop accepting for a while and try again,
        // serving the connections already open meanwhile.
        LOG_EVERY_N(WARNING, 100) << Errno("accepting a task channel") << "; pausing accepts for " << accept_pause_ms_
                                  << " ms";
        accept_paused_until_us_ = NowUs() + accept_pause_ms_ * 1000;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        LOG_EVERY_N(WARNING, 100) << Errno("accepting a task channel");
      }
      return;
    }
    TuneSocket(fd);
    std::shared_ptr<Connection> c = Admit(fd);
    if (c == nullptr) {
      close(fd);
      continue;
    }
    // The challenge goes first: nothing is read from this owner before it answers.
    c->handshake = std::make_unique<WorkerHandshake>(security_);
    std::string frame;
    AppendRawFrame(FrameKind::kChallenge, c->handshake->challenge(), &frame);
    Queue(*c, frame);
  }
}

std::shared_ptr<TaskChannelServer::Connection> TaskChannelServer::Admit(int fd) {
  std::string host = PeerHostForLimit(fd, limit_loopback_);
  absl::MutexLock lock(&mu_);
  size_t pending = 0;
  size_t from_host = 0;
  for (const auto& [id, other] : connections_) {
    if (other->authenticated) continue;
    ++pending;
    if (!host.empty() && other->host == host) ++from_host;
  }
  if (pending >= max_pending_handshakes_ || from_host >= max_pending_handshakes_per_host_) {
    int64_t others = 0;
    if (refusals_.Allow(&others)) {
      LOG(WARNING) << "refused task channel from " << PeerName(fd) << ": "
                   << (from_host >= max_pending_handshakes_per_host_ ? std::to_string(from_host) + " from that host"
                                                                 : std::to_string(pending))
                   << " connections are in their handshake already" << LogRateLimiter::LeftOut(others);
    }
    return nullptr;
  }
  int64_t id = next_connection_++;
  auto c = std::make_shared<Connection>(id, fd, std::move(host), NowUs() + handshake_timeout_ms_ * 1000);
  connections_.emplace(id, c);
  return c;
}

int TaskChannelServer::MsToNextHandshakeDeadline() const {
  int64_t next_us = -1;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, c] : connections_) {
      if (!c->authenticated && (next_us < 0 || c->handshake_deadline_us < next_us)) next_us = c->handshake_deadline_us;
    }
  }
  if (next_us < 0) return -1;
  return static_cast<int>(std::max<int64_t>(0, (next_us - NowUs() + 999) / 1000));
}

void TaskChannelServer::ExpireHandshakes() {
  std::vector<int64_t> expired;
  const int64_t now_us = NowUs();
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, c] : connections_) {
      if (!c->authenticated && c->handshake_deadline_us <= now_us) expired.push_back(id);
    }
  }
  for (int64_t id : expired) {
    Close(id, absl::DeadlineExceededError("no handshake within " + std::to_string(handshake_timeout_ms_) + " ms"));
  }
}

bool TaskChannelServer::CheckProof(const std::shared_ptr<Connection>& c, FrameKind kind, std::string_view body) {
  if (kind != FrameKind::kProof) {
    Close(c->id, absl::PermissionDeniedError("a frame before the handshake"));
    return false;
  }
  ChannelKeys keys;
  absl::StatusOr<std::string> answer = c->handshake->Answer(body, &keys);
  if (!answer.ok()) {
    Close(c->id, answer.status());
    return false;
  }
  c->handshake.reset();
  c->authenticated = true;
  const bool sealed = keys.protection != ChannelProtection::kNone;
  c->reader.set_max_frame_bytes(max_frame_bytes_ + (sealed ? static_cast<int64_t>(kFrameTagBytes) : 0));
  std::unique_ptr<FrameSealer> sealer;
  if (sealed) {
    c->reader.set_opener(std::make_unique<FrameOpener>(keys.protection, keys.owner_to_worker));
    sealer = std::make_unique<FrameSealer>(keys.protection, keys.worker_to_owner);
  }
  std::string frame;
  AppendRawFrame(FrameKind::kServerProof, *answer, &frame);
  return Queue(*c, frame, std::move(sealer));
}

void TaskChannelServer::ReadConnection(const std::shared_ptr<Connection>& c) {
  bool got = false;
  absl::Status status = c->reader.ReadAvailable(c->fd, &got);
  FrameKind kind;
  std::string_view body;
  while (c->reader.Next(&kind, &body)) {
    if (!c->authenticated) {
      if (!CheckProof(c, kind, body)) return;
      continue;
    }
    auto request = std::make_shared<rpc::PushTaskRequest>();
    if (kind != FrameKind::kPush || !request->ParseFromArray(body.data(), static_cast<int>(body.size()))) {
      status = absl::DataLossError("malformed push frame");
      break;
    }
    ready_.push_back(Push{c->id, std::move(request)});
  }
  if (status.ok() && !c->reader.error().ok()) status = c->reader.error();
  if (!status.ok()) Close(c->id, status);
}

void TaskChannelServer::Close(int64_t connection, const absl::Status& why) {
  std::shared_ptr<Connection> c;
  {
    absl::MutexLock lock(&mu_);
    auto it = connections_.find(connection);
    if (it == connections_.end()) return;
    c = std::move(it->second);
    connections_.erase(it);
  }
  if (absl::IsUnavailable(why)) {
    VLOG(1) << "task channel " << connection << " closed: " << why.message();
  } else if (!c->authenticated) {
    metrics::CountAuthFailure("task");
    // A stranger: logged at most once a second, however many there are.
    int64_t others = 0;
    if (refusals_.Allow(&others)) {
      LOG(WARNING) << "refused task channel " << connection << " from " << PeerName(c->fd) << ": " << why.message()
                   << LogRateLimiter::LeftOut(others);
    }
  } else {
    LOG(WARNING) << "dropping task channel " << connection << ": " << why.message();
  }
  absl::MutexLock lock(&c->write_mu);
  c->broken = true;
  shutdown(c->fd, SHUT_RDWR);
}

bool TaskChannelServer::Send(int64_t connection, const std::string& frames) {
  std::shared_ptr<Connection> c;
  {
    absl::MutexLock lock(&mu_);
    auto it = connections_.find(connection);
    if (it == connections_.end()) return false;
    c = it->second;
  }
  return Queue(*c, frames);
}

bool TaskChannelServer::Queue(Connection& c, std::string_view frames, std::unique_ptr<FrameSealer> then_seal_with) {
  absl::MutexLock lock(&c.write_mu);
  if (c.broken) return false;
  if (c.sealer != nullptr) {
    c.sealer->SealFrames(frames, &c.out);
  } else {
    c.out.append(frames);
  }
  if (then_seal_with != nullptr) c.sealer = std::move(then_seal_with);
  bool ok = c.WriteSome();
  // What the socket did not take goes when the owner reads (the execution thread
  // polls for it); wake it if it sleeps.
  if (ok && c.has_output.load(std::memory_order_acquire)) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
  }
  return ok;
}

void TaskChannelServer::FlushAll(int64_t timeout_ms) {
  const int64_t until = NowUs() + timeout_ms * 1000;
  std::vector<std::shared_ptr<Connection>> connections;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, c] : connections_) connections.push_back(c);
  }
  for (const auto& c : connections) {
    while (c->has_output.load(std::memory_order_acquire)) {
      int64_t left_ms = (until - NowUs()) / 1000;
      if (left_ms <= 0) return;
      pollfd p{c->fd, POLLOUT, 0};
      if (poll(&p, 1, static_cast<int>(left_ms)) <= 0) return;
      absl::MutexLock lock(&c->write_mu);
      if (c->broken || !c->WriteSome()) break;
    }
  }
}

}  // namespace manta::core
