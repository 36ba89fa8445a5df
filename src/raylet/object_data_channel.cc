#include "src/raylet/object_data_channel.h"
#include "src/common/metrics/metrics_proto.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <glog/logging.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "src/common/blocking_socket.h"
#include "src/common/logging.h"
#include "src/common/network.h"
#include "src/common/security.h"
#include "src/common/util.h"

namespace manta::raylet {
namespace {

constexpr size_t kNonceBytes = 32;
constexpr size_t kMacBytes = 32;
// Bigger sizes than any store holds mean a confused or hostile peer.
constexpr uint64_t kMaxObjectBytes = uint64_t{1} << 44;

std::string Mac(const std::string& token, std::string_view role, std::string_view server_nonce,
                std::string_view client_nonce) {
  std::string message = "manta object channel v1 ";
  message.append(role).append(server_nonce).append(client_nonce);
  return HmacSha256(token, message);
}

std::string Nonce() {
  std::string nonce(kNonceBytes, '\0');
  FillSecureRandom(reinterpret_cast<uint8_t*>(nonce.data()), nonce.size());
  return nonce;
}

}  // namespace

// ---------------------------------------------------------------- server

absl::StatusOr<std::unique_ptr<ObjectDataServer>> ObjectDataServer::Listen(const std::string& ip,
                                                                           const std::string& token, int arena_fd,
                                                                           const uint8_t* base, Source source,
                                                                           const ObjectDataLimits& limits) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (inet_pton(AF_INET, ip == "localhost" ? "127.0.0.1" : ip.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError("object channel: cannot listen on '" + ip + "'");
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  socklen_t len = sizeof(addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    if (fd >= 0) close(fd);
    return absl::UnavailableError("object channel: cannot listen on " + ip + ": " + std::strerror(err));
  }
  std::unique_ptr<ObjectDataServer> server(
      new ObjectDataServer(fd, ntohs(addr.sin_port), token, arena_fd, base, std::move(source), limits));
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

ObjectDataServer::ObjectDataServer(int listen_fd, int port, std::string token, int arena_fd, const uint8_t* base,
                                   Source source, const ObjectDataLimits& limits)
    : listen_fd_(listen_fd), port_(port), token_(std::move(token)), arena_fd_(arena_fd), base_(base),
      source_(std::move(source)), limits_(limits) {}

ObjectDataServer::~ObjectDataServer() { Stop(); }

void ObjectDataServer::Stop() {
  if (stopping_.exchange(true)) return;
  shutdown(listen_fd_, SHUT_RDWR);
  if (accept_thread_.joinable()) accept_thread_.join();
  close(listen_fd_);
  absl::flat_hash_map<int64_t, std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [fd, open] : open_fds_) shutdown(fd, SHUT_RDWR);
    threads.swap(threads_);
    finished_.clear();
  }
  for (auto& [id, t] : threads) t.join();
}

void ObjectDataServer::ReapLocked() {
  for (int64_t id : finished_) {
    auto it = threads_.find(id);
    if (it == threads_.end()) continue;
    it->second.join();  // it has finished, or is about to: the join is short
    threads_.erase(it);
  }
  finished_.clear();
}

bool ObjectDataServer::AdmitLocked(int fd, std::string* why) {
  Peer peer{PeerHostForLimit(fd, limit_loopback_), PeerHostForLimit(fd, /*count_loopback=*/true), false};
  int64_t from_host = 0;
  int64_t unproven = 0;
  int64_t unproven_from_ip = 0;
  for (const auto& [open_fd, open] : open_fds_) {
    from_host += !peer.host.empty() && open.host == peer.host ? 1 : 0;
    unproven += open.proven ? 0 : 1;
    unproven_from_ip += !open.proven && open.ip == peer.ip ? 1 : 0;
  }
  if (open_fds_.size() >= kMaxConnections) {
    *why = std::to_string(kMaxConnections) + " connections are open";
  } else if (from_host >= kMaxConnectionsPerHost) {
    *why = std::to_string(from_host) + " connections from that host are open";
  } else if (unproven_from_ip >= limits_.max_unproven_per_host) {
    *why = std::to_string(unproven_from_ip) + " connections from that host are still in their handshake";
  } else if (unproven >= limits_.max_unproven) {
    *why = std::to_string(unproven) + " connections are still in their handshake";
  } else {
    open_fds_[fd] = std::move(peer);
    return true;
  }
  return false;
}

void ObjectDataServer::AcceptLoop() {
  while (!stopping_) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (stopping_) return;
      if (errno == EINTR || errno == ECONNABORTED) continue;
      // Out of descriptors: pause rather than spin on a listener that stays readable.
      LOG_EVERY_N(WARNING, 100) << "object channel accept failed: " << std::strerror(errno);
      pollfd p{listen_fd_, 0, 0};
      poll(&p, 1, 100);
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    ReapLocked();
    std::string why;
    if (!AdmitLocked(fd, &why)) {
      int64_t others = 0;
      if (refusals_.Allow(&others)) {
        LOG(WARNING) << "object channel: refused " << SocketPeerName(fd) << ": " << why
                     << LogRateLimiter::LeftOut(others);
      }
      close(fd);
      continue;
    }
    const int64_t id = next_connection_++;
    threads_.emplace(id, std::thread([this, fd, id] {
      Serve(fd);
      std::lock_guard<std::mutex> done(mu_);
      finished_.push_back(id);
    }));
  }
}

