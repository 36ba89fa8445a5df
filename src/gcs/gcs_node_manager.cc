#include "src/gcs/gcs_node_manager.h"

#include <glog/logging.h>

#include "src/gcs/table_loader.h"

namespace manta::gcs {

GcsNodeManager::GcsNodeManager(StoreClientInterface& store, GcsPublisher& publisher, ClusterID cluster_id,
                               std::function<int64_t()> now_ms, std::string system_config)
    : store_(store),
      publisher_(publisher),
      cluster_id_(cluster_id),
      now_ms_(std::move(now_ms)),
      system_config_(std::move(system_config)) {}

void GcsNodeManager::Initialize(const absl::flat_hash_map<std::string, std::string>& rows) {
  nodes_ = ParseTableRows<NodeID, rpc::NodeInfo>(rows, kNodeTable,
                                                 [](const rpc::NodeInfo& n) -> const std::string& { return n.node_id(); });
  for (const auto& [id, info] : nodes_) {
    if (info.state() == rpc::NodeInfo::ALIVE) {
      for (auto& l : added_listeners_) l(info);
    }
  }
  LOG(INFO) << "node table loaded: " << nodes_.size() << " nodes";
}

void GcsNodeManager::Persist(const rpc::NodeInfo& info, absl::AnyInvocable<void(absl::Status)> done) {
  store_.AsyncPut(kNodeTable, info.node_id(), info.SerializeAsString(), /*overwrite=*/true,
                  [done = std::move(done)](absl::StatusOr<bool> r) mutable { done(r.status()); });
}

void GcsNodeManager::PublishNode(const rpc::NodeInfo& info) {
  rpc::PubMessage m;
  m.set_channel_type(rpc::GCS_NODE_INFO_CHANNEL);
  m.set_key_id(info.node_id());
  *m.mutable_node_info_message() = info;
  publisher_.Publish(std::move(m));
}

void GcsNodeManager::HandleRegisterNode(const rpc::RegisterNodeRequest& request, rpc::RegisterNodeReply* reply,
                                        rpc::SendReply send_reply) {
  auto id = NodeID::FromBinaryChecked(request.node_info().node_id());
  if (!id.ok()) {
    std::move(send_reply)(absl::InvalidArgumentError("RegisterNode: bad node_id: " + std::string(id.status().message())));
    return;
  }
  reply->set_cluster_id(cluster_id_.Binary());
  reply->set_system_config(system_config_);
  if (auto pending = pending_registrations_.find(*id); pending != pending_registrations_.end()) {
    // The first registration is still being written: answer with its outcome.
    pending->second.emplace_back(reply, std::move(send_reply));
    return;
  }
  auto existing = nodes_.find(*id);
  if (existing != nodes_.end()) {
    if (existing->second.state() == rpc::NodeInfo::DEAD) {
      std::move(send_reply)(absl::FailedPreconditionError(
          "node " + id->Hex() + " was declared DEAD (" + existing->second.death_reason() +
          "); a dead node cannot rejoin, start a new raylet"));
      return;
    }
    // A raylet reconnecting after a GCS restart: same node, nothing to change.
    reply->set_already_registered(true);
    std::move(send_reply)(absl::OkStatus());
    return;
  }
  rpc::NodeInfo info = request.node_info();
  info.set_state(rpc::NodeInfo::ALIVE);
  if (info.start_time_ms() == 0) info.set_start_time_ms(now_ms_());
  nodes_[*id] = info;
  pending_registrations_[*id];
  Persist(info, [this, info, id = *id, send_reply = std::move(send_reply)](absl::Status s) mutable {
    auto waiters = std::move(pending_registrations_[id]);
    pending_registrations_.erase(id);
    for (auto& [waiting_reply, waiting_send] : waiters) {
      if (s.ok()) waiting_reply->set_already_registered(true);
      std::move(waiting_send)(s);
    }
    if (!s.ok()) {
      nodes_.erase(id);
      std::move(send_reply)(s);
      return;
    }
    LOG(INFO) << "node registered: " << NodeID::FromBinary(info.node_id()).Hex() << " at "
              << info.node_manager_address() << ":" << info.node_manager_port();
    PublishNode(info);
    for (auto& l : added_listeners_) l(info);
    std::move(send_reply)(absl::OkStatus());
  });
}

void GcsNodeManager::SetDead(const NodeID& node_id, const std::string& reason,
                             absl::AnyInvocable<void(absl::Status)> done) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || it->second.state() == rpc::NodeInfo::DEAD) {
    done(absl::OkStatus());
    return;
  }
  it->second.set_state(rpc::NodeInfo::DEAD);
  it->second.set_end_time_ms(now_ms_());
  it->second.set_death_reason(reason);
  usage_.erase(node_id);
  publisher_.DropReport(node_id.Binary());
  rpc::NodeInfo info = it->second;
  PublishNode(info);
  for (auto& l : removed_listeners_) l(info);
  Persist(info, std::move(done));
}

void GcsNodeManager::MarkNodeDead(const NodeID& node_id, const std::string& reason) {
  SetDead(node_id, reason, [node_id](absl::Status s) {
    if (!s.ok()) LOG(ERROR) << "could not persist death of node " << node_id.Hex() << ": " << s;
  });
}

