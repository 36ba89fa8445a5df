// GcsServer: builds the GCS object graph, loads the tables from the store, serves
// the GCS gRPC services, health-checks raylets and runs the pubsub timers.
//
// All state lives on the one loop passed in (ARCHITECTURE §12). Restart safety: the
// cluster id, node, job, actor, placement group and KV tables and the job counter live in the store, so a new
// GcsServer over the same Redis serves the same cluster.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "src/common/config.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"
#include "src/common/rpc/grpc_client.h"
#include "src/common/rpc/grpc_server.h"
#include "src/task_channel/task_channel.h"
#include "src/gcs/gcs_actor_manager.h"
#include "src/gcs/gcs_actor_scheduler.h"
#include "src/gcs/gcs_health_checker.h"
#include "src/gcs/gcs_job_manager.h"
#include "src/gcs/gcs_worker_manager.h"
#include "src/gcs/gcs_kv_manager.h"
#include "src/gcs/gcs_node_manager.h"
#include "src/gcs/gcs_placement_group_manager.h"
#include "src/gcs/gcs_placement_group_scheduler.h"
#include "src/gcs/gcs_publisher.h"
#include "src/common/metrics/metrics_endpoint.h"
#include "src/gcs/gcs_state_manager.h"
#include "src/gcs/gcs_task_manager.h"
#include "src/gcs/store_client.h"
#include "protos/node_manager.grpc.pb.h"
#include "src/raylet/raylet_client.h"

namespace manta::gcs {

inline constexpr char kClusterTable[] = "cluster";

struct GcsServerOptions {
  std::string bind_address = "127.0.0.1";
  int port = 0;
  int metrics_export_port = 0;  // the Prometheus endpoint (0: any free port)
  Config config;
  // The --system-config JSON given to this GCS, handed on to every raylet.
  std::string system_config;
  std::shared_ptr<rpc::FaultInjector> faults;
  // The cluster token and the task channel protection the GCS requires on the task
  // channels to actor workers (creation tasks). Its RPC server checks the process's
  // token (src/common/rpc/auth.h).
  core::TaskChannelSecurity task_channel_security;
  // With TLS: where connections go that do not start a TLS handshake (certificate
  // enrollment, src/common/enrollment.h); none: they are refused as bad TLS.
  std::function<void(int fd)> plain_connection_handler;
};

class GcsGrpcServices;

class GcsServer {
 public:
  GcsServer(EventLoop& loop, GcsServerOptions options, std::unique_ptr<StoreClientInterface> store);
  ~GcsServer();

  // Loads state and starts serving; `on_started` runs on the loop with the outcome
  // (e.g. the port is in use, or the store failed).
  void Start(absl::AnyInvocable<void(absl::Status)> on_started);
  // Answers held polls and stops the RPC server, blocking until it stopped. Not on
  // the loop thread while the loop must still run handlers (see GrpcServer::Shutdown).
  void Stop();
  // The same without blocking the loop: `done` runs on the loop once stopped. Loop thread.
  void StopAsync(absl::AnyInvocable<void()> done);
  // After StopAsync: waits up to `timeout_ms` for the RPC server to stop.
  bool WaitForStop(int64_t timeout_ms) { return server_ == nullptr || server_->WaitForShutdown(timeout_ms); }

  int port() const { return server_ ? server_->port() : 0; }
  // The Prometheus endpoint's port (0 before Start).
  int metrics_port() const { return metrics_ ? metrics_->port() : 0; }
  const ClusterID& cluster_id() const { return cluster_id_; }
  GcsNodeManager& node_manager() { return *node_manager_; }
  GcsActorManager& actor_manager() { return *actor_manager_; }
  GcsPlacementGroupManager& placement_group_manager() { return *placement_group_manager_; }
  GcsTaskManager& task_manager() { return *task_manager_; }

 private:
  void LoadClusterId(absl::AnyInvocable<void(absl::Status)> done);
  // The managers, schedulers and clients (once the cluster id is known).
  void BuildManagers();
  // What each manager tells the others (node added or removed, resources reported,
  // a worker or job gone).
  void WireManagers();
  // Fills the managers from the store, in the order they depend on each other.
  void LoadTables(absl::AnyInvocable<void(absl::Status)> done);
  using TableRows = absl::flat_hash_map<std::string, std::string>;
  struct TableLoad {
    std::string table;
    std::function<void(const TableRows&)> load;
  };
  // Reads the tables of `loads` from the store one after the other, from `next`.
  void LoadNext(std::shared_ptr<std::vector<TableLoad>> loads, size_t next,
                absl::AnyInvocable<void(absl::Status)> done);
  absl::Status StartRpc();
  // Stops the timers and answers held polls: the common start of Stop and StopAsync.
  void StopWork();
  void CheckNodeHealth(const NodeID& node_id, std::function<void(absl::Status)> done);

  EventLoop& loop_;
  GcsServerOptions options_;
  std::unique_ptr<StoreClientInterface> store_;
  ClusterID cluster_id_;
  GcsPublisher publisher_;
  std::unique_ptr<GcsNodeManager> node_manager_;
  std::unique_ptr<GcsJobManager> job_manager_;
  std::unique_ptr<GcsWorkerManager> worker_manager_;
  std::unique_ptr<GcsKVManager> kv_manager_;
  // Actors: leases through raylets, creation tasks over task channels.
  std::unique_ptr<raylet::RayletClientPool> lease_clients_;
  std::unique_ptr<core::TaskChannelPool> actor_channels_;
  std::unique_ptr<GcsActorScheduler> actor_scheduler_;
  std::unique_ptr<GcsActorManager> actor_manager_;
  // Placement groups: bundles reserved on raylets with two-phase commit.
  std::unique_ptr<GcsPlacementGroupScheduler> placement_group_scheduler_;
  std::unique_ptr<GcsPlacementGroupManager> placement_group_manager_;
  std::unique_ptr<GcsHealthChecker> health_checker_;
  // Task events and the state API (ARCHITECTURE.md §18).
  std::unique_ptr<GcsTaskManager> task_manager_;
  std::unique_ptr<GcsStateFanout> state_fanout_;
  std::unique_ptr<GcsStateManager> state_manager_;
  // Each node's raylet, for health checks (one attempt within health_check_timeout_ms).
  absl::flat_hash_map<NodeID, std::shared_ptr<raylet::RayletClientInterface>> raylet_clients_;
  std::unique_ptr<GcsGrpcServices> services_;
  std::unique_ptr<rpc::GrpcServer> server_;
  std::unique_ptr<Timer> health_timer_;
  std::unique_ptr<Timer> pubsub_timer_;
  std::unique_ptr<Timer> pubsub_batch_timer_;
  // The Prometheus endpoint, the GCS's snapshot for it, and the loop-lag probe.
  absl::Status StartMetrics();
  std::unique_ptr<metrics::MetricsEndpoint> metrics_;
  std::unique_ptr<Timer> metrics_timer_;
  std::unique_ptr<Timer> loop_lag_timer_;
};

}  // namespace manta::gcs
