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
    freer_.FlushLocal();
    auto dst = store_.Create(id, static_cast<int64_t>(size), 0, /*pin_on_seal=*/true, options_.worker_id.Binary());
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

void CoreWorker::OnObjectFreed(const ObjectID& id) {
  memory_releaser_.NoteFreed();
  // The end of a stream: its consumer is gone (before FreeValue tells the end's
  // waiters, so the stream does not take that for the task's end).
  if (id.Index() == 1 && any_stream_.load(std::memory_order_relaxed)) streams_->Release(id.Task());
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
  for (const std::string& raylet : freer_.TakeCopies(id)) freer_.Queue(raylet, {id});
  if (!obj || !obj->in_plasma || !obj->owner_copy || obj->plasma_raylet_address().empty()) return;
  freer_.Queue(obj->plasma_raylet_address(), {id});
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
  freer_.AddCopy(id, raylet_address);
  // Freed meanwhile (OnObjectFreed ran before the copy was recorded): delete it now.
  if (!reference_counter_->IsOwnedByUs(id)) {
    freer_.TakeCopies(id);
    freer_.Queue(raylet_address, {id});
  }
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
    freer_.Queue(request.raylet_address(), {*id});  // already freed: the copy goes too
  }
  send_reply(absl::OkStatus());
}

}  // namespace manta::core
