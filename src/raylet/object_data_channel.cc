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

// Bigger sizes than any store holds mean a confused or hostile peer.
constexpr uint64_t kMaxObjectBytes = uint64_t{1} << 44;
// What the task channel's handshake is for here (task_channel_security.h).
constexpr char kPurpose[] = "object channel";
// The kinds of sealed frames.
constexpr uint8_t kRequestFrame = 1;
constexpr uint8_t kAnswerFrame = 2;
constexpr uint8_t kSizesFrame = 3;
constexpr uint8_t kDataFrame = 4;
constexpr uint8_t kAckFrame = 5;

core::ChannelProtection Protection(bool encrypt) {
  return encrypt ? core::ChannelProtection::kEncrypt : core::ChannelProtection::kNone;
}

// A handshake message: a length byte, then the body.
absl::Status SendHandshake(int fd, std::string_view body, int64_t deadline) {
  std::string message(1, static_cast<char>(body.size()));
  message.append(body);
  return WriteAllBefore(fd, message.data(), message.size(), deadline);
}

absl::Status ReadHandshake(int fd, int64_t deadline, std::string* body) {
  unsigned char n = 0;
  if (auto s = ReadExactBefore(fd, &n, 1, deadline); !s.ok()) return s;
  body->resize(n);
  return ReadExactBefore(fd, body->data(), n, deadline);
}

// The keys of a finished handshake seal `c`'s directions (nothing without encryption).
void SetSealing(DataConnection& c, const core::ChannelKeys& keys, bool server) {
  if (keys.protection == core::ChannelProtection::kNone) return;
  c.sealer = std::make_unique<core::FrameSealer>(keys.protection, server ? keys.worker_to_owner : keys.owner_to_worker);
  c.opener = std::make_unique<core::FrameOpener>(keys.protection, server ? keys.owner_to_worker : keys.worker_to_owner);
}

// Checks a sealed frame's header: `n` bytes of body, of `kind`.
absl::Status CheckFrameHeader(const char* header, uint8_t kind, size_t n) {
  if (LoadLe(header, 4) != 1 + n + core::kFrameTagBytes || static_cast<uint8_t>(header[4]) != kind) {
    return absl::DataLossError("a message of another size or kind than the protocol's");
  }
  return absl::OkStatus();
}

}  // namespace

// ---------------------------------------------------------------- connections

DataConnection::DataConnection(int fd) : fd(fd) {}

DataConnection::~DataConnection() { close(fd); }

absl::Status DataConnection::Send(uint8_t kind, std::string_view body) {
  if (!sealed()) return WriteAll(fd, body.data(), body.size());
  buffer.clear();
  sealer->Append(kind, body, &buffer);
  return WriteAll(fd, buffer.data(), buffer.size());
}

absl::Status DataConnection::Read(uint8_t kind, size_t n, std::string* body) {
  if (!sealed()) {
    body->resize(n);
    return ReadExact(fd, body->data(), n);
  }
  // The size is the protocol's: the whole frame is read at once, then checked.
  const size_t frame = n + core::kSealedFrameOverheadBytes;
  buffer.resize(frame);
  if (auto s = ReadExact(fd, buffer.data(), frame); !s.ok()) return s;
  if (auto s = CheckFrameHeader(buffer.data(), kind, n); !s.ok()) return s;
  std::string_view plain;
  if (!opener->Open(buffer.data(), frame, &plain)) return absl::DataLossError("a message that does not open");
  body->assign(plain);
  return absl::OkStatus();
}

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

