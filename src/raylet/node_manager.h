// NodeManager: the raylet's control plane for issue-level "node membership".
//
// Registers this node with the GCS, answers health checks, keeps the cluster
// resource view fed by GCS pubsub, reports this node's availability (from the lease
// manager, with its infeasible requests), watches that the GCS stays reachable, and
// unregisters on clean shutdown. It also forwards cluster
// events to the lease manager (view changes, dead nodes, finished jobs, worker and
// driver exits on other nodes, removed placement groups), reports every exit of a registered local worker or
// driver to the GCS (ReportWorkerFailure, published on GCS_WORKER_DELTA_CHANNEL) and
// ends the job of a local driver that is gone (MarkJobFinished). Fatal conditions
// (the GCS unreachable longer than gcs_rpc_server_reconnect_timeout_s, this node
// declared DEAD, the GCS serving another cluster) are handed to `on_fatal`, which
// stops the raylet. Loop thread only.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "protos/node_manager.grpc.pb.h"
#include "src/common/config.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"
#include "src/common/rpc/grpc_server.h"
#include "src/gcs/gcs_client.h"
#include "src/gcs/gcs_subscriber.h"
#include "src/object_store/arena.h"
#include "src/object_store/object_store.h"
#include "src/scheduling/cluster_resource_view.h"
#include "src/raylet/fetch_admission.h"
#include "src/raylet/lease_manager.h"
#include "src/raylet/memory_monitor.h"
#include "src/raylet/object_manager.h"
#include "src/scheduling/resources.h"
#include "src/raylet/worker_pool.h"

namespace manta::raylet {

struct NodeManagerOptions {
  NodeID node_id;
  std::string node_ip_address = "127.0.0.1";
  int port = 0;  // the bound node-manager port
  // The object data channel's port (object_data_channel.h); 0: none, pulls from
  // this node use the node-manager port's gRPC service.
  int object_data_port = 0;
  int metrics_export_port = 0;
  std::string node_name;
  // Set for a node the autoscaler launched.
  std::string node_type;
  std::string instance_id;
  scheduling::ResourceMap resources;
  std::string session_dir;
  bool is_head = false;
};

// What the node manager works with, made before it (raylet.h builds them in order);
// all outlive it.
struct NodeManagerParts {
  Config& config;  // the node's: the head's overrides are applied at registration
  scheduling::ClusterResourceView& view;
  gcs::GcsClientInterface& gcs;
  gcs::PlacementGroupInfoClientInterface& groups;  // looks up groups whose requests wait here
  WorkerPool& pool;
  LeaseManager& lease_manager;
  object_store::ObjectStore& store;
  ObjectManager& object_manager;
  const object_store::Arena& arena;
  std::string store_socket;  // advertised in the node table
};

class NodeManager {
 public:
  // Listens to the pool (local workers and drivers that leave) and the lease manager
  // (placement groups its requests wait for) at once.
  NodeManager(EventLoop& loop, NodeManagerOptions options, NodeManagerParts parts, std::function<int64_t()> now_ms,
              std::function<void(const std::string&)> on_fatal);
  ~NodeManager();

  // The node-manager port, known once the RPC server is bound. REQUIRES: before Start().
  void SetPort(int port) { options_.port = port; }
  // The Prometheus endpoint's port (metrics_agent.h). REQUIRES: before Start().
  void SetMetricsExportPort(int port) { options_.metrics_export_port = port; }
  // The node's resources and object store as last reported (stats at most 1 s old).
  rpc::ResourceUsage Usage() { return MakeUsage(false); }
  // The object data channel's port, when it serves one. REQUIRES: before Start().
  void SetObjectDataPort(int port) { options_.object_data_port = port; }
  // Asks the GCS how `job_id`'s workers start (its registration) and hands the answer
  // to the worker pool: SetJobConfig, or FailJob when the GCS does not know the job.
  void FetchJobConfig(const JobID& job_id);
  // Registers with the GCS (retrying transient failures) and starts the subscriber and
  // timers. `on_registered` gets the outcome.
  void Start(absl::AnyInvocable<void(absl::Status)> on_registered);
  // Unregisters from the GCS (best effort, bounded by a short deadline), then `done`.
  void Shutdown(absl::AnyInvocable<void()> done);

