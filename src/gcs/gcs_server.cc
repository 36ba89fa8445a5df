#include "src/gcs/gcs_server.h"

#include <algorithm>

#include <glog/logging.h>

#include "src/common/status_util.h"
#include "src/common/network.h"
#include "src/common/util.h"
#include "src/gcs/gcs_grpc_services.h"
#include "src/gcs/gcs_metrics.h"
#include "src/common/node_address.h"

namespace manta::gcs {

GcsServer::GcsServer(EventLoop& loop, GcsServerOptions options, std::unique_ptr<StoreClientInterface> store)
    : loop_(loop),
      options_(std::move(options)),
      store_(std::move(store)),
      publisher_(GcsPublisher::Options{options_.config.gcs_pubsub_poll_timeout_ms,
                                       options_.config.gcs_pubsub_subscriber_timeout_ms,
                                       options_.config.gcs_pubsub_max_queued_messages,
                                       options_.config.gcs_max_subscribers,
                                       options_.config.gcs_pubsub_batch_ms,
                                       options_.config.gcs_pubsub_max_batched_answers_per_s},
                 MonotonicMs) {}

GcsServer::~GcsServer() { Stop(); }

void GcsServer::Start(absl::AnyInvocable<void(absl::Status)> on_started) {
  LoadClusterId([this, on_started = std::move(on_started)](absl::Status s) mutable {
    if (!s.ok()) return on_started(s);
    BuildManagers();
    WireManagers();
    LoadTables([this, on_started = std::move(on_started)](absl::Status s) mutable {
      if (!s.ok()) return on_started(s);
      on_started(StartRpc());
    });
  });
}

void GcsServer::LoadClusterId(absl::AnyInvocable<void(absl::Status)> done) {
  // Put-if-absent then read back: two GCSs racing on one Redis agree on one id.
  std::string fresh = ClusterID::FromRandom().Binary();
  store_->AsyncPut(kClusterTable, "cluster_id", fresh, /*overwrite=*/false,
                   [this, done = std::move(done)](absl::StatusOr<bool> put) mutable {
                     if (!put.ok()) return done(Annotate(put.status(), "storing the cluster id"));
                     store_->AsyncGet(kClusterTable, "cluster_id",
                                      [this, done = std::move(done)](
                                          absl::StatusOr<std::optional<std::string>> r) mutable {
                                        if (!r.ok()) return done(r.status());
                                        if (!r->has_value()) return done(absl::InternalError("cluster id vanished"));
                                        auto id = ClusterID::FromBinaryChecked(**r);
                                        if (!id.ok()) return done(Annotate(id.status(), "stored cluster id"));
                                        cluster_id_ = *id;
                                        LOG(INFO) << "cluster id " << cluster_id_.Hex();
                                        done(absl::OkStatus());
                                      });
                   });
}

void GcsServer::BuildManagers() {
  node_manager_ = std::make_unique<GcsNodeManager>(*store_, publisher_, cluster_id_, NowMs, options_.system_config);
  job_manager_ = std::make_unique<GcsJobManager>(*store_, publisher_, NowMs);
  worker_manager_ = std::make_unique<GcsWorkerManager>(publisher_);
  task_manager_ = std::make_unique<GcsTaskManager>(
      GcsTaskManager::Limits{options_.config.task_events_max_num, options_.config.task_events_max_bytes});
  kv_manager_ = std::make_unique<GcsKVManager>(*store_, options_.config.gcs_max_kv_value_bytes);
  rpc::ClientOptions lease_options = rpc::ClientOptionsFromConfig(options_.config, options_.faults);
  lease_clients_ = std::make_unique<raylet::RayletClientPool>([this, lease_options](const std::string& address) {
    return raylet::MakeGrpcRayletClient(loop_, address, lease_options);
  });
  actor_channels_ = std::make_unique<core::TaskChannelPool>([this](const std::string& key) {
    return core::MakeTcpTaskChannel(loop_, core::TaskChannelAddress(key), options_.config.grpc_max_message_bytes,
                                    options_.task_channel_security);
  });
  actor_scheduler_ = std::make_unique<GcsActorScheduler>(loop_, *node_manager_, *lease_clients_, *actor_channels_);
  actor_scheduler_->SetTaskEvents(task_manager_.get());
  actor_manager_ = std::make_unique<GcsActorManager>(*store_, publisher_, *actor_scheduler_, NowMs);
  placement_group_scheduler_ =
      std::make_unique<GcsPlacementGroupScheduler>(loop_, *node_manager_, *lease_clients_,
                                                   PlacementGroupSchedulerOptions{
                                                       options_.config.placement_group_split_wait_ms,
                                                       options_.config.bundle_return_attempts,
                                                       options_.config.bundle_return_retry_ms});
  placement_group_manager_ = std::make_unique<GcsPlacementGroupManager>(
      loop_, *store_, publisher_, *placement_group_scheduler_, NowMs,
      [this](const PlacementGroupID& group, const std::string& why) {
        actor_manager_->OnPlacementGroupRemoved(group, why);
      });
  health_checker_ = std::make_unique<GcsHealthChecker>(
      [this](const NodeID& id, std::function<void(absl::Status)> cb) { CheckNodeHealth(id, std::move(cb)); },
      [this](const NodeID& id, const std::string& reason) { node_manager_->MarkNodeDead(id, reason); },
      options_.config.health_check_failure_threshold, options_.config.health_check_initial_delay_ms, MonotonicMs,
      options_.config.health_check_isolation_grace_ms, options_.config.health_check_period_ms);
}

void GcsServer::WireManagers() {
  node_manager_->AddResourceReportListener([this](const NodeID& node) {
    placement_group_scheduler_->OnResourceReport(node);
    placement_group_manager_->OnResourcesChanged();
  });
  worker_manager_->AddDeathListener([this](const rpc::WorkerDeltaData& failure) {
    auto worker = WorkerID::FromBinaryChecked(failure.worker_id());
    if (worker.ok()) actor_manager_->OnWorkerDead(*worker, failure.exit_reason());
  });
  job_manager_->AddJobFinishedListener([this](const JobID& job) {
    actor_manager_->OnJobFinished(job);
    placement_group_manager_->OnJobFinished(job);
  });
  node_manager_->AddNodeAddedListener([this](const rpc::NodeInfo& info) {
    NodeID id = NodeID::FromBinary(info.node_id());
    rpc::ClientOptions client_options = rpc::ClientOptionsFromConfig(options_.config, options_.faults);
    client_options.deadline_ms = options_.config.health_check_timeout_ms;
    client_options.max_attempts = 1;
    raylet_clients_[id] = raylet::MakeGrpcRayletClient(
        loop_, RayletAddress(info), client_options);
    health_checker_->AddNode(id, /*remote=*/!IsLocalAddress(info.node_manager_address()));
    placement_group_manager_->OnResourcesChanged();
  });
  node_manager_->AddNodeRemovedListener([this](const rpc::NodeInfo& info) {
    NodeID id = NodeID::FromBinary(info.node_id());
    health_checker_->RemoveNode(id);
    raylet_clients_.erase(id);
    actor_scheduler_->OnNodeDead(id, RayletAddress(info));
    actor_manager_->OnNodeDead(id, info.death_reason());
    placement_group_manager_->OnNodeDead(id);
  });
}

void GcsServer::LoadTables(absl::AnyInvocable<void(absl::Status)> done) {
  // Nodes first (the actor scheduler places restarts on them), then jobs (finished
  // ones end their actors), then actors, then placement groups.
  auto loaders = std::make_shared<std::vector<TableLoad>>(std::vector<TableLoad>{
      {kNodeTable, [this](const TableRows& rows) { node_manager_->Initialize(rows); }},
      {kJobTable, [this](const TableRows& rows) { job_manager_->Initialize(rows); }},
      {kActorTable, [this](const TableRows& rows) { actor_manager_->Initialize(rows); }},
      {kPlacementGroupTable, [this](const TableRows& rows) { placement_group_manager_->Initialize(rows); }},
  });
  LoadNext(loaders, 0, std::move(done));
}

void GcsServer::LoadNext(std::shared_ptr<std::vector<TableLoad>> loads, size_t next,
                         absl::AnyInvocable<void(absl::Status)> done) {
  if (next == loads->size()) return done(absl::OkStatus());
  const std::string table = (*loads)[next].table;
  store_->AsyncGetAll(table, [this, loads, next, table, done = std::move(done)](
                                 absl::StatusOr<TableRows> rows) mutable {
    if (!rows.ok()) return done(Annotate(rows.status(), "loading the " + table + " table"));
    (*loads)[next].load(*rows);
    LoadNext(loads, next + 1, std::move(done));
  });
}

absl::Status GcsServer::StartRpc() {
  rpc::ClientOptions fanout_options = rpc::ClientOptionsFromConfig(options_.config, options_.faults);
  fanout_options.deadline_ms = options_.config.state_api_call_timeout_ms;
  fanout_options.max_attempts = 1;
  state_fanout_ = std::make_unique<GcsStateFanout>(loop_, *node_manager_, fanout_options);
  state_manager_ = std::make_unique<GcsStateManager>(*node_manager_, *job_manager_, *actor_manager_,
                                                     *placement_group_manager_, *task_manager_, *state_fanout_);
  services_ = std::make_unique<GcsGrpcServices>(loop_, *node_manager_, *job_manager_, *worker_manager_,
                                                *kv_manager_, *actor_manager_, *placement_group_manager_,
                                                publisher_, cluster_id_, *task_manager_, *state_manager_);
  server_ = std::make_unique<rpc::GrpcServer>("manta_gcs", options_.bind_address, options_.port,
                                              options_.config.grpc_max_message_bytes);
  server_->RegisterService(&services_->node);
  server_->RegisterService(&services_->job);
  server_->RegisterService(&services_->worker);
  server_->RegisterService(&services_->kv);
  server_->RegisterService(&services_->actor);
  server_->RegisterService(&services_->placement_group);
  server_->RegisterService(&services_->pubsub);
  server_->RegisterService(&services_->task);
  server_->RegisterService(&services_->state);
  if (options_.plain_connection_handler) server_->SetPlainConnectionHandler(options_.plain_connection_handler);
  MANTA_RETURN_IF_ERROR(server_->Start());
  // Each node is checked once a period at its own phase; the tick is that phase's
  // granularity.
  const int64_t period = std::max<int64_t>(1, options_.config.health_check_period_ms);
  health_timer_ = loop_.RunEvery("GcsServer.HealthCheck", std::clamp<int64_t>(period / 10, 1, 100),
                                 [this] { health_checker_->Tick(); });
  pubsub_timer_ =
      loop_.RunEvery("GcsServer.PubSubTick", options_.config.gcs_pubsub_tick_ms, [this] { publisher_.Tick(); });
  if (options_.config.gcs_pubsub_batch_ms > 0) {
    pubsub_batch_timer_ = loop_.RunEvery("GcsServer.PubSubBatch", options_.config.gcs_pubsub_batch_ms,
                                         [this] { publisher_.FlushBatched(); });
  }
  placement_group_manager_->Start();
  return StartMetrics();
}

absl::Status GcsServer::StartMetrics() {
  metrics_ = std::make_unique<metrics::MetricsEndpoint>(options_.bind_address, options_.metrics_export_port,
                                                        rpc::ProcessCredentials());
  if (absl::Status s = metrics_->Start(); !s.ok()) {
    return absl::Status(s.code(), "the metrics endpoint (--metrics-export-port): " + std::string(s.message()));
  }
  node_manager_->SetGcsMetricsExportPort(metrics_->port());
  auto snapshot = [this] {
    metrics_->SetSnapshot(
        GcsMetricFamilies(*task_manager_, *actor_manager_, *placement_group_manager_, *node_manager_));
  };
  snapshot();
  const int64_t period_ms = std::max<int64_t>(options_.config.metrics_report_period_ms, 100);
  metrics_timer_ = loop_.RunEvery("GcsServer.MetricsSnapshot", period_ms, snapshot);
  loop_lag_timer_ = metrics::WatchLoopLag(loop_, "gcs", period_ms);
  return absl::OkStatus();
}

void GcsServer::CheckNodeHealth(const NodeID& node_id, std::function<void(absl::Status)> done) {
  auto it = raylet_clients_.find(node_id);
  if (it == raylet_clients_.end()) {
    done(absl::NotFoundError("no client for node"));
    return;
  }
  it->second->HealthCheck([done, node_id](const absl::Status& s, rpc::HealthCheckReply&& reply) {
    if (s.ok() && reply.node_id() != node_id.Binary()) {
      // Another raylet now answers on that port: ours is gone.
      done(absl::NotFoundError("a different node answers at that address"));
      return;
    }
    done(s);
  });
}

void GcsServer::StopWork() {
  health_timer_.reset();
  pubsub_timer_.reset();
  pubsub_batch_timer_.reset();
  metrics_timer_.reset();
  loop_lag_timer_.reset();
  if (metrics_) metrics_->Stop();
  publisher_.FlushAll();  // held long polls must be answered before the server can stop
  if (placement_group_manager_) placement_group_manager_->FlushWaits();
}

void GcsServer::Stop() {
  StopWork();
  if (server_) server_->Shutdown(200);
}

void GcsServer::StopAsync(absl::AnyInvocable<void()> done) {
  StopWork();
  if (server_ == nullptr) return done();
  server_->ShutdownAsync(loop_, 200, std::move(done));
}

}  // namespace manta::gcs
