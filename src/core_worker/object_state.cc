#include "src/core_worker/object_state.h"

#include <algorithm>

#include "nlohmann/json.hpp"
#include "src/common/json.h"
#include "src/common/state_filter.h"
#include "src/common/status_util.h"

namespace manta::core {

namespace {

constexpr int64_t kMaxObjectRows = 10000;

const char* TaskStatusOf(ReferenceCounter::State state) {
  switch (state) {
    case ReferenceCounter::State::kPending: return "PENDING";
    case ReferenceCounter::State::kReady: return "FINISHED";
    case ReferenceCounter::State::kFailed: return "FAILED";
  }
  return "PENDING";
}

nlohmann::ordered_json ObjectRow(const ReferenceCounter::OwnedObject& o, const ObjectOwner& owner, bool detail) {
  nlohmann::ordered_json j;
  j["object_id"] = o.id.Hex();
  j["object_size"] = o.size_bytes >= 0 ? nlohmann::ordered_json(o.size_bytes) : nlohmann::ordered_json();
  j["reference_type"] = ReferenceTypeOf(o);
  j["task_status"] = TaskStatusOf(o.state);
  j["type"] = owner.is_driver ? "DRIVER" : "WORKER";
  j["pid"] = owner.pid;
  j["ip"] = owner.address.ip;
  j["owner_worker_id"] = owner.address.worker_id.Hex();
  j["node_id"] = owner.address.node_id.Hex();
  j["job_id"] = o.id.Task().Job().Hex();
  j["pinned_at"] = o.pinned_at ? o.pinned_at->Hex() : "";
  nlohmann::ordered_json locations = nlohmann::ordered_json::array();
  for (const NodeID& node : o.locations) locations.push_back(node.Hex());
  j["locations"] = std::move(locations);
  j["spilled"] = !o.spilled_url.empty();
  j["num_borrowers"] = o.borrowers.size();
  if (detail) {
    j["spilled_url"] = o.spilled_url;
    j["local_refs"] = o.local_refs;
    j["submitted_task_refs"] = o.submitted_task_refs;
    nlohmann::ordered_json borrowers = nlohmann::ordered_json::array();
    for (const Address& b : o.borrowers) {
      borrowers.push_back({{"worker_id", b.worker_id.Hex()}, {"ip", b.ip}, {"node_id", b.node_id.Hex()}});
    }
    j["borrowers"] = std::move(borrowers);
  }
  return j;
}

// Adds `o` to the summary: count, bytes and task statuses per reference type.
void Summarize(const ReferenceCounter::OwnedObject& o, nlohmann::ordered_json* summary) {
  nlohmann::ordered_json& entry = (*summary)[ReferenceTypeOf(o)];
  if (!entry.is_object()) entry = {{"count", 0}, {"bytes", 0}, {"task_status", nlohmann::ordered_json::object()}};
  entry["count"] = entry["count"].get<int64_t>() + 1;
  entry["bytes"] = entry["bytes"].get<int64_t>() + std::max<int64_t>(o.size_bytes, 0);
  nlohmann::ordered_json& statuses = entry["task_status"];
  const char* status = TaskStatusOf(o.state);
  statuses[status] = statuses.value(status, int64_t{0}) + 1;
}

}  // namespace

const char* ReferenceTypeOf(const ReferenceCounter::OwnedObject& o) {
  if (o.local_refs > 0) return "LOCAL_REFERENCE";
  if (o.submitted_task_refs > 0) return "USED_BY_PENDING_TASK";
  if (o.captured) return "CAPTURED_IN_OBJECT";
  return "BORROWED";
}

absl::Status ListOwnedObjects(std::vector<ReferenceCounter::OwnedObject> objects, const ObjectOwner& owner,
                              const rpc::ListObjectsRequest& request, rpc::ListObjectsReply* reply) {
  const std::vector<rpc::StateFilter> filters(request.filters().begin(), request.filters().end());
  MANTA_RETURN_IF_ERROR(CheckStateFilters("objects", ObjectStateFilterKeys(), filters));
  if (request.limit() < 1 || request.limit() > kMaxObjectRows) {
    return absl::InvalidArgumentError("limit " + std::to_string(request.limit()) + " is out of range (1 to " +
                                      std::to_string(kMaxObjectRows) + ")");
  }
  // The largest first, so that the rows kept under the limit are those holding memory.
  std::sort(objects.begin(), objects.end(), [](const auto& a, const auto& b) {
    return a.size_bytes != b.size_bytes ? a.size_bytes > b.size_bytes : a.id < b.id;
  });
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  nlohmann::ordered_json summary = nlohmann::ordered_json::object();
  int64_t matched = 0;
  for (const ReferenceCounter::OwnedObject& o : objects) {
    // Filters see the full row; past the limit, rows are only counted (and made
    // only when a filter needs them).
    const bool room = static_cast<int64_t>(rows.size()) < request.limit();
    if (filters.empty() && !room) {
      ++matched;
      Summarize(o, &summary);
      continue;
    }
    nlohmann::ordered_json row = ObjectRow(o, owner, request.detail());
    if (!RowPassesStateFilters(row, filters)) continue;
    ++matched;
    Summarize(o, &summary);
    if (room) rows.push_back(std::move(row));
  }
  reply->set_rows_json(DumpJson(rows));
  reply->set_num_matched(matched);
  reply->set_summary_json(DumpJson(summary));
  return absl::OkStatus();
}

}  // namespace manta::core
