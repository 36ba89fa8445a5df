#include "src/gcs/gcs_actor_scheduler.h"
#include "src/common/task_resources.h"
#include "src/common/node_address.h"

#include <glog/logging.h>

#include <optional>

namespace manta::gcs {

struct GcsActorScheduler::Attempt {
  ActorID actor_id;
  rpc::ActorTableData actor;
  Done done;
  std::string lease_request_id;
  std::string pending_at;  // raylet holding the lease request, while one is pending
  std::optional<ActorPlacement> leased;
  std::string describe;
};

GcsActorScheduler::GcsActorScheduler(EventLoop& loop, GcsNodeManager& nodes, raylet::RayletClientPool& raylets,
                                     core::TaskChannelPool& channels, int64_t retry_delay_ms)
    : loop_(loop), nodes_(nodes), raylets_(raylets), channels_(channels), retry_delay_ms_(retry_delay_ms) {}

GcsActorScheduler::~GcsActorScheduler() { *alive_ = false; }

bool GcsActorScheduler::Current(const std::shared_ptr<Attempt>& attempt) const {
  auto it = scheduling_.find(attempt->actor_id);
  return it != scheduling_.end() && it->second == attempt;
}

std::string GcsActorScheduler::PickRaylet(const rpc::ActorTableData& actor) const {
  auto owner_node = NodeID::FromBinaryChecked(actor.owner_address().node_id());
  if (owner_node.ok()) {
    const rpc::NodeInfo* node = nodes_.GetNode(*owner_node);
    if (node != nullptr && node->state() == rpc::NodeInfo::ALIVE && !node->draining()) {
      return RayletAddress(*node);
    }
  }
  for (const rpc::NodeInfo& node : nodes_.AliveNodes()) {
    if (node.draining()) continue;
    return RayletAddress(node);
  }
  return "";
}

void GcsActorScheduler::Schedule(const rpc::ActorTableData& actor, Done done) {
  auto actor_id = ActorID::FromBinaryChecked(actor.actor_id());
  if (!actor_id.ok()) {
    LOG(ERROR) << "cannot schedule an actor with a malformed id";
    return;
  }
  Cancel(*actor_id, "scheduled again");
  auto attempt = std::make_shared<Attempt>();
  attempt->actor_id = *actor_id;
  attempt->actor = actor;
  attempt->done = std::move(done);
  attempt->describe = "actor " + actor_id->Hex() + " (" + actor.creation_spec().function_name() + ")";
  scheduling_[*actor_id] = attempt;
  std::string raylet = PickRaylet(actor);
  if (raylet.empty()) return RetryLater(attempt, "no alive node");
  RequestLease(attempt, raylet, false);
}

void GcsActorScheduler::RequestLease(const std::shared_ptr<Attempt>& attempt, const std::string& raylet_address,
                                     bool grant_or_reject) {
  const rpc::ActorTableData& actor = attempt->actor;
  const rpc::TaskSpec& spec = actor.creation_spec();
  rpc::RequestWorkerLeaseRequest request;
  attempt->lease_request_id = LeaseID::FromRandom().Binary();
  attempt->pending_at = raylet_address;
  request.set_lease_request_id(attempt->lease_request_id);
  request.set_job_id(actor.job_id());
  // A non-detached actor's worker belongs to its owner: the raylet kills it when the
  // owner dies. A detached one belongs to no process.
  if (!actor.detached()) *request.mutable_owner_address() = actor.owner_address();
  *request.mutable_required_resources() = ResourceMapOf(spec);
  // As in Ray's C++ API, an actor given no resources needs none, to be placed or to
  // live: its creation does not wait for a CPU. In a placement group's bundle it is
  // placed with one CPU of the bundle (which locates the bundle) and holds none once
  // granted (placement_only). An explicit 0 asks the raylet for nothing (an empty
  // request means one CPU there).
  const bool no_resources = spec.required_resources().empty();
  const bool placement_only = no_resources && spec.has_placement();
  if (no_resources) (*request.mutable_required_resources())["CPU"] = placement_only ? 1 : 0;
  request.set_grant_or_reject(grant_or_reject);
  request.set_function_name(spec.function_name());
  request.set_runtime_env(spec.runtime_env());
  if (spec.has_placement()) *request.mutable_placement() = spec.placement();
  request.mutable_actor()->set_actor_id(actor.actor_id());
  request.mutable_actor()->set_detached(actor.detached());
  request.mutable_actor()->set_placement_only(placement_only);
  VLOG(1) << "leasing a worker for " << attempt->describe << " at " << raylet_address;
  std::weak_ptr<bool> alive = alive_;
  raylets_.Get(raylet_address)
      ->RequestWorkerLease(request, [this, alive, attempt, raylet_address, grant_or_reject](
                                        const absl::Status& status, rpc::RequestWorkerLeaseReply&& reply) {
        if (alive.expired()) return;
        OnLeaseReply(attempt, raylet_address, grant_or_reject, status, std::move(reply));
      });
}

void GcsActorScheduler::OnLeaseReply(const std::shared_ptr<Attempt>& attempt, const std::string& raylet_address,
                                     bool grant_or_reject, const absl::Status& status,
                                     rpc::RequestWorkerLeaseReply&& reply) {
  const bool granted = status.ok() && !reply.lease_id().empty() && !reply.worker_address().ip_address().empty();
  ActorPlacement placement;
  if (granted) {
    placement.worker = reply.worker_address();
    placement.lease_id = reply.lease_id();
    placement.raylet_address = raylet_address;
    placement.node_id = NodeID::FromBinaryChecked(reply.worker_address().node_id()).value_or(NodeID::Nil());
    placement.pid = reply.worker_pid();
  }
  if (!Current(attempt)) {
    // Cancelled meanwhile: the worker is not needed.
    if (granted) KillWorker(placement, "its actor no longer needs it");
    return;
  }
  attempt->pending_at.clear();
  if (granted) {
    attempt->leased = placement;
    PushCreation(attempt);
    return;
  }
  if (status.ok() && !grant_or_reject && !reply.retry_at_raylet_address().ip_address().empty()) {
    RequestLease(attempt, reply.retry_at_raylet_address().ip_address() + ":" +
                              std::to_string(reply.retry_at_raylet_address().port()),
                 true);
    return;
  }
  if (status.ok() && reply.rejected() && reply.runtime_env_setup_failed()) {
    // Final: no worker can be started for the actor's runtime env.
    scheduling_.erase(attempt->actor_id);
    rpc::ErrorInfo error;
    error.set_type(rpc::RUNTIME_ENV_SETUP_FAILED);
    error.set_message("its runtime_env cannot be applied: " + reply.failure_message());
    Finish(attempt, ActorPlacement{}, error, nullptr);
    return;
  }
  if (status.ok() && reply.rejected() && reply.placement_group_removed()) {
    // Final: the bundle the actor was to run in is gone for good.
    scheduling_.erase(attempt->actor_id);
    rpc::ErrorInfo error;
    error.set_type(rpc::PLACEMENT_GROUP_REMOVED);
    error.set_message(reply.failure_message());
    Finish(attempt, ActorPlacement{}, error, nullptr);
    return;
  }
  if (status.ok() && reply.rejected() && reply.place_again()) {
    // It waited on the node it was spilled back to, and another one has room now:
    // placed again from the start, at once.
    std::string raylet = PickRaylet(attempt->actor);
    if (!raylet.empty()) return RequestLease(attempt, raylet, false);
  }
  std::string why = !status.ok() ? std::string(status.message())
                                 : (reply.failure_message().empty() ? "the lease request was cancelled"
                                                                     : reply.failure_message());
  RetryLater(attempt, "no worker from " + raylet_address + ": " + why);
}

void GcsActorScheduler::PushCreation(const std::shared_ptr<Attempt>& attempt) {
  const ActorPlacement& placement = *attempt->leased;
  rpc::PushTaskRequest request;
  request.set_intended_worker_id(placement.worker.worker_id());
  *request.add_tasks() = attempt->actor.creation_spec();
  request.mutable_tasks(0)->mutable_actor_creation()->set_num_restarts(attempt->actor.num_restarts());
  if (task_events_ != nullptr) {
    task_events_->RecordOwn(attempt->actor.creation_spec(), attempt->actor.num_restarts(), rpc::SUBMITTED_TO_WORKER,
                            nullptr, nullptr, nullptr);
  }
  const std::string key = core::TaskChannelKey(placement.worker);
  std::weak_ptr<bool> alive = alive_;
  std::shared_ptr<core::TaskChannelInterface> channel = core::ChannelTo(channels_, placement.worker);
  std::weak_ptr<core::TaskChannelInterface> weak_channel = channel;
  channel->Push(std::move(request), [this, alive, attempt, key, weak_channel](const absl::Status& status,
                                                                             rpc::PushTaskReply&& reply) {
    // Any thread: handled on the loop.
    auto shared = std::make_shared<rpc::PushTaskReply>(std::move(reply));
    loop_.Post("GcsActorScheduler.CreationReply", [this, alive, attempt, key, weak_channel, status, shared] {
      if (alive.expired()) return;
      if (status.ok() && !shared->done()) return;  // results come with the last reply
      // The channel served its one push.
      if (auto used = weak_channel.lock()) used->Close(absl::CancelledError("actor creation done"));
      channels_.Disconnect(key);
      channels_.Prune([](core::TaskChannelInterface& c) { return c.IsClosed() && c.InFlight() == 0; });
      OnCreationReply(attempt, status, *shared);
    });
  });
}

void GcsActorScheduler::OnCreationReply(const std::shared_ptr<Attempt>& attempt, const absl::Status& status,
                                        const rpc::PushTaskReply& reply) {
  if (!Current(attempt)) return;  // cancelled: the worker was killed by Cancel
  ActorPlacement placement = *attempt->leased;
  rpc::ErrorInfo error;
  bool has_result = false;
  for (const rpc::TaskResult& result : reply.results()) {
    has_result = true;
    placement.pid = reply.worker_pid() != 0 ? reply.worker_pid() : placement.pid;
    for (const rpc::ReturnObject& r : result.returns()) {
      if (r.has_error() && r.error().type() != rpc::ERROR_TYPE_UNSPECIFIED) error = r.error();
    }
  }
  if (!status.ok() || !has_result) {
    // The worker died while the factory ran (or refused the push): try another one.
    attempt->leased.reset();
    KillWorker(placement, "the actor's creation did not complete");
    RetryLater(attempt, "its worker " + placement.worker.ip_address() + " pid " + std::to_string(placement.pid) +
                            " failed during creation: " +
                            (status.ok() ? std::string("no result") : std::string(status.message())));
    return;
  }
  scheduling_.erase(attempt->actor_id);
  Finish(attempt, placement, error, &reply.results(0));
}

void GcsActorScheduler::Finish(const std::shared_ptr<Attempt>& attempt, const ActorPlacement& placement,
                               const rpc::ErrorInfo& error, const rpc::TaskResult* result) {
  if (task_events_ != nullptr) {
    const bool failed = error.type() != rpc::ERROR_TYPE_UNSPECIFIED;
    rpc::TaskExecutor executor;
    executor.set_worker_id(placement.worker.worker_id());
    executor.set_node_id(placement.node_id.Binary());
    executor.set_pid(placement.pid);
    task_events_->RecordOwn(attempt->actor.creation_spec(), attempt->actor.num_restarts(),
                            failed ? rpc::FAILED : rpc::FINISHED, result != nullptr ? &executor : nullptr, result,
                            failed ? &error : nullptr);
  }
  attempt->done(placement, error);
}

void GcsActorScheduler::RetryLater(const std::shared_ptr<Attempt>& attempt, const std::string& why) {
  LOG(WARNING) << "scheduling " << attempt->describe << ": " << why << "; retrying in " << retry_delay_ms_ << " ms";
  std::weak_ptr<bool> alive = alive_;
  loop_.PostAfter("GcsActorScheduler.Retry", retry_delay_ms_, [this, alive, attempt] {
    if (alive.expired() || !Current(attempt)) return;
    std::string raylet = PickRaylet(attempt->actor);
    if (raylet.empty()) return RetryLater(attempt, "no alive node");
    RequestLease(attempt, raylet, false);
  });
}

void GcsActorScheduler::Cancel(const ActorID& actor_id, const std::string& reason) {
  auto it = scheduling_.find(actor_id);
  if (it == scheduling_.end()) return;
  std::shared_ptr<Attempt> attempt = std::move(it->second);
  scheduling_.erase(it);
  if (!attempt->pending_at.empty()) {
    rpc::CancelWorkerLeaseRequest request;
    request.set_lease_request_id(attempt->lease_request_id);
    raylets_.Get(attempt->pending_at)
        ->CancelWorkerLease(request, [](const absl::Status& s, rpc::CancelWorkerLeaseReply&&) {
          if (!s.ok()) VLOG(1) << "cancelling an actor's lease request: " << s;
        });
  }
  if (attempt->leased) KillWorker(*attempt->leased, reason);
}

void GcsActorScheduler::OnNodeDead(const NodeID& node_id, const std::string& raylet_address) {
  const absl::Status dead = absl::UnavailableError("node " + node_id.Hex() + " was declared dead");
  for (const auto& channel : channels_.RemoveGroup(node_id.Binary())) channel->Close(dead);
  raylets_.Get(raylet_address)->CancelAll();
  raylets_.Disconnect(raylet_address);
}

void GcsActorScheduler::KillWorker(const ActorPlacement& placement, const std::string& reason) {
  if (placement.lease_id.empty() || placement.raylet_address.empty()) return;
  rpc::ReturnWorkerRequest request;
  request.set_lease_id(placement.lease_id);
  request.set_worker_id(placement.worker.worker_id());
  request.set_disconnect_worker(true);
  request.set_reason(reason);
  raylets_.Get(placement.raylet_address)
      ->ReturnWorker(request, [pid = placement.pid](const absl::Status& s, rpc::ReturnWorkerReply&&) {
        if (!s.ok()) VLOG(1) << "returning the lease of actor worker pid " << pid << ": " << s;
      });
}

}  // namespace manta::gcs
