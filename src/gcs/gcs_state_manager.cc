#include "src/gcs/gcs_state_manager.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "src/common/json.h"
#include "src/common/status_util.h"
#include "src/common/util.h"

namespace manta::gcs {

namespace {

nlohmann::ordered_json ResourceMap(const google::protobuf::Map<std::string, double>& resources) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& [name, quantity] : resources) out[name] = quantity;
  return out;
}


}  // namespace

const std::vector<std::string>& GcsStateManager::Resources() {
  static const std::vector<std::string> resources = {"nodes", "jobs",  "workers", "actors", "placement-groups",
                                                     "tasks", "objects"};
  return resources;
}

const std::vector<std::string>& GcsStateManager::FilterKeys(const std::string& resource) {
  static const std::vector<std::string> nodes = {"node_id",      "node_ip",    "node_name",     "state",
                                                 "is_head_node", "raylet_pid", "start_time_ms", "draining",
                                                 "node_type",    "instance_id"};
  static const std::vector<std::string> jobs = {"job_id",        "status",     "driver_ip_address", "driver_pid",
                                                "ray_namespace", "entrypoint", "start_time_ms"};
  static const std::vector<std::string> actors = {"actor_id", "class_name", "name",         "ray_namespace",
                                                  "state",    "node_id",    "pid",          "num_restarts",
                                                  "job_id",   "detached",   "max_restarts", "death_cause"};
  static const std::vector<std::string> groups = {"placement_group_id", "name",     "ray_namespace",
                                                  "strategy",           "state",    "creator_job_id",
                                                  "infeasible"};
  static const std::vector<std::string> none;
  if (resource == "nodes") return nodes;
  if (resource == "jobs") return jobs;
  if (resource == "actors") return actors;
  if (resource == "placement-groups") return groups;
  if (resource == "tasks") return GcsTaskManager::FilterKeys();
  if (resource == "workers") return WorkerStateFilterKeys();
  if (resource == "objects") return ObjectStateFilterKeys();
  return none;
}

void GcsStateManager::HandleListState(const rpc::ListStateRequest& request, rpc::ListStateReply* reply,
                                      rpc::SendReply send_reply) {
  const std::string& resource = request.resource();
  if (resource != "workers" && resource != "objects") return std::move(send_reply)(List(request, reply));
  if (request.limit() < 0 || request.limit() > kMaxLimit) return std::move(send_reply)(List(request, reply));
  const int64_t limit = request.limit() == 0 ? kDefaultLimit : request.limit();
  std::vector<rpc::StateFilter> filters(request.filters().begin(), request.filters().end());
  auto done = [send = std::make_shared<rpc::SendReply>(std::move(send_reply))](absl::Status s) {
    std::move(*send)(std::move(s));
  };
  if (resource == "workers") return fanout_.ListWorkers(std::move(filters), limit, request.detail(), reply, done);
  fanout_.ListObjects(std::move(filters), limit, request.detail(), reply, done);
}

