#include "src/core_worker/task_channel.h"

#include "absl/strings/match.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <glog/logging.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
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

namespace {

constexpr size_t kHeaderBytes = 5;  // u32 length + u8 kind
constexpr size_t kReadChunkBytes = 256 * 1024;
constexpr int kConnectTimeoutMs = 5000;

uint32_t LoadLe32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return uint32_t{u[0]} | (uint32_t{u[1]} << 8) | (uint32_t{u[2]} << 16) | (uint32_t{u[3]} << 24);
}

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// No Nagle delay; and keepalive probes, so that a peer whose host vanished (no FIN
// or RST ever comes) is noticed within about 20 s instead of never.
void TuneSocket(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  int idle_s = 10, interval_s = 3, probes = 3;
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof(idle_s));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof(interval_s));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof(probes));
}

// Splits "ip:port" into a sockaddr. Only numeric IPv4 addresses (what nodes report).
absl::Status ParseAddress(const std::string& address, sockaddr_in* out) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) return absl::InvalidArgumentError("no port in task channel address " + address);
  std::string host = address.substr(0, colon);
  int port = std::atoi(address.c_str() + colon + 1);
  std::memset(out, 0, sizeof(*out));
  out->sin_family = AF_INET;
  out->sin_port = htons(static_cast<uint16_t>(port));
  if (port <= 0 || port > 65535 || inet_pton(AF_INET, host.c_str(), &out->sin_addr) != 1) {
    return absl::InvalidArgumentError("malformed task channel address " + address);
  }
  return absl::OkStatus();
}

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

absl::Status FrameReader::ReadAvailable(int fd, bool* got_bytes) {
  *got_bytes = false;
  if (start_ > 0 && (start_ == buffer_.size() || start_ >= (1u << 20))) {
    buffer_.erase(0, start_);
    start_ = 0;
  }
  // Until EAGAIN: the loop waits for readability edge-triggered, so bytes left
  // behind would wait for the next arrival.
  char chunk[16 * 1024];
  while (true) {
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
      continue;
    }
    if (n == 0) return absl::UnavailableError("connection closed by the peer");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    return absl::UnavailableError(Errno("reading the task channel"));
  }
  if (buffer_.size() - start_ >= 4) {
    uint32_t length = LoadLe32(buffer_.data() + start_);
    if (length == 0 || static_cast<int64_t>(length) > max_frame_bytes_ + 1) {
      return absl::DataLossError("task channel frame of " + std::to_string(length) +
                                 " bytes (the limit is " + std::to_string(max_frame_bytes_) + ")");
    }
  }
  return absl::OkStatus();
}

bool FrameReader::HasCompleteFrame() const {
  size_t have = buffer_.size() - start_;
  return have >= kHeaderBytes && have >= 4 + static_cast<size_t>(LoadLe32(buffer_.data() + start_));
}

bool FrameReader::Next(FrameKind* kind, std::string_view* body) {
  if (!HasCompleteFrame()) return false;
  uint32_t length = LoadLe32(buffer_.data() + start_);
  if (length == 0) return false;  // ReadAvailable reports it
  *kind = static_cast<FrameKind>(static_cast<unsigned char>(buffer_[start_ + 4]));
  *body = std::string_view(buffer_.data() + start_ + kHeaderBytes, length - 1);
  start_ += 4 + length;
  return true;
}

// ---------------------------------------------------------------------------
// Owner side

namespace {

class TcpTaskChannel final : public TaskChannelInterface, public std::enable_shared_from_this<TcpTaskChannel> {
 public:
  TcpTaskChannel(EventLoop& loop, std::string address, int64_t max_frame_bytes)
      : loop_(loop), io_(*static_cast<asio::io_context*>(loop.native_handle())), address_(std::move(address)),
        reader_(max_frame_bytes) {}

  ~TcpTaskChannel() override {
    if (descriptor_) {
      descriptor_.reset();  // closes fd_
    } else if (fd_ >= 0) {
      close(fd_);
    }
  }

  const std::string& address() const override { return address_; }