  void HandleHealthCheck(const rpc::HealthCheckRequest& request, rpc::HealthCheckReply* reply,
                         rpc::SendReply send_reply);
  void HandleGetNodeStats(const rpc::GetNodeStatsRequest& request, rpc::GetNodeStatsReply* reply,
                          rpc::SendReply send_reply);
  void HandlePinObjectIDs(const rpc::PinObjectIDsRequest& request, rpc::PinObjectIDsReply* reply,
                          rpc::SendReply send_reply);
  void HandleUnpinObjectIDs(const rpc::UnpinObjectIDsRequest& request, rpc::UnpinObjectIDsReply* reply,
                            rpc::SendReply send_reply);
  void HandleFreeObjects(const rpc::FreeObjectsRequest& request, rpc::FreeObjectsReply* reply,
                         rpc::SendReply send_reply);
  void HandleFetchObjects(const rpc::FetchObjectsRequest& request, rpc::FetchObjectsReply* reply,
                          rpc::SendReply send_reply);
  // Fetches waiting for their turn (tests).
  size_t num_waiting_fetches() const { return fetch_admission_.num_waiting(); }

  // Placement group bundles, handed to the lease manager.
  // A commit or return is reported to the GCS at once, so that requests for the
  // bundle find this node.
  void HandlePrepareBundleResources(const rpc::PrepareBundleResourcesRequest& request,
                                    rpc::PrepareBundleResourcesReply* reply, rpc::SendReply send_reply);
  void HandleCommitBundleResources(const rpc::CommitBundleResourcesRequest& request,
                                   rpc::CommitBundleResourcesReply* reply, rpc::SendReply send_reply);
  void HandleCancelResourceReserve(const rpc::CancelResourceReserveRequest& request,
                                   rpc::CancelResourceReserveReply* reply, rpc::SendReply send_reply);
  void HandleReleaseUnusedBundles(const rpc::ReleaseUnusedBundlesRequest& request,
                                  rpc::ReleaseUnusedBundlesReply* reply, rpc::SendReply send_reply);

  const scheduling::ClusterResourceView& view() const { return view_; }
  // The configuration, with the head's overrides once registered.
  const Config& config() const { return config_; }
  const ClusterID& cluster_id() const { return cluster_id_; }
  rpc::NodeInfo MakeNodeInfo() const;

 private:
  // Pins the sealed object `id` as a primary copy of `owner` (nil: unknown); false
  // when it is not here.
  bool PinFor(const ObjectID& id, const WorkerID& owner);
  // Pulls an admitted fetch's objects, holding each for its reader; the reply lists
  // those that failed.
  void StartFetch(const rpc::FetchObjectsRequest& request, std::vector<ObjectID> ids, rpc::FetchObjectsReply* reply,
                  rpc::SendReply send_reply, FetchAdmission::Done done);
  void Resync();
  void OnPubMessage(const rpc::PubMessage& message);
  // Tells the lease manager, once per loop turn, that the view changed.
  void ViewChanged();
  void OnDriverGone(const WorkerGone& gone);
  // Tells the GCS, which tells every raylet (leases it owns elsewhere are released).
  void ReportWorkerGone(const WorkerGone& gone);
  // A worker or driver (here or on another node; binary id) died: the primary copies
  // it owned here are deleted, since no one can free them any more.
  void DeleteObjectsOwnedBy(const std::string& worker_id);
  void CheckGcs();
  void ReportUsage(bool force);
  void MarkGcsReachable() { last_gcs_ok_ms_ = now_ms_(); }
  // With `fresh`, store stats are recomputed now (GetNodeStats); otherwise at most
  // once a second: computing them walks the object table, which is too slow for
  // every 100 ms resource report under heavy load.
  rpc::ResourceUsage MakeUsage(bool fresh);
  const object_store::ObjectStoreStats& StoreStats(bool fresh);

