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

// Blocking socket whose every read and write gives up after `timeout_ms`.
void Tune(int fd, int64_t timeout_ms) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  timeval tv{static_cast<time_t>(timeout_ms / 1000), static_cast<suseconds_t>((timeout_ms % 1000) * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

absl::Status IoError(const char* what, ssize_t n) {
  if (n == 0) return absl::UnavailableError(std::string(what) + ": the connection was closed");
  if (errno == EAGAIN || errno == EWOULDBLOCK) return absl::UnavailableError(std::string(what) + ": timed out");
  return absl::UnavailableError(std::string(what) + ": " + std::strerror(errno));
}

absl::Status ReadExact(int fd, void* buf, size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t got = recv(fd, p, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return IoError("read", got);
    p += got;
    n -= static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, const void* buf, size_t n) {
  const auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t sent = send(fd, p, n, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return IoError("write", sent);
    p += sent;
    n -= static_cast<size_t>(sent);
  }
  return absl::OkStatus();
}

void PutLe64(uint64_t v, char* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

uint64_t LoadLe64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

absl::StatusOr<sockaddr_in> ParseAddress(const std::string& address) {
  size_t colon = address.rfind(':');
  sockaddr_in out{};
  out.sin_family = AF_INET;
  int port = colon == std::string::npos ? 0 : std::atoi(address.c_str() + colon + 1);
  if (port <= 0 || port > 65535 || inet_pton(AF_INET, address.substr(0, colon).c_str(), &out.sin_addr) != 1) {
    return absl::InvalidArgumentError("malformed object channel address '" + address + "'");
  }
  out.sin_port = htons(static_cast<uint16_t>(port));
  return out;
}

// Connects within `timeout_ms`.
absl::StatusOr<int> ConnectWithin(const sockaddr_in& addr, const std::string& address, int64_t timeout_ms) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::UnavailableError(std::string("socket: ") + std::strerror(errno));
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 && errno != EINPROGRESS) {
    int err = errno;
    close(fd);
    return absl::UnavailableError("cannot connect to " + address + ": " + std::strerror(err));
  }
  pollfd p{fd, POLLOUT, 0};
  int ready = poll(&p, 1, static_cast<int>(timeout_ms));
  int err = 0;
  socklen_t len = sizeof(err);
  if (ready <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
    close(fd);
    return absl::UnavailableError("cannot connect to " + address + ": " +
                                  (ready <= 0 ? "timed out" : std::strerror(err)));
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

}  // namespace

// ---------------------------------------------------------------- server

absl::StatusOr<std::unique_ptr<ObjectDataServer>> ObjectDataServer::Listen(const std::string& ip,
                                                                           const std::string& token, int arena_fd,
                                                                           const uint8_t* base, Source source,
                                                                           int64_t io_timeout_ms) {
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
      new ObjectDataServer(fd, ntohs(addr.sin_port), token, arena_fd, base, std::move(source), io_timeout_ms));
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

ObjectDataServer::ObjectDataServer(int listen_fd, int port, std::string token, int arena_fd, const uint8_t* base,
                                   Source source, int64_t io_timeout_ms)
    : listen_fd_(listen_fd), port_(port), token_(std::move(token)), arena_fd_(arena_fd), base_(base),
      source_(std::move(source)), io_timeout_ms_(io_timeout_ms) {}

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

void ObjectDataServer::AcceptLoop() {
  LogRateLimiter refusals;
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
    std::string host = PeerHostForLimit(fd, limit_loopback_);
    std::lock_guard<std::mutex> lock(mu_);
    ReapLocked();
    int from_host = 0;
    for (const auto& [open_fd, open_host] : open_fds_) from_host += !host.empty() && open_host == host ? 1 : 0;
    if (open_fds_.size() >= kMaxConnections || from_host >= kMaxConnectionsPerHost) {
      int64_t others = 0;
      if (refusals.Allow(&others)) {
        LOG(WARNING) << "object channel: refused " << SocketPeerName(fd) << ": "
                     << (from_host >= kMaxConnectionsPerHost ? std::to_string(from_host) + " connections from that host"
                                                             : std::to_string(kMaxConnections) + " connections")
                     << " are open" << LogRateLimiter::LeftOut(others);
      }
      close(fd);
      continue;
    }
    open_fds_[fd] = host;
    const int64_t id = next_connection_++;
    threads_.emplace(id, std::thread([this, fd, id] {
      Serve(fd);
      std::lock_guard<std::mutex> done(mu_);
      finished_.push_back(id);
    }));
  }
}

void ObjectDataServer::Serve(int fd) {
  // sendfile() has no MSG_NOSIGNAL: a peer that went away must give this thread
  // EPIPE, not kill the process with SIGPIPE.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  Tune(fd, io_timeout_ms_);
  const std::string peer = SocketPeerName(fd);
  const std::string server_nonce = Nonce();
  char proof[kNonceBytes + kMacBytes];
  absl::Status s = WriteAll(fd, server_nonce.data(), server_nonce.size());
  if (s.ok()) s = ReadExact(fd, proof, sizeof(proof));
  if (s.ok()) {
    std::string client_nonce(proof, kNonceBytes);
    std::string_view mac(proof + kNonceBytes, kMacBytes);
    if (!ConstantTimeEquals(mac, Mac(token_, "client", server_nonce, client_nonce))) {
      s = absl::UnauthenticatedError("it does not hold the cluster token");
      metrics::CountAuthFailure("object");
    } else {
      std::string ours = Mac(token_, "server", server_nonce, client_nonce);
      s = WriteAll(fd, ours.data(), ours.size());
    }
  }
  if (!s.ok()) LOG(WARNING) << "object channel: refused " << peer << ": " << s.message();
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
  while (s.ok() && left > 0 && !stopping_) {
    // The pages go from the store to the socket without a copy through user space.
    ssize_t n = arena_fd_ >= 0 ? sendfile(fd, arena_fd_, &offset, static_cast<size_t>(std::min<int64_t>(left, 1 << 30)))
                               : send(fd, base_ + offset, static_cast<size_t>(std::min<int64_t>(left, 1 << 30)),
                                      MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      s = IoError("send", n);
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
  object->release();
  return s.ok() && left == 0 && ack == 1;
}

// ---------------------------------------------------------------- client

void ObjectDataClient::Fetch::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  if (fd_ >= 0) shutdown(fd_, SHUT_RDWR);
}

ObjectDataClient::ObjectDataClient(std::string token, int64_t connect_timeout_ms)
    : token_(std::move(token)), connect_timeout_ms_(connect_timeout_ms) {}

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
      Tune(fd, io_timeout_ms);
      *reused = true;
      return fd;
    }
  }
  auto addr = ParseAddress(address);
  if (!addr.ok()) return addr.status();
  auto fd = ConnectWithin(*addr, address, std::min(connect_timeout_ms_, io_timeout_ms));
  if (!fd.ok()) return fd.status();
  Tune(*fd, io_timeout_ms);
  char server_nonce[kNonceBytes];
  absl::Status s = ReadExact(*fd, server_nonce, sizeof(server_nonce));
  std::string client_nonce = Nonce();
  std::string proof = client_nonce + Mac(token_, "client", std::string_view(server_nonce, kNonceBytes), client_nonce);
  if (s.ok()) s = WriteAll(*fd, proof.data(), proof.size());
  char mac[kMacBytes];
  if (s.ok()) s = ReadExact(*fd, mac, sizeof(mac));
  if (s.ok() && !ConstantTimeEquals(std::string_view(mac, kMacBytes),
                                    Mac(token_, "server", std::string_view(server_nonce, kNonceBytes), client_nonce))) {
    s = absl::UnauthenticatedError("the server at " + address + " does not hold the cluster token");
  }
  if (!s.ok()) {
    close(*fd);
    return absl::Status(s.code(), "object channel to " + address + ": handshake failed: " + std::string(s.message()));
  }
  return *fd;
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
  uint8_t* p = *dest;
  uint64_t left = data_size + metadata_size;
  while (left > 0) {
    // Straight from the socket into the object's allocation.
    ssize_t got = recv(fd, p, static_cast<size_t>(std::min<uint64_t>(left, 1 << 30)), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      return finish(absl::UnavailableError("object channel to " + address + ": " +
                                           std::string(IoError("read", got).message())),
                    false);
    }
    p += got;
    left -= static_cast<uint64_t>(got);
  }
  // Every byte is here: the sender may let the object go (see SendObject).
  const char ack = 1;
  if (absl::Status acked = WriteAll(fd, &ack, 1); !acked.ok()) return finish(absl::OkStatus(), false);
  return finish(absl::OkStatus(), true);
}

}  // namespace manta::raylet