absl::Status ObjectDataServer::Handshake(int fd) {
  const int64_t deadline = MonotonicMs() + limits_.handshake_timeout_ms;
  const std::string server_nonce = Nonce();
  char proof[kNonceBytes + kMacBytes];
  absl::Status s = WriteAllBefore(fd, server_nonce.data(), server_nonce.size(), deadline);
  if (s.ok()) s = ReadExactBefore(fd, proof, sizeof(proof), deadline);
  if (!s.ok()) return s;
  std::string client_nonce(proof, kNonceBytes);
  std::string_view mac(proof + kNonceBytes, kMacBytes);
  if (!ConstantTimeEquals(mac, Mac(token_, "client", server_nonce, client_nonce))) {
    metrics::CountAuthFailure("object");
    return absl::UnauthenticatedError("it does not hold the cluster token");
  }
  std::string ours = Mac(token_, "server", server_nonce, client_nonce);
  return WriteAllBefore(fd, ours.data(), ours.size(), deadline);
}

void ObjectDataServer::Serve(int fd) {
  // sendfile() has no MSG_NOSIGNAL: a peer that went away must give this thread
  // EPIPE, not kill the process with SIGPIPE.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  SetBlockingTimeouts(fd, limits_.io_timeout_ms);
  absl::Status s = Handshake(fd);
  if (!s.ok()) {
    int64_t others = 0;
    if (refusals_.Allow(&others)) {
      LOG(WARNING) << "object channel: refused " << SocketPeerName(fd) << ": " << s.message()
                   << LogRateLimiter::LeftOut(others);
    }
  } else {
    SetBlockingTimeouts(fd, limits_.io_timeout_ms);
    std::lock_guard<std::mutex> lock(mu_);
    open_fds_[fd].proven = true;
  }
  while (s.ok() && !stopping_) {
    char id[ObjectID::kSize];
    if (!ReadExact(fd, id, sizeof(id)).ok()) break;  // the client is done with it
    if (!SendObject(fd, ObjectID::FromBinary(std::string(id, sizeof(id))))) break;
  }
  std::lock_guard<std::mutex> lock(mu_);
  open_fds_.erase(fd);
  close(fd);
}

bool ObjectDataServer::SendObject(int fd, const ObjectID& id) {
  std::optional<ServedObject> object = source_(id);
  if (!object || object->busy) {
    const char answer = object ? 2 : 0;
    return WriteAll(fd, &answer, 1).ok();
  }
  char header[17];
  header[0] = 1;
  PutLe64(static_cast<uint64_t>(object->data_size), header + 1);
  PutLe64(static_cast<uint64_t>(object->metadata_size), header + 9);
  absl::Status s = WriteAll(fd, header, sizeof(header));
  off_t offset = static_cast<off_t>(object->offset);
  int64_t left = object->data_size + object->metadata_size;
  const int64_t deadline = TransferDeadline(limits_.io_timeout_ms, static_cast<uint64_t>(left), limits_.min_bytes_per_s);
  while (s.ok() && left > 0 && !stopping_) {
    if (!SetTimeoutsWithin(fd, limits_.io_timeout_ms, deadline)) {
      s = absl::UnavailableError("send: slower than the transfer's deadline");
      break;
    }
    // The pages go from the store to the socket without a copy through user space.
    ssize_t n = arena_fd_ >= 0 ? sendfile(fd, arena_fd_, &offset, static_cast<size_t>(std::min<int64_t>(left, 1 << 30)))
                               : send(fd, base_ + offset, static_cast<size_t>(std::min<int64_t>(left, 1 << 30)),
                                      MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      s = SocketIoError("send", n);
      break;
    }
    if (arena_fd_ < 0) offset += n;
    left -= n;
    bytes_served_ += n;
  }
  // sendfile() hands the kernel the store's pages, not their bytes, which are read
  // when sent, or (between local namespaces) when the receiver reads them: let go
  // before the receiver has them all, a page reused by a new object would send that
  // object's bytes (seen as a corrupt bucket in the 4-host sort under memory
  // pressure). The receiver says when it has them.
  char ack = 0;
  if (s.ok() && left == 0) s = ReadExact(fd, &ack, 1);
  SetBlockingTimeouts(fd, limits_.io_timeout_ms);
  object->release();
  return s.ok() && left == 0 && ack == 1;
}

