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

}  // namespace manta::rpc
