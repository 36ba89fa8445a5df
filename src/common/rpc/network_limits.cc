#include "src/common/rpc/network_limits.h"

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "src/common/config.h"

namespace manta::rpc {
namespace {

absl::Mutex limits_mu(absl::kConstInit);
NetworkLimits& Limits() ABSL_EXCLUSIVE_LOCKS_REQUIRED(limits_mu) {
  static NetworkLimits* limits = new NetworkLimits();
  return *limits;
}

}  // namespace

NetworkLimits NetworkLimitsFromConfig(const Config& config) {
  NetworkLimits limits;
  limits.keepalive_time_ms = config.grpc_keepalive_time_ms;
  limits.keepalive_timeout_ms = config.grpc_keepalive_timeout_ms;
  limits.accept_pause_ms = config.accept_pause_ms;
  limits.unproven_timeout_ms = config.unproven_connection_timeout_ms;
  limits.max_unproven_per_host = config.max_unproven_connections_per_host;
  limits.max_unproven = config.max_unproven_connections;
  limits.task_channel_keepalive_idle_ms = config.task_channel_keepalive_idle_ms;
  limits.task_channel_keepalive_interval_ms = config.task_channel_keepalive_interval_ms;
  limits.task_channel_keepalive_probes = config.task_channel_keepalive_probes;
  return limits;
}

void SetNetworkLimits(const NetworkLimits& limits) {
  absl::MutexLock lock(&limits_mu);
  Limits() = limits;
}

NetworkLimits CurrentNetworkLimits() {
  absl::MutexLock lock(&limits_mu);
  return Limits();
}

}  // namespace manta::rpc
