#include "src/common/rpc/grpc_client.h"

#include <grpc/grpc.h>

#include "src/common/rpc/auth.h"
#include "src/common/rpc/network_limits.h"

namespace manta::rpc {

void AttachClusterToken(grpc::ClientContext* context) {
  std::string token = ProcessCredentials().token;
  if (!token.empty()) context->AddMetadata(kClusterTokenMetadataKey, token);
}

void KeepGrpcInitialized() {
  // Never undone: gRPC's idle threads stay until exit.
  [[maybe_unused]] static const bool initialized = (grpc_init(), true);
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, int64_t max_message_bytes) {
  KeepGrpcInitialized();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(max_message_bytes));
  args.SetMaxSendMessageSize(static_cast<int>(max_message_bytes));
  // A restarted peer (GCS, raylet) must be found again within about a second, not
  // after gRPC's default two-minute backoff. The minimum is also how long one connect
  // attempt may take (TCP and the peer's HTTP/2 settings): at 100 ms a live but busy
  // peer on a loaded machine (a sort's owner, a borrower) failed to connect and was
  // taken for dead (OwnerDiedException; a borrow released and the object freed
  // early). A dead peer still fails at once (connection refused).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 2000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  // Each client gets its own connection rather than sharing a global subchannel pool,
  // so one component's reconnect backoff does not hold another's calls.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // Large initial flow-control window: object chunks are megabytes, and waiting for
  // window updates would halve transfer throughput.
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 32 << 20);
  args.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 4 << 20);
  // While calls are in flight, ping the peer: a connection whose packets vanish (a
  // host cut off by a partition sends no FIN or RST) is given up after
  // keepalive time + timeout (network_limits.h) instead of TCP's minutes of retries,
  // so calls fail (and retry on a fresh connection) and a healed link is used again
  // at once. Servers accept pings this often (grpc_server.cc).
  const NetworkLimits limits = CurrentNetworkLimits();
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(limits.keepalive_time_ms));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(limits.keepalive_timeout_ms));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  Credentials credentials = ProcessCredentials();
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials;
  if (credentials.tls()) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = credentials.tls_ca;
    tls.pem_cert_chain = credentials.tls_cert;
    tls.pem_private_key = credentials.tls_key;
    channel_credentials = grpc::SslCredentials(tls);
  } else {
    channel_credentials = grpc::InsecureChannelCredentials();
  }
  return grpc::CreateCustomChannel(address, channel_credentials, args);
}

ClientOptions ClientOptionsFromConfig(const Config& config, std::shared_ptr<FaultInjector> faults) {
  ClientOptions options;
  options.deadline_ms = config.grpc_client_deadline_ms;
  options.max_attempts = config.grpc_client_max_attempts;
  options.initial_backoff_ms = config.grpc_client_initial_backoff_ms;
  options.max_backoff_ms = config.grpc_client_max_backoff_ms;
  options.max_message_bytes = config.grpc_max_message_bytes;
  options.faults = std::move(faults);
  return options;
}

GrpcClientCore::State::State(EventLoop& l, std::string a, ClientOptions o)
    : loop(l), address(std::move(a)), options(std::move(o)), channel(MakeChannel(address, options.max_message_bytes)) {}

GrpcClientCore::GrpcClientCore(EventLoop& loop, std::string address, ClientOptions options)
    : state_(std::make_shared<State>(loop, std::move(address), std::move(options))) {}

void GrpcClientCore::CancelAll() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->cancelled = true;
  for (grpc::ClientContext* context : state_->contexts) context->TryCancel();
}

void GrpcClientCore::Start(std::shared_ptr<CallBase> call) {
  state_->in_flight.fetch_add(1);
  Attempt(state_, std::move(call));
}

namespace {

bool Retryable(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace

void GrpcClientCore::Attempt(std::shared_ptr<State> state, std::shared_ptr<CallBase> call) {
  ++call->attempt;
  int64_t deadline_ms =
      call->call_options.deadline_ms > 0 ? call->call_options.deadline_ms : state->options.deadline_ms;
  FaultDecision fault;
  if (state->options.faults) fault = state->options.faults->Decide(call->name);
  if (fault.kind == FaultKind::kDropRequest) {
    state->loop.PostAfter(call->name, deadline_ms, [state, call] {
      Finish(state, call, grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                       std::string("injected fault: request of ") + call->name + " dropped"));
    });
    return;
  }
  const bool drop_reply = fault.kind == FaultKind::kDropReply;
  if (fault.kind == FaultKind::kDelay) {
    state->loop.PostAfter(call->name, fault.delay_ms,
                          [state, call, deadline_ms, drop_reply] { Send(state, call, deadline_ms, drop_reply); });
  } else {
    Send(std::move(state), std::move(call), deadline_ms, drop_reply);
  }
}

void GrpcClientCore::Send(std::shared_ptr<State> state, std::shared_ptr<CallBase> call, int64_t deadline_ms,
                          bool drop_reply) {
  call->context = std::make_unique<grpc::ClientContext>();
  AttachClusterToken(call->context.get());
  call->context->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
  call->ClearReply();
  {
    std::lock_guard<std::mutex> lock(state->mu);
    if (state->cancelled) {
      state->loop.Post(call->name, [state, call] {
        Finish(state, call, grpc::Status(grpc::StatusCode::CANCELLED, "the client is shutting down"));
      });
      return;
    }
    state->contexts.insert(call->context.get());
  }
  grpc::ClientContext* context = call->context.get();
  call->Send(context, [state, call, drop_reply](grpc::Status s) {
    {
      std::lock_guard<std::mutex> lock(state->mu);
      state->contexts.erase(call->context.get());
    }
    if (drop_reply && s.ok()) {
      s = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                       std::string("injected fault: reply of ") + call->name + " dropped");
      call->ClearReply();  // discarded: the caller must not see its contents
    }
    state->loop.Post(call->name, [state, call, s] { Finish(state, call, s); });
  });
}

void GrpcClientCore::Finish(std::shared_ptr<State> state, std::shared_ptr<CallBase> call,
                            const grpc::Status& status) {
  bool cancelled;
  {
    std::lock_guard<std::mutex> lock(state->mu);
    cancelled = state->cancelled;
  }
  if (!status.ok() && !cancelled && call->call_options.idempotent && Retryable(status) &&
      call->attempt < state->options.max_attempts) {
    int64_t backoff = state->options.initial_backoff_ms;
    for (int i = 1; i < call->attempt && backoff < state->options.max_backoff_ms; ++i) backoff *= 2;
    backoff = std::min(backoff, state->options.max_backoff_ms);
    state->loop.PostAfter(call->name, backoff, [state, call] { Attempt(state, call); });
    return;
  }
  absl::Status result = FromGrpcStatus(status);
  if (!result.ok()) {
    result = absl::Status(result.code(), std::string(call->name) + " to " + state->address + ": " +
                                             std::string(result.message()));
  }
  call->Deliver(result);
  state->in_flight.fetch_sub(1);
}

}  // namespace manta::rpc