absl::Status ObjectDataServer::Handshake(DataConnection& c) {
  const int64_t deadline = MonotonicMs() + limits_.handshake_timeout_ms;
  core::WorkerHandshake handshake({token_, Protection(limits_.encrypt), kPurpose});
  std::string proof;
  absl::Status s = SendHandshake(c.fd, handshake.challenge(), deadline);
  if (s.ok()) s = ReadHandshake(c.fd, deadline, &proof);
  if (!s.ok()) return s;
  core::ChannelKeys keys;
  absl::StatusOr<std::string> answer = handshake.Answer(proof, &keys);
  if (!answer.ok()) {
    metrics::CountAuthFailure("object");
    return absl::UnauthenticatedError("it does not hold the cluster token");
  }
  {
    // Proven from here, before the answer goes: a client that has read it may count
    // on its connection no longer taking a stranger's place.
    std::lock_guard<std::mutex> lock(mu_);
    open_fds_[c.fd].proven = true;
  }
  if (s = SendHandshake(c.fd, *answer, deadline); !s.ok()) return s;
  SetSealing(c, keys, /*server=*/true);
  return absl::OkStatus();
}

void ObjectDataServer::Serve(int fd) {
  // sendfile() has no MSG_NOSIGNAL: a peer that went away must give this thread
  // EPIPE, not kill the process with SIGPIPE.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  DataConnection c(fd);  // closes fd at the end, after it left open_fds_
  SetBlockingTimeouts(fd, limits_.io_timeout_ms);
  absl::Status s = Handshake(c);
  if (!s.ok()) {
    int64_t others = 0;
    if (refusals_.Allow(&others)) {
      LOG(WARNING) << "object channel: refused " << SocketPeerName(fd) << ": " << s.message()
                   << LogRateLimiter::LeftOut(others);
    }
  } else {
    SetBlockingTimeouts(fd, limits_.io_timeout_ms);
  }
  std::string id;
  while (s.ok() && !stopping_) {
    if (!c.Read(kRequestFrame, ObjectID::kSize, &id).ok()) break;  // the client is done with it
    if (!SendObject(c, ObjectID::FromBinary(id))) break;
  }
  std::lock_guard<std::mutex> lock(mu_);
  open_fds_.erase(fd);
}

bool ObjectDataServer::SendObject(DataConnection& c, const ObjectID& id) {
  std::optional<ServedObject> object = source_(id);
  if (!object || object->busy) return c.Send(kAnswerFrame, std::string(1, object ? 2 : 0)).ok();
  char sizes[16];
  PutLe64(static_cast<uint64_t>(object->data_size), sizes);
  PutLe64(static_cast<uint64_t>(object->metadata_size), sizes + 8);
  absl::Status s = c.Send(kAnswerFrame, std::string(1, 1));
  if (s.ok()) s = c.Send(kSizesFrame, std::string_view(sizes, sizeof(sizes)));
  const uint64_t total = static_cast<uint64_t>(object->data_size + object->metadata_size);
  if (s.ok()) s = SendBytes(c, *object, TransferDeadline(limits_.io_timeout_ms, total, limits_.min_bytes_per_s));
  // sendfile() hands the kernel the store's pages, not their bytes, which are read
  // when sent, or (between local namespaces) when the receiver reads them: let go
  // before the receiver has them all, a page reused by a new object would send that
  // object's bytes (seen as a corrupt bucket in the 4-host sort under memory
  // pressure). The receiver says when it has them.
  std::string ack;
  if (s.ok()) s = c.Read(kAckFrame, 1, &ack);
  SetBlockingTimeouts(c.fd, limits_.io_timeout_ms);
  object->release();
  return s.ok() && ack == std::string(1, 1);
}

absl::Status ObjectDataServer::SendBytes(DataConnection& c, const ServedObject& object, int64_t deadline_ms) {
  off_t offset = static_cast<off_t>(object.offset);
  int64_t left = object.data_size + object.metadata_size;
  while (left > 0 && !stopping_) {
    if (!SetTimeoutsWithin(c.fd, limits_.io_timeout_ms, deadline_ms)) {
      return absl::UnavailableError("send: slower than the transfer's deadline");
    }
    ssize_t n = 0;
    if (c.sealed()) {
      // Sealed from the store's memory into the connection's chunk (one pass), a
      // chunk at a time.
      n = static_cast<ssize_t>(std::min<int64_t>(left, kSealedChunkBytes));
      const size_t frame = c.sealer->SealInto(kDataFrame, reinterpret_cast<const char*>(base_ + offset),
                                              static_cast<size_t>(n), c.Chunk());
      if (absl::Status s = WriteAll(c.fd, c.Chunk(), frame); !s.ok()) return s;
      offset += n;
    } else {
      // The pages go from the store to the socket without a copy through user space.
      const size_t want = static_cast<size_t>(std::min<int64_t>(left, 1 << 30));
      n = arena_fd_ >= 0 ? sendfile(c.fd, arena_fd_, &offset, want) : send(c.fd, base_ + offset, want, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return SocketIoError("send", n);
      if (arena_fd_ < 0) offset += n;
    }
    left -= n;
    bytes_served_ += n;
  }
  return left == 0 ? absl::OkStatus() : absl::UnavailableError("the server is stopping");
}

// ---------------------------------------------------------------- client

void ObjectDataClient::Fetch::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  if (fd_ >= 0) shutdown(fd_, SHUT_RDWR);
}

