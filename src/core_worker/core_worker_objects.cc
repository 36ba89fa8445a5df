// CoreWorker, objects: Put, Get and Wait across the memory store, the node's object
// store and owners elsewhere, and freeing. Split from core_worker.cc to keep files
// small.
#include <glog/logging.h>

#include <sched.h>

#include <algorithm>
#include <chrono>

#include "src/common/status_util.h"
#include "src/common/util.h"
#include "src/core_worker/common.h"
#include "src/core_worker/core_worker.h"
#include "src/gcs/gcs_client.h"
#include "src/object_store/store_client.h"

namespace manta::core {

// ---------------------------------------------------------------------------
// Objects

absl::StatusOr<ObjectID> CoreWorker::Put(size_t size, const std::function<void(char*)>& write,
                                         const std::vector<ObjectID>& contained_ids) {
  ObjectID id = ObjectID::ForPut(CurrentTaskId(), static_cast<uint32_t>(NextPutIndex()));
  auto obj = std::make_shared<StoredObject>();
  obj->size_bytes = static_cast<int64_t>(size);
  if (static_cast<int64_t>(size) <= options_.config.max_direct_put_bytes) {
    obj->data.resize(size);
    if (size > 0) write(obj->data.data());
  } else {
    FlushLocalFrees();
    auto dst = store_.Create(id, static_cast<int64_t>(size), 0, /*pin_on_seal=*/true);
    if (!dst.ok()) return dst.status();
    write(reinterpret_cast<char*>(*dst));
    MANTA_RETURN_IF_ERROR(store_.Seal(id));
    obj->in_plasma = true;
    obj->owner_copy = true;
    obj->SetPlasmaLocation(node_id_, options_.raylet_address);
  }
  reference_counter_->AddOwnedObject(id, self_, contained_ids, static_cast<int64_t>(size), /*pending=*/false);
  reference_counter_->AddLocalReference(id);
  if (obj->in_plasma) {
    reference_counter_->AddObjectLocation(id, node_id_);
    reference_counter_->UpdatePinnedAt(id, node_id_);
  }
  memory_store_.Put(id, std::move(obj));
  return id;
}

void CoreWorker::NotifyBlocked(bool blocked) {
  // Only a thread running a task holds the lease's CPU.
  if (options_.is_driver || ScopedTaskContext::Current(this) == nullptr) return;
  rpc::NotifyWorkerBlockedRequest request;
  request.set_worker_id(options_.worker_id.Binary());
  request.set_blocked(blocked);
  raylets_.Get(options_.raylet_address)
      ->NotifyWorkerBlocked(request, [](const absl::Status& s, rpc::NotifyWorkerBlockedReply&&) {
        if (!s.ok()) LOG(WARNING) << "NotifyWorkerBlocked: " << s;
      });
}

void CoreWorker::RequestFromOwners(const std::vector<ObjectID>& ids,
                                   const absl::flat_hash_map<ObjectID, std::string>& lost_at) {
  for (const ObjectID& id : ids) {
    if (memory_store_.Contains(id) || !owner_requests_.insert(id).second) continue;
    auto owner = reference_counter_->GetOwner(id);
    if (!owner.ok()) {
      owner_requests_.erase(id);
      memory_store_.Put(id, MakeErrorObject(rpc::OBJECT_LOST, "object " + id.Hex() + " is unknown to this process"));
      continue;
    }
    rpc::GetObjectStatusRequest request;
    request.set_object_id(id.Binary());
    request.set_owner_worker_id(owner->worker_id.Binary());
    if (auto lost = lost_at.find(id); lost != lost_at.end()) request.set_lost_at(lost->second);
    Address owner_address = *owner;
    if (IsNodeDead(owner_address.node_id.Binary())) {
      owner_requests_.erase(id);
      reference_counter_->HandleOwnerDied(owner_address);
      memory_store_.Put(id, MakeErrorObject(rpc::OWNER_DIED, "the owner of object " + id.Hex() + " (" +
                                                                 owner_address.ToString() +
                                                                 ") died: its node was declared dead"));
      continue;
    }
    workers_.Get(HostPort(owner_address), owner_address.node_id.Binary())
        ->GetObjectStatus(request, [this, id, owner_address](const absl::Status& s, rpc::GetObjectStatusReply&& r) {
          owner_requests_.erase(id);
          StoredObjectPtr value;
          if (!s.ok()) {
            reference_counter_->HandleOwnerDied(owner_address);
            value = MakeErrorObject(rpc::OWNER_DIED, "the owner of object " + id.Hex() + " (" +
                                                         owner_address.ToString() +
                                                         ") died or is unreachable: " + std::string(s.message()));
          } else if (r.status() == rpc::GetObjectStatusReply::FAILED) {
            value = MakeErrorObject(r.error());
          } else if (r.status() == rpc::GetObjectStatusReply::OUT_OF_SCOPE) {
            value = MakeErrorObject(rpc::OBJECT_LOST,
                                    "object " + id.Hex() + " was already freed by its owner " + owner_address.ToString());
          } else {
            auto obj = std::make_shared<StoredObject>();
            obj->size_bytes = r.size_bytes();
            if (r.node_ids_size() > 0 && r.raylet_addresses_size() > 0) {
              obj->in_plasma = true;
              auto n = NodeID::FromBinaryChecked(r.node_ids(0));
              obj->SetPlasmaLocation(n.ok() ? *n : NodeID::Nil(), r.raylet_addresses(0));
              if (r.raylet_addresses_size() > 1) {
                obj->SetPlasmaCopies({r.raylet_addresses().begin() + 1, r.raylet_addresses().end()});
              }
            } else {
              obj->data = std::move(*r.mutable_data());
              obj->metadata = std::move(*r.mutable_metadata());
            }
            value = std::move(obj);
          }
          memory_store_.Put(id, std::move(value));
          // The last ref may have gone while we asked: nothing will free it later.
          if (!reference_counter_->HasReference(id)) memory_store_.Delete({id});
        });
  }
}

absl::StatusOr<std::vector<ObjectValue>> CoreWorker::Get(const std::vector<ObjectID>& ids, int64_t timeout_ms) {
  // A copy lost with its node is rebuilt (by its owner) and read again, a few times.
  constexpr int kRecoveryRounds = 3;
  return GetWithRecovery(ids, timeout_ms, kRecoveryRounds);
}

absl::StatusOr<std::vector<ObjectValue>> CoreWorker::GetWithRecovery(const std::vector<ObjectID>& ids,
                                                                     int64_t timeout_ms, int recovery_rounds) {
  int64_t deadline = timeout_ms < 0 ? -1 : MonotonicMs() + timeout_ms;
  auto blocked_or = AwaitAbsent(ids, timeout_ms);
  if (!blocked_or.ok()) return blocked_or.status();
  const bool blocked = *blocked_or;
  std::vector<StoredObjectPtr> values = memory_store_.Get(ids, ids.size(), timeout_ms);
  std::vector<ObjectValue> out(ids.size());
  std::vector<ObjectID> plasma_ids;
  std::vector<StoredObjectPtr> markers;
  std::vector<size_t> positions;
  absl::Status status;
  for (size_t i = 0; i < ids.size(); ++i) {
    const StoredObjectPtr& v = values[i];
    if (!v) {
      status = absl::DeadlineExceededError("Get timed out after " + std::to_string(timeout_ms) +
                                           " ms waiting for object " + ids[i].Hex());
      break;
    }
    if (!v->error.ok()) {
      out[i].error = v;
    } else if (v->in_plasma) {
      plasma_ids.push_back(ids[i]);
      markers.push_back(v);
      positions.push_back(i);
    } else {
      out[i].data = v->data.data();
      out[i].size = v->data.size();
      out[i].holder = v;
    }
  }
  std::vector<size_t> lost;
  if (status.ok() && !plasma_ids.empty()) {
    status = ReadPlasmaValues(plasma_ids, markers, deadline, &out, positions, &lost);
  }
  if (blocked) NotifyBlocked(false);
  if (!status.ok()) return status;
  if (lost.empty() || recovery_rounds <= 0) return out;
  std::vector<ObjectID> lost_ids = RecoverLost(ids, values, out, lost);
  int64_t left = deadline < 0 ? -1 : std::max<int64_t>(0, deadline - MonotonicMs());
  auto again = GetWithRecovery(lost_ids, left, recovery_rounds - 1);
  if (!again.ok()) return again.status();
  for (size_t k = 0; k < lost.size(); ++k) out[lost[k]] = std::move((*again)[k]);
  return out;
}

absl::StatusOr<bool> CoreWorker::AwaitAbsent(const std::vector<ObjectID>& ids, int64_t timeout_ms) {
  std::vector<ObjectID> borrowed_absent;
  const std::vector<size_t> absent = memory_store_.AbsentPositions(ids);
  for (size_t position : absent) {
    const ObjectID& id = ids[position];
    if (!reference_counter_->HasReference(id)) {
      return absl::NotFoundError("object " + id.Hex() +
                                 " is unknown to this process (no live ObjectRef to it was created here)");
    }
    if (!reference_counter_->IsOwnedByUs(id)) borrowed_absent.push_back(id);
  }
  if (!borrowed_absent.empty()) {
    loop_.Post("CoreWorker.RequestFromOwners", [this, borrowed_absent] { RequestFromOwners(borrowed_absent); });
  }
  if (absent.empty() || timeout_ms == 0) return false;
  // Results of our own tasks: read them here rather than wait for the loop to.
  size_t next = 0;
  SpinOnTaskChannels([&] {
    while (next < absent.size() && memory_store_.Contains(ids[absent[next]])) ++next;
    return next == absent.size();
  });
  const bool blocked = next < absent.size();
  if (blocked) NotifyBlocked(true);
  return blocked;
}

std::vector<ObjectID> CoreWorker::RecoverLost(const std::vector<ObjectID>& ids,
                                              const std::vector<StoredObjectPtr>& values,
                                              const std::vector<ObjectValue>& out, const std::vector<size_t>& lost) {
  // Copies that could not be fetched: the owner rebuilds them; then read again.
  std::vector<ObjectID> lost_ids;
  absl::flat_hash_map<ObjectID, std::string> borrowed_lost_at;
  for (size_t pos : lost) {
    const ObjectID& id = ids[pos];
    lost_ids.push_back(id);
    std::string cause(out[pos].error->error.message());
    if (reference_counter_->IsOwnedByUs(id)) {
      RecoverObject(id, values[pos], cause);
    } else if (StoredObjectPtr marker = memory_store_.GetIfExists(id); marker && marker->in_plasma) {
      memory_store_.Delete({id});
      borrowed_lost_at[id] = marker->plasma_raylet_address();
    }
  }
  if (!borrowed_lost_at.empty()) {
    std::vector<ObjectID> borrowed;
    for (const auto& [id, at] : borrowed_lost_at) borrowed.push_back(id);
    // Posted before the Get below posts its own request, so this one (with the
    // hint) is the one sent.
    loop_.Post("CoreWorker.ReportLost", [this, borrowed, borrowed_lost_at] {
      RequestFromOwners(borrowed, borrowed_lost_at);
    });
  }
  return lost_ids;
}

bool CoreWorker::PollTaskChannels(bool* in_flight) {
  bool any = false;
  *in_flight = false;
  channels_.ForEachShared([&](const std::shared_ptr<TaskChannelInterface>& c) {
    if (c->InFlight() == 0) return;
    *in_flight = true;
    any |= c->Poll();
  });
  return any;
}

void CoreWorker::SpinOnTaskChannels(const std::function<bool()>& done) {
  const int64_t spin_us = options_.config.task_channel_spin_us;
  if (spin_us <= 0) return;
  auto now_us = [] {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  int64_t until = now_us() + spin_us;
  for (int round = 1;; ++round) {
    bool in_flight = false;
    if (PollTaskChannels(&in_flight)) {
      if (done()) return;
      until = now_us() + spin_us;  // results keep coming: keep reading them here
    } else if (!in_flight || now_us() >= until) {
      return;  // nothing of ours is on the way, or it is slow: sleep
    } else if (round % 16 == 0 && done()) {
      return;  // the value came another way (the loop, another thread)
    } else {
      sched_yield();  // a thread runnable on this CPU (perhaps the worker) goes first
    }
  }
}

absl::Status CoreWorker::ReadPlasmaValues(const std::vector<ObjectID>& ids, const std::vector<StoredObjectPtr>& markers,
                                          int64_t deadline_ms, std::vector<ObjectValue>* out,
                                          const std::vector<size_t>& positions, std::vector<size_t>* lost) {
  object_store::ObjectStoreClientInterface* store = &store_;
  auto hold = [store](const ObjectID& id) {
    return std::shared_ptr<const void>(nullptr, [store, id](const void*) { store->Release(id).IgnoreError(); });
  };
  auto got = store_.Get(ids, 0);
  if (!got.ok()) return got.status();
  std::vector<ObjectID> missing;
  std::vector<size_t> missing_pos;
  for (size_t i = 0; i < ids.size(); ++i) {
    if ((*got)[i]) {
      ObjectValue& v = (*out)[positions[i]];
      v.data = reinterpret_cast<const char*>((*got)[i]->data);
      v.size = static_cast<size_t>((*got)[i]->data_size);
      v.holder = hold(ids[i]);
    } else {
      missing.push_back(ids[i]);
      missing_pos.push_back(i);
    }
  }
  if (missing.empty()) return absl::OkStatus();
  if (auto s = PullToThisNode(missing, missing_pos, markers, deadline_ms, out, positions, lost); !s.ok()) return s;
  std::vector<ObjectID> fetch_ids;
  std::vector<size_t> fetch_pos;
  for (size_t k = 0; k < missing.size(); ++k) {
    if ((*out)[positions[missing_pos[k]]].error) continue;
    fetch_ids.push_back(missing[k]);
    fetch_pos.push_back(missing_pos[k]);
  }
  if (fetch_ids.empty()) return absl::OkStatus();
  // Each pulled object now has a copy on this node, which its owner must delete
  // along with the object.
  for (const ObjectID& id : fetch_ids) RecordCopy(id, node_id_, options_.raylet_address);
  int64_t wait_ms = deadline_ms < 0 ? -1 : std::max<int64_t>(0, deadline_ms - MonotonicMs());
  auto again = store_.Get(fetch_ids, wait_ms < 0 ? options_.config.object_manager_pull_timeout_ms : wait_ms);
  if (!again.ok()) return again.status();
  for (size_t k = 0; k < fetch_ids.size(); ++k) {
    ObjectValue& v = (*out)[positions[fetch_pos[k]]];
    if (!(*again)[k]) {
      v.error = MakeErrorObject(rpc::OBJECT_LOST, "object " + fetch_ids[k].Hex() + " was fetched but is not readable");
      continue;
    }
    v.data = reinterpret_cast<const char*>((*again)[k]->data);
    v.size = static_cast<size_t>((*again)[k]->data_size);
    v.holder = hold(fetch_ids[k]);
  }
  return absl::OkStatus();
}

absl::Status CoreWorker::PullToThisNode(const std::vector<ObjectID>& missing, const std::vector<size_t>& missing_pos,
                                        const std::vector<StoredObjectPtr>& markers, int64_t deadline_ms,
                                        std::vector<ObjectValue>* out, const std::vector<size_t>& positions,
                                        std::vector<size_t>* lost) {
  // From the node holding each primary copy (then the other copies).
  absl::flat_hash_map<std::string, std::vector<ObjectID>> by_location;
  for (size_t k = 0; k < missing.size(); ++k) {
    by_location[markers[missing_pos[k]]->plasma_raylet_address()].push_back(missing[k]);
  }
  auto remaining = [deadline_ms] { return deadline_ms < 0 ? int64_t{-1} : std::max<int64_t>(0, deadline_ms - MonotonicMs()); };
  for (const auto& [location, location_ids] : by_location) {
    rpc::FetchObjectsRequest request;
    for (const ObjectID& id : location_ids) request.add_object_ids(id.Binary());
    if (!location.empty()) request.add_locations(location);
    for (size_t k = 0; k < missing.size(); ++k) {
      if (markers[missing_pos[k]]->plasma_raylet_address() == location) AddCopies(missing[k], *markers[missing_pos[k]], &request);
    }
    int64_t wait_ms = remaining();
    int64_t rpc_deadline = wait_ms < 0 ? options_.config.object_manager_pull_timeout_ms * 4 : std::max<int64_t>(wait_ms, 1);
    auto raylet = raylets_.Get(options_.raylet_address);
    absl::Status s = RunOnLoopAndWait(
        [raylet, request, rpc_deadline](std::function<void(absl::Status)> done) {
          raylet->FetchObjects(request, rpc_deadline,
                               [done](const absl::Status& s, rpc::FetchObjectsReply&&) { done(s); });
        },
        rpc_deadline + 1000);
    if (!s.ok()) {
      if (s.code() == absl::StatusCode::kDeadlineExceeded && wait_ms >= 0) {
        return absl::DeadlineExceededError("Get timed out fetching object " + location_ids[0].Hex() + " from " +
                                           location);
      }
      for (size_t k = 0; k < missing.size(); ++k) {
        if (markers[missing_pos[k]]->plasma_raylet_address() != location) continue;
        (*out)[positions[missing_pos[k]]].error =
            MakeErrorObject(rpc::OBJECT_LOST, "object " + missing[k].Hex() + " could not be fetched from " +
                                                  location + ": " + std::string(s.message()));
        lost->push_back(positions[missing_pos[k]]);
      }
    }
  }
  return absl::OkStatus();
}

std::vector<bool> CoreWorker::Wait(const std::vector<ObjectID>& ids, int num_objects, int64_t timeout_ms) {
  std::vector<ObjectID> borrowed_absent;
  for (const ObjectID& id : ids) {
    if (!memory_store_.Contains(id) && !reference_counter_->IsOwnedByUs(id)) borrowed_absent.push_back(id);
  }
  if (!borrowed_absent.empty()) {
    loop_.Post("CoreWorker.RequestFromOwners", [this, borrowed_absent] { RequestFromOwners(borrowed_absent); });
  }
  const size_t wanted = std::min(static_cast<size_t>(std::max(num_objects, 0)), ids.size());
  bool satisfied = false;
  if (timeout_ms != 0) {
    SpinOnTaskChannels([&] {
      size_t present = 0;
      for (const ObjectID& id : ids) present += memory_store_.Contains(id) ? 1 : 0;
      satisfied = present >= wanted;
      return satisfied;
    });
  }
  // A worker waiting for long lends its CPU to the raylet meanwhile.
  if (!satisfied) NotifyBlocked(true);
  auto values = memory_store_.Get(ids, wanted, satisfied ? 0 : timeout_ms);
  if (!satisfied) NotifyBlocked(false);
  std::vector<bool> ready(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) ready[i] = values[i] != nullptr;
  return ready;
}

void CoreWorker::OnObjectFreed(const ObjectID& id) {
  memory_releaser_.NoteFreed();
  FreeValue(id);
  std::optional<ActorID> out_of_scope;
  {
    absl::MutexLock lock(&actors_mu_);
    auto it = handle_objects_.find(id);
    if (it != handle_objects_.end()) {
      out_of_scope = it->second;
      handle_objects_.erase(it);
    }
  }
  if (out_of_scope) {
    // No handle to the actor is left anywhere: unless named or detached it dies.
    loop_.Post("CoreWorker.ActorOutOfScope", [this, actor_id = *out_of_scope] {
      gcs_.AsyncReportActorOutOfScope(actor_id.Binary(), [actor_id](const absl::Status& s,
                                                                     rpc::ReportActorOutOfScopeReply&&) {
        if (!s.ok()) LOG(WARNING) << "could not report actor " << actor_id.Hex() << " out of scope: " << s;
      });
    });
  }
  // Its task's record (lineage) is not needed any more once every return is gone.
  task_manager_->OnObjectFreed(id);
}

bool CoreWorker::RecoverObject(const ObjectID& id, const StoredObjectPtr& stale, const std::string& cause) {
  std::string why;
  TaskManager::Recovery recovery = task_manager_->ResubmitForRecovery(id, stale, &why);
  if (recovery == TaskManager::Recovery::kResubmitted && stale && stale->in_plasma && stale->owner_copy) {
    // The old primary copy (if its node still lives) goes when the object does.
    RecordCopy(id, stale->plasma_node(), stale->plasma_raylet_address());
  }
  if (recovery != TaskManager::Recovery::kImpossible) return true;
  LOG(WARNING) << "object " << id.Hex() << " is lost (" << cause << ") and cannot be rebuilt: " << why;
  // Nothing can produce a value for it any more (no lineage, not pending).
  if (memory_store_.GetIfExists(id) != stale) return true;
  memory_store_.Delete({id});
  reference_counter_->UpdateObjectFailed(id);
  memory_store_.Put(id, MakeErrorObject(rpc::OBJECT_LOST, "object " + id.Hex() + " is lost (" + cause +
                                                              ") and cannot be rebuilt: " + why));
  return false;
}

void CoreWorker::FreeValue(const ObjectID& id) {
  StoredObjectPtr obj = memory_store_.Take(id);
  // Borrowers still asking about it (GetObjectStatus) get their answer now.
  memory_store_.ResolveAsyncWaiters(id, [&id] { return FreedObject(id); });
  std::vector<std::string> copies;
  {
    absl::MutexLock lock(&free_mu_);
    auto it = copies_.find(id);
    if (it != copies_.end()) {
      copies = std::move(it->second);
      copies_.erase(it);
    }
  }
  for (const std::string& raylet : copies) QueueFrees(raylet, {id});
  if (!obj || !obj->in_plasma || !obj->owner_copy || obj->plasma_raylet_address().empty()) return;
  QueueFrees(obj->plasma_raylet_address(), {id});
}

void CoreWorker::QueueFrees(const std::string& raylet_address, const std::vector<ObjectID>& ids) {
  // Frees are batched: one FreeObjects (or store Delete) per raylet per loop turn.
  bool post;
  {
    absl::MutexLock lock(&free_mu_);
    auto& queued = pending_frees_[raylet_address];
    queued.insert(queued.end(), ids.begin(), ids.end());
    post = !free_flush_posted_;
    free_flush_posted_ = true;
  }
  if (post) loop_.Post("CoreWorker.FreePlasma", [this] { FlushFrees(); });
}

void CoreWorker::RecordCopy(const ObjectID& id, const NodeID& node_id, const std::string& raylet_address) {
  if (!reference_counter_->IsOwnedByUs(id)) {
    auto owner = reference_counter_->GetOwner(id);
    if (!owner.ok()) return;
    rpc::AddObjectLocationRequest request;
    request.set_object_id(id.Binary());
    request.set_node_id(node_id.Binary());
    request.set_raylet_address(raylet_address);
    workers_.Get(HostPort(*owner), owner->node_id.Binary())
        ->AddObjectLocation(request, [id](const absl::Status& s, rpc::AddObjectLocationReply&&) {
          if (!s.ok()) VLOG(1) << "telling the owner of " << id.Hex() << " about a copy: " << s;
        });
    return;
  }
  reference_counter_->AddObjectLocation(id, node_id);
  {
    absl::MutexLock lock(&free_mu_);
    auto& copies = copies_[id];
    if (std::find(copies.begin(), copies.end(), raylet_address) == copies.end()) copies.push_back(raylet_address);
  }
  // Freed meanwhile (OnObjectFreed ran before the copy was recorded): delete it now.
  if (!reference_counter_->IsOwnedByUs(id)) {
    {
      absl::MutexLock lock(&free_mu_);
      copies_.erase(id);
    }
    QueueFrees(raylet_address, {id});
  }
}

void CoreWorker::AddCopies(const ObjectID& id, const StoredObject& marker, rpc::FetchObjectsRequest* request) {
  // Other copies, tried in turn when the primary cannot be pulled from: as the
  // owner knows them (ours), or as it told us.
  std::vector<std::string> copies = reference_counter_->IsOwnedByUs(id) ? CopiesOf(id) : marker.plasma_copies();
  for (const std::string& copy : copies) {
    const auto& tried = request->locations();
    if (copy == options_.raylet_address || std::find(tried.begin(), tried.end(), copy) != tried.end()) continue;
    request->add_locations(copy);
  }
}

std::vector<std::string> CoreWorker::CopiesOf(const ObjectID& id) {
  absl::MutexLock lock(&free_mu_);
  auto it = copies_.find(id);
  return it == copies_.end() ? std::vector<std::string>{} : it->second;
}

void CoreWorker::HandleAddObjectLocation(const rpc::AddObjectLocationRequest& request,
                                         rpc::AddObjectLocationReply* reply,
                                         std::function<void(absl::Status)> send_reply) {
  auto id = ObjectID::FromBinaryChecked(request.object_id());
  if (!id.ok()) return send_reply(id.status());
  if (request.raylet_address().empty()) return send_reply(absl::InvalidArgumentError("no raylet address"));
  NodeID node_id;
  if (auto n = NodeID::FromBinaryChecked(request.node_id()); n.ok()) node_id = *n;
  if (reference_counter_->IsOwnedByUs(*id)) {
    RecordCopy(*id, node_id, request.raylet_address());
  } else {
    QueueFrees(request.raylet_address(), {*id});  // already freed: the copy goes too
  }
  send_reply(absl::OkStatus());
}

void CoreWorker::FlushLocalFrees() {
  std::vector<ObjectID> ids;
  {
    absl::MutexLock lock(&free_mu_);
    auto it = pending_frees_.find(options_.raylet_address);
    if (it == pending_frees_.end()) return;
    ids.swap(it->second);
    pending_frees_.erase(it);
  }
  if (ids.empty() || store_.Delete(ids, /*wait=*/false).ok()) return;
  QueueFrees(options_.raylet_address, ids);  // the loop tries again, then through the raylet
}

void CoreWorker::FlushFrees() {
  absl::flat_hash_map<std::string, std::vector<ObjectID>> frees;
  {
    absl::MutexLock lock(&free_mu_);
    frees.swap(pending_frees_);
    free_flush_posted_ = false;
  }
  for (const auto& [raylet, ids] : frees) {
    if (raylet == options_.raylet_address) {
      // Our own node: straight to the store over its socket, no RPC to the raylet.
      absl::Status s = store_.Delete(ids, /*wait=*/false);
      if (s.ok()) continue;
      VLOG(1) << "deleting " << ids.size() << " objects from the local store: " << s;
    }
    rpc::FreeObjectsRequest request;
    for (const ObjectID& id : ids) request.add_object_ids(id.Binary());
    raylets_.Get(raylet)->FreeObjects(request, [raylet](const absl::Status& s, rpc::FreeObjectsReply&&) {
      if (!s.ok()) VLOG(1) << "freeing objects at " << raylet << ": " << s;
    });
  }
}

}  // namespace manta::core
