// TlsRelay: the TLS end of a gRPC server's connections, so that TLS servers can use
// TcpAcceptor like plaintext ones.
//
// gRPC 1.51 adopts only plaintext descriptors (grpc_server_add_channel_from_fd
// refuses TLS credentials), and its own TLS listener stops accepting for good after
// one EMFILE. So the acceptor hands each TLS connection here instead: one thread
// runs the handshake (mutual: the peer must present a certificate signed by the
// cluster's CA; ALPN "h2", which gRPC clients require), then makes a socketpair,
// gives one end to `on_ready` (GrpcServer gives it to gRPC as a plaintext
// connection) and relays bytes between the other end and the TLS connection.
//
// Either side closing ends the connection: the peer (or the acceptor shutting down
// an unproven connection) closes gRPC's end, and gRPC closing its end closes the
// peer's; gRPC's last words before it closes are still delivered. At most
// kBufferBytes are held per direction (allocated after the handshake); a side that
// does not read stops the other. Thread-safe.
#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "src/common/logging.h"

namespace manta::rpc {

class TlsRelay {
 public:
  // `accepted_fd` is the connection Add() was given (still open, owned by the relay);
  // `grpc_fd` is the plaintext end for gRPC, owned by the callee from then on.
  using OnReady = std::function<void(int accepted_fd, int grpc_fd)>;
  static constexpr size_t kBufferBytes = 64 << 10;

  // PEM contents: this server's certificate (chain) and key, and the CA its peers'
  // certificates must be signed by. InvalidArgument names what does not parse.
  static absl::StatusOr<std::unique_ptr<TlsRelay>> Create(const std::string& cert_pem, const std::string& key_pem,
                                                          const std::string& ca_pem);
  ~TlsRelay();
  TlsRelay(const TlsRelay&) = delete;
  TlsRelay& operator=(const TlsRelay&) = delete;

  // Connections whose first byte is not a TLS handshake record (0x16) go to
  // `handler` instead, blocking, owned by it (the GCS serves certificate enrollment
  // on its port so). Runs on the relay's thread: it must not block. REQUIRES: before
  // Start().
  void SetPlainHandler(std::function<void(int fd)> handler) { plain_handler_ = std::move(handler); }
  void Start(OnReady on_ready);
  // Takes `fd`, an accepted non-blocking TCP connection, and starts its handshake.
  void Add(int fd);
  // No more connections go to `on_ready`: those still in their handshake are closed
  // (and later ones closed as they finish it). Once this returns, on_ready is not
  // running and will not run again. Relaying goes on.
  void StopHandoffs();
  // Closes every connection and stops the thread. Idempotent.
  void Stop();
  // Connections open (in their handshake or relaying); for tests.
  size_t num_connections() const { return num_connections_.load(); }
  // Times the relay's thread has woken up; for tests (an idle relay does not wake).
  uint64_t num_wakeups() const { return num_wakeups_.load(); }

 private:
  struct Connection;
  TlsRelay(SSL_CTX* ctx, int epoll_fd, int wake_fd);
  void Run();
  void TakeNewConnections();
  // Moves bytes until nothing more can move; returns whether anything did.
  bool Pump(Connection& c);
  // Before the handshake: whether the connection is TLS, its first byte is still to
  // come, or it went to the plain handler (and is no longer the relay's).
  enum class Sniffed { kTls, kWait, kHandedOff };
  Sniffed Sniff(Connection& c);
  bool Handshake(Connection& c);
  // What an SSL_read or SSL_write result means: bytes moved, wait for the socket
  // (noting when it must become writable), or the TLS connection is over.
  enum class SslOutcome { kMoved, kWait, kOver };
  SslOutcome Outcome(Connection& c, int result);
  void Watch(Connection& c);
  void Close(Connection& c);

  SSL_CTX* const ctx_;
  const int epoll_fd_;
  const int wake_fd_;
  OnReady on_ready_;
  std::function<void(int fd)> plain_handler_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> num_connections_{0};
  std::atomic<uint64_t> num_wakeups_{0};

  std::mutex incoming_mu_;
  std::vector<int> incoming_;  // accepted, not yet seen by the thread

  std::mutex handoff_mu_;  // held while on_ready runs
  bool handoffs_stopped_ = false;

  // Relay thread only.
  absl::flat_hash_map<Connection*, std::unique_ptr<Connection>> connections_;
  std::vector<Connection*> closed_;  // freed after the events being handled
  LogRateLimiter warnings_;
};

}  // namespace manta::rpc
