// GcsPlacementGroupManager: the placement group table, the named-group index and
// every group's life (ARCHITECTURE.md §7, §10).
//
// States: PENDING (registered, not placed: waiting for resources, or infeasible)
// -> CREATED (every bundle reserved on a node, by GcsPlacementGroupScheduler's
// two-phase commit) -> REMOVED; a CREATED group whose node died is RESCHEDULING
// while its lost bundles are placed again (the others keep their nodes). Every
// change is written to the store before it is acknowledged or published
// (GCS_PLACEMENT_GROUP_CHANNEL, keyed by group id).
//
// Scheduling: groups not placed wait in a FIFO queue. A pass tries every waiting group
// that has no attempt in flight, oldest first, all at once (each placement counts what
// the ones before it reserved, so they do not collide). A pass runs at once when a
// group is created or removed, and at most every `retry_period_ms` after something
// else changed that may let one fit (a node joined, died or reported its resources, an
// attempt failed). A group that does not fit keeps
// why in `pending_reason`, and `infeasible` when no set of the alive nodes could
// ever hold it; it is placed once nodes join that can.
//
// Removal (RemovePlacementGroup, or the end of the job that created it): the group
// is REMOVED at once; once that is stored, its bundles are returned to their nodes
// (each raylet kills the workers leased from them), `on_removed` kills its actors,
// raylets fail its waiting lease requests (they follow the channel), and held Waits
// are answered NOT_FOUND. A group becomes CREATED for waiters once that is stored.
// Removed groups stay in the table (REMOVED), so a second Remove is a no-op and
// Get still finds them.
//
// Restart of the GCS: Initialize loads every row; Start first tells every alive
// raylet which bundles it keeps (releasing those of commits the old GCS never
// finished), then scheduling resumes. CREATED groups keep their reservations.
//
// Thread: the GCS loop only. Ownership: the store, publisher and scheduler outlive it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "protos/gcs.pb.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"
#include "src/common/rpc/grpc_server.h"
#include "src/gcs/gcs_placement_group_scheduler.h"
#include "src/gcs/gcs_publisher.h"
#include "src/gcs/store_client.h"

namespace manta::gcs {

inline constexpr char kPlacementGroupTable[] = "placement_groups";

class GcsPlacementGroupManager {
 public:
  // `on_removed(group, why)`: kill the actors of a removed group.
  using RemovedListener = std::function<void(const PlacementGroupID&, const std::string&)>;

  GcsPlacementGroupManager(EventLoop& loop, StoreClientInterface& store, GcsPublisher& publisher,
                           GcsPlacementGroupScheduler& scheduler, std::function<int64_t()> now_ms,
                           RemovedListener on_removed, int64_t retry_period_ms = 200);
  ~GcsPlacementGroupManager();

  // Loads the table read from the store at start-up (field = group id, value =
  // PlacementGroupTableData). Malformed rows are logged and skipped.
  void Initialize(const absl::flat_hash_map<std::string, std::string>& rows);
  // Reconciles reservations with the raylets, then starts scheduling (see the top).
  void Start();

  void HandleCreatePlacementGroup(const rpc::CreatePlacementGroupRequest& request,
                                  rpc::CreatePlacementGroupReply* reply, rpc::SendReply send_reply);
  void HandleRemovePlacementGroup(const rpc::RemovePlacementGroupRequest& request,
                                  rpc::RemovePlacementGroupReply* reply, rpc::SendReply send_reply);
  void HandleGetPlacementGroup(const rpc::GetPlacementGroupRequest& request, rpc::GetPlacementGroupReply* reply,
                               rpc::SendReply send_reply);
  void HandleGetNamedPlacementGroup(const rpc::GetNamedPlacementGroupRequest& request,
                                    rpc::GetNamedPlacementGroupReply* reply, rpc::SendReply send_reply);
  void HandleGetAllPlacementGroup(const rpc::GetAllPlacementGroupRequest& request,
                                  rpc::GetAllPlacementGroupReply* reply, rpc::SendReply send_reply);
  void HandleWaitPlacementGroupUntilReady(const rpc::WaitPlacementGroupUntilReadyRequest& request,
                                          rpc::WaitPlacementGroupUntilReadyReply* reply, rpc::SendReply send_reply);

  // A node died: the bundles it held are placed again.
  void OnNodeDead(const NodeID& node_id);
  // Something changed that may let a waiting group fit (a node joined or reported).
  void OnResourcesChanged();
  // A job ended: the groups it created are removed, and it creates no more (after a
  // restart: the groups of ended jobs still in the table are removed at Start).
  void OnJobFinished(const JobID& job_id);
  // Answers every held Wait (ready = false): the server is stopping.
  void FlushWaits();

  const rpc::PlacementGroupTableData* GetGroup(const PlacementGroupID& id) const;
  size_t NumGroups() const { return groups_.size(); }
  size_t NumPending() const { return pending_.size(); }
  // Scheduling has started, no attempt is in flight and no pass is due (tests).
  bool Settled() const { return started_ && scheduling_.empty() && !pass_due_; }

  // INVALID_ARGUMENT naming what is wrong with a group to create (id, bundles,
  // strategy), OK otherwise.
  static absl::Status Validate(const rpc::PlacementGroupTableData& group);

 private:
  using NamedKey = std::pair<std::string, std::string>;  // namespace, name
  struct Waiter {
    rpc::WaitPlacementGroupUntilReadyReply* reply;
    rpc::SendReply send_reply;
  };

  // Runs a pass now.
  void Kick();
  void RunPass();
  void OnScheduled(const PlacementGroupID& id, const PlacementGroupScheduleResult& result);
  void Remove(const PlacementGroupID& id, const std::string& why, absl::AnyInvocable<void(absl::Status)> done);
  void AnswerWaiters(const PlacementGroupID& id, const absl::Status& status, bool ready);
  void PersistAndPublish(rpc::PlacementGroupTableData& group,
                         absl::AnyInvocable<void(absl::Status)> done = nullptr);

  EventLoop& loop_;
  StoreClientInterface& store_;
  GcsPublisher& publisher_;
  GcsPlacementGroupScheduler& scheduler_;
  std::function<int64_t()> now_ms_;
  RemovedListener on_removed_;
  const int64_t retry_period_ms_;
  absl::flat_hash_map<PlacementGroupID, rpc::PlacementGroupTableData> groups_;
  absl::flat_hash_map<NamedKey, PlacementGroupID> named_;
  // Groups waiting to be placed (PENDING or RESCHEDULING), oldest first.
  std::deque<PlacementGroupID> pending_;
  // Groups with an attempt in flight.
  absl::flat_hash_set<PlacementGroupID> scheduling_;
  bool pass_due_ = false;
  bool started_ = false;
  uint64_t next_waiter_ = 0;
  absl::flat_hash_map<PlacementGroupID, absl::flat_hash_map<uint64_t, Waiter>> waiters_;
  absl::flat_hash_set<JobID> finished_jobs_;
  std::unique_ptr<Timer> retry_timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace manta::gcs
