// Raylet: the composition root of manta_raylet (ARCHITECTURE.md §2, §7, §8). Builds
// the node's parts in the order they depend on each other: the config and the
// cluster view first; the event loop; the object store (arena and its pager,
// spiller, object table, socket server) and the object manager; the GCS client and
// the RPC server; the worker pool and lease manager; the node manager, which is
// handed all of them; the RPC services; the child reaper. Run registers with
// the GCS and serves until a termination signal or a fatal condition (the GCS gone
// too long, this node declared dead), then stops the parts in reverse order.
#pragma once

#include <memory>
#include <random>
#include <string>

#include "absl/status/statusor.h"
#include "src/common/config.h"
#include "src/common/event_loop.h"
#include "src/common/rpc/auth.h"
#include "src/common/rpc/fault_injection.h"
#include "src/common/rpc/grpc_server.h"
#include "src/gcs/gcs_client.h"
#include "src/object_store/arena.h"
#include "src/object_store/arena_pager.h"
#include "src/object_store/object_store.h"
#include "src/object_store/spiller.h"
#include "src/object_store/store_server.h"
#include "src/raylet/child_reaper.h"
#include "src/raylet/lease_manager.h"
#include "src/raylet/log_manager.h"
#include "src/raylet/metrics_agent.h"
#include "src/raylet/node_state_service.h"
#include "src/raylet/node_manager.h"
#include "src/raylet/node_manager_worker_grpc_service.h"
#include "src/raylet/object_manager.h"
#include "src/raylet/process_worker_launcher.h"
#include "src/raylet/worker_pool.h"

namespace manta::raylet {

struct RayletOptions {
  std::string gcs_address;
  std::string bind_address;  // where the raylet and its workers listen
  int port = 0;              // node manager port (0: any free port)
  std::string store_socket;  // empty: <session dir>/store.sock
  std::string ready_file;    // written with "<port> <metrics port>" once registered
  int metrics_export_port = 0;  // the Prometheus endpoint (0: any free port)
  NodeManagerOptions node;
  Config config;  // with the overrides given; the head's are applied at registration
  rpc::Credentials credentials;
  rpc::TlsFiles tls;
  std::shared_ptr<rpc::FaultInjector> faults;
};

class Raylet {
 public:
  // Builds every part; an error names the one that could not be made (the arena,
  // the store socket, the RPC server's port, the data channel).
  static absl::StatusOr<std::unique_ptr<Raylet>> Create(RayletOptions options);
  ~Raylet();
  Raylet(const Raylet&) = delete;
  Raylet& operator=(const Raylet&) = delete;

  // Registers with the GCS and serves until told to stop. Returns the exit code.
  int Run();

 private:
  explicit Raylet(RayletOptions options);
  absl::Status BuildObjectStore();
  void BuildObjectManager();
  void BuildWorkers();
  void BuildNodeManager();
  absl::Status StartServing();
  // Starts the Prometheus endpoint and the node's snapshots for it.
  absl::Status StartMetrics();
  void OnRegistered(const absl::Status& status);
  // Stops the RPC server while the loop still runs the handlers of calls in flight,
  // then the loop. Safe to call more than once.
  void Quit(int code);

  RayletOptions options_;
  scheduling::ClusterResourceView view_;
  std::string private_dir_;  // the session dir, or a folder of this process's own
  EventLoop loop_;
  // Pulls, spills and restores, for the timeline (before the store and object manager).
  NodeEventLog node_events_;
  std::unique_ptr<object_store::Arena> arena_;
  std::unique_ptr<object_store::ArenaPager> pager_;
  std::unique_ptr<object_store::FileSpiller> spiller_;
  std::unique_ptr<object_store::ObjectStore> store_;
  std::unique_ptr<Timer> pager_timer_;
  std::unique_ptr<object_store::StoreServer> store_server_;
  std::unique_ptr<ObjectManager> object_manager_;
  rpc::ClientOptions client_options_;
  std::unique_ptr<gcs::GrpcGcsClient> gcs_;
  std::unique_ptr<rpc::GrpcServer> server_;
  std::unique_ptr<ProcessWorkerLauncher> launcher_;
  std::unique_ptr<WorkerPool> pool_;
  std::mt19937_64 rng_{std::random_device{}()};
  std::unique_ptr<LeaseManager> lease_manager_;
  std::unique_ptr<NodeManager> node_manager_;
  std::unique_ptr<NodeManagerGrpcService> service_;
  std::unique_ptr<NodeManagerWorkerGrpcService> worker_service_;
  // The node's log files, for `manta logs` and the drivers' terminals.
  std::unique_ptr<LogManager> log_manager_;
  std::unique_ptr<LogGrpcService> log_service_;
  std::unique_ptr<NodeStateGrpcService> node_state_service_;
  // The Prometheus endpoint, its snapshot of the node and the loop-lag probe.
  std::unique_ptr<MetricsAgent> metrics_agent_;
  std::unique_ptr<Timer> metrics_timer_;
  std::unique_ptr<Timer> loop_lag_timer_;
  std::unique_ptr<ChildReaper> reaper_;
  bool data_channel_ = false;  // objects leave through the object data channel
  bool quitting_ = false;
  int exit_code_ = 0;
};

}  // namespace manta::raylet
