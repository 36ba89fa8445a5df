#include "src/core_worker/task_manager.h"

#include <glog/logging.h>

#include <algorithm>

#include "src/core_worker/common.h"
#include "src/core_worker/table_shrink.h"

namespace manta::core {
namespace {

// The ids of the arguments `spec` passes by reference (not inlined).
std::vector<ObjectID> PassedByReference(const PackedTask& spec) {
  std::vector<ObjectID> ids;
  const rpc::TaskSpec unpacked = spec.Unpack();
  for (const rpc::TaskArg& arg : unpacked.args()) {
    if (!arg.is_ref() || !arg.data().empty()) continue;
    auto id = ObjectID::FromBinaryChecked(arg.ref().object_id());
    if (id.ok()) ids.push_back(*id);
  }
  return ids;
}

}  // namespace

TaskManager::TaskManager(MemoryStore& memory_store, ReferenceCounter& reference_counter, Resubmit resubmit,
                         int64_t max_lineage_bytes)
    : memory_store_(memory_store), reference_counter_(reference_counter), resubmit_(std::move(resubmit)),
      max_lineage_bytes_(max_lineage_bytes) {}

PackedTaskPtr TaskManager::Entry::NextAttempt() const { return spec->NextAttempt(); }

void TaskManager::AddPendingTask(PackedTaskPtr spec, std::vector<ObjectID> argument_ids) {
  const TaskID task_id = spec->task_id();
  Entry e;
  e.retries_left = spec->max_retries();
  e.spec = std::move(spec);
  e.argument_ids = std::move(argument_ids);
  if (inbox_.Add({task_id, std::move(e)})) TablesLock take_in(this);
}

void TaskManager::ArgumentsInlined(PackedTaskPtr resolved) {
  TablesLock lock(this);
  auto it = pending_.find(resolved->task_id());
  if (it == pending_.end() || it->second.completing ||
      it->second.spec->attempt_number() != resolved->attempt_number()) {
    return;
  }
  // Under the lock, as ReportInFlight: an attempt reported in flight stays reported.
  if (events_ != nullptr) events_->Moved(*it->second.spec, *resolved);
  it->second.spec = std::move(resolved);
}

void TaskManager::TakeInLocked() const {
  inbox_.TakeAll([this](const Added& added) { pending_.prefetch(added.first); },
                 [this](Added& added) { pending_[added.first] = std::move(added.second); });
}

bool TaskManager::IsPending(const TaskID& task_id) const {
  TablesLock lock(this);
  return pending_.contains(task_id);
}

bool TaskManager::ShouldRun(const TaskID& task_id) const {
  TablesLock lock(this);
  auto it = pending_.find(task_id);
  return it != pending_.end() && !it->second.cancelled;
}

size_t TaskManager::NumPending() const {
  TablesLock lock(this);
  return pending_.size();
}

std::vector<TaskID> TaskManager::PendingTaskIds() const {
  TablesLock lock(this);
  std::vector<TaskID> ids;
  ids.reserve(pending_.size());
  for (const auto& [id, entry] : pending_) ids.push_back(id);
  return ids;
}

void TaskManager::CompletePendingTasks(const google::protobuf::RepeatedPtrField<rpc::TaskResult>& results,
                                       const TaskExecutorInfo* by) {
  if (results.size() > 1) {
    std::vector<ObjectID> returns;
    returns.reserve(results.size());
    {
      TablesLock lock(this);
      for (const rpc::TaskResult& result : results) {
        auto task_id = TaskID::FromBinaryChecked(result.task_id());
        if (!task_id.ok()) continue;
        pending_.prefetch(*task_id);
        for (int i = 1; i <= result.returns_size(); ++i) returns.push_back(ObjectID::FromIndex(*task_id, i));
      }
    }
    reference_counter_.Prefetch(returns);
    memory_store_.Prefetch(returns);
  }
  // One clock read for the whole reply's task events, after the first result is
  // stored (its waiter wakes first).
  int64_t now_us = 0;
  for (const rpc::TaskResult& result : results) CompletePendingTask(result, by, &now_us);
}

void TaskManager::CompletePendingTask(const rpc::TaskResult& result, const TaskExecutorInfo* by, int64_t* now_us) {
  auto task_id = TaskID::FromBinaryChecked(result.task_id());
  if (!task_id.ok()) {
    LOG(WARNING) << "task result with a malformed task id: " << task_id.status();
    return;
  }
  if (result.stolen()) {  // not run: this attempt was taken back (unless that happened already)
    TakeBack(*task_id, result.attempt_number(), "taken back from a worker busy with a long task");
    return;
  }
  Entry entry;
  {
    TablesLock lock(this);
    auto it = pending_.find(*task_id);
    if (it == pending_.end() || it->second.completing ||
        it->second.spec->attempt_number() != result.attempt_number()) {
      VLOG(1) << "ignoring a result of task " << task_id->Hex() << " attempt " << result.attempt_number();
      return;
    }
    // The task stays pending (as `completing`) until its returns are stored and its
    // lineage kept, so no reader ever sees it neither pending nor stored.
    entry = std::move(it->second);
    it->second = Entry();
    it->second.completing = true;
  }
  if (entry.cancelled) {
    // ray::Cancel came first: whatever the task returned, its result is the error.
    const rpc::TaskResult instead = CancelledInstead(*entry.spec, result);
    return CompleteTaken(*task_id, std::move(entry), instead, by, now_us);
  }
  CompleteTaken(*task_id, std::move(entry), result, by, now_us);
}

rpc::TaskResult TaskManager::CancelledInstead(const PackedTask& spec, const rpc::TaskResult& result) {
  for (const rpc::ReturnObject& r : result.returns()) {
    if (r.has_error() && r.error().type() != rpc::ERROR_TYPE_UNSPECIFIED) return result;  // failed anyway
  }
  rpc::TaskResult instead;
  instead.set_task_id(result.task_id());
  instead.set_attempt_number(result.attempt_number());
  instead.set_run_us(result.run_us());
  instead.set_start_unix_us(result.start_unix_us());
  *instead.mutable_borrowed_refs() = result.borrowed_refs();
  const rpc::ErrorInfo error = CancelledError(spec);
  for (const rpc::ReturnObject& r : result.returns()) {
    rpc::ReturnObject* out = instead.add_returns();
    out->set_object_id(r.object_id());
    *out->mutable_error() = error;
    auto id = ObjectID::FromBinaryChecked(r.object_id());
    if (id.ok()) DiscardStoredCopy(*id, r);  // nobody will read it
  }
  return instead;
}

void TaskManager::DiscardStoredCopy(const ObjectID& id, const rpc::ReturnObject& r) {
  if (!r.in_plasma() || !on_unreferenced_) return;
  auto stored = std::make_shared<StoredObject>();
  stored->in_plasma = true;
  stored->owner_copy = true;
  auto node = NodeID::FromBinaryChecked(r.node_id());
  stored->SetPlasmaLocation(node.ok() ? *node : NodeID::Nil(), r.raylet_address());
  on_unreferenced_(id, stored);
}

void TaskManager::StoreStreamItem(const ObjectID& id, const rpc::ReturnObject& item) {
  reference_counter_.AddOwnedObject(id, reference_counter_.self(), {});
  reference_counter_.AddLocalReference(id);
  StoreReturn(id.Task(), item);
}

void TaskManager::CompleteTaken(const TaskID& task_id, Entry entry, const rpc::TaskResult& result,
                                const TaskExecutorInfo* by, int64_t* now_us) {
  bool failed = false;
  bool in_store = false;  // a return is in the object store, where it can be lost
  const rpc::ErrorInfo* error = nullptr;
  for (const rpc::ReturnObject& r : result.returns()) {
    const ReturnKind kind = StoreReturn(task_id, r);
    if (kind == ReturnKind::kError && !failed) error = &r.error();
    failed |= kind == ReturnKind::kError;
    in_store |= kind == ReturnKind::kInStore;
  }
  if (failed && result.returns_size() < entry.spec->num_returns()) {
    // A refusal may name the first return only: the others fail the same way.
    for (int i = result.returns_size() + 1; i <= entry.spec->num_returns(); ++i) {
      const ObjectID id = ObjectID::FromIndex(task_id, i);
      reference_counter_.UpdateObjectFailed(id);
      PutIfReferenced(id, MakeErrorObject(*error));
    }
  }
  if (events_ != nullptr) {
    int64_t read_now = 0;
    int64_t& now = now_us != nullptr ? *now_us : read_now;
    if (now == 0) now = UnixMicros();
    events_->Ended(*entry.spec, result, by != nullptr ? *by : TaskExecutorInfo{}, error, now);
  }
  // Actor calls are not run again to rebuild their returns (the actor's state moved on).
  const bool keep_lineage = !failed && in_store && entry.spec->type() == rpc::NORMAL_TASK;
  FinishCompletion(task_id, std::move(entry), result, keep_lineage);
}

TaskManager::ReturnKind TaskManager::StoreReturn(const TaskID& task_id, const rpc::ReturnObject& r) {
  auto id = ObjectID::FromBinaryChecked(r.object_id());
  if (!id.ok() || id->Task() != task_id) {
    LOG(WARNING) << "task " << task_id.Hex() << " returned a foreign object id; ignored";
    return ReturnKind::kForeign;
  }
  StoredObjectPtr value;
  ReturnKind kind = ReturnKind::kInline;
  if (r.has_error() && r.error().type() != rpc::ERROR_TYPE_UNSPECIFIED) {
    kind = ReturnKind::kError;
    value = MakeErrorObject(r.error());
    reference_counter_.UpdateObjectFailed(*id);
  } else {
    auto obj = std::make_shared<StoredObject>();
    obj->size_bytes = r.size_bytes();
    if (r.in_plasma()) {
      kind = ReturnKind::kInStore;
      obj->in_plasma = true;
      obj->owner_copy = true;
      auto node = NodeID::FromBinaryChecked(r.node_id());
      if (node.ok()) {
        reference_counter_.AddObjectLocation(*id, *node);
        reference_counter_.UpdatePinnedAt(*id, *node);
      }
      obj->SetPlasmaLocation(node.ok() ? *node : NodeID::Nil(), r.raylet_address());
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
  if (!inner.empty()) reference_counter_.AddNestedObjectIds(*id, inner, reference_counter_.self());
  PutIfReferenced(*id, std::move(value));
  return kind;
}

void TaskManager::FinishCompletion(const TaskID& task_id, Entry entry, const rpc::TaskResult& result,
                                   bool keep_lineage) {
  std::vector<BorrowedRef> borrowed;
  for (const rpc::BorrowedRefReport& b : result.borrowed_refs()) {
    auto id = ObjectID::FromBinaryChecked(b.ref().object_id());
    if (id.ok()) borrowed.push_back(BorrowedRef{*id, FromRpc(b.borrower())});
  }
  std::vector<ObjectID> argument_ids = entry.argument_ids;
  std::vector<ObjectID> evicted;
  // Keep the spec for rebuilding the returns that can be lost; the arguments we own
  // that it passes by reference stay known (lineage refs, taken before the submitted
  // refs go) so they can be rebuilt too. Inlined arguments travel in the spec.
  std::vector<ObjectID> owned_args;
  if (keep_lineage && !argument_ids.empty()) {
    for (const ObjectID& arg : PassedByReference(*entry.spec)) {
      if (!reference_counter_.IsOwnedByUs(arg)) continue;
      reference_counter_.AddLineageReference(arg);
      owned_args.push_back(arg);
    }
  }
  {
    TablesLock lock(this);
    pending_.erase(task_id);
    ShrinkIfMostlyEmpty(pending_);
    if (keep_lineage) evicted = KeepLineageLocked(std::move(entry), std::move(owned_args));
  }
  reference_counter_.UpdateFinishedTaskReferences(argument_ids, borrowed);
  for (const ObjectID& id : evicted) reference_counter_.RemoveLineageReference(id);
  if (keep_lineage) {
    // Returns freed before the lineage was recorded never reach OnObjectFreed.
    for (int i = 1; i <= result.returns_size(); ++i) {
      ObjectID id = ObjectID::FromIndex(task_id, i);
      if (!reference_counter_.HasReference(id)) OnObjectFreed(id);
    }
  }
}

std::vector<ObjectID> TaskManager::KeepLineageLocked(Entry entry, std::vector<ObjectID> owned_args) {
  const TaskID task_id = entry.spec->task_id();
  LineageEntry& kept = lineage_[task_id];
  kept.bytes = static_cast<int64_t>(entry.spec->bytes().size());
  for (int i = 1; i <= std::max(1, entry.spec->num_returns()); ++i) kept.returns_alive.push_back(i);
  kept.task = std::move(entry);
  kept.owned_args = std::move(owned_args);
  kept.seq = next_lineage_seq_++;
  lineage_order_.emplace_back(kept.seq, task_id);
  lineage_bytes_ += kept.bytes;
  std::vector<ObjectID> released;
  while (lineage_bytes_ > max_lineage_bytes_ && !lineage_order_.empty()) {
    const auto oldest = lineage_order_.front();
    lineage_order_.pop_front();
    if (!IsKeptLocked(oldest)) continue;
    LOG_EVERY_N(WARNING, 1000) << "lineage over max_lineage_bytes (" << max_lineage_bytes_
                               << "): dropping the oldest; objects made by those tasks can no longer be rebuilt";
    std::vector<ObjectID> args = DropLineageLocked(oldest.second);
    released.insert(released.end(), args.begin(), args.end());
  }
  return released;
}

std::vector<ObjectID> TaskManager::DropLineageLocked(const TaskID& task_id) {
  auto it = lineage_.find(task_id);
  if (it == lineage_.end()) return {};
  std::vector<ObjectID> args = std::move(it->second.owned_args);
  const uint64_t seq = it->second.seq;
  lineage_bytes_ -= it->second.bytes;
  lineage_.erase(it);
  ShrinkIfMostlyEmpty(lineage_);
  // Tasks mostly go in the order they were kept: then their items leave from the
  // front, with no lookup. Others stay until a compaction.
  if (!lineage_order_.empty() && lineage_order_.front().first == seq) {
    lineage_order_.pop_front();
  } else {
    CompactLineageOrderLocked();
  }
  return args;
}

bool TaskManager::IsKeptLocked(const std::pair<uint64_t, TaskID>& item) const {
  auto it = lineage_.find(item.second);
  return it != lineage_.end() && it->second.seq == item.first;
}

void TaskManager::CompactLineageOrderLocked() {
  // Rebuilt once at most about half its items are live (amortized O(1) per drop).
  if (lineage_order_.size() <= 2 * lineage_.size() + 1024) return;
  std::deque<std::pair<uint64_t, TaskID>> live;
  for (const auto& item : lineage_order_) {
    if (IsKeptLocked(item)) live.push_back(item);
  }
  lineage_order_.swap(live);
}

void TaskManager::OnObjectFreed(const ObjectID& id) {
  std::vector<ObjectID> released;
  {
    TablesLock lock(this);
    auto it = lineage_.find(id.Task());
    if (it == lineage_.end()) return;
    auto& alive = it->second.returns_alive;
    alive.erase(std::remove(alive.begin(), alive.end(), id.Index()), alive.end());
    if (!alive.empty()) return;
    released = DropLineageLocked(id.Task());
  }
  for (const ObjectID& arg : released) reference_counter_.RemoveLineageReference(arg);
}

TaskManager::Recovery TaskManager::ResubmitForRecovery(const ObjectID& id, const StoredObjectPtr& stale,
                                                      std::string* why) {
  const TaskID task_id = id.Task();
  PackedTaskPtr spec;
  std::vector<ObjectID> argument_ids;
  std::vector<ObjectID> owned_args;
  {
    TablesLock lock(this);
    if (pending_.contains(task_id)) return Recovery::kAlreadyPending;
    // Under mu_, so a completion cannot slip in between (the memory store never
    // calls out while holding its own mutex, so nesting it here is safe).
    if (memory_store_.GetIfExists(id) != stale) return Recovery::kNotNeeded;
    auto it = lineage_.find(task_id);
    if (it == lineage_.end()) {
      *why = "no record of the task that made it is kept (objects from ray::Put cannot be rebuilt; a task's "
             "record goes once none of its returns is referenced, or beyond max_lineage_bytes)";
      return Recovery::kImpossible;
    }
    Entry& task = it->second.task;
    if (task.retries_left == 0) {
      *why = "its task " + task_id.Hex() + " (" + task.spec->function_name() + ") has no retries left";
      return Recovery::kImpossible;
    }
    if (task.retries_left > 0) --task.retries_left;
    task.spec = task.NextAttempt();
    task.seen = 0;
    spec = task.spec;
    argument_ids = task.argument_ids;
    Entry pending = std::move(task);
    std::vector<ObjectID> args = DropLineageLocked(task_id);
    owned_args = std::move(args);
    pending_[task_id] = std::move(pending);
  }
  // Submitted refs replace the lineage refs (taken first: nothing goes in between).
  reference_counter_.UpdateSubmittedTaskReferences(argument_ids);
  for (const ObjectID& arg : owned_args) reference_counter_.RemoveLineageReference(arg);
  for (int i = 1; i <= std::max(1, spec->num_returns()); ++i) memory_store_.Delete({ObjectID::FromIndex(task_id, i)});
  LOG(INFO) << "rebuilding object " << id.Hex() << ": running task " << task_id.Hex() << " ("
            << spec->function_name() << ") again, attempt " << spec->attempt_number();
  resubmit_(spec);
  return Recovery::kResubmitted;
}

void TaskManager::ReportInFlight(bool all) {
  if (events_ == nullptr) return;
  constexpr uint8_t kReported = 2;
  // Under the lock: ArgumentsInlined moves an attempt's stamps to its new spec under
  // it too, so an attempt is never reported on a spec just replaced.
  TablesLock lock(this);
  for (auto& [task_id, e] : pending_) {
    if (e.completing || e.seen == kReported) continue;
    if (++e.seen < kReported && !all) continue;
    // (Not submitted yet, or no room left: the next call.)
    const bool reported = events_->FreeRows() > 0 && events_->InFlight(*e.spec);
    e.seen = reported ? kReported : kReported - 1;
  }
}

size_t TaskManager::NumLineage() const {
  TablesLock lock(this);
  return lineage_.size();
}

int64_t TaskManager::LineageBytes() const {
  TablesLock lock(this);
  return lineage_bytes_;
}

size_t TaskManager::TableCapacity() const {
  TablesLock lock(this);
  return pending_.capacity() + lineage_.capacity();
}

bool TaskManager::Retry(const TaskID& task_id, int attempt, rpc::ErrorType type, const std::string& message,
                        RetryKind kind) {
  const bool charge = kind == RetryKind::kCharged;
  PackedTaskPtr resubmit;
  Entry failed;
  {
    TablesLock lock(this);
    auto it = pending_.find(task_id);
    if (it == pending_.end() || it->second.completing || it->second.spec->attempt_number() != attempt) return false;
    Entry& e = it->second;
    if (e.cancelled) {
      failed = std::move(e);
      pending_.erase(it);
      ShrinkIfMostlyEmpty(pending_);
    } else if (e.retries_left != 0 || !charge) {  // negative = retry forever
      if (e.retries_left > 0 && charge) --e.retries_left;
      if (events_ != nullptr && kind == RetryKind::kTakenBack) {
        events_->Withdrawn(*e.spec);
      } else if (events_ != nullptr) {
        rpc::ErrorInfo attempt_error;
        attempt_error.set_type(type);
        attempt_error.set_message(message);
        events_->Failed(*e.spec, attempt_error);
      }
      e.spec = e.NextAttempt();
      e.seen = 0;
      resubmit = e.spec;
    } else {
      failed = std::move(e);
      pending_.erase(it);
      ShrinkIfMostlyEmpty(pending_);
    }
  }
  if (failed.cancelled) {
    rpc::ErrorInfo error = CancelledError(*failed.spec, "its worker went away: " + message);
    if (events_ != nullptr) events_->Failed(*failed.spec, error);
    StoreErrorAndRelease(std::move(failed), error);
    return false;
  }
  if (resubmit) {
    LOG_IF(INFO, kind != RetryKind::kTakenBack || VLOG_IS_ON(1)) << "retrying task " << task_id.Hex() << " ("
                                                << resubmit->function_name() << "), attempt "
                                                << resubmit->attempt_number() << ": " << message;
    resubmit_(resubmit);
    return true;
  }
  rpc::ErrorInfo error;
  error.set_type(type);
  error.set_message(message + " (task " + task_id.Hex() + ", function " + failed.spec->function_name() +
                    ", after " + std::to_string(failed.spec->attempt_number() + 1) + " attempts)");
  if (events_ != nullptr) events_->Failed(*failed.spec, error);
  StoreErrorAndRelease(std::move(failed), error);
  return false;
}

void TaskManager::FailTask(const TaskID& task_id, const rpc::ErrorInfo& error) {
  Entry failed;
  {
    TablesLock lock(this);
    auto it = pending_.find(task_id);
    if (it == pending_.end() || it->second.completing) return;
    failed = std::move(it->second);
    pending_.erase(it);
    ShrinkIfMostlyEmpty(pending_);
  }
  if (events_ != nullptr) events_->Failed(*failed.spec, error);
  StoreErrorAndRelease(std::move(failed), error);
}

absl::StatusOr<PackedTaskPtr> TaskManager::MarkCancelled(const TaskID& task_id, bool force) {
  TablesLock lock(this);
  auto it = pending_.find(task_id);
  if (it == pending_.end() || it->second.completing) return PackedTaskPtr();
  Entry& e = it->second;
  if (e.spec->type() == rpc::ACTOR_CREATION_TASK) {
    return absl::InvalidArgumentError("task " + task_id.Hex() + " creates an actor (" + e.spec->function_name() +
                                      "): kill the actor (ray::ActorHandle::Kill) instead of cancelling it");
  }
  if (force && e.spec->type() == rpc::ACTOR_TASK) {
    return absl::InvalidArgumentError("task " + task_id.Hex() + " is a call of an actor (" + e.spec->function_name() +
                                      "): force is for normal tasks only; cancel it without force, or kill the actor");
  }
  e.cancelled = true;
  return e.spec;
}

rpc::ErrorInfo TaskManager::CancelledError(const PackedTask& spec, const std::string& how) {
  rpc::ErrorInfo error;
  error.set_type(rpc::TASK_CANCELLED);
  error.set_message("task " + spec.task_id().Hex() + " (" + spec.function_name() + ") was cancelled" +
                    (how.empty() ? "" : " (" + how + ")"));
  return error;
}

std::vector<TaskID> TaskManager::PendingChildren(const TaskID& parent) const {
  const std::string_view parent_bytes(reinterpret_cast<const char*>(parent.Data()), TaskID::kSize);
  std::vector<TaskID> children;
  TablesLock lock(this);
  for (const auto& [id, entry] : pending_) {
    if (entry.spec && entry.spec->parent_task_id() == parent_bytes) children.push_back(id);
  }
  return children;
}

void TaskManager::PutIfReferenced(const ObjectID& id, StoredObjectPtr value) {
  memory_store_.Put(id, value);
  // Every ref may have gone while the task ran: the free already happened, so drop
  // the value now (checked after the Put, so a concurrent free cannot slip between),
  // and its copy in the object store.
  if (reference_counter_.HasReference(id)) return;
  memory_store_.Delete({id});
  if (value->in_plasma && value->owner_copy && on_unreferenced_) on_unreferenced_(id, value);
}

void TaskManager::StoreErrorAndRelease(Entry entry, const rpc::ErrorInfo& error) {
  const TaskID task_id = entry.spec->task_id();
  for (int i = 1; i <= entry.spec->num_returns(); ++i) {
    ObjectID id = ObjectID::FromIndex(task_id, i);
    reference_counter_.UpdateObjectFailed(id);
    PutIfReferenced(id, MakeErrorObject(error));
  }
  reference_counter_.UpdateFinishedTaskReferences(entry.argument_ids, {});
}

}  // namespace manta::core
