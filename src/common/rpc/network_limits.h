// NetworkLimits: the limits every listening socket and gRPC channel of a process
// keeps (keepalive pings, and how many connections that have not yet proven they
// hold the cluster token a listener lets in). One set per process, from the config
// table (config_def.h), applied at start-up by SetUpDaemon and by a core worker
// before it opens any socket; every process of a cluster reads the same table, so
// servers and clients agree on the ping rate. Thread-safe.
#pragma once

#include <cstdint>

namespace manta {
struct Config;
}

namespace manta::rpc {

struct NetworkLimits {
  // gRPC channels ping this often while they have calls in flight, and give a
  // connection up when a ping is not answered within keepalive_timeout_ms.
  int64_t keepalive_time_ms = 5000;
  int64_t keepalive_timeout_ms = 5000;
  // A listener out of descriptors stops accepting for this long.
  int64_t accept_pause_ms = 100;
  // Connections that have not proven the token yet: shut down after this long;
  // at most this many from one remote host, and in all (task channels).
  int64_t unproven_timeout_ms = 10000;
  int64_t max_unproven_per_host = 64;
  int64_t max_unproven = 1024;
  // TCP keepalive of task channels: probes after this long idle, this far apart,
  // this many unanswered before the kernel gives the connection up (whole seconds).
  int64_t task_channel_keepalive_idle_ms = 10000;
  int64_t task_channel_keepalive_interval_ms = 3000;
  int64_t task_channel_keepalive_probes = 3;
};

NetworkLimits NetworkLimitsFromConfig(const Config& config);
void SetNetworkLimits(const NetworkLimits& limits);
// The process's limits (the defaults above until SetNetworkLimits).
NetworkLimits CurrentNetworkLimits();

}  // namespace manta::rpc