absl::Status GcsStateManager::List(const rpc::ListStateRequest& request, rpc::ListStateReply* reply) {
  const std::vector<std::string>& resources = Resources();
  const std::string& resource = request.resource();
  if (std::find(resources.begin(), resources.end(), resource) == resources.end()) {
    return absl::InvalidArgumentError("unknown resource '" + resource + "'; the state API lists " +
                                      absl::StrJoin(resources, ", "));
  }
  if (request.limit() < 0 || request.limit() > kMaxLimit) {
    return absl::InvalidArgumentError("limit " + std::to_string(request.limit()) + " is out of range: a query returns 1 to " +
                                      std::to_string(kMaxLimit) + " rows");
  }
  if (resource == "workers" || resource == "objects") {
    return absl::FailedPreconditionError(resource + " are answered by the raylets and owners (HandleListState)");
  }
  const int64_t limit = request.limit() == 0 ? kDefaultLimit : request.limit();
  const std::vector<rpc::StateFilter> filters(request.filters().begin(), request.filters().end());
  if (resource == "tasks") {
    auto listed = tasks_.List(filters, limit, request.detail());
    if (!listed.ok()) return listed.status();
    reply->set_num_matched(listed->num_matched);
    reply->set_num_returned(static_cast<int64_t>(listed->rows.size()));
    reply->set_num_dropped(tasks_.num_dropped());
    reply->set_rows_json(DumpJson(listed->rows));
    return absl::OkStatus();
  }
  auto rows = FilteredRows(resource, filters, request.detail());
  if (!rows.ok()) return rows.status();
  const int64_t matched = static_cast<int64_t>(rows->size());
  if (matched > limit) rows->erase(rows->begin() + limit, rows->end());
  reply->set_num_matched(matched);
  reply->set_num_returned(static_cast<int64_t>(rows->size()));
  reply->set_rows_json(DumpJson(*rows));
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::ordered_json> GcsStateManager::FilteredRows(const std::string& resource,
                                                             const std::vector<rpc::StateFilter>& filters,
                                                             bool detail) {
  MANTA_RETURN_IF_ERROR(CheckStateFilters(resource, FilterKeys(resource), filters));
  nlohmann::ordered_json all = resource == "nodes"    ? NodeRows(detail)
                       : resource == "jobs"   ? JobRows(detail)
                       : resource == "actors" ? ActorRows(detail)
                                              : PlacementGroupRows(detail);
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (nlohmann::ordered_json& row : all) {
    if (RowPassesStateFilters(row, filters)) rows.push_back(std::move(row));
  }
  return rows;
}

void GcsStateManager::HandleSummarizeState(const rpc::SummarizeStateRequest& request,
                                           rpc::SummarizeStateReply* reply, rpc::SendReply send_reply) {
  if (request.resource() != "objects") return std::move(send_reply)(Summarize(request, reply));
  fanout_.SummarizeObjects(std::vector<rpc::StateFilter>(request.filters().begin(), request.filters().end()), reply,
                           [send = std::make_shared<rpc::SendReply>(std::move(send_reply))](absl::Status s) {
                             std::move(*send)(std::move(s));
                           });
}

absl::Status GcsStateManager::Summarize(const rpc::SummarizeStateRequest& request, rpc::SummarizeStateReply* reply) {
  const std::vector<rpc::StateFilter> filters(request.filters().begin(), request.filters().end());
  if (request.resource() == "tasks") {
    auto summary = tasks_.Summarize(filters);
    if (!summary.ok()) return summary.status();
    reply->set_summary_json(DumpJson(*summary));
    reply->set_num_dropped(tasks_.num_dropped());
    return absl::OkStatus();
  }
  if (request.resource() != "actors") {
    return absl::InvalidArgumentError("cannot summarize '" + request.resource() +
                                      "'; summaries are of tasks, actors, objects");
  }
  auto rows = FilteredRows("actors", filters, false);
  if (!rows.ok()) return rows.status();
  nlohmann::ordered_json by_name = nlohmann::ordered_json::object();
  for (const nlohmann::ordered_json& row : *rows) {
    nlohmann::ordered_json& entry = by_name[row["class_name"].get<std::string>()];
    entry["type"] = "ACTOR";
    const std::string state = row["state"].get<std::string>();
    nlohmann::ordered_json& state_counts = entry["state_counts"];
    if (!state_counts.is_object()) state_counts = nlohmann::ordered_json::object();
    state_counts[state] = state_counts.value(state, int64_t{0}) + 1;
  }
  reply->set_summary_json(
      DumpJson(nlohmann::ordered_json{{"total", rows->size()}, {"by_name", std::move(by_name)}}));
  return absl::OkStatus();
}

void GcsStateManager::HandleGetTaskTimeline(const rpc::GetTaskTimelineRequest& request,
                                            rpc::GetTaskTimelineReply* reply, rpc::SendReply send_reply) {
  auto attempts = tasks_.Export(request.job_id());
  if (!attempts.ok()) return std::move(send_reply)(attempts.status());
  *reply->mutable_attempts() = std::move(*attempts);
  reply->set_num_dropped(tasks_.num_dropped());
  std::move(send_reply)(absl::OkStatus());
}

nlohmann::ordered_json GcsStateManager::NodeRows(bool detail) {
  auto reply = Ask(nodes_, &GcsNodeManager::HandleGetAllNodeInfo);
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const rpc::NodeInfo& n : reply.node_info_list()) {
    nlohmann::ordered_json j;
    j["node_id"] = BinaryHex(n.node_id());
    j["node_ip"] = n.node_manager_address();
    j["node_name"] = n.node_name();
    j["state"] = n.state() == rpc::NodeInfo::ALIVE ? "ALIVE" : "DEAD";
    j["is_head_node"] = n.is_head_node();
    j["raylet_pid"] = n.raylet_pid();
    j["start_time_ms"] = n.start_time_ms();
    j["draining"] = n.draining();
    j["node_type"] = n.node_type();
    j["instance_id"] = n.instance_id();
    j["metrics_export_port"] = n.metrics_export_port();
    j["resources_total"] = ResourceMap(n.resources_total());
    if (n.state() == rpc::NodeInfo::DEAD) {
      j["end_time_ms"] = n.end_time_ms();
      j["death_reason"] = n.death_reason();
    }
    if (detail) {
      j["node_manager_port"] = n.node_manager_port();
      j["object_manager_port"] = n.object_manager_port();
      j["session_dir"] = n.session_dir();
      for (const rpc::ResourceUsage& u : reply.resource_usage()) {
        if (u.node_id() != n.node_id()) continue;
        j["resources_available"] = ResourceMap(u.resources_available());
        j["object_store_used_bytes"] = u.object_store().used_bytes();
        j["object_store_capacity_bytes"] = u.object_store().capacity_bytes();
        j["object_store_num_objects"] = u.object_store().num_objects();
        j["object_store_spilled_bytes"] = u.object_store().spilled_bytes_current();
        j["object_store_num_spilled"] = u.object_store().num_spilled();
      }
    }
    rows.push_back(std::move(j));
  }
  return rows;
}

