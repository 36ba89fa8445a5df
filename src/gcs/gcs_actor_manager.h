// GcsActorManager: the actor table, the named-actor index and every actor's life
// (ARCHITECTURE.md §6, §10).
//
// States: DEPENDENCIES_UNREADY (registered; the owner resolves the factory's
// arguments) -> PENDING_CREATION (CreateActor: the scheduler leases a worker and runs
// the factory) -> ALIVE <-> RESTARTING -> DEAD. Every change is written to the store
// before it is acknowledged or published (GCS_ACTOR_CHANNEL, keyed by actor id; the
// published copy leaves out the creation spec).
//
// Death and restarts. When an ALIVE actor's worker or node dies it is restarted
// (the factory runs again, num_restarts counts) while restarts remain
// (max_restarts -1 = always), unless its owner is gone; otherwise it is DEAD with a
// cause naming the actor and why. Kill(no_restart) and the actor's own ExitActor make
// it DEAD at once; Kill without no_restart kills the process and restarts it when
// restarts remain. An actor of a placement group dies, without restart, when the group
// is removed (or was removed before the actor could be placed). A factory that throws makes it DEAD with the factory's error. A
// non-detached actor dies with its owner (the owner process died, or its job ended)
// and, unless it is named, when its owner reports that no handle to it is left.
//
// Names are unique per namespace among actors that are not DEAD. The index is not a
// table of its own: it is rebuilt from the actor rows (each carries its name) when
// the table is loaded, so the two can never disagree.
//
// Restart of the GCS: Initialize loads every row; ALIVE actors keep running (their
// workers are untouched), actors that were being created are scheduled again.
//
// Thread: the GCS loop only. Ownership: the store, publisher and scheduler outlive it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "protos/gcs.pb.h"
#include "src/common/id.h"
#include "src/common/rpc/grpc_server.h"
#include "src/gcs/gcs_actor_scheduler.h"
#include "src/gcs/gcs_publisher.h"
#include "src/gcs/store_client.h"

namespace manta::gcs {

inline constexpr char kActorTable[] = "actors";

class GcsActorManager {
 public:
  GcsActorManager(StoreClientInterface& store, GcsPublisher& publisher, GcsActorScheduler& scheduler,
                  std::function<int64_t()> now_ms);

  // Loads the table read from the store at start-up (field = actor id, value =
  // ActorTableData) and schedules the actors that were being created. Malformed rows
  // are logged and skipped.
  void Initialize(const absl::flat_hash_map<std::string, std::string>& rows);

  // ALREADY_EXISTS when the name is taken in the namespace by an actor that is not
  // DEAD; INVALID_ARGUMENT for a spec that is not an actor creation.
  void HandleRegisterActor(const rpc::RegisterActorRequest& request, rpc::RegisterActorReply* reply,
                           rpc::SendReply send_reply);
  // NOT_FOUND for an unregistered actor. Repeats (a retried call) and calls for a
  // DEAD actor are answered OK without effect.
  void HandleCreateActor(const rpc::CreateActorRequest& request, rpc::CreateActorReply* reply,
                         rpc::SendReply send_reply);
  void HandleGetActorInfo(const rpc::GetActorInfoRequest& request, rpc::GetActorInfoReply* reply,
                          rpc::SendReply send_reply);
  void HandleGetNamedActorInfo(const rpc::GetNamedActorInfoRequest& request, rpc::GetNamedActorInfoReply* reply,
                               rpc::SendReply send_reply);
  void HandleGetAllActorInfo(const rpc::GetAllActorInfoRequest& request, rpc::GetAllActorInfoReply* reply,
                             rpc::SendReply send_reply);
  // NOT_FOUND for an unknown actor; OK (no effect) for a DEAD one.
  void HandleKillActor(const rpc::KillActorRequest& request, rpc::KillActorReply* reply, rpc::SendReply send_reply);
  void HandleReportActorOutOfScope(const rpc::ReportActorOutOfScopeRequest& request,
                                   rpc::ReportActorOutOfScopeReply* reply, rpc::SendReply send_reply);

  // A worker or driver process exited (published by GcsWorkerManager): the actor it
  // ran restarts or dies; the non-detached actors it owned die.
  void OnWorkerDead(const WorkerID& worker_id, const std::string& reason);
  // A node died: its actors restart or die; actors owned by processes there die.
  void OnNodeDead(const NodeID& node_id, const std::string& reason);
  // A job ended (its driver exited): its non-detached actors die.
  void OnJobFinished(const JobID& job_id);
  // A placement group was removed (`why` says so): the actors placed in it die (they
  // are not restarted).
  void OnPlacementGroupRemoved(const PlacementGroupID& group_id, const std::string& why);

  // Lookups (tests, the CLI's listing).
  const rpc::ActorTableData* GetActor(const ActorID& actor_id) const;
  size_t NumActors() const { return actors_.size(); }
  size_t NumActorsInState(rpc::ActorTableData::ActorState state) const;

 private:
  using NamedKey = std::pair<std::string, std::string>;  // namespace, name
  // The actor's worker ran the factory (or the factory failed).
  void OnCreated(const ActorID& actor_id, const ActorPlacement& placement, const rpc::ErrorInfo& error);
  void Schedule(rpc::ActorTableData& actor);
  // The actor's process went away (`why`): restart it if allowed, else DEAD.
  void OnActorProcessLost(const ActorID& actor_id, const std::string& why);
  // Marks the actor DEAD with `why` (death cause of `type`: ACTOR_DIED, or
  // RUNTIME_ENV_SETUP_FAILED when its env cannot be applied), kills its worker and
  // frees its name.
  void Die(const ActorID& actor_id, const std::string& why, rpc::ErrorType type = rpc::ACTOR_DIED);
  // Writes the row (version bumped), then publishes it and runs `done` with the
  // store's status.
  void PersistAndPublish(rpc::ActorTableData& actor, absl::AnyInvocable<void(absl::Status)> done = nullptr);
  void IndexWorker(const rpc::ActorTableData& actor);
  void UnindexWorker(const rpc::ActorTableData& actor);
  bool RestartsLeft(const rpc::ActorTableData& actor) const;
  static ActorPlacement PlacementOf(const rpc::ActorTableData& actor);
  static rpc::ActorTableData PublicView(const rpc::ActorTableData& actor);

  StoreClientInterface& store_;
  GcsPublisher& publisher_;
  GcsActorScheduler& scheduler_;
  std::function<int64_t()> now_ms_;
  absl::flat_hash_map<ActorID, rpc::ActorTableData> actors_;
  absl::flat_hash_map<NamedKey, ActorID> named_;
  // The worker each live actor runs in.
  absl::flat_hash_map<WorkerID, ActorID> by_worker_;
  // Jobs known to have ended: their non-detached actors are never created or restarted.
  absl::flat_hash_set<JobID> finished_jobs_;
};

}  // namespace manta::gcs