void GcsNodeManager::HandleUnregisterNode(const rpc::UnregisterNodeRequest& request,
                                          rpc::UnregisterNodeReply* reply, rpc::SendReply send_reply) {
  auto id = NodeID::FromBinaryChecked(request.node_id());
  if (!id.ok()) {
    std::move(send_reply)(absl::InvalidArgumentError("UnregisterNode: bad node_id"));
    return;
  }
  std::string reason = request.reason().empty() ? "unregistered by its raylet" : request.reason();
  LOG(INFO) << "node " << id->Hex() << " leaves: " << reason;
  SetDead(*id, reason, [send_reply = std::move(send_reply)](absl::Status s) mutable {
    std::move(send_reply)(s);
  });
}

void GcsNodeManager::HandleDrainNode(const rpc::DrainNodeRequest& request, rpc::DrainNodeReply* reply,
                                     rpc::SendReply send_reply) {
  auto id = NodeID::FromBinaryChecked(request.node_id());
  if (!id.ok()) {
    std::move(send_reply)(absl::InvalidArgumentError("DrainNode: bad node_id"));
    return;
  }
  auto it = nodes_.find(*id);
  if (it == nodes_.end() || it->second.state() == rpc::NodeInfo::DEAD) {
    std::move(send_reply)(absl::NotFoundError("DrainNode: no alive node " + id->Hex()));
    return;
  }
  it->second.set_draining(true);
  rpc::NodeInfo info = it->second;
  Persist(info, [this, info, reply, send_reply = std::move(send_reply)](absl::Status s) mutable {
    if (s.ok()) {
      reply->set_accepted(true);
      PublishNode(info);
    }
    std::move(send_reply)(s);
  });
}

void GcsNodeManager::HandleGetAllNodeInfo(const rpc::GetAllNodeInfoRequest& request,
                                          rpc::GetAllNodeInfoReply* reply, rpc::SendReply send_reply) {
  std::vector<const rpc::NodeInfo*> sorted;
  for (const auto& [id, info] : nodes_) sorted.push_back(&info);
  std::sort(sorted.begin(), sorted.end(), [](const rpc::NodeInfo* a, const rpc::NodeInfo* b) {
    return a->start_time_ms() != b->start_time_ms() ? a->start_time_ms() < b->start_time_ms()
                                                    : a->node_id() < b->node_id();
  });
  reply->set_gcs_metrics_export_port(gcs_metrics_export_port_);
  for (const rpc::NodeInfo* info : sorted) {
    *reply->add_node_info_list() = *info;
    auto u = usage_.find(NodeID::FromBinary(info->node_id()));
    if (u != usage_.end()) *reply->add_resource_usage() = u->second;
  }
  std::move(send_reply)(absl::OkStatus());
}

void GcsNodeManager::HandleReportResourceUsage(const rpc::ReportResourceUsageRequest& request,
                                               rpc::ReportResourceUsageReply* reply, rpc::SendReply send_reply) {
  auto id = NodeID::FromBinaryChecked(request.usage().node_id());
  if (!id.ok()) {
    std::move(send_reply)(absl::InvalidArgumentError("ReportResourceUsage: bad node_id"));
    return;
  }
  auto it = nodes_.find(*id);
  if (it == nodes_.end() || it->second.state() == rpc::NodeInfo::DEAD) {
    std::move(send_reply)(absl::NotFoundError("ReportResourceUsage: node " + id->Hex() + " is not alive"));
    return;
  }
  rpc::ResourceUsage& stored = usage_[*id];
  stored = request.usage();
  // Every node hears every node's reports: only what their views use (availability
  // and totals). The rest (the store's statistics, queued demand) stays here, for
  // status and the autoscaler. Every report is published, changed or not: a node
  // that spilled a lease to this one counts it taken until this one reports again.
  rpc::PubMessage m;
  m.set_channel_type(rpc::RESOURCE_USAGE_CHANNEL);
  m.set_key_id(stored.node_id());
  rpc::ResourceUsage* news = m.mutable_resource_usage_message();
  news->set_node_id(stored.node_id());
  *news->mutable_resources_available() = stored.resources_available();
  *news->mutable_resources_total() = stored.resources_total();
  publisher_.Publish(std::move(m));
  std::move(send_reply)(absl::OkStatus());
  for (const auto& listener : report_listeners_) listener(*id);
}

const rpc::ResourceUsage* GcsNodeManager::GetUsage(const NodeID& node_id) const {
  auto it = usage_.find(node_id);
  return it == usage_.end() ? nullptr : &it->second;
}

const rpc::NodeInfo* GcsNodeManager::GetNode(const NodeID& node_id) const {
  auto it = nodes_.find(node_id);
  return it == nodes_.end() ? nullptr : &it->second;
}

std::vector<rpc::NodeInfo> GcsNodeManager::AliveNodes() const {
  std::vector<rpc::NodeInfo> alive;
  for (const auto& [id, info] : nodes_) {
    if (info.state() == rpc::NodeInfo::ALIVE) alive.push_back(info);
  }
  return alive;
}

}  // namespace manta::gcs