ObjectDataClient::ObjectDataClient(std::string token, const ObjectDataLimits& limits)
    : token_(std::move(token)), limits_(limits) {}

ObjectDataClient::~ObjectDataClient() = default;

absl::StatusOr<ObjectDataClient::Connection> ObjectDataClient::Connect(const std::string& address,
                                                                       int64_t io_timeout_ms, bool* reused) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = idle_.find(address);
    if (it != idle_.end() && !it->second.empty()) {
      Connection c = std::move(it->second.back());
      it->second.pop_back();
      SetBlockingTimeouts(c->fd, io_timeout_ms);
      *reused = true;
      return c;
    }
  }
  auto fd = ConnectWithin(address, std::min(limits_.connect_timeout_ms, io_timeout_ms));
  if (!fd.ok()) return fd.status();
  auto c = std::make_unique<DataConnection>(*fd);
  SetBlockingTimeouts(c->fd, io_timeout_ms);
  const int64_t deadline = MonotonicMs() + std::min(limits_.handshake_timeout_ms, io_timeout_ms);
  core::OwnerHandshake handshake({token_, Protection(limits_.encrypt), kPurpose});
  std::string challenge, answer;
  core::ChannelKeys keys;
  absl::Status s = ReadHandshake(c->fd, deadline, &challenge);
  if (s.ok()) {
    absl::StatusOr<std::string> proof = handshake.Prove(challenge);
    s = proof.ok() ? SendHandshake(c->fd, *proof, deadline) : proof.status();
  }
  if (s.ok()) s = ReadHandshake(c->fd, deadline, &answer);
  if (s.ok()) s = handshake.Check(answer, &keys);
  if (!s.ok()) {
    // The host answered: the channel refused us (a cap full, a stranger on the port,
    // another protection).
    return absl::FailedPreconditionError("object channel to " + address + ": handshake failed: " +
                                         std::string(s.message()));
  }
  SetSealing(*c, keys, /*server=*/false);
  SetBlockingTimeouts(c->fd, io_timeout_ms);  // the handshake's deadline lowered them
  return c;
}

absl::Status ObjectDataClient::Receive(DataConnection& c, uint8_t* p, uint64_t n, int64_t io_timeout_ms,
                                       int64_t deadline_ms) {
  const absl::Status late = absl::UnavailableError("read: slower than the transfer's deadline");
  while (n > 0 && c.sealed()) {
    // A frame at a time into the connection's chunk (it stays in cache), opened
    // from there into the allocation (one pass; bytes that do not open fail the
    // pull, and the unsealed object is dropped).
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, kSealedChunkBytes));
    const size_t frame = chunk + core::kSealedFrameOverheadBytes;
    absl::Status s = ReadExactBefore(c.fd, c.Chunk(), frame, deadline_ms);
    if (!s.ok()) return MonotonicMs() >= deadline_ms ? late : s;
    if (s = CheckFrameHeader(c.Chunk(), kDataFrame, chunk); !s.ok()) return s;
    if (!c.opener->OpenInto(c.Chunk(), frame, reinterpret_cast<char*>(p))) {
      return absl::DataLossError("object bytes that do not open");
    }
    p += chunk;
    n -= chunk;
  }
  while (n > 0) {
    if (!SetTimeoutsWithin(c.fd, io_timeout_ms, deadline_ms)) return late;
    // Straight from the socket into the object's allocation.
    ssize_t got = recv(c.fd, p, static_cast<size_t>(std::min<uint64_t>(n, 1 << 30)), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && MonotonicMs() >= deadline_ms) return late;
    if (got <= 0) return SocketIoError("read", got);
    p += got;
    n -= static_cast<uint64_t>(got);
  }
  SetBlockingTimeouts(c.fd, io_timeout_ms);
  return absl::OkStatus();
}