// ---------------------------------------------------------------- client

void ObjectDataClient::Fetch::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  if (fd_ >= 0) shutdown(fd_, SHUT_RDWR);
}

ObjectDataClient::ObjectDataClient(std::string token, const ObjectDataLimits& limits)
    : token_(std::move(token)), limits_(limits) {}

ObjectDataClient::~ObjectDataClient() {
  for (auto& [address, fds] : idle_) {
    for (int fd : fds) close(fd);
  }
}

absl::StatusOr<int> ObjectDataClient::Connect(const std::string& address, int64_t io_timeout_ms, bool* reused) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = idle_.find(address);
    if (it != idle_.end() && !it->second.empty()) {
      int fd = it->second.back();
      it->second.pop_back();
      SetBlockingTimeouts(fd, io_timeout_ms);
      *reused = true;
      return fd;
    }
  }
  auto fd = ConnectWithin(address, std::min(limits_.connect_timeout_ms, io_timeout_ms));
  if (!fd.ok()) return fd.status();
  SetBlockingTimeouts(*fd, io_timeout_ms);
  const int64_t deadline = MonotonicMs() + std::min(limits_.handshake_timeout_ms, io_timeout_ms);
  char server_nonce[kNonceBytes];
  absl::Status s = ReadExactBefore(*fd, server_nonce, sizeof(server_nonce), deadline);
  std::string client_nonce = Nonce();
  std::string proof = client_nonce + Mac(token_, "client", std::string_view(server_nonce, kNonceBytes), client_nonce);
  if (s.ok()) s = WriteAllBefore(*fd, proof.data(), proof.size(), deadline);
  char mac[kMacBytes];
  if (s.ok()) s = ReadExactBefore(*fd, mac, sizeof(mac), deadline);
  if (s.ok() && !ConstantTimeEquals(std::string_view(mac, kMacBytes),
                                    Mac(token_, "server", std::string_view(server_nonce, kNonceBytes), client_nonce))) {
    s = absl::UnauthenticatedError("the server at " + address + " does not hold the cluster token");
  }
  if (!s.ok()) {
    close(*fd);
    // The host answered: the channel refused us (a cap full, a stranger on the port).
    return absl::FailedPreconditionError("object channel to " + address + ": handshake failed: " +
                                         std::string(s.message()));
  }
  return *fd;
}

absl::Status ObjectDataClient::Receive(int fd, uint8_t* p, uint64_t n, int64_t io_timeout_ms, int64_t deadline_ms) {
  while (n > 0) {
    if (!SetTimeoutsWithin(fd, io_timeout_ms, deadline_ms)) {
      return absl::UnavailableError("read: slower than the transfer's deadline");
    }
    // Straight from the socket into the object's allocation.
    ssize_t got = recv(fd, p, static_cast<size_t>(std::min<uint64_t>(n, 1 << 30)), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && MonotonicMs() >= deadline_ms) {
      return absl::UnavailableError("read: slower than the transfer's deadline");
    }
    if (got <= 0) return SocketIoError("read", got);
    p += got;
    n -= static_cast<uint64_t>(got);
  }
  SetBlockingTimeouts(fd, io_timeout_ms);
  return absl::OkStatus();
}

void ObjectDataClient::ReturnIdle(const std::string& address, int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& fds = idle_[address];
  if (fds.size() >= 4) {
    close(fd);
    return;
  }
  fds.push_back(fd);
}