  void Push(rpc::PushTaskRequest request, PushCallback callback) override {
    absl::Status failed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (status_.ok() && fd_ < 0) status_ = Connect();
      if (status_.ok()) {
        uint64_t push_id = next_push_id_++;
        request.set_push_id(push_id);
        pushes_.emplace(push_id, std::make_shared<PushCallback>(std::move(callback)));
        AppendFrame(FrameKind::kPush, request, &out_);
        if (!write_armed_ && WriteSome()) {
          write_armed_ = true;
          loop_.Post("TaskChannel.WaitWritable", [self = shared_from_this()] { self->OnWritable(); });
        }
        return;
      }
      failed = status_;
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
      std::unique_lock<std::mutex> reading(read_mu_, std::try_to_lock);
      if (!reading.owns_lock()) return any;
      while (poll_requested_.exchange(false, std::memory_order_acq_rel)) any |= ReadAndDispatch();
      reading.unlock();
      if (!poll_requested_.load(std::memory_order_acquire)) return any;
    }
  }

  int64_t InFlight() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int64_t>(pushes_.size());
  }

  bool IsClosed() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return !status_.ok();
  }

  void CancelAll() override {
    std::vector<std::shared_ptr<PushCallback>> callbacks;
    absl::Status why = absl::CancelledError("task channel to " + address_ + ": the owner is shutting down");
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (status_.ok()) status_ = why;
      for (auto& [id, cb] : pushes_) callbacks.push_back(std::move(cb));
      pushes_.clear();
      if (fd_ >= 0) shutdown(fd_, SHUT_RDWR);
    }
    for (auto& cb : callbacks) {
      loop_.Post("TaskChannel.Cancelled", [cb, why] { (*cb)(why, {}); });
    }
  }

 private:
  // REQUIRES: mu_ held.
  absl::Status Connect() {
    sockaddr_in addr;
    absl::Status parsed = ParseAddress(address_, &addr);
    if (!parsed.ok()) return parsed;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return absl::UnavailableError(Errno("socket"));
    int r = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    if (r < 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      r = poll(&p, 1, kConnectTimeoutMs);
      int error = 0;
      socklen_t len = sizeof(error);
      if (r == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0) {
        r = 0;
      } else {
        errno = r == 0 ? ETIMEDOUT : (error != 0 ? error : errno);
        r = -1;
      }
    }
    if (r < 0) {
      absl::Status s = absl::UnavailableError("connecting the task channel to the worker at " + address_ + ": " +
                                              std::strerror(errno));
      close(fd);
      return s;
    }
    TuneSocket(fd);
    fd_ = fd;
    loop_.Post("TaskChannel.Watch", [self = shared_from_this()] { self->Watch(); });
    return absl::OkStatus();
  }

  // Writes what the socket takes. Returns true when bytes remain (EAGAIN).
  // REQUIRES: mu_ held.
  bool WriteSome() {
    while (out_offset_ < out_.size()) {
      ssize_t n = send(fd_, out_.data() + out_offset_, out_.size() - out_offset_, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        out_offset_ += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      // The reader sees the shut-down socket and fails the pushes in flight.
      if (status_.ok()) status_ = absl::UnavailableError(Errno(("writing to the worker at " + address_).c_str()));
      shutdown(fd_, SHUT_RDWR);
      break;
    }
    out_.clear();
    out_offset_ = 0;
    return false;
  }

  // Loop thread: the socket may take more bytes.
  void OnWritable() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!descriptor_ || !WriteSome()) {
      write_armed_ = false;
      return;
    }
    descriptor_->async_wait(asio::posix::stream_descriptor::wait_write,
                            [self = shared_from_this()](const boost::system::error_code& ec) {
                              if (ec == asio::error::operation_aborted) return;
                              self->OnWritable();
                            });
  }

  // Loop thread: starts reading replies whenever no other thread does.
  void Watch() {
    int fd;
    {
      std::lock_guard<std::mutex> lock(mu_);
      fd = fd_;
    }
    descriptor_ = std::make_unique<asio::posix::stream_descriptor>(io_, fd);
    ArmRead();
  }

  void ArmRead() {
    descriptor_->async_wait(asio::posix::stream_descriptor::wait_read,
                            [self = shared_from_this()](const boost::system::error_code& ec) {
                              if (ec) return;
                              self->Poll();
                              if (!self->closed_.load(std::memory_order_acquire)) self->ArmRead();
                            });
  }

  // REQUIRES: read_mu_ held.
  bool ReadAndDispatch() {
    int fd;
    {
      std::lock_guard<std::mutex> lock(mu_);
      fd = fd_;
    }
    if (fd < 0 || closed_.load(std::memory_order_acquire)) return false;
    bool got = false;
    absl::Status read_status = reader_.ReadAvailable(fd, &got);
    FrameKind kind;
    std::string_view body;
    while (reader_.Next(&kind, &body)) {
      rpc::PushTaskReply reply;
      if (kind != FrameKind::kReply || !reply.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
        read_status = absl::DataLossError("malformed reply frame from the worker at " + address_);
        break;
      }
      std::shared_ptr<PushCallback> callback;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = pushes_.find(reply.push_id());
        if (it == pushes_.end()) continue;  // cancelled meanwhile
        callback = it->second;
        if (reply.done()) pushes_.erase(it);
      }
      absl::Status status = reply.error().empty()
                                ? absl::OkStatus()
                                : absl::UnavailableError("the worker at " + address_ + " refused the push: " +
                                                         reply.error());
      (*callback)(status, std::move(reply));
    }
    if (!read_status.ok()) FailAll(read_status);
    return got;
  }

  // The connection is gone: every push in flight fails. REQUIRES: read_mu_ held.
  void FailAll(const absl::Status& read_status) {
    std::vector<std::shared_ptr<PushCallback>> callbacks;
    absl::Status why;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (status_.ok()) {
        status_ = absl::UnavailableError("task channel to the worker at " + address_ + ": " +
                                         std::string(read_status.message()));
      }
      why = status_;
      for (auto& [id, cb] : pushes_) callbacks.push_back(std::move(cb));
      pushes_.clear();
      if (fd_ >= 0) shutdown(fd_, SHUT_RDWR);
      closed_.store(true, std::memory_order_release);
    }
    if (!callbacks.empty()) VLOG(1) << why << ": failing " << callbacks.size() << " push(es)";
    for (auto& cb : callbacks) (*cb)(why, {});
  }

  EventLoop& loop_;
  asio::io_context& io_;
  const std::string address_;

  mutable std::mutex mu_;
  int fd_ = -1;
  absl::Status status_;  // not OK once the channel failed or was cancelled
  uint64_t next_push_id_ = 1;
  absl::flat_hash_map<uint64_t, std::shared_ptr<PushCallback>> pushes_;
  std::string out_;  // bytes the socket did not take yet
  size_t out_offset_ = 0;
  bool write_armed_ = false;

  std::mutex read_mu_;
  FrameReader reader_;
  std::atomic<bool> poll_requested_{false};
  std::atomic<bool> closed_{false};

  std::unique_ptr<asio::posix::stream_descriptor> descriptor_;  // loop thread
};

}  // namespace