  EventLoop& loop_;
  NodeManagerOptions options_;
  Config& config_;
  gcs::GcsClientInterface& gcs_;
  std::function<int64_t()> now_ms_;
  std::function<void(const std::string&)> on_fatal_;
  ClusterID cluster_id_;
  scheduling::ClusterResourceView& view_;
  gcs::PlacementGroupInfoClientInterface& groups_;
  WorkerPool& pool_;
  LeaseManager& lease_manager_;
  bool view_change_posted_ = false;
  std::string last_reported_;
  object_store::ObjectStore& store_;
  ObjectManager& object_manager_;
  const object_store::Arena& arena_;
  object_store::ObjectStoreStats store_stats_;
  int64_t store_stats_ms_ = -1;
  const std::string store_socket_;
  bool reported_once_ = false;
  int64_t last_gcs_ok_ms_ = 0;
  bool check_in_flight_ = false;
  bool gcs_check_failed_ = false;  // since the last check that succeeded
  bool shutting_down_ = false;
  int64_t start_time_ms_ = 0;
  std::unique_ptr<gcs::GcsSubscriber> subscriber_;
  std::unique_ptr<Timer> gcs_check_timer_;
  std::unique_ptr<Timer> report_timer_;
  std::unique_ptr<MemoryMonitor> memory_monitor_;
  // A blocked worker lends its CPU only while the node's memory use is below this
  // fraction of memory_usage_threshold.
  static constexpr double kLendCpuBelow = 0.8;
  // Readers' fetches take turns for room in the store.
  FetchAdmission fetch_admission_{loop_, [this] { return store_.capacity_bytes() - store_.InUseBytes(); }};
  // Cleared on destruction, so that posted view-change notices do nothing.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// The NodeManagerService gRPC front: posts each call to the loop.
class NodeManagerGrpcService final : public rpc::NodeManagerService::CallbackService {
 public:
  NodeManagerGrpcService(EventLoop& loop, NodeManager& manager) : loop_(loop), manager_(manager) {}
  grpc::ServerUnaryReactor* HealthCheck(grpc::CallbackServerContext* c, const rpc::HealthCheckRequest* q,
                                        rpc::HealthCheckReply* r) override;
  grpc::ServerUnaryReactor* GetNodeStats(grpc::CallbackServerContext* c, const rpc::GetNodeStatsRequest* q,
                                         rpc::GetNodeStatsReply* r) override;
  grpc::ServerUnaryReactor* PinObjectIDs(grpc::CallbackServerContext* c, const rpc::PinObjectIDsRequest* q,
                                         rpc::PinObjectIDsReply* r) override;
  grpc::ServerUnaryReactor* UnpinObjectIDs(grpc::CallbackServerContext* c, const rpc::UnpinObjectIDsRequest* q,
                                           rpc::UnpinObjectIDsReply* r) override;
  grpc::ServerUnaryReactor* FreeObjects(grpc::CallbackServerContext* c, const rpc::FreeObjectsRequest* q,
                                        rpc::FreeObjectsReply* r) override;
  grpc::ServerUnaryReactor* FetchObjects(grpc::CallbackServerContext* c, const rpc::FetchObjectsRequest* q,
                                         rpc::FetchObjectsReply* r) override;
  grpc::ServerUnaryReactor* PrepareBundleResources(grpc::CallbackServerContext* c,
                                                   const rpc::PrepareBundleResourcesRequest* q,
                                                   rpc::PrepareBundleResourcesReply* r) override;
  grpc::ServerUnaryReactor* CommitBundleResources(grpc::CallbackServerContext* c,
                                                  const rpc::CommitBundleResourcesRequest* q,
                                                  rpc::CommitBundleResourcesReply* r) override;
  grpc::ServerUnaryReactor* CancelResourceReserve(grpc::CallbackServerContext* c,
                                                  const rpc::CancelResourceReserveRequest* q,
                                                  rpc::CancelResourceReserveReply* r) override;
  grpc::ServerUnaryReactor* ReleaseUnusedBundles(grpc::CallbackServerContext* c,
                                                 const rpc::ReleaseUnusedBundlesRequest* q,
                                                 rpc::ReleaseUnusedBundlesReply* r) override;

 private:
  EventLoop& loop_;
  NodeManager& manager_;
};

}  // namespace manta::raylet