absl::Status ObjectDataClient::Ask(int fd, const ObjectID& id, uint64_t* data_size, uint64_t* metadata_size) {
  std::string request = id.Binary();
  char found = 0;
  absl::Status s = WriteAll(fd, request.data(), request.size());
  if (s.ok()) s = ReadExact(fd, &found, 1);
  if (!s.ok()) return s;
  if (found == 0) return absl::NotFoundError("not there");
  if (found == 2) return absl::ResourceExhaustedError("it is there, spilled, with no room yet to restore it");
  if (found != 1) return absl::DataLossError("the server's answer is malformed");
  char sizes[16];
  if (s = ReadExact(fd, sizes, sizeof(sizes)); !s.ok()) return s;
  *data_size = LoadLe64(sizes);
  *metadata_size = LoadLe64(sizes + 8);
  if (*data_size > kMaxObjectBytes || *metadata_size > kMaxObjectBytes) {
    return absl::DataLossError("the server sent impossible sizes");
  }
  return absl::OkStatus();
}

absl::Status ObjectDataClient::ConnectAndAsk(const std::string& address, const ObjectID& id, int64_t io_timeout_ms,
                                             const std::shared_ptr<Fetch>& fetch, int* fd, uint64_t* data_size,
                                             uint64_t* metadata_size) {
  // Idle connections the server has closed are dropped one by one; a new
  // connection always ends the loop.
  absl::Status s;
  for (int attempt = 0; attempt < 64; ++attempt) {
    bool reused = false;
    auto connected = Connect(address, io_timeout_ms, &reused);
    if (absl::IsFailedPrecondition(connected.status())) {
      fetch->channel_refused_ = true;
      return absl::UnavailableError(connected.status().message());
    }
    if (!connected.ok()) return connected.status();
    {
      std::lock_guard<std::mutex> lock(fetch->mu_);
      if (fetch->cancelled_) {
        close(*connected);
        return absl::CancelledError("the pull was cancelled");
      }
      fetch->fd_ = *connected;
    }
    s = Ask(*connected, id, data_size, metadata_size);
    // A connection kept idle may have been closed by the server meanwhile (its idle
    // timeout, its cap on connections): asked again on another.
    if (!reused || s.ok() || absl::IsNotFound(s) || absl::IsResourceExhausted(s) || absl::IsDataLoss(s)) {
      *fd = *connected;
      return s;
    }
    {
      std::lock_guard<std::mutex> lock(fetch->mu_);
      fetch->fd_ = -1;
    }
    close(*connected);
  }
  return s;
}

absl::Status ObjectDataClient::Run(const std::string& address, const ObjectID& id, int64_t io_timeout_ms,
                                   const Allocate& allocate, const std::shared_ptr<Fetch>& fetch) {
  int fd = -1;
  uint64_t data_size = 0;
  uint64_t metadata_size = 0;
  absl::Status s = ConnectAndAsk(address, id, io_timeout_ms, fetch, &fd, &data_size, &metadata_size);
  if (fd < 0) return s;
  auto finish = [&](absl::Status s, bool reusable) {
    {
      std::lock_guard<std::mutex> lock(fetch->mu_);
      fetch->fd_ = -1;
      if (fetch->cancelled_ && s.ok()) reusable = false;
      if (fetch->cancelled_ && !s.ok()) s = absl::CancelledError("the pull was cancelled");
    }
    if (reusable) {
      ReturnIdle(address, fd);
    } else {
      close(fd);
    }
    return s;
  };
  if (!s.ok()) {
    if (absl::IsNotFound(s)) return finish(absl::NotFoundError("object " + id.Hex() + " is not at " + address), true);
    if (absl::IsResourceExhausted(s)) {
      return finish(absl::ResourceExhaustedError("object " + id.Hex() + " at " + address + ": " + std::string(s.message())),
                    true);
    }
    return finish(absl::UnavailableError("object channel to " + address + ": " + std::string(s.message())), false);
  }
  auto dest = allocate(static_cast<int64_t>(data_size), static_cast<int64_t>(metadata_size));
  if (!dest.ok()) return finish(dest.status(), false);  // the bytes are still coming: drop the connection
  const uint64_t total = data_size + metadata_size;
  const int64_t deadline = TransferDeadline(io_timeout_ms, total, limits_.min_bytes_per_s);
  if (absl::Status got = Receive(fd, *dest, total, io_timeout_ms, deadline); !got.ok()) {
    return finish(absl::UnavailableError("object channel to " + address + ": " + std::string(got.message())), false);
  }
  // Every byte is here: the sender may let the object go (see SendObject).
  const char ack = 1;
  if (absl::Status acked = WriteAll(fd, &ack, 1); !acked.ok()) return finish(absl::OkStatus(), false);
  return finish(absl::OkStatus(), true);
}

}  // namespace manta::raylet