std::shared_ptr<TaskChannelInterface> MakeTcpTaskChannel(EventLoop& loop, const std::string& address,
                                                         int64_t max_frame_bytes) {
  return std::make_shared<TcpTaskChannel>(loop, address, max_frame_bytes);
}

// ---------------------------------------------------------------------------
// Worker side

struct TaskChannelServer::Connection {
  Connection(int64_t id_in, int fd_in, int64_t max_frame_bytes) : id(id_in), fd(fd_in), reader(max_frame_bytes) {}
  ~Connection() { close(fd); }
  const int64_t id;
  const int fd;
  FrameReader reader;  // execution thread
  std::mutex write_mu;
  bool broken = false;  // guarded by write_mu
};

absl::StatusOr<std::unique_ptr<TaskChannelServer>> TaskChannelServer::Listen(const std::string& ip,
                                                                             int64_t max_frame_bytes) {
  sockaddr_in addr;
  absl::Status parsed = ParseAddress(ip + ":1", &addr);
  if (!parsed.ok()) return absl::InvalidArgumentError("cannot listen for tasks on " + ip + ": not an IPv4 address");
  addr.sin_port = 0;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::UnavailableError(Errno("socket"));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0 || listen(fd, 128) < 0) {
    absl::Status s = absl::UnavailableError(Errno(("listening for tasks on " + ip).c_str()));
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
  return std::unique_ptr<TaskChannelServer>(new TaskChannelServer(fd, wake, ntohs(addr.sin_port), max_frame_bytes));
}

