#include "src/raylet/node_manager.h"

#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>

#include "src/common/rpc/serve_on_loop.h"
#include "src/common/util.h"
#include "src/common/node_address.h"

namespace manta::raylet {

NodeManager::NodeManager(EventLoop& loop, NodeManagerOptions options, NodeManagerParts parts,
                         std::function<int64_t()> now_ms, std::function<void(const std::string&)> on_fatal)
    : loop_(loop),
      options_(std::move(options)),
      config_(parts.config),
      gcs_(parts.gcs),
      now_ms_(std::move(now_ms)),
      on_fatal_(std::move(on_fatal)),
      view_(parts.view),
      groups_(parts.groups),
      pool_(parts.pool),
      lease_manager_(parts.lease_manager),
      store_(parts.store),
      object_manager_(parts.object_manager),
      arena_(parts.arena),
      store_socket_(std::move(parts.store_socket)),
      start_time_ms_(NowMs()) {
  // Usage reports carry the lease manager's availability and infeasible shapes,
  // cluster events reach it, and a local driver that is gone is reported to the GCS.
  pool_.AddGoneListener([this, alive = std::weak_ptr<bool>(alive_)](const WorkerGone& gone) {
    if (alive.expired()) return;
    if (gone.is_driver) OnDriverGone(gone);
    ReportWorkerGone(gone);
    DeleteObjectsOwnedBy(gone.worker_id.Binary());
  });
  // A group whose requests wait here is looked up; one that is removed or unknown
  // fails them.
  lease_manager_.SetWaitingGroupListener([this, alive = std::weak_ptr<bool>(alive_)](const PlacementGroupID& id) {
    if (alive.expired()) return;
    groups_.AsyncGetPlacementGroup(id.Binary(), [this, alive, id](const absl::Status& s,
                                                                   rpc::GetPlacementGroupReply&& reply) {
      if (alive.expired() || !s.ok()) return;  // unknown: the group's requests keep waiting
      if (!reply.found() || reply.placement_group().state() == rpc::PlacementGroupTableData::REMOVED) {
        lease_manager_.OnPlacementGroupRemoved(id);
      }
    });
  });
}

NodeManager::~NodeManager() { *alive_ = false; }

void NodeManager::ReportWorkerGone(const WorkerGone& gone) {
  // Leases it owns on other nodes: their raylets learn it from the GCS.
  if (!gone.registered) return;  // never ran anything, owns nothing
  rpc::WorkerDeltaData failure;
  failure.set_worker_id(gone.worker_id.Binary());
  failure.set_node_id(options_.node_id.Binary());
  failure.set_job_id(gone.job_id.Binary());
  failure.set_is_driver(gone.is_driver);
  failure.set_exit_reason(gone.reason);
  gcs_.AsyncReportWorkerFailure(failure, [worker = gone.worker_id](const absl::Status& s,
                                                                   rpc::ReportWorkerFailureReply&&) {
    if (!s.ok()) LOG(WARNING) << "could not report the exit of " << worker.Hex() << " to the GCS: " << s;
  });
}

void NodeManager::DeleteObjectsOwnedBy(const std::string& worker_id) {
  auto id = WorkerID::FromBinaryChecked(worker_id);
  if (!id.ok()) return;
  if (int64_t n = store_.DeleteOwnedBy(*id); n > 0) {
    LOG(INFO) << "deleted " << n << " primary copies whose owner " << id->Hex() << " died";
  }
}

void NodeManager::OnDriverGone(const WorkerGone& gone) {
  // The GCS publishes the job's end, so every raylet releases what the job holds.
  gcs_.AsyncMarkJobFinished(gone.job_id.Binary(), [job = gone.job_id](const absl::Status& s,
                                                                      rpc::MarkJobFinishedReply&&) {
    if (!s.ok()) LOG(WARNING) << "could not mark job " << job.Hex() << " finished at the GCS: " << s;
  });
}

void NodeManager::ViewChanged() {
  if (view_change_posted_) return;
  view_change_posted_ = true;
  loop_.Post("NodeManager.ViewChanged", [this, alive = std::weak_ptr<bool>(alive_)] {
    if (alive.expired()) return;
    view_change_posted_ = false;
    lease_manager_.OnClusterViewChanged();
  });
}

rpc::NodeInfo NodeManager::MakeNodeInfo() const {
  rpc::NodeInfo info;
  info.set_node_id(options_.node_id.Binary());
  info.set_node_manager_address(options_.node_ip_address);
  info.set_node_manager_port(options_.port);
  info.set_object_manager_port(options_.object_data_port > 0 ? options_.object_data_port : options_.port);
  info.set_state(rpc::NodeInfo::ALIVE);
  for (const auto& [name, value] : options_.resources) (*info.mutable_resources_total())[name] = value;
  info.set_node_name(options_.node_name);
  info.set_node_type(options_.node_type);
  info.set_instance_id(options_.instance_id);
  info.set_start_time_ms(start_time_ms_);
  info.set_session_dir(options_.session_dir);
  info.set_is_head_node(options_.is_head);
  info.set_raylet_pid(getpid());
  info.set_metrics_export_port(options_.metrics_export_port);
  info.set_object_store_socket(store_socket_);
  return info;
}

void NodeManager::Start(absl::AnyInvocable<void(absl::Status)> on_registered) {
  auto done = std::make_shared<absl::AnyInvocable<void(absl::Status)>>(std::move(on_registered));
  gcs_.AsyncRegisterNode(MakeNodeInfo(), [this, done](const absl::Status& s, rpc::RegisterNodeReply&& reply) {
    if (!s.ok()) {
      (*done)(s);
      return;
    }
    MarkGcsReachable();
    cluster_id_ = ClusterID::FromBinaryChecked(reply.cluster_id()).value_or(ClusterID::Nil());
    if (!reply.system_config().empty()) {
      // The head's overrides apply cluster-wide; they are applied before any timer starts.
      if (absl::Status c = config_.ApplyJson(reply.system_config()); !c.ok()) {
        LOG(WARNING) << "ignoring the head's system config: " << c;
      }
    }
    LOG(INFO) << "registered node " << options_.node_id.Hex() << " with cluster " << cluster_id_.Hex()
              << (reply.already_registered() ? " (already known)" : "");
    subscriber_ = std::make_unique<gcs::GcsSubscriber>(
        loop_, gcs_,
        std::vector<rpc::ChannelType>{rpc::GCS_NODE_INFO_CHANNEL, rpc::RESOURCE_USAGE_CHANNEL, rpc::GCS_JOB_CHANNEL,
                                      rpc::GCS_WORKER_DELTA_CHANNEL, rpc::GCS_PLACEMENT_GROUP_CHANNEL},
        config_.gcs_pubsub_poll_timeout_ms, [this](const rpc::PubMessage& m) { OnPubMessage(m); },
        [this] { Resync(); });
    subscriber_->SetOnPollResult([this](const absl::Status& s) {
      if (s.ok()) MarkGcsReachable();
    });
    subscriber_->Start();
    Resync();
    gcs_check_timer_ = loop_.RunEvery("NodeManager.CheckGcs", config_.raylet_gcs_check_period_ms,
                                      [this] { CheckGcs(); });
    report_timer_ = loop_.RunEvery("NodeManager.ReportUsage", config_.resource_report_ms,
                                   [this] { ReportUsage(false); });
    memory_monitor_ = std::make_unique<MemoryMonitor>(
        loop_, config_.memory_usage_threshold, config_.memory_monitor_refresh_ms,
        [this](const MemoryUsage& usage, double threshold) {
          return lease_manager_.KillWorkerForMemory(usage.ToString(), threshold);
        });
    // Past 80% of the threshold a blocked worker's CPU starts no more tasks here.
    lease_manager_.SetMemoryPressure([this] { return memory_monitor_->Above(kLendCpuBelow); });
    (*done)(absl::OkStatus());
  });
}

void NodeManager::Resync() {
  // After a GCS restart: make sure we are (still) registered, then reload the view.
  gcs_.AsyncRegisterNode(MakeNodeInfo(), [this](const absl::Status& s, rpc::RegisterNodeReply&& reply) {
    if (s.code() == absl::StatusCode::kFailedPrecondition) {
      on_fatal_("the GCS declared this node dead: " + std::string(s.message()));
      return;
    }
    if (s.ok()) {
      MarkGcsReachable();
      auto id = ClusterID::FromBinaryChecked(reply.cluster_id());
      if (id.ok() && !cluster_id_.IsNil() && *id != cluster_id_) {
        on_fatal_("the GCS now serves another cluster (" + id->Hex() + ")");
        return;
      }
    }
  });
  gcs_.AsyncGetAllNodeInfo([this](const absl::Status& s, rpc::GetAllNodeInfoReply&& reply) {
    if (!s.ok()) {
      LOG(WARNING) << "could not read the node table: " << s;
      return;
    }
    MarkGcsReachable();
    std::vector<NodeID> known;
    for (const auto& [id, node] : view_.nodes()) known.push_back(id);
    view_.ResetFromSnapshot(reply);
    for (const rpc::NodeInfo& node : reply.node_info_list()) {
      if (node.state() != rpc::NodeInfo::ALIVE || node.node_id() == options_.node_id.Binary()) continue;
      object_manager_.OnNodeAlive(RayletAddress(node),
                                   node.object_manager_port());
    }
    // Nodes that died while we were not listening.
    for (const NodeID& id : known) {
      if (!view_.Contains(id)) lease_manager_.OnNodeDead(id);
    }
    // Placement groups removed while we were not listening.
    lease_manager_.AskAboutWaitingGroups();
    ViewChanged();
    reported_once_ = false;  // the GCS may have lost our availability
    ReportUsage(true);
  });
}

void NodeManager::OnPubMessage(const rpc::PubMessage& message) {
  if (message.has_node_info_message()) {
    const rpc::NodeInfo& info = message.node_info_message();
    if (info.node_id() == options_.node_id.Binary() && info.state() == rpc::NodeInfo::DEAD && !shutting_down_) {
      on_fatal_("the GCS declared this node dead: " + info.death_reason());
      return;
    }
    view_.OnNodeInfo(info);
    const std::string address = RayletAddress(info);
    if (info.node_id() != options_.node_id.Binary()) {
      if (info.state() == rpc::NodeInfo::DEAD) {
        object_manager_.OnNodeDead(address);
      } else {
        object_manager_.OnNodeAlive(address, info.object_manager_port());
      }
    }
    if (info.state() == rpc::NodeInfo::DEAD) {
      auto id = NodeID::FromBinaryChecked(info.node_id());
      if (id.ok()) lease_manager_.OnNodeDead(*id);
    }
    ViewChanged();
  } else if (message.has_resource_usage_message()) {
    view_.OnResourceUsage(message.resource_usage_message());
    ViewChanged();
  } else if (message.has_job_message()) {
    const rpc::JobInfo& job = message.job_message();
    auto id = JobID::FromBinaryChecked(job.job_id());
    if (id.ok() && job.has_config()) pool_.SetJobConfig(*id, job.config());
    if (job.is_dead() && id.ok()) lease_manager_.OnJobFinished(*id);
  } else if (message.has_worker_delta_message()) {
    const rpc::WorkerDeltaData& failure = message.worker_delta_message();
    // A process of this node was handled when the worker pool saw it go.
    if (failure.node_id() == options_.node_id.Binary()) return;
    auto worker = WorkerID::FromBinaryChecked(failure.worker_id());
    if (worker.ok()) lease_manager_.OnRemoteOwnerGone(*worker, failure.exit_reason());
    DeleteObjectsOwnedBy(failure.worker_id());
  } else if (message.has_placement_group_message()) {
    const rpc::PlacementGroupTableData& group = message.placement_group_message();
    auto id = PlacementGroupID::FromBinaryChecked(group.placement_group_id());
    if (id.ok() && group.state() == rpc::PlacementGroupTableData::REMOVED) {
      lease_manager_.OnPlacementGroupRemoved(*id);
    }
  }
}

void NodeManager::FetchJobConfig(const JobID& job_id) {
  gcs_.AsyncGetAllJobInfo([this, job_id, alive = std::weak_ptr<bool>(alive_)](const absl::Status& s,
                                                                             rpc::GetAllJobInfoReply&& reply) {
    if (alive.expired()) return;
    if (!s.ok()) {
      pool_.FailJob(job_id, absl::UnavailableError("cannot read job " + job_id.Hex() + " from the GCS: " +
                                                    std::string(s.message())));
      return;
    }
    bool found = false;
    for (const rpc::JobInfo& job : reply.job_info_list()) {
      auto id = JobID::FromBinaryChecked(job.job_id());
      if (!id.ok() || !job.has_config()) continue;
      pool_.SetJobConfig(*id, job.config());
      found |= *id == job_id;
    }
    if (!found) {
      pool_.FailJob(job_id, absl::NotFoundError("job " + job_id.Hex() +
                                                 " is not registered with the GCS: no worker can be started for it"));
    }
  });
}

void NodeManager::CheckGcs() {
  int64_t timeout_ms = config_.gcs_rpc_server_reconnect_timeout_s * 1000;
  if (now_ms_() - last_gcs_ok_ms_ > timeout_ms) {
    on_fatal_("the GCS has been unreachable for more than " +
              std::to_string(config_.gcs_rpc_server_reconnect_timeout_s) + " s");
    return;
  }
  if (check_in_flight_) return;
  check_in_flight_ = true;
  gcs_.AsyncGetClusterId(config_.raylet_gcs_check_period_ms,
                         [this](const absl::Status& s, rpc::GetClusterIdReply&& reply) {
                           check_in_flight_ = false;
                           if (!s.ok()) {
                             LOG_EVERY_N(WARNING, 10) << "GCS check failed: " << s;
                             gcs_check_failed_ = true;
                             return;
                           }
                           MarkGcsReachable();
                           if (reply.cluster_id() != cluster_id_.Binary()) {
                             on_fatal_("the GCS now serves another cluster");
                             return;
                           }
                           if (gcs_check_failed_) {
                             // Back from a spell without the GCS (a partition, say): it
                             // may have declared this node dead meanwhile (Resync then
                             // ends this raylet), and nodes may have come and gone.
                             gcs_check_failed_ = false;
                             LOG(INFO) << "the GCS answers again; registering anew";
                             Resync();
                           }
                         });
}

const object_store::ObjectStoreStats& NodeManager::StoreStats(bool fresh) {
  int64_t now = now_ms_();
  if (fresh || store_stats_ms_ < 0 || now - store_stats_ms_ >= 1000) {
    store_stats_ = store_.Stats();
    store_stats_ms_ = now;
  }
  return store_stats_;
}

rpc::ResourceUsage NodeManager::MakeUsage(bool fresh) {
  rpc::ResourceUsage usage;
  usage.set_node_id(options_.node_id.Binary());
  // Blocked workers that took their CPU back may oversubscribe the node for a while;
  // others see it as full, not as negative.
  for (const auto& [k, v] : lease_manager_.available()) {
    (*usage.mutable_resources_available())[k] = std::max(0.0, v);
  }
  for (const std::string& shape : lease_manager_.InfeasibleShapes()) usage.add_infeasible_shapes(shape);
  for (const LeaseManager::Demand& d : lease_manager_.Demands()) {
    rpc::ResourceDemand* demand = usage.add_resource_demands();
    demand->mutable_shape()->insert(d.shape.begin(), d.shape.end());
    demand->set_num_queued(d.queued);
    demand->set_num_infeasible(d.infeasible);
  }
  usage.set_num_leases(static_cast<int32_t>(lease_manager_.num_leases()));
  // Committed bundles are resources of this node too.
  for (const auto& [k, v] : lease_manager_.total()) (*usage.mutable_resources_total())[k] = v;
  {
    const object_store::ObjectStoreStats& s = StoreStats(fresh);
    rpc::ObjectStoreStats* o = usage.mutable_object_store();
    o->set_capacity_bytes(s.capacity_bytes);
    o->set_used_bytes(s.used_bytes);
    o->set_num_objects(s.num_objects);
    o->set_num_pinned(s.num_pinned);
    o->set_num_spilled(s.num_spilled);
    o->set_spilled_bytes_current(s.spilled_bytes_current);
    o->set_spilled_bytes_total(s.spilled_bytes_total);
    o->set_restored_bytes_total(s.restored_bytes_total);
    o->set_evicted_bytes_total(s.evicted_bytes_total);
    o->set_num_pending_creates(s.num_pending_creates);
    o->set_prefaulted_bytes(arena_.prefaulted_bytes());
    o->set_prefault_target_bytes(arena_.prefault_target());
    o->set_pulled_bytes_total(object_manager_.bytes_pulled_total());
    o->set_served_bytes_total(object_manager_.bytes_served_total());
  }
  return usage;
}

void NodeManager::ReportUsage(bool force) {
  rpc::ResourceUsage usage = MakeUsage(/*fresh=*/false);
  std::string serialized = usage.SerializeAsString();
  if (!force && reported_once_ && serialized == last_reported_) return;
  reported_once_ = true;
  last_reported_ = serialized;
  gcs_.AsyncReportResourceUsage(usage, [this](const absl::Status& s, rpc::ReportResourceUsageReply&&) {
    if (!s.ok()) {
      reported_once_ = false;  // try again on the next tick
      VLOG(1) << "resource report failed: " << s;
    }
  });
}

void NodeManager::Shutdown(absl::AnyInvocable<void()> done) {
  if (shutting_down_) return;
  shutting_down_ = true;
  gcs_check_timer_.reset();
  report_timer_.reset();
  auto shared_done = std::make_shared<absl::AnyInvocable<void()>>(std::move(done));
  gcs_.AsyncUnregisterNode(options_.node_id.Binary(), "raylet stopped (SIGTERM)",
                           [shared_done](const absl::Status& s, rpc::UnregisterNodeReply&&) {
                             if (!s.ok()) LOG(WARNING) << "could not unregister from the GCS: " << s;
                             (*shared_done)();
                           });
}

void NodeManager::HandleHealthCheck(const rpc::HealthCheckRequest&, rpc::HealthCheckReply* reply,
                                    rpc::SendReply send_reply) {
  reply->set_node_id(options_.node_id.Binary());
  std::move(send_reply)(absl::OkStatus());
}

void NodeManager::HandleGetNodeStats(const rpc::GetNodeStatsRequest&, rpc::GetNodeStatsReply* reply,
                                     rpc::SendReply send_reply) {
  *reply->mutable_node_info() = MakeNodeInfo();
  *reply->mutable_usage() = MakeUsage(/*fresh=*/true);
  reply->set_num_alive_nodes_in_view(static_cast<int32_t>(view_.NumNodes()));
  std::move(send_reply)(absl::OkStatus());
}

namespace {

// Parses every id or explains which one is malformed.
absl::StatusOr<std::vector<ObjectID>> ParseObjectIds(const google::protobuf::RepeatedPtrField<std::string>& ids) {
  std::vector<ObjectID> out;
  out.reserve(ids.size());
  for (const auto& b : ids) {
    auto id = ObjectID::FromBinaryChecked(b);
    if (!id.ok()) return absl::InvalidArgumentError("malformed object id: " + std::string(id.status().message()));
    out.push_back(*id);
  }
  return out;
}

}  // namespace

bool NodeManager::PinFor(const ObjectID& id, const WorkerID& owner) {
  if (!store_.Pin(id).ok()) return false;
  if (!owner.IsNil()) store_.SetOwner(id, owner);  // deleted if that owner dies
  return true;
}

void NodeManager::HandlePinObjectIDs(const rpc::PinObjectIDsRequest& request, rpc::PinObjectIDsReply* reply,
                                     rpc::SendReply send_reply) {
  auto ids = ParseObjectIds(request.object_ids());
  if (!ids.ok()) return std::move(send_reply)(ids.status());
  const WorkerID owner = WorkerID::FromBinaryChecked(request.owner_address().worker_id()).value_or(WorkerID::Nil());
  for (const auto& id : *ids) reply->add_successes(PinFor(id, owner));
  std::move(send_reply)(absl::OkStatus());
}

void NodeManager::HandleUnpinObjectIDs(const rpc::UnpinObjectIDsRequest& request, rpc::UnpinObjectIDsReply*,
                                       rpc::SendReply send_reply) {
  auto ids = ParseObjectIds(request.object_ids());
  if (!ids.ok()) return std::move(send_reply)(ids.status());
  for (const auto& id : *ids) store_.Unpin(id);
  std::move(send_reply)(absl::OkStatus());
}

void NodeManager::HandleFreeObjects(const rpc::FreeObjectsRequest& request, rpc::FreeObjectsReply*,
                                    rpc::SendReply send_reply) {
  auto ids = ParseObjectIds(request.object_ids());
  if (!ids.ok()) return std::move(send_reply)(ids.status());
  store_.Delete(*ids);
  std::move(send_reply)(absl::OkStatus());
}

void NodeManager::HandleFetchObjects(const rpc::FetchObjectsRequest& request, rpc::FetchObjectsReply* reply,
                                     rpc::SendReply send_reply) {
  auto ids = ParseObjectIds(request.object_ids());
  if (!ids.ok()) return std::move(send_reply)(ids.status());
  if (request.object_locations_size() > 0 && request.object_locations_size() != request.object_ids_size()) {
    return std::move(send_reply)(absl::InvalidArgumentError(
        "FetchObjects: " + std::to_string(request.object_locations_size()) + " location lists for " +
        std::to_string(request.object_ids_size()) + " objects"));
  }
  int64_t bytes = 0;
  for (int k = 0; k < request.object_sizes_size() && k < request.object_ids_size(); ++k) {
    bytes += std::max<int64_t>(request.object_sizes(k), 0);
  }
  // A request dropped unstarted (the raylet stopping) is still answered.
  struct PendingReply {
    rpc::SendReply send;
    ~PendingReply() {
      if (send) std::move(send)(absl::UnavailableError("the raylet stopped before it fetched the objects"));
    }
  };
  auto pending = std::make_shared<PendingReply>();
  pending->send = std::move(send_reply);
  fetch_admission_.Add(bytes, [this, alive = std::weak_ptr<bool>(alive_), request, reply, ids = std::move(*ids),
                               pending](FetchAdmission::Done done) mutable {
    if (alive.expired()) return;
    rpc::SendReply send = std::move(pending->send);
    pending->send = nullptr;
    StartFetch(request, std::move(ids), reply, std::move(send), std::move(done));
  });
}

void NodeManager::StartFetch(const rpc::FetchObjectsRequest& request, std::vector<ObjectID> ids,
                             rpc::FetchObjectsReply* reply, rpc::SendReply send_reply, FetchAdmission::Done done) {
  struct Joint {
    size_t remaining;
    rpc::FetchObjectsReply* reply;
    rpc::SendReply send_reply;
    FetchAdmission::Done done;
  };
  auto joint = std::make_shared<Joint>(Joint{ids.size(), reply, std::move(send_reply), std::move(done)});
  if (ids.empty()) {
    std::move(joint->done)();
    return std::move(joint->send_reply)(absl::OkStatus());
  }
  const int64_t hold_ms = config_.object_manager_pull_timeout_ms;
  const bool pin = request.has_pin_for_owner();
  const WorkerID owner = WorkerID::FromBinaryChecked(request.pin_for_owner().worker_id()).value_or(WorkerID::Nil());
  for (size_t k = 0; k < ids.size(); ++k) {
    std::vector<std::string> locations;
    if (static_cast<int>(k) < request.object_locations_size()) {
      const auto& own = request.object_locations(static_cast<int>(k)).addresses();
      locations.assign(own.begin(), own.end());
    }
    for (const std::string& l : request.locations()) {
      if (std::find(locations.begin(), locations.end(), l) == locations.end()) locations.push_back(l);
    }
    const ObjectID id = ids[k];
    object_manager_.Pull(id, std::move(locations), [this, joint, id, hold_ms, pin, owner](absl::Status s) {
      if (s.ok() && pin && !PinFor(id, owner)) s = absl::UnavailableError("fetched, but gone before it was pinned");
      if (s.ok() && !pin) {
        // Kept for the reader until its Get takes it: pulling the reader's other
        // objects must not evict it first.
        store_.HoldForReader(id, hold_ms);
      } else if (!s.ok()) {
        auto* failure = joint->reply->add_failures();
        failure->set_object_id(id.Binary());
        failure->set_code(static_cast<int32_t>(s.code()));
        failure->set_message(std::string(s.message()));
      }
      if (--joint->remaining > 0) return;
      std::move(joint->done)();
      std::move(joint->send_reply)(absl::OkStatus());
    });
  }
}

MANTA_SERVE_ON_LOOP_AS(NodeManagerGrpcService, HealthCheck, "NodeManager.HealthCheck",
                       manager_, &NodeManager::HandleHealthCheck)

MANTA_SERVE_ON_LOOP_AS(NodeManagerGrpcService, GetNodeStats, "NodeManager.GetNodeStats",
                       manager_, &NodeManager::HandleGetNodeStats)

}  // namespace manta::raylet

