#include "src/gcs/gcs_placement_group_manager.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>

#include "src/gcs/table_loader.h"
#include "src/scheduling/resources.h"

namespace manta::gcs {

namespace {

using State = rpc::PlacementGroupTableData;

bool IsRemoved(const rpc::PlacementGroupTableData& group) { return group.state() == State::REMOVED; }

std::string Describe(const rpc::PlacementGroupTableData& group) {
  return "placement group " + PlacementGroupID::FromBinary(group.placement_group_id()).Hex() +
         (group.name().empty() ? "" : " ('" + group.name() + "')");
}

}  // namespace

GcsPlacementGroupManager::GcsPlacementGroupManager(EventLoop& loop, StoreClientInterface& store,
                                                   GcsPublisher& publisher, GcsPlacementGroupScheduler& scheduler,
                                                   std::function<int64_t()> now_ms, RemovedListener on_removed,
                                                   int64_t retry_period_ms)
    : loop_(loop),
      store_(store),
      publisher_(publisher),
      scheduler_(scheduler),
      now_ms_(std::move(now_ms)),
      on_removed_(std::move(on_removed)),
      retry_period_ms_(retry_period_ms) {}

GcsPlacementGroupManager::~GcsPlacementGroupManager() {
  *alive_ = false;
  FlushWaits();
}

absl::Status GcsPlacementGroupManager::Validate(const rpc::PlacementGroupTableData& group) {
  if (!PlacementGroupID::FromBinaryChecked(group.placement_group_id()).ok()) {
    return absl::InvalidArgumentError("placement group id must be " + std::to_string(PlacementGroupID::kSize) +
                                      " bytes");
  }
  if (!rpc::PlacementStrategy_IsValid(group.strategy())) {
    return absl::InvalidArgumentError("unknown placement strategy " + std::to_string(group.strategy()));
  }
  if (group.bundles().empty()) return absl::InvalidArgumentError("a placement group needs at least one bundle");
  for (int i = 0; i < group.bundles_size(); ++i) {
    const rpc::Bundle& bundle = group.bundles(i);
    bool any = false;
    for (const auto& [name, quantity] : bundle.unit_resources()) {
      if (name.empty()) return absl::InvalidArgumentError("bundle " + std::to_string(i) + " has an empty resource name");
      if (!std::isfinite(quantity) || quantity < 0) {
        return absl::InvalidArgumentError("bundle " + std::to_string(i) + ": resource '" + name + "' has quantity " +
                                          std::to_string(quantity) + " (must be a finite non-negative number)");
      }
      if (quantity > 0 && scheduling::ToSteps(quantity) == 0) {
        return absl::InvalidArgumentError("bundle " + std::to_string(i) + ": resource '" + name +
                                          "' is below the resolution of 0.0001");
      }
      any |= quantity > 0;
    }
    if (!any) return absl::InvalidArgumentError("bundle " + std::to_string(i) + " reserves no resources");
  }
  return absl::OkStatus();
}

void GcsPlacementGroupManager::Initialize(const absl::flat_hash_map<std::string, std::string>& rows) {
  groups_ = ParseTableRows<PlacementGroupID, rpc::PlacementGroupTableData>(
      rows, kPlacementGroupTable,
      [](const rpc::PlacementGroupTableData& g) -> const std::string& { return g.placement_group_id(); });
  std::vector<std::pair<int64_t, PlacementGroupID>> waiting;
  for (const auto& [id, group] : groups_) {
    if (IsRemoved(group)) continue;
    if (!group.name().empty()) named_[{group.ray_namespace(), group.name()}] = id;
    if (group.state() != State::CREATED) waiting.emplace_back(group.create_time_ms(), id);
  }
  std::sort(waiting.begin(), waiting.end());
  for (const auto& [time, id] : waiting) pending_.push_back(id);
  LOG(INFO) << "placement group table loaded: " << groups_.size() << " groups, " << pending_.size()
            << " waiting to be placed";
}

void GcsPlacementGroupManager::Start() {
  absl::flat_hash_map<NodeID, std::vector<rpc::Bundle>> in_use;
  for (const auto& [id, group] : groups_) {
    if (IsRemoved(group)) continue;
    for (const rpc::Bundle& bundle : group.bundles()) {
      auto node = NodeID::FromBinaryChecked(bundle.node_id());
      if (node.ok()) in_use[*node].push_back(bundle);
    }
  }
  retry_timer_ = loop_.RunEvery("PlacementGroups.Retry", retry_period_ms_, [this] {
    if (pass_due_ && started_) RunPass();
  });
  scheduler_.ReleaseUnusedBundles(in_use, [this, alive = std::weak_ptr<bool>(alive_)] {
    if (alive.expired()) return;
    started_ = true;
    // Groups of jobs that ended while their removal was not stored yet.
    for (const JobID& job : std::vector<JobID>(finished_jobs_.begin(), finished_jobs_.end())) OnJobFinished(job);
    Kick();
  });
}

const rpc::PlacementGroupTableData* GcsPlacementGroupManager::GetGroup(const PlacementGroupID& id) const {
  auto it = groups_.find(id);
  return it == groups_.end() ? nullptr : &it->second;
}

void GcsPlacementGroupManager::PersistAndPublish(rpc::PlacementGroupTableData& group,
                                                 absl::AnyInvocable<void(absl::Status)> done) {
  group.set_version(group.version() + 1);
  rpc::PubMessage message;
  message.set_channel_type(rpc::GCS_PLACEMENT_GROUP_CHANNEL);
  message.set_key_id(group.placement_group_id());
  *message.mutable_placement_group_message() = group;
  store_.AsyncPut(kPlacementGroupTable, group.placement_group_id(), group.SerializeAsString(), /*overwrite=*/true,
                  [this, message = std::move(message), done = std::move(done)](absl::StatusOr<bool> r) mutable {
                    if (r.ok()) {
                      publisher_.Publish(std::move(message));
                    } else {
                      LOG(ERROR) << "could not store placement group "
                                 << PlacementGroupID::FromBinary(message.key_id()).Hex() << ": " << r.status();
                    }
                    if (done) done(r.status());
                  });
}

// ---------------------------------------------------------------- RPC handlers

void GcsPlacementGroupManager::HandleCreatePlacementGroup(const rpc::CreatePlacementGroupRequest& request,
                                                          rpc::CreatePlacementGroupReply*,
                                                          rpc::SendReply send_reply) {
  rpc::PlacementGroupTableData group = request.placement_group();
  if (absl::Status valid = Validate(group); !valid.ok()) return std::move(send_reply)(valid);
  PlacementGroupID id = PlacementGroupID::FromBinary(group.placement_group_id());
  if (groups_.contains(id)) return std::move(send_reply)(absl::OkStatus());  // a retried call
  auto creator = JobID::FromBinaryChecked(group.creator_job_id());
  if (creator.ok() && finished_jobs_.contains(*creator)) {
    return std::move(send_reply)(
        absl::FailedPreconditionError("job " + creator->Hex() + ", which creates the placement group, has ended"));
  }
  if (!group.name().empty() && named_.contains({group.ray_namespace(), group.name()})) {
    return std::move(send_reply)(absl::AlreadyExistsError("a placement group named '" + group.name() +
                                                          "' already exists in namespace '" +
                                                          group.ray_namespace() + "'"));
  }
  group.set_state(State::PENDING);
  group.set_create_time_ms(now_ms_());
  group.set_remove_time_ms(0);
  group.set_infeasible(false);
  group.set_pending_reason("");
  group.set_version(0);
  for (int i = 0; i < group.bundles_size(); ++i) {
    rpc::Bundle* bundle = group.mutable_bundles(i);
    bundle->set_placement_group_id(group.placement_group_id());
    bundle->set_bundle_index(i);
    bundle->clear_node_id();
  }
  auto [it, inserted] = groups_.emplace(id, std::move(group));
  if (!it->second.name().empty()) named_[{it->second.ray_namespace(), it->second.name()}] = id;
  LOG(INFO) << Describe(it->second) << " registered: " << it->second.bundles_size() << " bundles, "
            << rpc::PlacementStrategy_Name(it->second.strategy());
  PersistAndPublish(it->second, [this, id, send_reply = std::move(send_reply)](absl::Status s) mutable {
    if (!s.ok()) {
      auto found = groups_.find(id);
      if (found != groups_.end()) {
        named_.erase({found->second.ray_namespace(), found->second.name()});
        groups_.erase(found);
      }
      return std::move(send_reply)(s);
    }
    std::move(send_reply)(absl::OkStatus());
    auto found = groups_.find(id);
    if (found == groups_.end() || IsRemoved(found->second)) return;
    pending_.push_back(id);
    Kick();
  });
}

void GcsPlacementGroupManager::HandleRemovePlacementGroup(const rpc::RemovePlacementGroupRequest& request,
                                                          rpc::RemovePlacementGroupReply*,
                                                          rpc::SendReply send_reply) {
  auto id = PlacementGroupID::FromBinaryChecked(request.placement_group_id());
  if (!id.ok()) return std::move(send_reply)(absl::InvalidArgumentError("malformed placement group id"));
  auto it = groups_.find(*id);
  if (it == groups_.end()) {
    return std::move(send_reply)(absl::NotFoundError("no placement group " + id->Hex() + " was ever created"));
  }
  if (IsRemoved(it->second)) return std::move(send_reply)(absl::OkStatus());
  Remove(*id, "removed by ray::RemovePlacementGroup",
         [send_reply = std::move(send_reply)](absl::Status s) mutable { std::move(send_reply)(s); });
}

void GcsPlacementGroupManager::HandleGetPlacementGroup(const rpc::GetPlacementGroupRequest& request,
                                                       rpc::GetPlacementGroupReply* reply, rpc::SendReply send_reply) {
  auto id = PlacementGroupID::FromBinaryChecked(request.placement_group_id());
  if (id.ok()) {
    if (const rpc::PlacementGroupTableData* group = GetGroup(*id)) {
      reply->set_found(true);
      *reply->mutable_placement_group() = *group;
    }
  }
  std::move(send_reply)(absl::OkStatus());
}

void GcsPlacementGroupManager::HandleGetNamedPlacementGroup(const rpc::GetNamedPlacementGroupRequest& request,
                                                            rpc::GetNamedPlacementGroupReply* reply,
                                                            rpc::SendReply send_reply) {
  auto it = named_.find({request.ray_namespace(), request.name()});
  if (it != named_.end()) {
    reply->set_found(true);
    *reply->mutable_placement_group() = groups_.at(it->second);
  }
  std::move(send_reply)(absl::OkStatus());
}

void GcsPlacementGroupManager::HandleGetAllPlacementGroup(const rpc::GetAllPlacementGroupRequest&,
                                                          rpc::GetAllPlacementGroupReply* reply,
                                                          rpc::SendReply send_reply) {
  std::vector<const rpc::PlacementGroupTableData*> all;
  for (const auto& [id, group] : groups_) all.push_back(&group);
  // Oldest first, as they were created.
  std::sort(all.begin(), all.end(), [](const auto* a, const auto* b) {
    if (a->create_time_ms() != b->create_time_ms()) return a->create_time_ms() < b->create_time_ms();
    return a->placement_group_id() < b->placement_group_id();
  });
  for (const auto* group : all) *reply->add_placement_groups() = *group;
  std::move(send_reply)(absl::OkStatus());
}

void GcsPlacementGroupManager::HandleWaitPlacementGroupUntilReady(
    const rpc::WaitPlacementGroupUntilReadyRequest& request, rpc::WaitPlacementGroupUntilReadyReply* reply,
    rpc::SendReply send_reply) {
  auto id = PlacementGroupID::FromBinaryChecked(request.placement_group_id());
  if (!id.ok()) return std::move(send_reply)(absl::InvalidArgumentError("malformed placement group id"));
  const rpc::PlacementGroupTableData* group = GetGroup(*id);
  if (group == nullptr) {
    return std::move(send_reply)(absl::NotFoundError("no placement group " + id->Hex() + " was ever created"));
  }
  if (IsRemoved(*group)) {
    return std::move(send_reply)(absl::NotFoundError(Describe(*group) + " was removed"));
  }
  if (group->state() == State::CREATED) {
    reply->set_ready(true);
    return std::move(send_reply)(absl::OkStatus());
  }
  if (request.timeout_ms() <= 0) return std::move(send_reply)(absl::OkStatus());
  uint64_t waiter = next_waiter_++;
  waiters_[*id].emplace(waiter, Waiter{reply, std::move(send_reply)});
  loop_.PostAfter("PlacementGroups.WaitTimeout", request.timeout_ms(),
                  [this, alive = std::weak_ptr<bool>(alive_), group_id = *id, waiter] {
                    if (alive.expired()) return;
                    auto it = waiters_.find(group_id);
                    if (it == waiters_.end()) return;
                    auto w = it->second.find(waiter);
                    if (w == it->second.end()) return;
                    Waiter held = std::move(w->second);
                    it->second.erase(w);
                    if (it->second.empty()) waiters_.erase(it);
                    held.reply->set_ready(false);
                    std::move(held.send_reply)(absl::OkStatus());
                  });
}

void GcsPlacementGroupManager::AnswerWaiters(const PlacementGroupID& id, const absl::Status& status, bool ready) {
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return;
  auto held = std::move(it->second);
  waiters_.erase(it);
  for (auto& [waiter, w] : held) {
    w.reply->set_ready(ready);
    std::move(w.send_reply)(status);
  }
}

void GcsPlacementGroupManager::FlushWaits() {
  auto all = std::move(waiters_);
  waiters_.clear();
  for (auto& [id, held] : all) {
    for (auto& [waiter, w] : held) {
      w.reply->set_ready(false);
      std::move(w.send_reply)(absl::OkStatus());
    }
  }
}

// ---------------------------------------------------------------- scheduling

void GcsPlacementGroupManager::Kick() {
  pass_due_ = true;
  if (started_) RunPass();
}

void GcsPlacementGroupManager::OnResourcesChanged() {
  if (!pending_.empty()) pass_due_ = true;
}

void GcsPlacementGroupManager::RunPass() {
  pass_due_ = false;
  // A copy: an attempt may finish (and change the queue) before Schedule returns.
  const std::deque<PlacementGroupID> waiting = pending_;
  for (const PlacementGroupID& id : waiting) {
    auto it = groups_.find(id);
    if (it == groups_.end() || it->second.state() == State::CREATED || IsRemoved(it->second)) continue;
    if (!scheduling_.insert(id).second) continue;  // an attempt is in flight
    scheduler_.Schedule(it->second, [this, id](const PlacementGroupScheduleResult& result) {
      OnScheduled(id, result);
    });
  }
}

void GcsPlacementGroupManager::OnScheduled(const PlacementGroupID& id, const PlacementGroupScheduleResult& result) {
  scheduling_.erase(id);
  auto it = groups_.find(id);
  if (it == groups_.end() || IsRemoved(it->second)) return;
  rpc::PlacementGroupTableData& group = it->second;
  using Kind = PlacementGroupScheduleResult::Kind;
  if (result.kind == Kind::kCreated) {
    for (int i = 0; i < group.bundles_size(); ++i) group.mutable_bundles(i)->set_node_id(result.nodes[i].Binary());
    const bool rescheduled = group.state() == State::RESCHEDULING;
    group.set_state(State::CREATED);
    group.set_infeasible(false);
    group.set_pending_reason("");
    pending_.erase(std::remove(pending_.begin(), pending_.end(), id), pending_.end());
    LOG(INFO) << Describe(group) << (rescheduled ? " placed again" : " created");
    // Waiters hear it once it is stored: a GCS restart never takes back a "ready".
    PersistAndPublish(group, [this, id](absl::Status s) {
      if (s.ok()) AnswerWaiters(id, absl::OkStatus(), true);
    });
    return;
  }
  const bool infeasible = result.kind == Kind::kInfeasible;
  if (result.kind == Kind::kFailed || result.kind == Kind::kWaiting) pass_due_ = true;  // try again soon
  if (group.infeasible() != infeasible || group.pending_reason() != result.reason) {
    if (infeasible && !group.infeasible()) {
      LOG(WARNING) << Describe(group) << " is infeasible: " << result.reason
                   << "; it waits until nodes join that can hold it";
    }
    group.set_infeasible(infeasible);
    group.set_pending_reason(result.reason);
    PersistAndPublish(group);
  }
}

// ---------------------------------------------------------------- removal and failures

void GcsPlacementGroupManager::Remove(const PlacementGroupID& id, const std::string& why,
                                      absl::AnyInvocable<void(absl::Status)> done) {
  rpc::PlacementGroupTableData& group = groups_.at(id);
  if (scheduling_.erase(id) > 0) scheduler_.Cancel(id);
  pending_.erase(std::remove(pending_.begin(), pending_.end(), id), pending_.end());
  std::vector<rpc::Bundle> placed;
  for (rpc::Bundle& bundle : *group.mutable_bundles()) {
    if (!bundle.node_id().empty()) placed.push_back(bundle);
    bundle.clear_node_id();
  }
  if (!group.name().empty()) named_.erase({group.ray_namespace(), group.name()});
  group.set_state(State::REMOVED);
  group.set_remove_time_ms(now_ms_());
  group.set_infeasible(false);
  group.set_pending_reason("");
  LOG(INFO) << Describe(group) << " " << why;
  // Acted on once stored: a GCS restart never brings back a group whose bundles and
  // actors are gone.
  PersistAndPublish(group, [this, id, placed = std::move(placed), why, done = std::move(done),
                            alive = std::weak_ptr<bool>(alive_)](absl::Status s) mutable {
    if (alive.expired()) return;
    const rpc::PlacementGroupTableData& removed = groups_.at(id);
    if (s.ok()) {
      scheduler_.ReturnBundles(placed);
      AnswerWaiters(id, absl::NotFoundError(Describe(removed) + " was removed"), false);
      if (on_removed_) on_removed_(id, Describe(removed) + " was " + why);
      Kick();
    } else {
      LOG(ERROR) << Describe(removed) << ": its removal was not stored (" << s
                 << "); its bundles stay reserved until the GCS restarts";
    }
    if (done) done(s);
  });
}

void GcsPlacementGroupManager::OnNodeDead(const NodeID& node_id) {
  const std::string node = node_id.Binary();
  // Attempts in flight may have chosen that node: they start over (what they
  // reserved elsewhere is returned).
  for (const PlacementGroupID& id : scheduling_) scheduler_.Cancel(id);
  scheduling_.clear();
  for (auto& [id, group] : groups_) {
    if (IsRemoved(group)) continue;
    int lost = 0;
    for (rpc::Bundle& bundle : *group.mutable_bundles()) {
      if (bundle.node_id() != node) continue;
      bundle.clear_node_id();
      ++lost;
    }
    if (lost == 0) continue;
    LOG(INFO) << Describe(group) << " lost " << lost << " bundles with node " << node_id.Hex()
              << "; they are placed again";
    if (group.state() == State::CREATED) {
      group.set_state(State::RESCHEDULING);
      pending_.push_front(id);
    }
    PersistAndPublish(group);
  }
  Kick();
}

void GcsPlacementGroupManager::OnJobFinished(const JobID& job_id) {
  finished_jobs_.insert(job_id);
  std::vector<PlacementGroupID> to_remove;
  for (const auto& [id, group] : groups_) {
    if (!IsRemoved(group) && group.creator_job_id() == job_id.Binary()) to_remove.push_back(id);
  }
  for (const PlacementGroupID& id : to_remove) Remove(id, "removed: the job that created it ended", nullptr);
}

}  // namespace manta::gcs
