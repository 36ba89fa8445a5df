#include "src/core_worker/placement_group_calls.h"

#include <glog/logging.h>

#include <algorithm>
#include <iterator>

#include "src/common/loop_call.h"
#include "src/gcs/gcs_client.h"

namespace manta::core {

namespace {

// How long a GCS call may take with its retries: every attempt's deadline and the
// pauses between them, at most.
int64_t GcsCallTimeoutMs(const Config& config) {
  const int64_t attempts = std::max<int64_t>(config.grpc_client_max_attempts, 1);
  return attempts * config.grpc_client_deadline_ms + (attempts - 1) * config.grpc_client_max_backoff_ms;
}

// A status from the GCS, prefixed with what was asked (same code). NOT_FOUND, which
// callers turn into a message of their own, is left as the GCS said it.
absl::Status Explain(const absl::Status& s, const std::string& what) {
  if (s.ok() || absl::IsNotFound(s)) return s;
  return absl::Status(s.code(), what + ": " + std::string(s.message()));
}

}  // namespace

template <typename Reply>
absl::StatusOr<Reply> PlacementGroupCalls::Ask(const Request<Reply>& request, int64_t timeout_ms) {
  return CallOnLoop<Reply>(loop_, [this, request](auto callback) { request(gcs_, std::move(callback)); }, timeout_ms);
}

absl::StatusOr<PlacementGroupID> PlacementGroupCalls::Create(
    const std::string& name, const std::vector<std::map<std::string, double>>& bundles,
    rpc::PlacementStrategy strategy) {
  const PlacementGroupID id = PlacementGroupID::FromRandom();
  rpc::PlacementGroupTableData group;
  group.set_placement_group_id(id.Binary());
  group.set_name(name);
  group.set_ray_namespace(ray_namespace_);
  group.set_strategy(strategy);
  group.set_creator_job_id(job_id_.Binary());
  for (size_t i = 0; i < bundles.size(); ++i) {
    rpc::Bundle* bundle = group.add_bundles();
    bundle->set_placement_group_id(id.Binary());
    bundle->set_bundle_index(static_cast<int32_t>(i));
    bundle->mutable_unit_resources()->insert(bundles[i].begin(), bundles[i].end());
  }
  auto reply = Ask<rpc::CreatePlacementGroupReply>(
      [group](gcs::PlacementGroupInfoClientInterface& gcs, auto callback) {
        gcs.AsyncCreatePlacementGroup(group, std::move(callback));
      },
      GcsCallTimeoutMs(config_));
  if (!reply.ok()) return Explain(reply.status(), "registering placement group " + id.Hex() + " with the GCS");
  VLOG(1) << "placement group " << id.Hex() << (name.empty() ? "" : " '" + name + "'") << " registered, "
          << bundles.size() << " bundle(s)";
  return id;
}

absl::Status PlacementGroupCalls::Remove(const PlacementGroupID& group_id) {
  auto reply = Ask<rpc::RemovePlacementGroupReply>(
      [id = group_id.Binary()](gcs::PlacementGroupInfoClientInterface& gcs, auto callback) {
        gcs.AsyncRemovePlacementGroup(id, std::move(callback));
      },
      GcsCallTimeoutMs(config_));
  return Explain(reply.status(), "removing placement group " + group_id.Hex());
}

absl::StatusOr<bool> PlacementGroupCalls::WaitReady(const PlacementGroupID& group_id, int64_t timeout_ms) {
  timeout_ms = std::max<int64_t>(timeout_ms, 0);
  // The GCS client answers by the timeout plus one call's deadline; waiting as long
  // as a whole call may take beyond it is a bound that is never reached.
  auto reply = Ask<rpc::WaitPlacementGroupUntilReadyReply>(
      [id = group_id.Binary(), timeout_ms](gcs::PlacementGroupInfoClientInterface& gcs, auto callback) {
        gcs.AsyncWaitPlacementGroupUntilReady(id, timeout_ms, std::move(callback));
      },
      timeout_ms + GcsCallTimeoutMs(config_));
  if (!reply.ok()) return Explain(reply.status(), "waiting for placement group " + group_id.Hex());
  return reply->ready();
}

absl::StatusOr<std::optional<rpc::PlacementGroupTableData>> PlacementGroupCalls::Get(
    const PlacementGroupID& group_id) {
  auto reply = Ask<rpc::GetPlacementGroupReply>(
      [id = group_id.Binary()](gcs::PlacementGroupInfoClientInterface& gcs, auto callback) {
        gcs.AsyncGetPlacementGroup(id, std::move(callback));
      },
      GcsCallTimeoutMs(config_));
  if (!reply.ok()) return Explain(reply.status(), "reading placement group " + group_id.Hex());
  if (!reply->found()) return std::nullopt;
  return std::move(*reply->mutable_placement_group());
}

absl::StatusOr<std::optional<rpc::PlacementGroupTableData>> PlacementGroupCalls::GetNamed(
    const std::string& name, const std::string& ray_namespace) {
  const std::string ns = ray_namespace.empty() ? ray_namespace_ : ray_namespace;
  auto reply = Ask<rpc::GetNamedPlacementGroupReply>(
      [name, ns](gcs::PlacementGroupInfoClientInterface& gcs, auto callback) {
        gcs.AsyncGetNamedPlacementGroup(name, ns, std::move(callback));
      },
      GcsCallTimeoutMs(config_));
  if (!reply.ok()) {
    return Explain(reply.status(), "looking up placement group '" + name + "' in namespace '" + ns + "'");
  }
  if (!reply->found()) return std::nullopt;
  return std::move(*reply->mutable_placement_group());
}

absl::StatusOr<std::vector<rpc::PlacementGroupTableData>> PlacementGroupCalls::GetAll() {
  auto reply = Ask<rpc::GetAllPlacementGroupReply>(
      [](gcs::PlacementGroupInfoClientInterface& gcs, auto callback) {
        gcs.AsyncGetAllPlacementGroup(std::move(callback));
      },
      GcsCallTimeoutMs(config_));
  if (!reply.ok()) return Explain(reply.status(), "listing placement groups");
  return std::vector<rpc::PlacementGroupTableData>(std::make_move_iterator(reply->mutable_placement_groups()->begin()),
                                                   std::make_move_iterator(reply->mutable_placement_groups()->end()));
}

}  // namespace manta::core
