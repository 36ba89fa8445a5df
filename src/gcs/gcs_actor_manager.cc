#include "src/gcs/gcs_actor_manager.h"

#include <glog/logging.h>

#include <algorithm>

#include "src/gcs/table_loader.h"

namespace manta::gcs {
namespace {

std::string Describe(const rpc::ActorTableData& actor) {
  std::string out = "actor " + ActorID::FromBinary(actor.actor_id()).Hex();
  std::string what = actor.class_name().empty() ? actor.creation_spec().function_name() : actor.class_name();
  if (!what.empty()) out += " (" + what + ")";
  if (!actor.name().empty()) out += " named '" + actor.name() + "'";
  return out;
}

bool IsLive(const rpc::ActorTableData& actor) { return actor.state() != rpc::ActorTableData::DEAD; }

}  // namespace

GcsActorManager::GcsActorManager(StoreClientInterface& store, GcsPublisher& publisher, GcsActorScheduler& scheduler,
                                 std::function<int64_t()> now_ms)
    : store_(store), publisher_(publisher), scheduler_(scheduler), now_ms_(std::move(now_ms)) {}

void GcsActorManager::Initialize(const absl::flat_hash_map<std::string, std::string>& rows) {
  actors_ = ParseTableRows<ActorID, rpc::ActorTableData>(
      rows, kActorTable, [](const rpc::ActorTableData& a) -> const std::string& { return a.actor_id(); });
  std::vector<ActorID> to_schedule;
  for (const auto& [id, actor] : actors_) {
    if (IsLive(actor) && !actor.name().empty()) named_[{actor.ray_namespace(), actor.name()}] = id;
    if (actor.state() == rpc::ActorTableData::ALIVE) IndexWorker(actor);
    if (actor.state() == rpc::ActorTableData::PENDING_CREATION ||
        actor.state() == rpc::ActorTableData::RESTARTING) {
      to_schedule.push_back(id);
    }
  }
  for (const ActorID& id : to_schedule) Schedule(actors_.at(id));
  LOG(INFO) << "actor table loaded: " << actors_.size() << " actors, " << by_worker_.size() << " alive, "
            << to_schedule.size() << " being created";
}

const rpc::ActorTableData* GcsActorManager::GetActor(const ActorID& actor_id) const {
  auto it = actors_.find(actor_id);
  return it == actors_.end() ? nullptr : &it->second;
}

size_t GcsActorManager::NumActorsInState(rpc::ActorTableData::ActorState state) const {
  size_t n = 0;
  for (const auto& [id, actor] : actors_) n += actor.state() == state ? 1 : 0;
  return n;
}

rpc::ActorTableData GcsActorManager::PublicView(const rpc::ActorTableData& actor) {
  rpc::ActorTableData view = actor;
  view.clear_creation_spec();
  return view;
}

ActorPlacement GcsActorManager::PlacementOf(const rpc::ActorTableData& actor) {
  ActorPlacement placement;
  placement.worker = actor.address();
  placement.lease_id = actor.lease_id();
  placement.raylet_address = actor.raylet_address();
  placement.node_id = NodeID::FromBinaryChecked(actor.node_id()).value_or(NodeID::Nil());
  placement.pid = actor.pid();
  return placement;
}

void GcsActorManager::PersistAndPublish(rpc::ActorTableData& actor, absl::AnyInvocable<void(absl::Status)> done) {
  actor.set_version(actor.version() + 1);
  rpc::PubMessage message;
  message.set_channel_type(rpc::GCS_ACTOR_CHANNEL);
  message.set_key_id(actor.actor_id());
  *message.mutable_actor_message() = PublicView(actor);
  store_.AsyncPut(kActorTable, actor.actor_id(), actor.SerializeAsString(), /*overwrite=*/true,
                  [this, message = std::move(message), done = std::move(done)](absl::StatusOr<bool> r) mutable {
                    if (r.ok()) {
                      publisher_.Publish(std::move(message));
                    } else {
                      LOG(ERROR) << "could not store actor " << ActorID::FromBinary(message.key_id()).Hex() << ": "
                                 << r.status();
                    }
                    if (done) done(r.status());
                  });
}

void GcsActorManager::IndexWorker(const rpc::ActorTableData& actor) {
  auto worker = WorkerID::FromBinaryChecked(actor.address().worker_id());
  if (worker.ok()) by_worker_[*worker] = ActorID::FromBinary(actor.actor_id());
}

void GcsActorManager::UnindexWorker(const rpc::ActorTableData& actor) {
  auto worker = WorkerID::FromBinaryChecked(actor.address().worker_id());
  if (!worker.ok()) return;
  auto it = by_worker_.find(*worker);
  if (it != by_worker_.end() && it->second.Binary() == actor.actor_id()) by_worker_.erase(it);
}

bool GcsActorManager::RestartsLeft(const rpc::ActorTableData& actor) const {
  return actor.max_restarts() < 0 || actor.num_restarts() < actor.max_restarts();
}

void GcsActorManager::HandleRegisterActor(const rpc::RegisterActorRequest& request, rpc::RegisterActorReply* reply,
                                          rpc::SendReply send_reply) {
  const rpc::TaskSpec& spec = request.creation_spec();
  auto actor_id = ActorID::FromBinaryChecked(spec.actor_creation().actor_id());
  auto job_id = JobID::FromBinaryChecked(spec.job_id());
  if (spec.type() != rpc::ACTOR_CREATION_TASK || !actor_id.ok() || !job_id.ok()) {
    return std::move(send_reply)(absl::InvalidArgumentError(
        "RegisterActor: not an actor creation task with a valid actor id and job id"));
  }
  if (actors_.contains(*actor_id)) return std::move(send_reply)(absl::OkStatus());  // a retried call
  const rpc::ActorCreationSpec& creation = spec.actor_creation();
  if (!creation.detached() && finished_jobs_.contains(*job_id)) {
    return std::move(send_reply)(absl::FailedPreconditionError("RegisterActor: job " + job_id->Hex() +
                                                               " has finished; its actors cannot be created"));
  }
  NamedKey key{creation.ray_namespace(), creation.name()};
  if (!creation.name().empty()) {
    auto taken = named_.find(key);
    if (taken != named_.end()) {
      return std::move(send_reply)(absl::AlreadyExistsError(
          "an actor named '" + creation.name() + "' already exists in namespace '" + creation.ray_namespace() +
          "' (actor " + taken->second.Hex() + "); names are unique per namespace among live actors"));
    }
    named_[key] = *actor_id;
  }
  rpc::ActorTableData& actor = actors_[*actor_id];
  actor.set_actor_id(actor_id->Binary());
  actor.set_job_id(job_id->Binary());
  actor.set_state(rpc::ActorTableData::DEPENDENCIES_UNREADY);
  *actor.mutable_owner_address() = spec.caller_address();
  actor.set_name(creation.name());
  actor.set_ray_namespace(creation.ray_namespace());
  actor.set_max_restarts(creation.max_restarts());
  actor.set_detached(creation.detached());
  actor.set_class_name(creation.class_name());
  actor.set_max_concurrency(std::max(1, creation.max_concurrency()));
  *actor.mutable_creation_spec() = spec;
  actor.set_start_time_ms(now_ms_());
  VLOG(1) << "registering " << Describe(actor);
  PersistAndPublish(actor, [this, id = *actor_id, key, send_reply = std::move(send_reply)](absl::Status s) mutable {
    if (!s.ok()) {
      actors_.erase(id);
      auto named = named_.find(key);
      if (named != named_.end() && named->second == id) named_.erase(named);
    }
    std::move(send_reply)(s);
  });
}

void GcsActorManager::HandleCreateActor(const rpc::CreateActorRequest& request, rpc::CreateActorReply* reply,
                                        rpc::SendReply send_reply) {
  auto actor_id = ActorID::FromBinaryChecked(request.creation_spec().actor_creation().actor_id());
  if (!actor_id.ok()) return std::move(send_reply)(absl::InvalidArgumentError("CreateActor: malformed actor id"));
  auto it = actors_.find(*actor_id);
  if (it == actors_.end()) {
    return std::move(send_reply)(absl::NotFoundError("CreateActor: actor " + actor_id->Hex() + " is not registered"));
  }
  rpc::ActorTableData& actor = it->second;
  if (actor.state() != rpc::ActorTableData::DEPENDENCIES_UNREADY) return std::move(send_reply)(absl::OkStatus());
  *actor.mutable_creation_spec() = request.creation_spec();
  actor.set_state(rpc::ActorTableData::PENDING_CREATION);
  PersistAndPublish(actor, [this, id = *actor_id, send_reply = std::move(send_reply)](absl::Status s) mutable {
    auto it = actors_.find(id);
    if (s.ok() && it != actors_.end() && it->second.state() == rpc::ActorTableData::PENDING_CREATION) {
      Schedule(it->second);
    }
    std::move(send_reply)(s);
  });
}

void GcsActorManager::Schedule(rpc::ActorTableData& actor) {
  ActorID id = ActorID::FromBinary(actor.actor_id());
  scheduler_.Schedule(actor, [this, id](const ActorPlacement& placement, const rpc::ErrorInfo& error) {
    OnCreated(id, placement, error);
  });
}

void GcsActorManager::OnCreated(const ActorID& actor_id, const ActorPlacement& placement,
                                const rpc::ErrorInfo& error) {
  auto it = actors_.find(actor_id);
  if (it == actors_.end() || !IsLive(it->second)) {
    scheduler_.KillWorker(placement, "its actor is dead");
    return;
  }
  rpc::ActorTableData& actor = it->second;
  *actor.mutable_address() = placement.worker;
  actor.set_lease_id(placement.lease_id);
  actor.set_raylet_address(placement.raylet_address);
  actor.set_node_id(placement.node_id.Binary());
  actor.set_pid(placement.pid);
  if (error.type() == rpc::RUNTIME_ENV_SETUP_FAILED) {
    Die(actor_id, error.message(), rpc::RUNTIME_ENV_SETUP_FAILED);
    return;
  }
  if (error.type() == rpc::PLACEMENT_GROUP_REMOVED) {
    Die(actor_id, error.message());
    return;
  }
  if (error.type() != rpc::ERROR_TYPE_UNSPECIFIED) {
    Die(actor_id, "its factory " + actor.creation_spec().function_name() + " failed: " + error.message());
    return;
  }
  actor.set_state(rpc::ActorTableData::ALIVE);
  IndexWorker(actor);
  LOG(INFO) << Describe(actor) << " is ALIVE in worker pid " << placement.pid << " on node "
            << placement.node_id.Hex() << (actor.num_restarts() > 0 ? " (restart " + std::to_string(actor.num_restarts()) + ")" : "");
  PersistAndPublish(actor);
}

void GcsActorManager::OnActorProcessLost(const ActorID& actor_id, const std::string& why) {
  auto it = actors_.find(actor_id);
  if (it == actors_.end() || !IsLive(it->second)) return;
  rpc::ActorTableData& actor = it->second;
  UnindexWorker(actor);
  const JobID job = JobID::FromBinary(actor.job_id());
  if (!actor.detached() && finished_jobs_.contains(job)) {
    return Die(actor_id, why + "; its job has finished");
  }
  if (!RestartsLeft(actor)) {
    return Die(actor_id, why + "; no restarts left (max_restarts " + std::to_string(actor.max_restarts()) + ")");
  }
  actor.set_num_restarts(actor.num_restarts() + 1);
  actor.set_state(rpc::ActorTableData::RESTARTING);
  actor.clear_address();
  actor.clear_lease_id();
  actor.clear_raylet_address();
  actor.clear_pid();
  LOG(INFO) << Describe(actor) << " restarts (" << actor.num_restarts() << " of "
            << (actor.max_restarts() < 0 ? std::string("unlimited") : std::to_string(actor.max_restarts()))
            << "): " << why;
  PersistAndPublish(actor);
  Schedule(actor);
}

void GcsActorManager::OnPlacementGroupRemoved(const PlacementGroupID& group_id, const std::string& why) {
  std::vector<ActorID> in_group;
  for (const auto& [id, actor] : actors_) {
    if (IsLive(actor) && actor.creation_spec().placement().placement_group_id() == group_id.Binary()) {
      in_group.push_back(id);
    }
  }
  for (const ActorID& id : in_group) Die(id, why);
}

void GcsActorManager::Die(const ActorID& actor_id, const std::string& why, rpc::ErrorType type) {
  auto it = actors_.find(actor_id);
  if (it == actors_.end() || !IsLive(it->second)) return;
  rpc::ActorTableData& actor = it->second;
  scheduler_.Cancel(actor_id, "its actor died");
  if (!actor.lease_id().empty()) scheduler_.KillWorker(PlacementOf(actor), "its actor died: " + why);
  UnindexWorker(actor);
  auto named = named_.find(NamedKey{actor.ray_namespace(), actor.name()});
  if (named != named_.end() && named->second == actor_id) named_.erase(named);
  actor.set_state(rpc::ActorTableData::DEAD);
  actor.set_end_time_ms(now_ms_());
  actor.mutable_death_cause()->set_type(type);
  actor.mutable_death_cause()->set_message(Describe(actor) + " is dead: " + why);
  LOG(INFO) << actor.death_cause().message();
  PersistAndPublish(actor);
}

void GcsActorManager::HandleGetActorInfo(const rpc::GetActorInfoRequest& request, rpc::GetActorInfoReply* reply,
                                         rpc::SendReply send_reply) {
  auto actor_id = ActorID::FromBinaryChecked(request.actor_id());
  if (!actor_id.ok()) return std::move(send_reply)(absl::InvalidArgumentError("GetActorInfo: malformed actor id"));
  auto it = actors_.find(*actor_id);
  if (it != actors_.end()) {
    reply->set_found(true);
    *reply->mutable_actor() = PublicView(it->second);
  }
  std::move(send_reply)(absl::OkStatus());
}

void GcsActorManager::HandleGetNamedActorInfo(const rpc::GetNamedActorInfoRequest& request,
                                              rpc::GetNamedActorInfoReply* reply, rpc::SendReply send_reply) {
  if (request.name().empty()) {
    return std::move(send_reply)(absl::InvalidArgumentError("GetNamedActorInfo: the actor name is empty"));
  }
  auto named = named_.find(NamedKey{request.ray_namespace(), request.name()});
  if (named != named_.end()) {
    reply->set_found(true);
    *reply->mutable_actor() = PublicView(actors_.at(named->second));
  }
  std::move(send_reply)(absl::OkStatus());
}

void GcsActorManager::HandleGetAllActorInfo(const rpc::GetAllActorInfoRequest&, rpc::GetAllActorInfoReply* reply,
                                            rpc::SendReply send_reply) {
  std::vector<const rpc::ActorTableData*> sorted;
  sorted.reserve(actors_.size());
  for (const auto& [id, actor] : actors_) sorted.push_back(&actor);
  std::sort(sorted.begin(), sorted.end(), [](const rpc::ActorTableData* a, const rpc::ActorTableData* b) {
    return a->start_time_ms() != b->start_time_ms() ? a->start_time_ms() < b->start_time_ms()
                                                    : a->actor_id() < b->actor_id();
  });
  for (const rpc::ActorTableData* actor : sorted) *reply->add_actors() = PublicView(*actor);
  std::move(send_reply)(absl::OkStatus());
}

void GcsActorManager::HandleKillActor(const rpc::KillActorRequest& request, rpc::KillActorReply* reply,
                                      rpc::SendReply send_reply) {
  auto actor_id = ActorID::FromBinaryChecked(request.actor_id());
  if (!actor_id.ok()) return std::move(send_reply)(absl::InvalidArgumentError("KillActor: malformed actor id"));
  auto it = actors_.find(*actor_id);
  if (it == actors_.end()) {
    return std::move(send_reply)(absl::NotFoundError("KillActor: no actor " + actor_id->Hex()));
  }
  rpc::ActorTableData& actor = it->second;
  const std::string reason = request.reason().empty() ? "killed by ray::ActorHandle::Kill()" : request.reason();
  if (request.no_restart()) {
    Die(*actor_id, reason);
  } else if (actor.state() == rpc::ActorTableData::ALIVE) {
    scheduler_.KillWorker(PlacementOf(actor), reason);
    OnActorProcessLost(*actor_id, reason);
  }
  *reply->mutable_actor() = PublicView(actor);
  std::move(send_reply)(absl::OkStatus());
}

void GcsActorManager::HandleReportActorOutOfScope(const rpc::ReportActorOutOfScopeRequest& request,
                                                  rpc::ReportActorOutOfScopeReply* reply, rpc::SendReply send_reply) {
  auto actor_id = ActorID::FromBinaryChecked(request.actor_id());
  if (!actor_id.ok()) {
    return std::move(send_reply)(absl::InvalidArgumentError("ReportActorOutOfScope: malformed actor id"));
  }
  auto it = actors_.find(*actor_id);
  if (it != actors_.end() && it->second.name().empty() && !it->second.detached()) {
    Die(*actor_id, "every handle to it went out of scope");
  }
  std::move(send_reply)(absl::OkStatus());
}

void GcsActorManager::OnWorkerDead(const WorkerID& worker_id, const std::string& reason) {
  auto ran = by_worker_.find(worker_id);
  if (ran != by_worker_.end()) {
    ActorID actor_id = ran->second;
    const rpc::ActorTableData& actor = actors_.at(actor_id);
    OnActorProcessLost(actor_id, "its worker process (pid " + std::to_string(actor.pid()) + ") died: " + reason);
  }
  std::vector<ActorID> owned;
  for (const auto& [id, actor] : actors_) {
    if (IsLive(actor) && !actor.detached() && actor.owner_address().worker_id() == worker_id.Binary()) {
      owned.push_back(id);
    }
  }
  for (const ActorID& id : owned) Die(id, "its owner " + worker_id.Hex() + " died: " + reason);
}

void GcsActorManager::OnNodeDead(const NodeID& node_id, const std::string& reason) {
  std::vector<ActorID> lost;
  std::vector<ActorID> orphaned;
  for (const auto& [id, actor] : actors_) {
    if (!IsLive(actor)) continue;
    if (actor.state() == rpc::ActorTableData::ALIVE && actor.node_id() == node_id.Binary()) lost.push_back(id);
    if (!actor.detached() && actor.owner_address().node_id() == node_id.Binary()) orphaned.push_back(id);
  }
  for (const ActorID& id : orphaned) Die(id, "its owner's node " + node_id.Hex() + " died: " + reason);
  for (const ActorID& id : lost) OnActorProcessLost(id, "its node " + node_id.Hex() + " died: " + reason);
}

void GcsActorManager::OnJobFinished(const JobID& job_id) {
  finished_jobs_.insert(job_id);
  std::vector<ActorID> ending;
  for (const auto& [id, actor] : actors_) {
    if (IsLive(actor) && !actor.detached() && actor.job_id() == job_id.Binary()) ending.push_back(id);
  }
  for (const ActorID& id : ending) Die(id, "its job " + job_id.Hex() + " finished (the driver exited)");
}

}  // namespace manta::gcs
