// TcpAcceptor: a listening TCP socket whose connections are accepted on a thread of
// its own and handed to a callback (GrpcServer gives them to gRPC).
//
// It exists because gRPC 1.51's own listener stops accepting for good after one
// accept4() fails with EMFILE. Here running out of descriptors (or memory) pauses
// accepting for `pause_ms` and then resumes, while the connections already open are
// served. Thread-safe; the callback runs on the acceptor's thread.
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
  // Starts accepting; each connection (non-blocking, close-on-exec, TCP_NODELAY) goes
  // to `on_accept`, which owns it from then on.
  void Start(OnAccept on_accept, int64_t pause_ms = 100);
  // Stops accepting and closes the listening socket. Idempotent.
  void Stop();

 private:
  TcpAcceptor(int listen_fd, int wake_fd, int port) : listen_fd_(listen_fd), wake_fd_(wake_fd), port_(port) {}
  void Run(int64_t pause_ms);

  int listen_fd_;
  const int wake_fd_;
  const int port_;
  OnAccept on_accept_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  LogRateLimiter warnings_;
};

}  // namespace manta::rpc
