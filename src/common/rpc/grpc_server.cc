#include "src/common/rpc/grpc_server.h"

#include <glog/logging.h>
#include <grpcpp/server_posix.h>

#include "src/common/rpc/auth.h"
#include "src/common/rpc/network_limits.h"
#include "src/common/rpc/grpc_client.h"

namespace manta::rpc {

GrpcServer::GrpcServer(std::string name, std::string bind_address, int port, int64_t max_message_bytes)
    : name_(std::move(name)),
      bind_address_(std::move(bind_address)),
      requested_port_(port),
      max_message_bytes_(max_message_bytes) {}

GrpcServer::~GrpcServer() {
  if (shutdown_thread_.joinable()) {
    if (shutdown_done_->load()) {
      shutdown_thread_.join();
    } else {
      // Still blocked on a call that will never finish: leave it to process exit.
      shutdown_thread_.detach();
      server_.release();
      relay_.release();  // gRPC may still write to its connections
    }
    return;
  }
  Shutdown(0);
}

void GrpcServer::RegisterService(grpc::Service* service) { services_.push_back(service); }

absl::Status GrpcServer::Start() {
  KeepGrpcInitialized();
  grpc::ServerBuilder builder;
  std::string address = bind_address_ + ":" + std::to_string(requested_port_);
  int selected_port = 0;
  Credentials credentials = ProcessCredentials();
  if (credentials.tls()) {
    // Mutual TLS: every member of the cluster holds a certificate signed by the CA.
    auto relay = TlsRelay::Create(credentials.tls_cert, credentials.tls_key, credentials.tls_ca);
    if (!relay.ok()) return relay.status();
    relay_ = std::move(*relay);
    if (plain_handler_) relay_->SetPlainHandler(plain_handler_);
  }
  auto acceptor = TcpAcceptor::Listen(bind_address_, requested_port_);
  if (!acceptor.ok()) return acceptor.status();
  acceptor_ = std::move(*acceptor);
  selected_port = acceptor_->port();
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Clients ping every keepalive_time_ms while they wait (grpc_client.cc); by
  // default a server would call that abuse and close the connection.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             static_cast<int>(CurrentNetworkLimits().keepalive_time_ms / 2));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  builder.SetMaxReceiveMessageSize(static_cast<int>(max_message_bytes_));
  builder.SetMaxSendMessageSize(static_cast<int>(max_message_bytes_));
  // gRPC 1.51 buffers a whole request before it compares its size with the cap (and
  // before any handler can check the caller's token), so a peer could make a server
  // hold gigabytes. The quota bounds what all of this server's connections buffer:
  // under pressure gRPC shrinks windows and cancels the largest calls.
  grpc::ResourceQuota quota(name_ + "_quota");
  quota.Resize(static_cast<size_t>(2 * max_message_bytes_));
  builder.SetResourceQuota(quota);
  for (grpc::Service* s : services_) builder.RegisterService(s);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr) {
    relay_.reset();
    acceptor_.reset();
    return absl::UnavailableError("cannot listen on " + address + " (port in use or address not available)");
  }
  grpc::Server* server = server_.get();
  if (relay_) {
    relay_->Start([server](int accepted_fd, int grpc_fd) {
      ConnectionRenamed(accepted_fd, grpc_fd);
      grpc::AddInsecureChannelFromFd(server, grpc_fd);
    });
    acceptor_->Start([relay = relay_.get()](int fd) { relay->Add(fd); });
  } else {
    acceptor_->Start([server](int fd) { grpc::AddInsecureChannelFromFd(server, fd); });
  }
  port_ = selected_port;
  LOG(INFO) << name_ << " listening on " << bind_address_ << ":" << port_;
  return absl::OkStatus();
}

void GrpcServer::StopAccepting() {
  if (acceptor_) acceptor_->Stop();
  // gRPC must adopt no connection once it is shutting down.
  if (relay_) relay_->StopHandoffs();
}

void GrpcServer::ShutdownAsync(EventLoop& loop, int64_t grace_ms, absl::AnyInvocable<void()> done) {
  if (server_ == nullptr || shutdown_thread_.joinable()) {
    loop.Post("GrpcServer.ShutdownDone", std::move(done));
    return;
  }
  grpc::Server* server = server_.get();
  StopAccepting();
  shutdown_thread_ = std::thread([server, grace_ms, &loop, flag = shutdown_done_, done = std::move(done)]() mutable {
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms));
    flag->store(true);
    loop.Post("GrpcServer.ShutdownDone", std::move(done));
  });
}

bool GrpcServer::WaitForShutdown(int64_t timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!shutdown_done_->load()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

void GrpcServer::Shutdown(int64_t grace_ms) {
  if (shutdown_thread_.joinable()) return;  // ShutdownAsync owns it
  if (server_ == nullptr) return;
  StopAccepting();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms));
  server_.reset();
  if (relay_) relay_->Stop();
}

}  // namespace manta::rpc