namespace manta::raylet {

// The object RPCs: each posted to the loop and handed to the node manager.
MANTA_SERVE_ON_LOOP_AS(NodeManagerGrpcService, PinObjectIDs, "NodeManager.PinObjectIDs",
                       manager_, &NodeManager::HandlePinObjectIDs)
MANTA_SERVE_ON_LOOP_AS(NodeManagerGrpcService, UnpinObjectIDs, "NodeManager.UnpinObjectIDs",
                       manager_, &NodeManager::HandleUnpinObjectIDs)
MANTA_SERVE_ON_LOOP_AS(NodeManagerGrpcService, FreeObjects, "NodeManager.FreeObjects",
                       manager_, &NodeManager::HandleFreeObjects)
namespace {
std::vector<rpc::Bundle> BundlesOf(const google::protobuf::RepeatedPtrField<rpc::Bundle>& bundles) {
  return std::vector<rpc::Bundle>(bundles.begin(), bundles.end());
}
}  // namespace

void NodeManager::HandlePrepareBundleResources(const rpc::PrepareBundleResourcesRequest& request,
                                               rpc::PrepareBundleResourcesReply* reply, rpc::SendReply send_reply) {
  reply->set_success(lease_manager_.PrepareBundles(BundlesOf(request.bundles()), request.attempt_id()));
  std::move(send_reply)(absl::OkStatus());
}

void NodeManager::HandleCommitBundleResources(const rpc::CommitBundleResourcesRequest& request,
                                              rpc::CommitBundleResourcesReply*, rpc::SendReply send_reply) {
  absl::Status s = lease_manager_.CommitBundles(BundlesOf(request.bundles()));
  if (s.ok()) ReportUsage(true);
  std::move(send_reply)(s);
}

void NodeManager::HandleCancelResourceReserve(const rpc::CancelResourceReserveRequest& request,
                                              rpc::CancelResourceReserveReply*, rpc::SendReply send_reply) {
  auto group = PlacementGroupID::FromBinaryChecked(request.bundle().placement_group_id());
  if (!group.ok()) return std::move(send_reply)(absl::InvalidArgumentError("malformed placement group id"));
  lease_manager_.ReturnBundle(*group, request.bundle().bundle_index(), request.attempt_id());
  ReportUsage(true);
  std::move(send_reply)(absl::OkStatus());
}

void NodeManager::HandleReleaseUnusedBundles(const rpc::ReleaseUnusedBundlesRequest& request,
                                             rpc::ReleaseUnusedBundlesReply*, rpc::SendReply send_reply) {
  lease_manager_.ReleaseUnusedBundles(BundlesOf(request.bundles_in_use()));
  ReportUsage(true);
  std::move(send_reply)(absl::OkStatus());
}

MANTA_SERVE_ON_LOOP_AS(NodeManagerGrpcService, PrepareBundleResources, "NodeManager.PrepareBundleResources",
                       manager_, &NodeManager::HandlePrepareBundleResources)

MANTA_SERVE_ON_LOOP_AS(NodeManagerGrpcService, CommitBundleResources, "NodeManager.CommitBundleResources",
                       manager_, &NodeManager::HandleCommitBundleResources)

MANTA_SERVE_ON_LOOP_AS(NodeManagerGrpcService, CancelResourceReserve, "NodeManager.CancelResourceReserve",
                       manager_, &NodeManager::HandleCancelResourceReserve)

MANTA_SERVE_ON_LOOP_AS(NodeManagerGrpcService, ReleaseUnusedBundles, "NodeManager.ReleaseUnusedBundles",
                       manager_, &NodeManager::HandleReleaseUnusedBundles)

MANTA_SERVE_ON_LOOP_AS(NodeManagerGrpcService, FetchObjects, "NodeManager.FetchObjects",
                       manager_, &NodeManager::HandleFetchObjects)

}  // namespace manta::raylet
