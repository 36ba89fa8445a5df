#include "src/common/rpc/tcp_acceptor.h"

#include <glog/logging.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "src/common/rpc/network_limits.h"

namespace manta::rpc {

namespace {

// What the acceptors know of each descriptor they handed out, by number: a number
// is reused only after gRPC closed the connection, and the next accept overwrites it.
struct Peer {
  std::string address;  // "ipv4:127.0.0.1:5555"
  std::string host;     // "127.0.0.1"
  const TcpAcceptor* acceptor = nullptr;
  // While unproven: a duplicate of the connection (so that shutting it down can
  // never hit a descriptor number gRPC has closed and reused), its inode, and when
  // it must have proven itself.
  int watch_fd = -1;
  ino_t inode = 0;
  int64_t deadline_ms = 0;
};
struct PeerTable {
  absl::Mutex mu;
  absl::flat_hash_map<int, Peer> by_fd ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<std::string, int> unproven_by_host ABSL_GUARDED_BY(mu);
  // Written under mu; read without it by MarkAuthenticated's fast path.
  std::atomic<int> unproven{0};
};
PeerTable& Peers() {
  static PeerTable* const table = new PeerTable();
  return *table;
}

// Forgets that `peer` is unproven (closing the duplicate). REQUIRES: table.mu.
void StopWatching(PeerTable& table, Peer& peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(table.mu) {
  if (peer.watch_fd < 0) return;
  close(peer.watch_fd);
  peer.watch_fd = -1;
  --table.unproven;
  auto it = table.unproven_by_host.find(peer.host);
  if (it != table.unproven_by_host.end() && --it->second <= 0) table.unproven_by_host.erase(it);
}

ino_t InodeOf(int fd) {
  struct stat st {};
  return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

void DescribeAddress(int fd, std::string* address, std::string* host) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  char text[INET6_ADDRSTRLEN] = "?";
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    *address = *host = "unknown";
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
    *host = text;
    *address = std::string("ipv6:[") + text + "]:" + std::to_string(ntohs(a->sin6_port));
  } else {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
    *host = text;
    *address = std::string("ipv4:") + text + ":" + std::to_string(ntohs(a->sin_port));
  }
}

bool IsLoopbackHost(const std::string& host) {
  return host.rfind("127.", 0) == 0 || host == "::1" || host.rfind("::ffff:127.", 0) == 0;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The descriptor number gRPC names a connection it adopted by ("fd:12"), or -1.
int AdoptedFd(const std::string& grpc_peer) {
  if (grpc_peer.rfind("fd:", 0) != 0) return -1;
  return std::atoi(grpc_peer.c_str() + 3);
}

}  // namespace

std::string DescribePeer(const std::string& grpc_peer) {
  int fd = AdoptedFd(grpc_peer);
  if (fd < 0) return grpc_peer;
  PeerTable& table = Peers();
  absl::MutexLock lock(&table.mu);
  auto it = table.by_fd.find(fd);
  return it == table.by_fd.end() ? grpc_peer : it->second.address;
}

bool AnyUnprovenConnections() { return Peers().unproven.load(std::memory_order_relaxed) > 0; }

void MarkAuthenticated(const std::string& grpc_peer) {
  int fd = AdoptedFd(grpc_peer);
  if (fd < 0) return;
  PeerTable& table = Peers();
  absl::MutexLock lock(&table.mu);
  auto it = table.by_fd.find(fd);
  if (it == table.by_fd.end() || it->second.watch_fd < 0) return;
  // The call's connection is alive while it runs, so its number is still its own.
  if (InodeOf(fd) == it->second.inode) StopWatching(table, it->second);
}

void ConnectionRenamed(int accepted_fd, int grpc_fd) {
  PeerTable& table = Peers();
  absl::MutexLock lock(&table.mu);
  auto it = table.by_fd.find(accepted_fd);
  if (it == table.by_fd.end()) return;
  Peer peer = std::move(it->second);
  table.by_fd.erase(it);
  Peer& slot = table.by_fd[grpc_fd];
  StopWatching(table, slot);  // gRPC closed that one before it proved itself
  // MarkAuthenticated checks that a number is still this connection by its inode.
  if (peer.watch_fd >= 0) peer.inode = InodeOf(grpc_fd);
  slot = std::move(peer);
}

absl::StatusOr<std::unique_ptr<TcpAcceptor>> TcpAcceptor::Listen(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  if (int r = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); r != 0 || found == nullptr) {
    return absl::InvalidArgumentError("cannot listen on " + host + ": " + gai_strerror(r));
  }
  std::string where = host + ":" + service;
  absl::Status status = absl::UnavailableError("cannot listen on " + where);
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
      status = absl::UnavailableError("cannot listen on " + where + ": " + std::strerror(errno) +
                                      (errno == EADDRINUSE ? " (port in use)" : ""));
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return status;
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  int bound_port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                               : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  int wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake < 0) {
    close(fd);
    return absl::UnavailableError(std::string("eventfd: ") + std::strerror(errno));
  }
  return std::unique_ptr<TcpAcceptor>(new TcpAcceptor(fd, wake, bound_port));
}

