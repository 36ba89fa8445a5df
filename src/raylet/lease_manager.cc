#include "src/raylet/lease_manager.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>

#include "src/common/runtime_env.h"

namespace manta::raylet {

struct LeaseManager::Request {
  enum class Stage { kQueued, kInfeasible, kPopping, kDone };
  std::string id;
  JobID job_id;
  WorkerID owner_worker_id;  // nil when the owner is not a core worker (or unknown)
  NodeID owner_node_id;
  scheduling::ResourceMap resources;
  bool grant_or_reject = false;
  std::string function_name;
  // The worker must have been started for this runtime env (canonical JSON; "" = none).
  std::string runtime_env;
  // Actor leases: the worker outlives the job (detached); the resources only place
  // the actor and come back once its worker is granted (placement_only).
  bool detached = false;
  bool placement_only = false;
  rpc::RequestWorkerLeaseReply* reply = nullptr;
  rpc::SendReply send_reply;
  Stage stage = Stage::kQueued;

  // Completes the RPC (once); the reply must be filled.
  void Finish() {
    stage = Stage::kDone;
    if (send_reply) std::move(send_reply)(absl::OkStatus());
    send_reply = nullptr;
  }
  std::string Describe() const {
    return "lease request for {" + scheduling::FormatResources(resources) + "}" +
           (function_name.empty() ? "" : " (" + function_name + ")") + " of job " + job_id.Hex();
  }
};

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
  options_.total = scheduling::QuantizeResources(options_.total);
  available_ = options_.total;
  pool_.AddGoneListener([this, alive = std::weak_ptr<bool>(alive_)](const WorkerGone& gone) {
    if (!alive.expired()) OnWorkerGone(gone);
  });
}

LeaseManager::~LeaseManager() { *alive_ = false; }

size_t LeaseManager::num_queued() const {
  size_t n = 0;
  for (const auto& [shape, queue] : queued_) n += queue.size();
  return n;
}

size_t LeaseManager::num_infeasible() const {
  size_t n = 0;
  for (const auto& [shape, queue] : infeasible_) n += queue.size();
  return n;
}

std::vector<std::string> LeaseManager::InfeasibleShapes() const {
  std::vector<std::string> out;
  for (const auto& [shape, queue] : infeasible_) {
    if (!queue.empty()) out.push_back(scheduling::FormatResources(shape));
  }
  return out;
}

bool LeaseManager::LocalDraining() const {
  const scheduling::ClusterResourceView::NodeResources* self = view_.Get(options_.node_id);
  return self != nullptr && self->draining;
}

scheduling::SchedulingDecision LeaseManager::Schedule(const scheduling::ResourceMap& resources) const {
  scheduling::LocalNodeState local{options_.node_id, &options_.total, &available_, LocalDraining()};
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
  r.id = request.lease_request_id().empty() ? LeaseID::FromRandom().Binary() : request.lease_request_id();
  r.owner_worker_id = ParseIdOrNil<WorkerID>(request.owner_address().worker_id());
  r.owner_node_id = ParseIdOrNil<NodeID>(request.owner_address().node_id());
  r.grant_or_reject = request.grant_or_reject();
  r.detached = request.actor().detached();
  r.placement_only = request.actor().placement_only();
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
    if (!scheduling::ResourcesFit(r.resources, options_.total) || LocalDraining()) {
      return Reject(request_ptr, "node " + options_.node_id.Hex() + " cannot run {" + scheduling::FormatResources(r.resources) +
                                     "}: it has {" + scheduling::FormatResources(options_.total) + "}" +
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
  if (warned_infeasible_.insert(request->resources).second) {
    LOG(WARNING) << "infeasible " << request->Describe()
                 << ": no alive node has these resources; it waits until a node that has them joins (this node has {"
                 << scheduling::FormatResources(options_.total) << "})";
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
  lease.detached = request->detached;
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

void LeaseManager::HandleReturnWorker(const rpc::ReturnWorkerRequest& request, rpc::ReturnWorkerReply*,
                                      rpc::SendReply send_reply) {
  auto lease_id = LeaseID::FromBinaryChecked(request.lease_id());
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
  if (request.blocked() && !lease.blocked) {
    auto cpu = lease.resources.find("CPU");
    lease.blocked = true;
    lease.released_cpu = cpu == lease.resources.end() ? 0.0 : cpu->second;
    if (lease.released_cpu > 0) {
      scheduling::AddResources(available_, {{"CPU", lease.released_cpu}});
      VLOG(1) << "worker " << worker_id->Hex() << " blocked: " << lease.released_cpu << " CPU given back";
      Dispatch();
    }
  } else if (!request.blocked() && lease.blocked) {
    // Taken back even if that oversubscribes the node: the worker is already running.
    if (lease.released_cpu > 0) scheduling::SubtractResources(available_, {{"CPU", lease.released_cpu}});
    lease.blocked = false;
    lease.released_cpu = 0;
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
  if (lease.blocked && lease.released_cpu > 0) scheduling::SubtractResources(give_back, {{"CPU", lease.released_cpu}});
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
      if (d.kind == scheduling::SchedulingDecision::Kind::kLocal) {
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
        if ((*r)->grant_or_reject) {
          ++r;
          continue;
        }
        scheduling::SchedulingDecision d = Schedule(it->first);
        if (d.kind != scheduling::SchedulingDecision::Kind::kRemote || !d.available_now) break;
        RequestPtr request = std::move(*r);
        r = queue.erase(r);
        Spill(request, d.node_id);
      }
    }
    it = queue.empty() ? queued_.erase(it) : std::next(it);
  }
}

}  // namespace manta::raylet
