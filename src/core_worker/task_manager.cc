#include "src/core_worker/task_manager.h"

#include <glog/logging.h>

#include "src/core_worker/common.h"

namespace manta::core {

TaskManager::TaskManager(MemoryStore& memory_store, ReferenceCounter& reference_counter, Resubmit resubmit)
    : memory_store_(memory_store), reference_counter_(reference_counter), resubmit_(std::move(resubmit)) {}

void TaskManager::AddPendingTask(const rpc::TaskSpec& spec, std::vector<ObjectID> argument_ids) {
  TaskID task_id = TaskID::FromBinary(spec.task_id());
  absl::MutexLock lock(&mu_);
  Entry& e = pending_[task_id];
  e.spec = spec;
  e.argument_ids = std::move(argument_ids);
  e.retries_left = spec.max_retries();
}

bool TaskManager::IsPending(const TaskID& task_id) const {
  absl::MutexLock lock(&mu_);
  return pending_.contains(task_id);
}

size_t TaskManager::NumPending() const {
  absl::MutexLock lock(&mu_);
  return pending_.size();
}

void TaskManager::CompletePendingTask(const rpc::TaskResult& result) {
  auto task_id = TaskID::FromBinaryChecked(result.task_id());
  if (!task_id.ok()) {
    LOG(WARNING) << "task result with a malformed task id: " << task_id.status();
    return;
  }
  Entry entry;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_.find(*task_id);
    if (it == pending_.end() || it->second.spec.attempt_number() != result.attempt_number()) {
      VLOG(1) << "ignoring a result of task " << task_id->Hex() << " attempt " << result.attempt_number();
      return;
    }
    entry = std::move(it->second);
    pending_.erase(it);
  }
  const Address self = FromRpc(entry.spec.caller_address());
  for (const rpc::ReturnObject& r : result.returns()) {
    auto id = ObjectID::FromBinaryChecked(r.object_id());
    if (!id.ok() || id->Task() != *task_id) {
      LOG(WARNING) << "task " << task_id->Hex() << " returned a foreign object id; ignored";
      continue;
    }
    StoredObjectPtr value;
    if (r.has_error() && r.error().type() != rpc::ERROR_TYPE_UNSPECIFIED) {
      value = MakeErrorObject(r.error());
      reference_counter_.UpdateObjectFailed(*id);
    } else {
      auto obj = std::make_shared<StoredObject>();
      obj->size_bytes = r.size_bytes();
      if (r.in_plasma()) {
        obj->in_plasma = true;
        obj->owner_copy = true;
        if (auto node = NodeID::FromBinaryChecked(r.node_id()); node.ok()) {
          obj->plasma_node = *node;
          reference_counter_.AddObjectLocation(*id, *node);
          reference_counter_.UpdatePinnedAt(*id, *node);
        }
        obj->plasma_raylet_address = r.raylet_address();
      } else {
        obj->data = r.data();
        obj->metadata = r.metadata();
      }
      reference_counter_.UpdateObjectReady(*id, r.size_bytes());
      value = std::move(obj);
    }
    // Refs inside the value stay alive while the value does.
    std::vector<ObjectID> inner;
    for (const rpc::ObjectReference& ref : r.nested_refs()) {
      auto inner_id = ObjectID::FromBinaryChecked(ref.object_id());
      if (!inner_id.ok()) continue;
      reference_counter_.AddBorrowedObject(*inner_id, FromRpc(ref.owner_address()), *id);
      inner.push_back(*inner_id);
    }
    if (!inner.empty()) reference_counter_.AddNestedObjectIds(*id, inner, self);
    PutIfReferenced(*id, std::move(value));
  }
  std::vector<BorrowedRef> borrowed;
  for (const rpc::BorrowedRefReport& b : result.borrowed_refs()) {
    auto id = ObjectID::FromBinaryChecked(b.ref().object_id());
    if (id.ok()) borrowed.push_back(BorrowedRef{*id, FromRpc(b.borrower())});
  }
  reference_counter_.UpdateFinishedTaskReferences(entry.argument_ids, borrowed);
}

bool TaskManager::RetryOrFailTask(const TaskID& task_id, int attempt, rpc::ErrorType type,
                                  const std::string& message) {
  rpc::TaskSpec resubmit;
  Entry failed;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_.find(task_id);
    if (it == pending_.end() || it->second.spec.attempt_number() != attempt) return false;
    Entry& e = it->second;
    if (e.retries_left != 0) {  // negative = retry forever
      if (e.retries_left > 0) --e.retries_left;
      e.spec.set_attempt_number(e.spec.attempt_number() + 1);
      resubmit = e.spec;
    } else {
      failed = std::move(e);
      pending_.erase(it);
    }
  }
  if (!resubmit.task_id().empty()) {
    LOG(INFO) << "retrying task " << task_id.Hex() << " (" << resubmit.function_name() << "), attempt "
              << resubmit.attempt_number() << ": " << message;
    resubmit_(resubmit);
    return true;
  }
  rpc::ErrorInfo error;
  error.set_type(type);
  error.set_message(message + " (task " + task_id.Hex() + ", function " + failed.spec.function_name() +
                    ", after " + std::to_string(failed.spec.attempt_number() + 1) + " attempts)");
  StoreErrorAndRelease(std::move(failed), error);
  return false;
}

void TaskManager::FailTask(const TaskID& task_id, const rpc::ErrorInfo& error) {
  Entry failed;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_.find(task_id);
    if (it == pending_.end()) return;
    failed = std::move(it->second);
    pending_.erase(it);
  }
  StoreErrorAndRelease(std::move(failed), error);
}

void TaskManager::PutIfReferenced(const ObjectID& id, StoredObjectPtr value) {
  memory_store_.Put(id, std::move(value));
  // Every ref may have gone while the task ran: the free already happened, so drop
  // the value now (checked after the Put, so a concurrent free cannot slip between).
  if (!reference_counter_.HasReference(id)) memory_store_.Delete({id});
}

void TaskManager::StoreErrorAndRelease(Entry entry, const rpc::ErrorInfo& error) {
  TaskID task_id = TaskID::FromBinary(entry.spec.task_id());
  for (int i = 1; i <= entry.spec.num_returns(); ++i) {
    ObjectID id = ObjectID::FromIndex(task_id, i);
    reference_counter_.UpdateObjectFailed(id);
    PutIfReferenced(id, MakeErrorObject(error));
  }
  reference_counter_.UpdateFinishedTaskReferences(entry.argument_ids, {});
}

}  // namespace manta::core