TcpAcceptor::~TcpAcceptor() {
  Stop();
  close(wake_fd_);
}

void TcpAcceptor::Start(OnAccept on_accept) {
  const NetworkLimits limits = CurrentNetworkLimits();
  on_accept_ = std::move(on_accept);
  unproven_timeout_ms_ = limits.unproven_timeout_ms;
  max_unproven_per_host_ = limits.max_unproven_per_host;
  thread_ = std::thread([this, pause_ms = limits.accept_pause_ms] { Run(pause_ms); });
}

void TcpAcceptor::Stop() {
  if (stopping_.exchange(true)) return;
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  ExpireUnproven(true);
  close(listen_fd_);
  listen_fd_ = -1;
}

bool TcpAcceptor::Admit(int fd) {
  Peer peer;
  peer.acceptor = this;
  DescribeAddress(fd, &peer.address, &peer.host);
  PeerTable& table = Peers();
  absl::MutexLock lock(&table.mu);
  auto& old = table.by_fd[fd];
  StopWatching(table, old);  // gRPC closed that one before it proved itself
  auto count = table.unproven_by_host.find(peer.host);
  bool limited = limit_loopback_ || !IsLoopbackHost(peer.host);
  if (limited && count != table.unproven_by_host.end() && count->second >= max_unproven_per_host_) {
    int64_t others = 0;
    if (warnings_.Allow(&others)) {
      LOG(WARNING) << "refused a connection from " << peer.address << " on port " << port_ << ": "
                   << max_unproven_per_host_ << " connections from " << peer.host
                   << " have not presented the cluster token yet" << LogRateLimiter::LeftOut(others);
    }
    table.by_fd.erase(fd);
    return false;
  }
  peer.watch_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (peer.watch_fd >= 0) {
    peer.inode = InodeOf(fd);
    peer.deadline_ms = NowMs() + unproven_timeout_ms_;
    ++table.unproven_by_host[peer.host];
    ++table.unproven;
  }
  old = std::move(peer);
  return true;
}

int TcpAcceptor::ExpireUnproven(bool all) {
  PeerTable& table = Peers();
  absl::MutexLock lock(&table.mu);
  if (table.unproven == 0) return 0;
  int64_t now = NowMs();
  int left = 0;
  for (auto& [fd, peer] : table.by_fd) {
    if (peer.acceptor != this || peer.watch_fd < 0) continue;
    if (!all && now < peer.deadline_ms) {
      ++left;
      continue;
    }
    if (!all) {
      int64_t others = 0;
      if (warnings_.Allow(&others)) {
        LOG(WARNING) << "closing the connection from " << peer.address << " on port " << port_
                     << ": no call with the cluster token within " << unproven_timeout_ms_ << " ms"
                     << LogRateLimiter::LeftOut(others);
      }
    }
    // gRPC sees the connection end and closes its descriptor.
    shutdown(peer.watch_fd, SHUT_RDWR);
    StopWatching(table, peer);
  }
  return left;
}

void TcpAcceptor::Run(int64_t pause_ms) {
  int64_t paused_for_ms = 0;  // > 0: out of descriptors, wait this long first
  int unproven = 0;
  while (!stopping_.load()) {
    // While paused only the wake-up is watched: the listener would stay readable
    // and turn the wait into a busy loop. With unproven connections, a look at
    // their deadlines once a second; else no wake-ups at all.
    pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {paused_for_ms > 0 ? -1 : listen_fd_, POLLIN, 0}};
    int sweep_ms = static_cast<int>(std::min<int64_t>(1000, std::max<int64_t>(unproven_timeout_ms_ / 4, 10)));
    int timeout_ms = paused_for_ms > 0 ? static_cast<int>(paused_for_ms) : unproven > 0 ? sweep_ms : -1;
    int n = poll(fds, 2, timeout_ms);
    paused_for_ms = 0;
    if (n < 0 && errno != EINTR) {
      PLOG(ERROR) << "poll on the listener";
      return;
    }
    if (stopping_.load()) return;
    while (true) {
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          int64_t others = 0;
          if (warnings_.Allow(&others)) {
            LOG(WARNING) << "accepting on port " << port_ << ": " << std::strerror(errno) << "; pausing accepts for "
                         << pause_ms << " ms" << LogRateLimiter::LeftOut(others);
          }
          paused_for_ms = pause_ms;
        }
        break;  // EAGAIN, a connection that went away, or paused
      }
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      if (!Admit(fd)) {
        close(fd);
        continue;
      }
      on_accept_(fd);
    }
    unproven = ExpireUnproven(false);
  }
}

}  // namespace manta::rpc
