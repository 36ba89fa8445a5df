// GrpcServer: a gRPC callback server whose handlers run on a component's EventLoop.
//
// gRPC's own threads only post: ServeOnLoop() turns an incoming unary call into a
// named handler on the loop, which answers through a SendReply callback (callable
// from any thread, exactly once). A handler may keep that callback and answer later,
// which is how long polls work. Start() reports a port already in use as an error
// (SO_REUSEPORT is off, so a second server cannot silently share a port).
//
// The server's connections come from a TcpAcceptor (tcp_acceptor.h), which survives
// running out of descriptors and closes connections that prove nothing. With TLS a
// TlsRelay (tls_relay.h) terminates it and gives gRPC a plaintext socketpair, since
// gRPC 1.51 can adopt only plaintext connections. What the server's connections
// buffer is bounded by a gRPC resource quota of twice the message cap (gRPC reads a
// whole message before checking its size).
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "src/common/event_loop.h"
#include "src/common/metrics/metrics_proto.h"
#include "src/common/rpc/auth.h"
#include "src/common/rpc/send_reply.h"
#include "src/common/rpc/status_convert.h"
#include "src/common/rpc/tcp_acceptor.h"
#include "src/common/rpc/tls_relay.h"

namespace manta::rpc {

class GrpcServer {
 public:
  // `port` 0 asks the kernel for a free port; see port() after Start().
  GrpcServer(std::string name, std::string bind_address, int port, int64_t max_message_bytes);
  ~GrpcServer();

  // REQUIRES: called before Start(); `service` outlives the server.
  void RegisterService(grpc::Service* service);
  // With TLS: connections that do not start a TLS handshake go to `handler`
  // (TlsRelay::SetPlainHandler); without TLS, gRPC gets every connection. REQUIRES:
  // before Start().
  void SetPlainConnectionHandler(std::function<void(int fd)> handler) { plain_handler_ = std::move(handler); }
  // Binds and starts serving. Errors: the port is in use or the address is invalid.
  absl::Status Start();
  int port() const { return port_; }
  // Stops accepting calls; calls still open after `grace_ms` are cancelled.
  // Blocks until every accepted call has finished: gRPC waits for each handler to
  // answer, so never call this from the loop thread while handlers are still to run
  // there (use ShutdownAsync).
  void Shutdown(int64_t grace_ms = 200);
  // Shuts down on a helper thread while `loop` keeps running the handlers that
  // finish calls in flight; `done` then runs on the loop. Call from the loop thread.
  void ShutdownAsync(EventLoop& loop, int64_t grace_ms, absl::AnyInvocable<void()> done);
  // After ShutdownAsync: waits up to `timeout_ms` for it to complete.
  bool WaitForShutdown(int64_t timeout_ms);

 private:
  // No new connections, from the listener or the TLS relay.
  void StopAccepting();

  std::string name_;
  std::string bind_address_;
  int requested_port_;
  int port_ = 0;
  int64_t max_message_bytes_;
  std::vector<grpc::Service*> services_;
  std::function<void(int fd)> plain_handler_;
  std::unique_ptr<TcpAcceptor> acceptor_;
  std::unique_ptr<TlsRelay> relay_;  // with TLS
  std::unique_ptr<grpc::Server> server_;
  std::thread shutdown_thread_;
  std::shared_ptr<std::atomic<bool>> shutdown_done_ = std::make_shared<std::atomic<bool>>(false);
};

// Authenticates the call (the cluster token, src/common/rpc/auth.h); when it passes,
// posts `handler(request, reply, send_reply)` to `loop` under `name`. Returns the
// reactor gRPC needs. `Handler` is callable as
//   void(const Request&, Reply*, SendReply)
template <typename Request, typename Reply, typename Handler>
grpc::ServerUnaryReactor* ServeOnLoop(EventLoop& loop, const char* name,
                                      grpc::CallbackServerContext* context, const Request* request,
                                      Reply* reply, Handler handler) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status admitted = AuthenticateCall(*context, name); !admitted.ok()) {
    reactor->Finish(ToGrpcStatus(admitted));
    return reactor;
  }
  loop.Post(name, [name, request, reply, reactor, handler = std::move(handler),
                   arrived = std::chrono::steady_clock::now()]() mutable {
    handler(*request, reply, SendReply([name, reactor, arrived](absl::Status status) {
              metrics::RecordServedRpc(
                  name, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - arrived).count(),
                  status.ok());
              reactor->Finish(ToGrpcStatus(status));
            }));
  });
  return reactor;
}

// Adapts a component method `void Handle(const Request&, Reply*, SendReply)` into a
// ServeOnLoop handler: ServeOnLoop(loop, name, c, q, r, BindHandler(m, &M::HandleFoo)).
template <typename Component, typename Request, typename Reply>
auto BindHandler(Component& component, void (Component::*method)(const Request&, Reply*, SendReply)) {
  return [&component, method](const Request& q, Reply* r, SendReply s) { (component.*method)(q, r, std::move(s)); };
}

}  // namespace manta::rpc