nlohmann::ordered_json GcsStateManager::JobRows(bool detail) {
  auto reply = Ask(jobs_, &GcsJobManager::HandleGetAllJobInfo);
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const rpc::JobInfo& job : reply.job_info_list()) {
    nlohmann::ordered_json j;
    j["job_id"] = BinaryHex(job.job_id());
    j["status"] = job.is_dead() ? "FINISHED" : "RUNNING";
    j["entrypoint"] = job.entrypoint();
    j["driver_ip_address"] = job.driver_ip_address();
    j["driver_pid"] = job.driver_pid();
    j["ray_namespace"] = job.ray_namespace();
    j["start_time_ms"] = job.start_time_ms();
    if (job.is_dead()) j["end_time_ms"] = job.end_time_ms();
    if (detail) j["driver_worker_id"] = BinaryHex(job.driver_address().worker_id());
    rows.push_back(std::move(j));
  }
  return rows;
}

nlohmann::ordered_json GcsStateManager::ActorRows(bool detail) {
  auto reply = Ask(actors_, &GcsActorManager::HandleGetAllActorInfo);
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const rpc::ActorTableData& a : reply.actors()) {
    nlohmann::ordered_json j;
    j["actor_id"] = BinaryHex(a.actor_id());
    j["class_name"] = a.class_name();
    j["name"] = a.name();
    j["ray_namespace"] = a.ray_namespace();
    j["state"] = rpc::ActorTableData::ActorState_Name(a.state());
    j["node_id"] = BinaryHex(a.node_id());
    j["pid"] = a.pid();
    j["num_restarts"] = a.num_restarts();
    j["max_restarts"] = a.max_restarts();
    j["job_id"] = BinaryHex(a.job_id());
    j["detached"] = a.detached();
    j["death_cause"] = a.state() == rpc::ActorTableData::DEAD ? a.death_cause().message() : "";
    if (detail) {
      j["start_time_ms"] = a.start_time_ms();
      j["end_time_ms"] = a.end_time_ms();
      j["max_concurrency"] = a.max_concurrency();
      j["worker_id"] = BinaryHex(a.address().worker_id());
      j["owner_worker_id"] = BinaryHex(a.owner_address().worker_id());
    }
    rows.push_back(std::move(j));
  }
  return rows;
}

nlohmann::ordered_json GcsStateManager::PlacementGroupRows(bool detail) {
  auto reply = Ask(groups_, &GcsPlacementGroupManager::HandleGetAllPlacementGroup);
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const rpc::PlacementGroupTableData& g : reply.placement_groups()) {
    nlohmann::ordered_json j;
    j["placement_group_id"] = BinaryHex(g.placement_group_id());
    j["name"] = g.name();
    j["ray_namespace"] = g.ray_namespace();
    j["strategy"] = rpc::PlacementStrategy_Name(g.strategy());
    j["state"] = rpc::PlacementGroupTableData::PlacementGroupState_Name(g.state());
    j["creator_job_id"] = BinaryHex(g.creator_job_id());
    j["infeasible"] = g.infeasible();
    if (!g.pending_reason().empty()) j["pending_reason"] = g.pending_reason();
    if (detail) {
      nlohmann::ordered_json bundles = nlohmann::ordered_json::array();
      for (const rpc::Bundle& b : g.bundles()) {
        bundles.push_back({{"bundle_index", b.bundle_index()},
                           {"unit_resources", ResourceMap(b.unit_resources())},
                           {"node_id", BinaryHex(b.node_id())}});
      }
      j["bundles"] = std::move(bundles);
      j["create_time_ms"] = g.create_time_ms();
    }
    rows.push_back(std::move(j));
  }
  return rows;
}

}  // namespace manta::gcs