TaskChannelServer::TaskChannelServer(int listen_fd, int wake_fd, int port, int64_t max_frame_bytes)
    : listen_fd_(listen_fd), wake_fd_(wake_fd), port_(port), max_frame_bytes_(max_frame_bytes) {}

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
  std::lock_guard<std::mutex> lock(mu_);
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
    if (woken_.exchange(false, std::memory_order_acq_rel)) {
      uint64_t count;
      [[maybe_unused]] ssize_t n = read(wake_fd_, &count, sizeof(count));
      return std::nullopt;
    }
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
    std::lock_guard<std::mutex> lock(mu_);
    connections.reserve(connections_.size());
    for (const auto& [id, c] : connections_) connections.push_back(c);
  }
  std::vector<pollfd> fds(2 + connections.size());
  fds[0] = {listen_fd_, POLLIN, 0};
  fds[1] = {wake_fd_, POLLIN, 0};
  for (size_t i = 0; i < connections.size(); ++i) fds[2 + i] = {connections[i]->fd, POLLIN, 0};
  int n = poll(fds.data(), fds.size(), timeout_ms);
  if (n <= 0) return;
  if (fds[0].revents & POLLIN) {
    while (true) {
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) break;
      TuneSocket(fd);
      std::lock_guard<std::mutex> lock(mu_);
      int64_t id = next_connection_++;
      connections_.emplace(id, std::make_shared<Connection>(id, fd, max_frame_bytes_));
    }
  }
  for (size_t i = 0; i < connections.size(); ++i) {
    if (fds[2 + i].revents != 0) ReadConnection(connections[i]);
  }
}

void TaskChannelServer::ReadConnection(const std::shared_ptr<Connection>& c) {
  bool got = false;
  absl::Status status = c->reader.ReadAvailable(c->fd, &got);
  FrameKind kind;
  std::string_view body;
  while (c->reader.Next(&kind, &body)) {
    auto request = std::make_shared<rpc::PushTaskRequest>();
    if (kind != FrameKind::kPush || !request->ParseFromArray(body.data(), static_cast<int>(body.size()))) {
      status = absl::DataLossError("malformed push frame");
      break;
    }
    ready_.push_back(Push{c->id, std::move(request)});
  }
  if (!status.ok()) Close(c->id, std::string(status.message()));
}

void TaskChannelServer::Close(int64_t connection, const std::string& why) {
  std::shared_ptr<Connection> c;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = connections_.find(connection);
    if (it == connections_.end()) return;
    c = std::move(it->second);
    connections_.erase(it);
  }
  if (absl::StrContains(why, "closed by the peer")) {
    VLOG(1) << "task channel " << connection << " closed by its owner";
  } else {
    LOG(WARNING) << "dropping task channel " << connection << ": " << why;
  }
  std::lock_guard<std::mutex> lock(c->write_mu);
  c->broken = true;
  shutdown(c->fd, SHUT_RDWR);
}

bool TaskChannelServer::Send(int64_t connection, const std::string& frames) {
  std::shared_ptr<Connection> c;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = connections_.find(connection);
    if (it == connections_.end()) return false;
    c = it->second;
  }
  std::lock_guard<std::mutex> lock(c->write_mu);
  if (c->broken) return false;
  size_t offset = 0;
  while (offset < frames.size()) {
    ssize_t n = send(c->fd, frames.data() + offset, frames.size() - offset, MSG_NOSIGNAL);
    if (n > 0) {
      offset += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{c->fd, POLLOUT, 0};
      poll(&p, 1, 1000);
      continue;
    }
    VLOG(1) << "task channel " << connection << ": " << Errno("send");
    c->broken = true;
    shutdown(c->fd, SHUT_RDWR);
    return false;
  }
  return true;
}

}  // namespace manta::core