void ObjectDataClient::ReturnIdle(const std::string& address, Connection c) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& idle = idle_[address];
  if (idle.size() < 4) idle.push_back(std::move(c));
}

absl::Status ObjectDataClient::Ask(DataConnection& c, const ObjectID& id, uint64_t* data_size,
                                   uint64_t* metadata_size) {
  std::string found, sizes;
  absl::Status s = c.Send(kRequestFrame, id.Binary());
  if (s.ok()) s = c.Read(kAnswerFrame, 1, &found);
  if (!s.ok()) return s;
  if (found[0] == 0) return absl::NotFoundError("not there");
  if (found[0] == 2) {
    return absl::ResourceExhaustedError(
        "it is there but not readable yet (spilled with no room to restore it, or still being written)");
  }
  if (found[0] != 1) return absl::DataLossError("the server's answer is malformed");
  if (s = c.Read(kSizesFrame, 16, &sizes); !s.ok()) return s;
  *data_size = LoadLe64(sizes.data());
  *metadata_size = LoadLe64(sizes.data() + 8);
  if (*data_size > kMaxObjectBytes || *metadata_size > kMaxObjectBytes) {
    return absl::DataLossError("the server sent impossible sizes");
  }
  return absl::OkStatus();
}

absl::Status ObjectDataClient::ConnectAndAsk(const std::string& address, const ObjectID& id, int64_t io_timeout_ms,
                                             const std::shared_ptr<Fetch>& fetch, Connection* c, uint64_t* data_size,
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
      if (fetch->cancelled_) return absl::CancelledError("the pull was cancelled");
      fetch->fd_ = (*connected)->fd;
    }
    s = Ask(**connected, id, data_size, metadata_size);
    // A connection kept idle may have been closed by the server meanwhile (its idle
    // timeout, its cap on connections): asked again on another.
    if (!reused || s.ok() || absl::IsNotFound(s) || absl::IsResourceExhausted(s) || absl::IsDataLoss(s)) {
      *c = std::move(*connected);
      return s;
    }
    std::lock_guard<std::mutex> lock(fetch->mu_);
    fetch->fd_ = -1;
  }
  return s;
}

absl::Status ObjectDataClient::Run(const std::string& address, const ObjectID& id, int64_t io_timeout_ms,
                                   const Allocate& allocate, const std::shared_ptr<Fetch>& fetch) {
  Connection c;
  uint64_t data_size = 0;
  uint64_t metadata_size = 0;
  absl::Status s = ConnectAndAsk(address, id, io_timeout_ms, fetch, &c, &data_size, &metadata_size);
  if (c == nullptr) return s;
  auto finish = [&](absl::Status s, bool reusable) {
    {
      std::lock_guard<std::mutex> lock(fetch->mu_);
      fetch->fd_ = -1;
      if (fetch->cancelled_ && s.ok()) reusable = false;
      if (fetch->cancelled_ && !s.ok()) s = absl::CancelledError("the pull was cancelled");
    }
    if (reusable) ReturnIdle(address, std::move(c));
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
  if (absl::Status got = Receive(*c, *dest, total, io_timeout_ms, deadline); !got.ok()) {
    return finish(absl::UnavailableError("object channel to " + address + ": " + std::string(got.message())), false);
  }
  // Every byte is here: the sender may let the object go (see SendObject).
  if (absl::Status acked = c->Send(kAckFrame, std::string(1, 1)); !acked.ok()) return finish(absl::OkStatus(), false);
  return finish(absl::OkStatus(), true);
}

}  // namespace manta::raylet
