#include "src/common/rpc/tcp_acceptor.h"

#include <glog/logging.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace manta::rpc {

namespace {

// The address of each descriptor the acceptors handed out, by number: a number is
// reused only after gRPC closed the connection, and the next accept overwrites it.
struct PeerTable {
  absl::Mutex mu;
  absl::flat_hash_map<int, std::string> by_fd ABSL_GUARDED_BY(mu);
};
PeerTable& Peers() {
  static PeerTable* const table = new PeerTable();
  return *table;
}

std::string AddressOf(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "unknown";
  char host[INET6_ADDRSTRLEN] = "?";
  if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    return std::string("ipv6:[") + host + "]:" + std::to_string(ntohs(a->sin6_port));
  }
  const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
  inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
  return std::string("ipv4:") + host + ":" + std::to_string(ntohs(a->sin_port));
}

}  // namespace

std::string DescribePeer(const std::string& grpc_peer) {
  if (grpc_peer.rfind("fd:", 0) != 0) return grpc_peer;
  int fd = std::atoi(grpc_peer.c_str() + 3);
  PeerTable& table = Peers();
  absl::MutexLock lock(&table.mu);
  auto it = table.by_fd.find(fd);
  return it == table.by_fd.end() ? grpc_peer : it->second;
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

void TcpAcceptor::Start(OnAccept on_accept, int64_t pause_ms) {
  on_accept_ = std::move(on_accept);
  thread_ = std::thread([this, pause_ms] { Run(pause_ms); });
}

void TcpAcceptor::Stop() {
  if (stopping_.exchange(true)) return;
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
  listen_fd_ = -1;
}

void TcpAcceptor::Run(int64_t pause_ms) {
  int64_t paused_for_ms = 0;  // > 0: out of descriptors, wait this long first
  while (!stopping_.load()) {
    // While paused only the wake-up is watched: the listener would stay readable
    // and turn the wait into a busy loop.
    pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {paused_for_ms > 0 ? -1 : listen_fd_, POLLIN, 0}};
    int n = poll(fds, 2, paused_for_ms > 0 ? static_cast<int>(paused_for_ms) : -1);
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
      {
        PeerTable& table = Peers();
        absl::MutexLock lock(&table.mu);
        table.by_fd[fd] = AddressOf(fd);
      }
      on_accept_(fd);
    }
  }
}

}  // namespace manta::rpc
