#include "src/raylet/lease_manager.h"

#include <cstdio>
#include <tuple>

#include <glog/logging.h>

#include <algorithm>
#include <cmath>

#include "src/common/runtime_env.h"
#include "src/raylet/lease_request.h"
#include "src/scheduling/bundle_resources.h"

namespace manta::raylet {

namespace {

// The resources a request asks for, quantized (resources.h): an empty map means one
// CPU; zero quantities are dropped. InvalidArgument names a bad entry.
absl::StatusOr<scheduling::ResourceMap> ValidateResources(const google::protobuf::Map<std::string, double>& requested) {
  if (requested.empty()) return scheduling::ResourceMap{{"CPU", 1.0}};
  scheduling::ResourceMap out;
  for (const auto& [name, amount] : requested) {
    if (name.empty()) return absl::InvalidArgumentError("malformed lease request: empty resource name");
    if (!std::isfinite(amount) || amount < 0) {
      return absl::InvalidArgumentError("malformed lease request: resource '" + name + "' has quantity " +
                                        std::to_string(amount) + " (must be a finite non-negative number)");
    }
    if (amount > 0 && scheduling::ToSteps(amount) == 0) {
      return absl::InvalidArgumentError("malformed lease request: resource '" + name + "' has quantity " +
                                        std::to_string(amount) + ", below the resolution of 0.0001");
    }
    if (amount > 0) out[name] = scheduling::Quantize(amount);
  }
  return out;
}

template <typename T>
T ParseIdOrNil(const std::string& binary) {
  auto id = T::FromBinaryChecked(binary);
  return id.ok() ? *id : T::Nil();
}

}  // namespace

LeaseManager::LeaseManager(EventLoop& loop, LeaseManagerOptions options, const Config& config,
                           scheduling::ClusterResourceView& view, WorkerPool& pool, scheduling::RandomIndexFn random_index)
    : loop_(loop),
      options_(std::move(options)),
      config_(config),
      view_(view),
      pool_(pool),
      random_index_(std::move(random_index)) {
  total_ = scheduling::QuantizeResources(options_.total);
  available_ = total_;
  pool_.AddGoneListener([this, alive = std::weak_ptr<bool>(alive_)](const WorkerGone& gone) {
    if (!alive.expired()) OnWorkerGone(gone);
  });
}

LeaseManager::~LeaseManager() { *alive_ = false; }

bool LeaseManager::LocalDraining() const {
  const scheduling::ClusterResourceView::NodeResources* self = view_.Get(options_.node_id);
  return self != nullptr && self->draining;
}

scheduling::SchedulingDecision LeaseManager::Schedule(const scheduling::ResourceMap& resources) const {
  scheduling::LocalNodeState local{options_.node_id, &total_, &available_, LocalDraining()};
  scheduling::SchedulingPolicyOptions policy{config_.scheduler_spread_threshold, config_.scheduler_top_k_fraction};
  return scheduling::ScheduleLease(resources, local, view_, policy, random_index_);
}

void LeaseManager::HandleRequestWorkerLease(const rpc::RequestWorkerLeaseRequest& request,
                                            rpc::RequestWorkerLeaseReply* reply, rpc::SendReply send_reply) {
  auto request_ptr = std::make_shared<Request>();
  Request& r = *request_ptr;
  r.reply = reply;
  r.send_reply = std::move(send_reply);
  r.function_name = request.function_name();
  auto resources = ValidateResources(request.required_resources());
  auto job_id = JobID::FromBinaryChecked(request.job_id());
  if (!resources.ok() || !job_id.ok()) {
    std::string message =
        !resources.ok() ? std::string(resources.status().message()) : "malformed lease request: bad job_id";
    LOG(WARNING) << "rejecting a lease request: " << message;
    return Reject(request_ptr, message);
  }
  r.resources = std::move(*resources);
  r.job_id = *job_id;
  if (!request.placement().placement_group_id().empty() && !TakePlacement(request, request_ptr)) return;
  r.id = request.lease_request_id().empty() ? LeaseID::FromRandom().Binary() : request.lease_request_id();
  r.owner_worker_id = ParseIdOrNil<WorkerID>(request.owner_address().worker_id());
  r.owner_node_id = ParseIdOrNil<NodeID>(request.owner_address().node_id());
  r.grant_or_reject = request.grant_or_reject();
  r.backlog = std::max<int64_t>(0, request.backlog_size());
  r.detached = request.actor().detached();
  r.placement_only = request.actor().placement_only();
  r.is_actor = !request.actor().actor_id().empty();
  r.retriable = request.retriable();
  if (requests_.contains(r.id)) return Reject(request_ptr, "a lease request with this id is already pending here");
  if (request.runtime_env().size() > kMaxRuntimeEnvBytes) {
    request_ptr->reply->set_runtime_env_setup_failed(true);
    return Reject(request_ptr, "the runtime_env is " + std::to_string(request.runtime_env().size()) +
                                   " bytes, more than the " + std::to_string(kMaxRuntimeEnvBytes) + " allowed");
  }
  // Workers are keyed by the env's canonical text: an owner that sent another
  // spelling of an env still shares workers with it.
  auto runtime_env = CanonicalRuntimeEnv(request.runtime_env());
  if (!runtime_env.ok()) {
    request_ptr->reply->set_runtime_env_setup_failed(true);
    return Reject(request_ptr, std::string(runtime_env.status().message()));
  }
  r.runtime_env = std::move(*runtime_env);

  if (r.grant_or_reject) {
    // Spilled back here: run it here (now or once resources free up), or say no.
    if (!scheduling::ResourcesFit(r.resources, total_) || LocalDraining()) {
      return Reject(request_ptr, "node " + options_.node_id.Hex() + " cannot run {" + scheduling::FormatResources(r.resources) +
                                     "}: it has {" + scheduling::FormatResources(total_) + "}" +
                                     (LocalDraining() ? " and is draining" : ""));
    }
    requests_[r.id] = request_ptr;
    Enqueue(request_ptr);
    Dispatch();
    return;
  }
  requests_[r.id] = request_ptr;
  Place(request_ptr);
}

void LeaseManager::Place(const RequestPtr& request) {
  scheduling::SchedulingDecision d = Schedule(request->resources);
  switch (d.kind) {
    case scheduling::SchedulingDecision::Kind::kLocal:
      Enqueue(request);
      Dispatch();
      return;
    case scheduling::SchedulingDecision::Kind::kRemote:
      Spill(request, d.node_id);
      return;
    case scheduling::SchedulingDecision::Kind::kInfeasible:
      AddInfeasible(request);
      return;
  }
}

void LeaseManager::Enqueue(const RequestPtr& request) {
  request->stage = Request::Stage::kQueued;
  queued_[request->resources].push_back(request);
}

void LeaseManager::AddInfeasible(const RequestPtr& request) {
  request->stage = Request::Stage::kInfeasible;
  infeasible_[request->resources].push_back(request);
  if (!request->placement_group.IsNil()) {
    // Not infeasible: its bundle is not placed (or not yet known here). Unless the
    // group is gone, which this node may not have heard.
    VLOG(1) << request->Describe() << " waits until its bundle is placed";
    if (waiting_group_listener_ && asked_groups_.insert(request->placement_group).second) {
      waiting_group_listener_(request->placement_group);
    }
    return;
  }
  if (warned_infeasible_.insert(request->resources).second) {
    LOG(WARNING) << "infeasible " << request->Describe()
                 << ": no alive node has these resources; it waits until a node that has them joins (this node has {"
                 << scheduling::FormatResources(total_) << "})";
  }
}

void LeaseManager::Spill(const RequestPtr& request, const NodeID& node_id) {
  const scheduling::ClusterResourceView::NodeResources* node = view_.Get(node_id);
  CHECK(node != nullptr) << "the policy chose a node outside the view";
  rpc::Address* retry_at = request->reply->mutable_retry_at_raylet_address();
  retry_at->set_node_id(node_id.Binary());
  retry_at->set_ip_address(node->address);
  retry_at->set_port(node->port);
  // Until that node reports again, count what we sent it as taken.
  view_.SubtractAvailable(node_id, request->resources);
  VLOG(1) << request->Describe() << " spilled back to node " << node_id.Hex() << " at " << node->address << ":"
          << node->port;
  requests_.erase(request->id);
  request->Finish();
}

void LeaseManager::PlaceAgainFromHome(const RequestPtr& request, const NodeID& node_id) {
  // Spilled back here, it is never spilled again (no request bounces between nodes):
  // its owner places it again. Counted as taken there, as a spill is, so that one
  // free node sends back no more requests than it can run.
  view_.SubtractAvailable(node_id, request->resources);
  request->reply->set_place_again(true);
  Reject(request, request->Describe() + " waited on node " + options_.node_id.Hex() + "; node " + node_id.Hex() +
                      " can run it now");
}

void LeaseManager::Reject(const RequestPtr& request, const std::string& message) {
  request->reply->set_rejected(true);
  request->reply->set_failure_message(message);
  if (!request->id.empty()) {
    auto it = requests_.find(request->id);
    if (it != requests_.end() && it->second == request) requests_.erase(it);
  }
  request->Finish();
}

void LeaseManager::Dispatch() {
  for (auto it = queued_.begin(); it != queued_.end();) {
    std::deque<RequestPtr>& queue = it->second;
    while (!queue.empty() && scheduling::ResourcesFit(it->first, available_)) {
      RequestPtr request = std::move(queue.front());
      queue.pop_front();
      Grant(request);
    }
    it = queue.empty() ? queued_.erase(it) : std::next(it);
  }
}

void LeaseManager::Grant(const RequestPtr& request) {
  scheduling::SubtractResources(available_, request->resources);
  request->stage = Request::Stage::kPopping;
  pool_.PopWorker(request->job_id, request->runtime_env,
                  [this, alive = std::weak_ptr<bool>(alive_), request](absl::StatusOr<WorkerInfo> worker) {
                    if (!alive.expired()) OnWorkerPopped(request, std::move(worker));
                  });
}

void LeaseManager::OnWorkerPopped(const RequestPtr& request, absl::StatusOr<WorkerInfo> worker) {
  if (request->stage != Request::Stage::kPopping) {
    // Cancelled or dropped while the worker was coming; its resources are back.
    if (worker.ok()) pool_.PushWorker(worker->worker_id);
    return;
  }
  if (!worker.ok()) {
    scheduling::AddResources(available_, request->resources);
    LOG(WARNING) << request->Describe() << " failed: " << worker.status();
    // The owner gives up at once on an env that cannot be applied; it retries others.
    if (IsRuntimeEnvError(worker.status())) request->reply->set_runtime_env_setup_failed(true);
    Reject(request, "no worker could be started on node " + options_.node_id.Hex() + ": " +
                        std::string(worker.status().message()));
    Dispatch();
    return;
  }
  Lease lease;
  lease.lease_id = LeaseID::FromRandom();
  lease.worker_id = worker->worker_id;
  lease.job_id = request->job_id;
  lease.owner_worker_id = request->owner_worker_id;
  lease.owner_node_id = request->owner_node_id;
  lease.resources = request->resources;
  lease.placement_group = request->placement_group;
  lease.bundle_index = request->bundle_index;
  lease.detached = request->detached;
  lease.is_actor = request->is_actor;
  lease.retriable = request->retriable;
  lease.function_name = request->function_name;
  lease.granted_seq = ++grants_;
  if (request->placement_only) {
    // Placed: an actor without explicit resources holds none while it lives.
    scheduling::AddResources(available_, lease.resources);
    lease.resources.clear();
  }
  if (lease.detached) pool_.KeepPastJobEnd(worker->worker_id);
  rpc::RequestWorkerLeaseReply* reply = request->reply;
  *reply->mutable_worker_address() = worker->address;
  reply->set_lease_id(lease.lease_id.Binary());
  reply->set_worker_pid(worker->pid);
  VLOG(1) << request->Describe() << " granted: lease " << lease.lease_id.Hex() << ", worker "
          << worker->worker_id.Hex() << " (pid " << worker->pid << ")";
  lease_by_worker_[lease.worker_id] = lease.lease_id;
  leases_.emplace(lease.lease_id, std::move(lease));
  requests_.erase(request->id);
  request->Finish();
}

void LeaseManager::HandleReturnWorker(const rpc::ReturnWorkerRequest& request, rpc::ReturnWorkerReply* reply,
                                      rpc::SendReply send_reply) {
  auto lease_id = LeaseID::FromBinaryChecked(request.lease_id());
  if (lease_id.ok()) {
    // The memory monitor killed its worker: the owner learns why here.
    auto killed = std::find_if(memory_kills_.begin(), memory_kills_.end(),
                               [&](const auto& kill) { return kill.first == *lease_id; });
    if (killed != memory_kills_.end()) {
      reply->mutable_failure()->set_type(rpc::OUT_OF_MEMORY);
      reply->mutable_failure()->set_message(killed->second);
      memory_kills_.erase(killed);
    }
  }
  auto it = lease_id.ok() ? leases_.find(*lease_id) : leases_.end();
  if (it == leases_.end()) {
    auto worker_id = WorkerID::FromBinaryChecked(request.worker_id());
    auto by_worker = worker_id.ok() ? lease_by_worker_.find(*worker_id) : lease_by_worker_.end();
    if (by_worker != lease_by_worker_.end()) it = leases_.find(by_worker->second);
  }
  if (it == leases_.end()) {
    VLOG(1) << "ReturnWorker for a lease already released";
    return std::move(send_reply)(absl::OkStatus());
  }
  std::string reason = request.reason().empty() ? "returned by its owner" : request.reason();
  ReleaseLease(it->first, request.disconnect_worker() ? AfterRelease::kKillWorker : AfterRelease::kReturnToPool,
               reason);
  Dispatch();
  std::move(send_reply)(absl::OkStatus());
}

bool LeaseManager::TakePlacement(const rpc::RequestWorkerLeaseRequest& request, const RequestPtr& request_ptr) {
  Request& r = *request_ptr;
  auto group = PlacementGroupID::FromBinaryChecked(request.placement().placement_group_id());
  int index = request.placement().bundle_index();
  if (!group.ok() || index < -1) {
    LOG(WARNING) << "rejecting a lease request: malformed placement";
    Reject(request_ptr, "malformed lease request: bad placement group id or bundle index " + std::to_string(index));
    return false;
  }
  r.placement_group = *group;
  r.bundle_index = index;
  if (removed_groups_.contains(*group)) {
    RejectRemovedGroup(request_ptr);
    return false;
  }
  // An actor without resources of its own needs only the bundle's marker to be
  // placed there (it holds nothing while it lives).
  if (request.actor().placement_only()) r.resources.clear();
  r.resources = scheduling::BundleDemand(r.resources, *group, index);
  return true;
}

pid_t LeaseManager::KillWorkerForMemory(const std::string& usage, double threshold) {
  // The newest lease of a retriable task first (its work is redone elsewhere or
  // later), then the newest of the other tasks, then actors, newest first.
  const Lease* victim = nullptr;
  auto rank = [](const Lease& l) { return std::make_tuple(!l.is_actor, l.retriable, l.granted_seq); };
  for (const auto& [id, lease] : leases_) {
    if (victim == nullptr || rank(lease) > rank(*victim)) victim = &lease;
  }
  if (victim == nullptr) return 0;
  const pid_t pid = pool_.PidOf(victim->worker_id);
  char threshold_text[16];
  std::snprintf(threshold_text, sizeof(threshold_text), "%.2f", threshold);
  std::string what = victim->is_actor ? "the actor" : "the task";
  if (!victim->function_name.empty()) what += " " + victim->function_name;
  std::string message = what + " was running in worker " + victim->worker_id.Hex() + " (pid " + std::to_string(pid) +
                        "), which node " + options_.node_id.Hex() + " killed because its memory use, " + usage +
                        ", passed memory_usage_threshold " + threshold_text +
                        " (the newest retriable task is killed first: give tasks less data each, or the node more memory)";
  LOG(WARNING) << "memory monitor: " << message;
  memory_kills_.emplace_back(victim->lease_id, message);
  if (memory_kills_.size() > kMaxMemoryKillsKept) memory_kills_.pop_front();
  ReleaseLease(victim->lease_id, AfterRelease::kKillWorker, "killed by the memory monitor");
  Dispatch();
  return pid;
}

void LeaseManager::HandleCancelWorkerLease(const rpc::CancelWorkerLeaseRequest& request,
                                           rpc::CancelWorkerLeaseReply* reply, rpc::SendReply send_reply) {
  auto it = requests_.find(request.lease_request_id());
  if (request.lease_request_id().empty() || it == requests_.end()) {
    reply->set_success(false);
    return std::move(send_reply)(absl::OkStatus());
  }
  RequestPtr pending = it->second;
  Unlink(pending);
  pending->reply->set_canceled(true);
  pending->reply->set_failure_message("cancelled by its owner");
  pending->Finish();
  reply->set_success(true);
  Dispatch();
  std::move(send_reply)(absl::OkStatus());
}

void LeaseManager::HandleNotifyWorkerBlocked(const rpc::NotifyWorkerBlockedRequest& request,
                                             rpc::NotifyWorkerBlockedReply*, rpc::SendReply send_reply) {
  auto worker_id = WorkerID::FromBinaryChecked(request.worker_id());
  auto by_worker = worker_id.ok() ? lease_by_worker_.find(*worker_id) : lease_by_worker_.end();
  if (by_worker == lease_by_worker_.end()) return std::move(send_reply)(absl::OkStatus());
  Lease& lease = leases_.at(by_worker->second);
  if (request.blocked() && !lease.blocked && memory_pressure_ && memory_pressure_()) {
    VLOG(1) << "worker " << worker_id->Hex() << " blocked; its CPU is not lent: the node's memory is short";
  } else if (request.blocked() && !lease.blocked) {
    // Its CPUs: plain ones, or those of the bundle it was leased from.
    lease.blocked = true;
    lease.released_cpu.clear();
    for (const auto& [name, quantity] : lease.resources) {
      if (name == "CPU" || name.rfind("CPU_group_", 0) == 0) lease.released_cpu[name] = quantity;
    }
    if (!lease.released_cpu.empty()) {
      scheduling::AddResources(available_, lease.released_cpu);
      VLOG(1) << "worker " << worker_id->Hex() << " blocked: {"
              << scheduling::FormatResources(lease.released_cpu) << "} given back";
      Dispatch();
    }
  } else if (!request.blocked() && lease.blocked) {
    // Taken back even if that oversubscribes the node: the worker is already running.
    scheduling::SubtractResources(available_, lease.released_cpu);
    lease.blocked = false;
    lease.released_cpu.clear();
  }
  std::move(send_reply)(absl::OkStatus());
}

void LeaseManager::ReleaseLease(const LeaseID& lease_id, AfterRelease after, const std::string& reason) {
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return;
  Lease lease = std::move(it->second);
  leases_.erase(it);
  lease_by_worker_.erase(lease.worker_id);
  scheduling::ResourceMap give_back = lease.resources;
  // CPU a blocked worker gave back is back already.
  if (lease.blocked) scheduling::SubtractResources(give_back, lease.released_cpu);
  scheduling::AddResources(available_, give_back);
  VLOG(1) << "lease " << lease_id.Hex() << " of worker " << lease.worker_id.Hex() << " released: " << reason;
  switch (after) {
    case AfterRelease::kReturnToPool:
      pool_.PushWorker(lease.worker_id);
      break;
    case AfterRelease::kKillWorker:
      pool_.DisconnectWorker(lease.worker_id, reason);
      break;
    case AfterRelease::kWorkerGone:
      break;
  }
}

void LeaseManager::ReleaseLeases(const std::function<bool(const Lease&)>& match, const std::string& reason) {
  std::vector<LeaseID> matching;
  for (const auto& [id, lease] : leases_) {
    if (match(lease)) matching.push_back(id);
  }
  // Killing a worker releases, re-entrantly, the leases it owned in turn.
  for (const LeaseID& id : matching) ReleaseLease(id, AfterRelease::kKillWorker, reason);
}

void LeaseManager::Unlink(const RequestPtr& request) {
  auto remove_from = [&](std::map<scheduling::ResourceMap, std::deque<RequestPtr>>& queues) {
    auto q = queues.find(request->resources);
    if (q == queues.end()) return;
    auto& deque = q->second;
    deque.erase(std::remove(deque.begin(), deque.end(), request), deque.end());
    if (deque.empty()) queues.erase(q);
  };
  switch (request->stage) {
    case Request::Stage::kQueued:
      remove_from(queued_);
      break;
    case Request::Stage::kInfeasible:
      remove_from(infeasible_);
      break;
    case Request::Stage::kPopping:
      // The worker, when it comes, goes back to the pool (OnWorkerPopped).
      scheduling::AddResources(available_, request->resources);
      break;
    case Request::Stage::kDone:
      break;
  }
  request->stage = Request::Stage::kDone;
  requests_.erase(request->id);
}

void LeaseManager::DropRequests(const std::function<bool(const Request&)>& match, const std::string& reason) {
  std::vector<RequestPtr> matching;
  for (const auto& [id, request] : requests_) {
    if (match(*request)) matching.push_back(request);
  }
  for (const RequestPtr& request : matching) {
    if (request->stage == Request::Stage::kDone) continue;
    VLOG(1) << "dropping " << request->Describe() << ": " << reason;
    Unlink(request);
    request->reply->set_canceled(true);
    request->reply->set_failure_message(reason);
    request->Finish();
  }
}

void LeaseManager::OnWorkerGone(const WorkerGone& gone) {
  // The lease it held itself: its worker is already gone, nothing to kill.
  auto held = lease_by_worker_.find(gone.worker_id);
  if (held != lease_by_worker_.end()) {
    LeaseID lease_id = held->second;
    ReleaseLease(lease_id, AfterRelease::kWorkerGone, "its worker went away: " + gone.reason);
  }
  ForgetOwner(gone.worker_id,
              std::string(gone.is_driver ? "driver " : "worker ") + gone.worker_id.Hex() + " (the owner) is gone");
  Dispatch();
}

void LeaseManager::OnRemoteOwnerGone(const WorkerID& owner, const std::string& reason) {
  ForgetOwner(owner, "its owner " + owner.Hex() + " on another node is gone: " + reason);
  Dispatch();
}

void LeaseManager::ForgetOwner(const WorkerID& owner, const std::string& why) {
  // Requests without an owner id (nil) belong to no process that can die.
  if (owner.IsNil()) return;
  // Its requests first: killing a leased worker below re-enters OnWorkerGone, whose
  // Dispatch must not grant them the resources freed.
  DropRequests([&](const Request& r) { return r.owner_worker_id == owner; }, why);
  ReleaseLeases([&](const Lease& lease) { return lease.owner_worker_id == owner; }, why);
}

void LeaseManager::OnNodeDead(const NodeID& node_id) {
  if (node_id == options_.node_id) return;
  const std::string why = "the owner's node " + node_id.Hex() + " died";
  DropRequests([&](const Request& r) { return r.owner_node_id == node_id; }, why);
  ReleaseLeases([&](const Lease& lease) { return lease.owner_node_id == node_id; }, why);
  Dispatch();
}

void LeaseManager::OnJobFinished(const JobID& job_id) {
  const std::string why = "job " + job_id.Hex() + " finished";
  DropRequests([&](const Request& r) { return r.job_id == job_id && !r.detached; }, why);
  // Killing the job's workers releases their leases (OnWorkerGone); detached actors
  // keep theirs.
  pool_.KillJobWorkers(job_id, why);
  ReleaseLeases([&](const Lease& lease) { return lease.job_id == job_id && !lease.detached; }, why);
  Dispatch();
}

void LeaseManager::RejectRemovedGroup(const RequestPtr& request) {
  request->reply->set_placement_group_removed(true);
  Reject(request, "placement group " + request->placement_group.Hex() + " was removed (or never created)");
}

std::vector<LeaseManager::RequestPtr> LeaseManager::TakeWaiting(const std::function<bool(const Request&)>& match) {
  std::vector<RequestPtr> taken;
  for (const auto& [id, request] : requests_) {
    if (request->stage != Request::Stage::kDone && match(*request)) taken.push_back(request);
  }
  for (const RequestPtr& request : taken) Unlink(request);
  return taken;
}

void LeaseManager::PlaceAgain(const std::vector<RequestPtr>& requests) {
  for (const RequestPtr& request : requests) {
    requests_[request->id] = request;
    if (removed_groups_.contains(request->placement_group)) {
      RejectRemovedGroup(request);
    } else if (!request->grant_or_reject) {
      Place(request);
    } else if (scheduling::ResourcesFit(request->resources, total_)) {
      Enqueue(request);
    } else {
      Reject(request, "node " + options_.node_id.Hex() + " no longer holds the bundle of " + request->Describe());
    }
  }
}

bool LeaseManager::PrepareBundles(const std::vector<rpc::Bundle>& bundles, const std::string& attempt_id) {
  scheduling::ResourceMap needed;
  std::vector<std::pair<BundleKey, scheduling::ResourceMap>> fresh;
  for (const rpc::Bundle& bundle : bundles) {
    auto group = PlacementGroupID::FromBinaryChecked(bundle.placement_group_id());
    if (!group.ok() || bundle.bundle_index() < 0) return false;
    BundleKey key{*group, bundle.bundle_index()};
    if (bundles_.contains(key)) continue;  // a repeated prepare: taken over below
    scheduling::ResourceMap resources = scheduling::QuantizeResources(
        scheduling::ResourceMap(bundle.unit_resources().begin(), bundle.unit_resources().end()));
    scheduling::AddResources(needed, resources);
    fresh.emplace_back(key, std::move(resources));
  }
  if (!scheduling::ResourcesFit(needed, available_)) {
    VLOG(1) << "cannot prepare bundles needing {" << scheduling::FormatResources(needed) << "}: available {"
            << scheduling::FormatResources(available_) << "}";
    return false;
  }
  scheduling::SubtractResources(available_, needed);
  for (auto& [key, resources] : fresh) {
    VLOG(1) << "bundle " << key.second << " of placement group " << key.first.Hex() << " prepared: {"
            << scheduling::FormatResources(resources) << "}";
    bundles_.emplace(key, Bundle{std::move(resources), false, attempt_id});
  }
  for (const rpc::Bundle& bundle : bundles) {
    bundles_.at({PlacementGroupID::FromBinary(bundle.placement_group_id()), bundle.bundle_index()}).attempt_id =
        attempt_id;
  }
  return true;
}

absl::Status LeaseManager::CommitBundles(const std::vector<rpc::Bundle>& bundles) {
  for (const rpc::Bundle& bundle : bundles) {
    auto group = PlacementGroupID::FromBinaryChecked(bundle.placement_group_id());
    if (!group.ok() || !bundles_.contains({*group, bundle.bundle_index()})) {
      return absl::FailedPreconditionError("bundle " + std::to_string(bundle.bundle_index()) +
                                           " of placement group " + (group.ok() ? group->Hex() : "<malformed>") +
                                           " was not prepared on node " + options_.node_id.Hex());
    }
  }
  for (const rpc::Bundle& bundle : bundles) {
    PlacementGroupID group = PlacementGroupID::FromBinary(bundle.placement_group_id());
    Bundle& held = bundles_.at({group, bundle.bundle_index()});
    if (held.committed) continue;
    held.committed = true;
    scheduling::ResourceMap added =
        scheduling::CommittedBundleResources(held.resources, group, bundle.bundle_index());
    scheduling::AddResources(total_, added);
    scheduling::AddResources(available_, added);
    LOG(INFO) << "bundle " << bundle.bundle_index() << " of placement group " << group.Hex() << " committed: {"
              << scheduling::FormatResources(held.resources) << "}";
  }
  // Requests waiting for these bundles can run now.
  PlaceInfeasible();
  Dispatch();
  return absl::OkStatus();
}

void LeaseManager::ReturnBundle(const PlacementGroupID& group, int bundle_index, const std::string& attempt_id) {
  auto it = bundles_.find({group, bundle_index});
  if (it == bundles_.end()) return;
  if (!attempt_id.empty() && it->second.attempt_id != attempt_id) {
    VLOG(1) << "bundle " << bundle_index << " of placement group " << group.Hex()
            << " is held for a newer attempt: a late cancel of attempt " << attempt_id << " leaves it";
    return;
  }
  Bundle bundle = std::move(it->second);
  bundles_.erase(it);
  if (bundle.committed) {
    // Its workers go first (their leases give the bundle's resources back; the
    // requests of owners among them are dropped), including actors that hold nothing
    // while they live. Leases of "any bundle" of the group go too.
    ReleaseLeases(
        [&](const Lease& lease) {
          return lease.placement_group == group && (lease.bundle_index == bundle_index || lease.bundle_index < 0);
        },
        "bundle " + std::to_string(bundle_index) + " of placement group " + group.Hex() + " was returned");
  }
  // The group's requests step aside (those waiting for a worker give back what they
  // took), so that nothing is granted from the bundle while it goes; they are placed
  // again once it is gone.
  std::vector<RequestPtr> waiting = TakeWaiting([&](const Request& r) { return r.placement_group == group; });
  if (bundle.committed) {
    scheduling::ResourceMap added = scheduling::CommittedBundleResources(bundle.resources, group, bundle_index);
    scheduling::SubtractResources(total_, added);
    scheduling::SubtractResources(available_, added);
    for (const auto& [name, quantity] : added) {
      if (scheduling::ToSteps(total_[name]) == 0) {
        total_.erase(name);
        available_.erase(name);
      }
    }
  }
  scheduling::AddResources(available_, bundle.resources);
  LOG(INFO) << "bundle " << bundle_index << " of placement group " << group.Hex() << " returned ("
            << (bundle.committed ? "committed" : "prepared") << ")";
  PlaceAgain(waiting);
  Dispatch();
}

void LeaseManager::ReleaseUnusedBundles(const std::vector<rpc::Bundle>& in_use) {
  absl::flat_hash_set<BundleKey> keep;
  for (const rpc::Bundle& bundle : in_use) {
    auto group = PlacementGroupID::FromBinaryChecked(bundle.placement_group_id());
    if (group.ok()) keep.insert({*group, bundle.bundle_index()});
  }
  std::vector<BundleKey> unused;
  for (const auto& [key, bundle] : bundles_) {
    if (!keep.contains(key)) unused.push_back(key);
  }
  for (const BundleKey& key : unused) ReturnBundle(key.first, key.second);
}

void LeaseManager::AskAboutWaitingGroups() {
  absl::flat_hash_set<PlacementGroupID> waiting;
  for (const auto& [shape, queue] : infeasible_) {
    for (const RequestPtr& request : queue) {
      if (!request->placement_group.IsNil()) waiting.insert(request->placement_group);
    }
  }
  for (const PlacementGroupID& group : waiting) {
    asked_groups_.insert(group);
    if (waiting_group_listener_) waiting_group_listener_(group);
  }
}

void LeaseManager::OnPlacementGroupRemoved(const PlacementGroupID& group) {
  if (!removed_groups_.insert(group).second) return;
  std::vector<RequestPtr> matching;
  for (const auto& [id, request] : requests_) {
    if (request->placement_group == group && request->stage != Request::Stage::kDone) matching.push_back(request);
  }
  for (const RequestPtr& request : matching) {
    Unlink(request);
    RejectRemovedGroup(request);
  }
  ReleaseLeases([&](const Lease& lease) { return lease.placement_group == group; },
                "placement group " + group.Hex() + " was removed");
  Dispatch();
}

void LeaseManager::OnClusterViewChanged() {
  PlaceInfeasible();
  SpillQueuedElsewhere();
  Dispatch();
}

void LeaseManager::PlaceInfeasible() {
  for (auto it = infeasible_.begin(); it != infeasible_.end();) {
    std::deque<RequestPtr>& queue = it->second;
    while (!queue.empty()) {
      scheduling::SchedulingDecision d = Schedule(it->first);
      if (d.kind == scheduling::SchedulingDecision::Kind::kInfeasible) break;
      RequestPtr request = std::move(queue.front());
      queue.pop_front();
      LOG_IF(INFO, queue.empty()) << "requests for {" << scheduling::FormatResources(it->first) << "} are feasible again";
      if (d.kind == scheduling::SchedulingDecision::Kind::kLocal || !d.available_now) {
        // Feasible, but no node can run it now: it waits here, and SpillQueuedElsewhere
        // sends it to the first node with room (not all of them to the one node
        // that just joined, where they would queue behind each other).
        Enqueue(request);
      } else {
        Spill(request, d.node_id);
      }
    }
    if (queue.empty()) {
      warned_infeasible_.erase(it->first);
      it = infeasible_.erase(it);
    } else {
      ++it;
    }
  }
}

void LeaseManager::SpillQueuedElsewhere() {
  for (auto it = queued_.begin(); it != queued_.end();) {
    std::deque<RequestPtr>& queue = it->second;
    if (!scheduling::ResourcesFit(it->first, available_)) {
      // Waiting here; send them where they can run now, while there is such a node.
      for (auto r = queue.begin(); r != queue.end();) {
        scheduling::SchedulingDecision d = Schedule(it->first);
        if (d.kind != scheduling::SchedulingDecision::Kind::kRemote || !d.available_now) break;
        RequestPtr request = std::move(*r);
        r = queue.erase(r);
        if (request->grant_or_reject) {
          PlaceAgainFromHome(request, d.node_id);
        } else {
          Spill(request, d.node_id);
        }
      }
    }
    it = queue.empty() ? queued_.erase(it) : std::next(it);
  }
}

}  // namespace manta::raylet
