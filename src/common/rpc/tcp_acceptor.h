// TcpAcceptor: a listening TCP socket whose connections are accepted on a thread of
// its own and handed to a callback (GrpcServer gives them to gRPC).
//
// It exists because gRPC 1.51's own listener stops accepting for good after one
// accept4() fails with EMFILE. Here running out of descriptors (or memory) pauses
// accepting for `pause_ms` and then resumes, while the connections already open are
// served. Thread-safe; the callback runs on the acceptor's thread.
//
// It also bounds what a peer without the cluster's token can hold: a connection is
// "unproven" until a call on it passes AuthenticateCall (which reports it with
// MarkAuthenticated). A remote host may have at most
// NetworkLimits::max_unproven_per_host unproven connections (more are closed as they
// are accepted), and one still unproven after NetworkLimits::unproven_timeout_ms is
// shut down (network_limits.h: config_def.h's max_unproven_connections_per_host and
// unproven_connection_timeout_ms, read when the acceptor starts). Proven connections are not limited: every worker
// of a node connects from the node's one address. Loopback peers are not counted
// (they share one address with every local process, which a cap would lock out;
// the timeout still applies).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "src/common/logging.h"

namespace manta::rpc {

// gRPC names the peer of a connection it adopted "fd:<n>"; this returns the address
// the acceptor saw at accept time instead ("ipv4:127.0.0.1:5555"), and any other
// peer string unchanged. Thread-safe.
std::string DescribePeer(const std::string& grpc_peer);
// A call on the connection gRPC names `grpc_peer` ("fd:<n>") carried the token.
// Cheap for connections already proven, and a no-op for other peer names.
void MarkAuthenticated(const std::string& grpc_peer);
// Whether any acceptor of this process has a connection still to prove itself: when
// not (nearly always), a call need not be looked up at all.
bool AnyUnprovenConnections();
// The connection an acceptor handed out as `accepted_fd` reaches gRPC as `grpc_fd`
// (TlsRelay's end of a socketpair): DescribePeer and MarkAuthenticated know it by
// that number from now on. Shutting the connection down (unproven too long) still
// shuts down the accepted one. Thread-safe.
void ConnectionRenamed(int accepted_fd, int grpc_fd);

class TcpAcceptor {
 public:
  using OnAccept = std::function<void(int fd)>;

  // Binds `host` (a numeric address or a name) and `port` (0 = any free port).
  // Errors: the port is in use (SO_REUSEPORT is off) or the address is not local.
  static absl::StatusOr<std::unique_ptr<TcpAcceptor>> Listen(const std::string& host, int port);
  ~TcpAcceptor();
  TcpAcceptor(const TcpAcceptor&) = delete;
  TcpAcceptor& operator=(const TcpAcceptor&) = delete;

  int port() const { return port_; }
  // Tests: count loopback peers like remote ones. REQUIRES: before Start().
  void LimitLoopbackPeersForTesting() { limit_loopback_ = true; }
  // Starts accepting; each connection (non-blocking, close-on-exec, TCP_NODELAY) goes
  // to `on_accept`, which owns it from then on. The process's NetworkLimits
  // (network_limits.h) say how long accepting pauses when descriptors run out, how
  // many unproven connections one remote host may hold, and how long they may stay
  // unproven before they are shut down.
  void Start(OnAccept on_accept);
  // Stops accepting and closes the listening socket. Idempotent.
  void Stop();

 private:
  TcpAcceptor(int listen_fd, int wake_fd, int port) : listen_fd_(listen_fd), wake_fd_(wake_fd), port_(port) {}
  void Run(int64_t pause_ms);
  // Records a new connection; false when its host has too many unproven ones.
  bool Admit(int fd);
  // Shuts down this acceptor's connections unproven past their deadline (all of
  // them when `all`); returns how many are still unproven.
  int ExpireUnproven(bool all);

  int listen_fd_;
  const int wake_fd_;
  const int port_;
  OnAccept on_accept_;
  bool limit_loopback_ = false;
  int64_t unproven_timeout_ms_ = 0;   // from NetworkLimits at Start
  int64_t max_unproven_per_host_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  LogRateLimiter warnings_;
};

}  // namespace manta::rpc
