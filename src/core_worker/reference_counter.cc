#include "src/core_worker/reference_counter.h"

#include <glog/logging.h>

#include <utility>

#include "src/core_worker/table_shrink.h"

namespace manta::core {

std::string Address::ToString() const {
  return ip + ":" + std::to_string(port) + "/" + worker_id.Hex();
}

void ReferenceCounter::Run(Deferred& deferred) const {
  for (auto& action : deferred.actions) action();
  deferred.actions.clear();
  if (on_object_out_of_scope_) {
    for (const ObjectID& id : deferred.out_of_scope) on_object_out_of_scope_(id);
  }
  deferred.out_of_scope.clear();
  if (on_object_freed_) {
    for (const ObjectID& id : deferred.freed) on_object_freed_(id);
  }
  deferred.freed.clear();
}

ReferenceCounter::ReferenceCounter(Address self, BorrowerClientInterface* borrower_client)
    : self_(std::move(self)), borrower_client_(borrower_client) {
  CHECK(borrower_client_ != nullptr);
}

void ReferenceCounter::SetOnObjectFreed(ObjectCallback cb) { on_object_freed_ = std::move(cb); }

void ReferenceCounter::SetOnObjectOutOfScope(ObjectCallback cb) {
  on_object_out_of_scope_ = std::move(cb);
}

const ReferenceCounter::Details& ReferenceCounter::DetailsOf(const Entry& e) {
  static const Details* const kNone = new Details();
  return e.details ? *e.details : *kNone;
}

const ReferenceCounter::Entry* ReferenceCounter::FindLocked(const ObjectID& id) const {
  auto it = objects_.find(id);
  return it == objects_.end() ? nullptr : &it->second;
}

bool ReferenceCounter::AddOwnedObject(const ObjectID& id, const Address& owner_address,
                                      const std::vector<ObjectID>& contained_ids,
                                      std::optional<int64_t> size_bytes, bool pending) {
  TableLock lock(this);
  auto [it, inserted] = objects_.try_emplace(id);
  if (!inserted) {
    LOG(WARNING) << "AddOwnedObject: " << id.Hex() << " is already in the table; ignored";
    return false;
  }
  Entry& entry = it->second;
  entry.owned_by_us = true;
  if (owner_address != self_) entry.MutableDetails().owner = owner_address;
  entry.size_bytes = size_bytes.value_or(-1);
  entry.state = pending ? State::kPending : State::kReady;
  for (const ObjectID& inner : contained_ids) {
    auto inner_it = objects_.find(inner);
    if (inner_it == objects_.end() || inner == id) {
      LOG(WARNING) << "AddOwnedObject: contained ref " << inner.Hex() << " of " << id.Hex()
                   << " is not held; skipped";
      continue;
    }
    // `entry` stays valid: find() neither inserts nor rehashes.
    entry.MutableDetails().contains.insert(inner);
    inner_it->second.MutableDetails().contained_in.insert(id);
  }
  VLOG(2) << "Owned object " << id.Hex() << " added";
  return true;
}

void ReferenceCounter::AddBorrowedObject(const ObjectID& id, const Address& owner_address,
                                         std::optional<ObjectID> outer_id) {
  TableLock lock(this);
  auto [it, inserted] = objects_.try_emplace(id);
  Entry& entry = it->second;
  if (inserted) {
    if (owner_address != self_) entry.MutableDetails().owner = owner_address;
    VLOG(2) << "Borrowed object " << id.Hex() << " from " << owner_address.ToString();
  } else if (entry.owned_by_us) {
    return;  // A ref to our own object came back to us: nothing to borrow.
  }
  if (!outer_id.has_value() || *outer_id == id) return;
  auto outer_it = objects_.find(*outer_id);
  if (outer_it == objects_.end()) {
    LOG(WARNING) << "AddBorrowedObject: outer object " << outer_id->Hex() << " of "
                 << id.Hex() << " is unknown; no nested link recorded";
    return;
  }
  outer_it->second.MutableDetails().contains.insert(id);
  // `entry` is still valid: find() does not invalidate references.
  entry.MutableDetails().contained_in.insert(*outer_id);
}

void ReferenceCounter::Prefetch(const std::vector<ObjectID>& ids) const {
  TableLock lock(this);
  for (const ObjectID& id : ids) objects_.prefetch(id);
}

void ReferenceCounter::AddOwnedTaskReturn(const ObjectID& return_id, const std::vector<ObjectID>& argument_ids) {
  if (inbox_.Add(AddedReturn{return_id, argument_ids})) TableLock take_in(this);
}

void ReferenceCounter::TakeInLocked() const {
  inbox_.TakeAll([this](const AddedReturn& added) { objects_.prefetch(added.id); },
                 [this](AddedReturn& added) { AddOwnedTaskReturnLocked(added.id, added.argument_ids); });
}

void ReferenceCounter::AddOwnedTaskReturnLocked(const ObjectID& return_id,
                                                const std::vector<ObjectID>& argument_ids) const {
  auto [it, inserted] = objects_.try_emplace(return_id);
  if (!inserted) {
    LOG(WARNING) << "AddOwnedTaskReturn: " << return_id.Hex() << " is already in the table; ignored";
  } else {
    it->second.owned_by_us = true;
    it->second.state = State::kPending;
    it->second.local_ref_count = 1;
  }
  AddSubmittedRefsLocked(argument_ids);
}

void ReferenceCounter::AddLocalReference(const ObjectID& id) {
  TableLock lock(this);
  auto it = objects_.find(id);
  if (it == objects_.end()) {
    LOG(WARNING) << "AddLocalReference: unknown object " << id.Hex() << "; ignored";
    return;
  }
  it->second.local_ref_count++;
  // Back in scope: when it leaves again, on_object_out_of_scope runs again.
  it->second.out_of_scope = false;
}

void ReferenceCounter::RemoveLocalReference(const ObjectID& id) {
  Deferred deferred;
  {
    TableLock lock(this);
    auto it = objects_.find(id);
    if (it == objects_.end() || it->second.local_ref_count == 0) {
      LOG(WARNING) << "RemoveLocalReference: " << id.Hex() << " holds no local ref; ignored";
      return;
    }
    it->second.local_ref_count--;
    ReleaseIfUnusedLocked(id, deferred);
  }
  Run(deferred);
}

void ReferenceCounter::UpdateSubmittedTaskReferences(const std::vector<ObjectID>& argument_ids) {
  if (argument_ids.empty()) return;
  TableLock lock(this);
  AddSubmittedRefsLocked(argument_ids);
}

void ReferenceCounter::AddSubmittedRefsLocked(const std::vector<ObjectID>& argument_ids) const {
  for (const ObjectID& id : argument_ids) {
    auto it = objects_.find(id);
    if (it == objects_.end()) {
      LOG(WARNING) << "Submitted task references unknown object " << id.Hex() << "; ignored";
      continue;
    }
    it->second.submitted_task_ref_count++;
    it->second.out_of_scope = false;  // back in scope (a task kept for lineage runs again)
  }
}

void ReferenceCounter::UpdateFinishedTaskReferences(
    const std::vector<ObjectID>& argument_ids, const std::vector<BorrowedRef>& borrowed_refs) {
  if (argument_ids.empty() && borrowed_refs.empty()) return;
  Deferred deferred;
  {
    TableLock lock(this);
    // Record the borrowers first so no argument goes out of scope in between.
    for (const BorrowedRef& ref : borrowed_refs) {
      auto it = objects_.find(ref.object_id);
      if (it == objects_.end()) {
        LOG(WARNING) << "Worker " << ref.borrower.ToString() << " reports borrowing unknown "
                     << ref.object_id.Hex() << "; ignored";
        continue;
      }
      AddBorrowerLocked(ref.object_id, it->second, ref.borrower, deferred);
    }
    for (const ObjectID& id : argument_ids) {
      auto it = objects_.find(id);
      if (it == objects_.end() || it->second.submitted_task_ref_count == 0) {
        LOG(WARNING) << "Finished task releases " << id.Hex()
                     << ", which has no submitted-task ref; ignored";
        continue;
      }
      it->second.submitted_task_ref_count--;
      ReleaseIfUnusedLocked(id, deferred);
    }
  }
  Run(deferred);
}

void ReferenceCounter::AddNestedObjectIds(const ObjectID& outer,
                                          const std::vector<ObjectID>& inner_ids,
                                          const Address& owner_address) {
  Deferred deferred;
  {
    TableLock lock(this);
    auto outer_it = objects_.find(outer);
    const bool outer_ours = owner_address == self_ ||
                            (outer_it != objects_.end() && outer_it->second.owned_by_us);
    for (const ObjectID& inner : inner_ids) {
      auto inner_it = objects_.find(inner);
      if (inner_it == objects_.end() || inner == outer) {
        LOG(WARNING) << "AddNestedObjectIds: inner ref " << inner.Hex() << " of "
                     << outer.Hex() << " is not held; skipped";
        continue;
      }
      if (outer_ours) {
        if (outer_it == objects_.end()) {
          LOG(WARNING) << "AddNestedObjectIds: our object " << outer.Hex() << " is unknown";
          return;
        }
        outer_it->second.MutableDetails().contains.insert(inner);
        inner_it->second.MutableDetails().contained_in.insert(outer);
      } else if (inner_it->second.owned_by_us) {
        // The outer object's owner will deserialize our ref: it borrows it.
        AddBorrowerLocked(inner, inner_it->second, owner_address, deferred, outer);
      } else {
        VLOG(1) << "AddNestedObjectIds: borrowed " << inner.Hex() << " nested in foreign "
                << outer.Hex() << " is not tracked";
      }
    }
  }
  Run(deferred);
}

void ReferenceCounter::AddLineageReference(const ObjectID& id) {
  TableLock lock(this);
  auto it = objects_.find(id);
  if (it == objects_.end()) {
    LOG(WARNING) << "AddLineageReference: unknown object " << id.Hex() << "; ignored";
    return;
  }
  it->second.lineage_ref_count++;
}

void ReferenceCounter::RemoveLineageReference(const ObjectID& id) {
  Deferred deferred;
  {
    TableLock lock(this);
    auto it = objects_.find(id);
    if (it == objects_.end() || it->second.lineage_ref_count == 0) {
      LOG(WARNING) << "RemoveLineageReference: " << id.Hex() << " has no lineage ref; ignored";
      return;
    }
    it->second.lineage_ref_count--;
    ReleaseIfUnusedLocked(id, deferred);
  }
  Run(deferred);
}

void ReferenceCounter::AddBorrowerLocked(const ObjectID& id, Entry& entry, const Address& borrower,
                                         Deferred& deferred, std::optional<ObjectID> contained_in) {
  if (borrower == self_) return;  // We are not our own borrower.
  if (!entry.MutableDetails().borrowers.insert(borrower).second) return;
  VLOG(1) << "Object " << id.Hex() << " borrowed by " << borrower.ToString();
  // Borrowers of objects we only borrow are handed to our owner when it asks.
  if (!entry.owned_by_us) return;
  deferred.actions.push_back([this, id, borrower, contained_in] {
    borrower_client_->WaitForRefRemoved(
        borrower, id, self_, contained_in,
        [this, id, borrower](absl::Status status, std::vector<BorrowedRef> new_borrowers) {
          OnBorrowerReply(id, borrower, status, std::move(new_borrowers));
        });
  });
}

void ReferenceCounter::OnBorrowerReply(const ObjectID& id, const Address& borrower,
                                       const absl::Status& status,
                                       std::vector<BorrowedRef> new_borrowers) {
  Deferred deferred;
  {
    TableLock lock(this);
    if (!status.ok()) {
      LOG(WARNING) << "Borrower " << borrower.ToString() << " of " << id.Hex()
                   << " is gone (" << status << "); releasing its borrow";
    } else {
      // Merge sub-borrowers before dropping `borrower`, in the same critical section.
      for (const BorrowedRef& ref : new_borrowers) {
        auto it = objects_.find(ref.object_id);
        if (it == objects_.end() || !it->second.owned_by_us) {
          LOG(WARNING) << "Sub-borrower " << ref.borrower.ToString() << " reported for "
                       << ref.object_id.Hex() << ", which we do not own; ignored";
          continue;
        }
        AddBorrowerLocked(ref.object_id, it->second, ref.borrower, deferred);
      }
    }
    auto it = objects_.find(id);
    if (it == objects_.end() || !it->second.details || it->second.details->borrowers.erase(borrower) == 0) {
      LOG(WARNING) << "WaitForRefRemoved reply from " << borrower.ToString() << " for "
                   << id.Hex() << ", which it was not recorded as borrowing";
    } else {
      ReleaseIfUnusedLocked(id, deferred);
    }
  }
  Run(deferred);
}

void ReferenceCounter::HandleWaitForRefRemoved(const ObjectID& id, WaitReply reply,
                                               std::optional<ObjectID> contained_in,
                                               std::optional<Address> owner) {
  Deferred deferred;
  {
    TableLock lock(this);
    auto it = objects_.find(id);
    if (it == objects_.end() && contained_in.has_value() && owner.has_value()) {
      // The ref travels inside an object we hold but have not read yet (a task's
      // return value racing its WaitForRefRemoved): record the borrow now.
      auto outer_it = objects_.find(*contained_in);
      if (outer_it != objects_.end() && *contained_in != id) {
        outer_it->second.MutableDetails().contains.insert(id);
        it = objects_.try_emplace(id).first;
        Details& details = it->second.MutableDetails();
        if (*owner != self_) details.owner = *owner;
        details.contained_in.insert(*contained_in);
      }
    }
    if (answer_waits_at_once_) {
      // Shutting down: this process will hold nothing in a moment.
    } else if (it == objects_.end()) {
      // Either we already dropped it, or the borrow is not recorded yet (out-of-order
      // delivery); in both cases we hold nothing now.
      VLOG(1) << "WaitForRefRemoved for " << id.Hex() << ", not held: replying now";
    } else if (it->second.owned_by_us) {
      LOG(WARNING) << "WaitForRefRemoved for our own object " << id.Hex() << "; replying now";
    } else {
      it->second.MutableDetails().wait_replies.push_back(std::move(reply));
      ReleaseIfUnusedLocked(id, deferred);
      reply = nullptr;
    }
  }
  Run(deferred);
  if (reply) reply({});
}

void ReferenceCounter::AnswerWaitersAtShutdown() {
  std::vector<WaitReply> replies;
  {
    TableLock lock(this);
    answer_waits_at_once_ = true;
    for (auto& [id, entry] : objects_) {
      if (!entry.details) continue;
      for (WaitReply& reply : entry.details->wait_replies) replies.push_back(std::move(reply));
      entry.details->wait_replies.clear();
    }
  }
  for (WaitReply& reply : replies) reply({});
}

void ReferenceCounter::HandleOwnerDied(const Address& owner) {
  TableLock lock(this);
  size_t marked = 0;
  for (auto& [id, entry] : objects_) {
    if (!entry.owned_by_us && OwnerOf(entry).worker_id == owner.worker_id) {
      entry.owner_dead = true;
      marked++;
    }
  }
  LOG(INFO) << "Owner " << owner.ToString() << " died; " << marked << " borrowed objects affected";
}

void ReferenceCounter::ReleaseIfUnusedLocked(const ObjectID& start, Deferred& deferred) {
  // A worklist rather than recursion: nested refs may form long chains.
  std::vector<ObjectID> work{start};
  while (!work.empty()) {
    ObjectID id = work.back();
    work.pop_back();
    auto it = objects_.find(id);
    if (it == objects_.end()) continue;
    Entry& entry = it->second;
    if (!HeldLocally(entry) && entry.details && !entry.details->wait_replies.empty()) {
      // Our owner asked: hand our sub-borrowers over and forget them.
      Details& details = *entry.details;
      std::vector<BorrowedRef> subs;
      for (const Address& b : details.borrowers) subs.push_back({id, b});
      details.borrowers.clear();
      for (size_t i = 0; i < details.wait_replies.size(); ++i) {
        // Only the first reply carries the sub-borrowers; they must be merged once.
        std::vector<BorrowedRef> payload = i == 0 ? subs : std::vector<BorrowedRef>{};
        deferred.actions.push_back(
            [r = std::move(details.wait_replies[i]), p = std::move(payload)]() mutable {
              r(std::move(p));
            });
      }
      details.wait_replies.clear();
    }
    if (InScope(entry)) continue;
    // Out of scope: the value goes away, so the refs it contains are released.
    if (entry.details) {
      for (const ObjectID& inner : entry.details->contains) {
        auto inner_it = objects_.find(inner);
        if (inner_it == objects_.end()) continue;
        if (inner_it->second.details) inner_it->second.details->contained_in.erase(id);
        work.push_back(inner);
      }
      entry.details->contains.clear();
    }
    if (entry.lineage_ref_count > 0) {
      if (!entry.out_of_scope) {
        entry.out_of_scope = true;
        VLOG(1) << "Object " << id.Hex() << " out of scope; kept for lineage";
        deferred.out_of_scope.push_back(id);
      }
      continue;
    }
    objects_.erase(it);
    VLOG(1) << "Object " << id.Hex() << " freed";
    deferred.freed.push_back(id);
  }
  ShrinkIfMostlyEmpty(objects_);
}

bool ReferenceCounter::UpdateObjectReady(const ObjectID& id, int64_t size_bytes) {
  TableLock lock(this);
  auto it = objects_.find(id);
  if (it == objects_.end()) return false;
  it->second.state = State::kReady;
  it->second.size_bytes = size_bytes;
  return true;
}

bool ReferenceCounter::UpdateObjectFailed(const ObjectID& id) {
  TableLock lock(this);
  auto it = objects_.find(id);
  if (it == objects_.end()) return false;
  it->second.state = State::kFailed;
  return true;
}

bool ReferenceCounter::AddObjectLocation(const ObjectID& id, const NodeID& node_id) {
  TableLock lock(this);
  auto it = objects_.find(id);
  if (it == objects_.end()) return false;
  it->second.MutableDetails().locations.insert(node_id);
  return true;
}

bool ReferenceCounter::RemoveObjectLocation(const ObjectID& id, const NodeID& node_id) {
  TableLock lock(this);
  auto it = objects_.find(id);
  if (it == objects_.end()) return false;
  return it->second.details && it->second.details->locations.erase(node_id) > 0;
}

bool ReferenceCounter::UpdatePinnedAt(const ObjectID& id, const NodeID& node_id) {
  TableLock lock(this);
  auto it = objects_.find(id);
  if (it == objects_.end()) return false;
  it->second.MutableDetails().pinned_at = node_id;
  return true;
}

bool ReferenceCounter::UpdateSpilledUrl(const ObjectID& id, const std::string& url) {
  TableLock lock(this);
  auto it = objects_.find(id);
  if (it == objects_.end()) return false;
  it->second.MutableDetails().spilled_url = url;
  return true;
}

bool ReferenceCounter::HasReference(const ObjectID& id) const {
  TableLock lock(this);
  return FindLocked(id) != nullptr;
}

size_t ReferenceCounter::NumObjects() const {
  TableLock lock(this);
  return objects_.size();
}

std::vector<ReferenceCounter::OwnedObject> ReferenceCounter::OwnedObjects() const {
  std::vector<OwnedObject> out;
  TableLock lock(this);
  for (const auto& [id, e] : objects_) {
    if (!e.owned_by_us || e.out_of_scope) continue;
    const Details& d = DetailsOf(e);
    OwnedObject& o = out.emplace_back();
    o.id = id;
    o.state = e.state;
    o.size_bytes = e.size_bytes;
    o.local_refs = e.local_ref_count;
    o.submitted_task_refs = e.submitted_task_ref_count;
    o.captured = !d.contained_in.empty();
    o.borrowers.assign(d.borrowers.begin(), d.borrowers.end());
    o.locations.assign(d.locations.begin(), d.locations.end());
    o.pinned_at = d.pinned_at;
    o.spilled_url = d.spilled_url;
  }
  return out;
}

bool ReferenceCounter::IsOwnedByUs(const ObjectID& id) const {
  TableLock lock(this);
  const Entry* e = FindLocked(id);
  return e != nullptr && e->owned_by_us;
}

absl::StatusOr<Address> ReferenceCounter::GetOwner(const ObjectID& id) const {
  TableLock lock(this);
  const Entry* e = FindLocked(id);
  if (e == nullptr) return absl::NotFoundError("object " + id.Hex() + " is not referenced");
  return OwnerOf(*e);
}

absl::Status ReferenceCounter::GetOwnerStatus(const ObjectID& id) const {
  TableLock lock(this);
  const Entry* e = FindLocked(id);
  if (e == nullptr) return absl::NotFoundError("object " + id.Hex() + " is not referenced");
  if (e->owner_dead) {
    return absl::UnavailableError("owner died: owner " + OwnerOf(*e).ToString() + " of object " +
                                  id.Hex() + " is dead");
  }
  return absl::OkStatus();
}

std::optional<ReferenceCounter::State> ReferenceCounter::GetState(const ObjectID& id) const {
  TableLock lock(this);
  const Entry* e = FindLocked(id);
  if (e == nullptr) return std::nullopt;
  return e->state;
}

std::vector<NodeID> ReferenceCounter::GetLocations(const ObjectID& id) const {
  TableLock lock(this);
  const Entry* e = FindLocked(id);
  if (e == nullptr) return {};
  const Details& details = DetailsOf(*e);
  return std::vector<NodeID>(details.locations.begin(), details.locations.end());
}

std::optional<NodeID> ReferenceCounter::GetPinnedAt(const ObjectID& id) const {
  TableLock lock(this);
  const Entry* e = FindLocked(id);
  return e == nullptr ? std::nullopt : DetailsOf(*e).pinned_at;
}

std::string ReferenceCounter::GetSpilledUrl(const ObjectID& id) const {
  TableLock lock(this);
  const Entry* e = FindLocked(id);
  return e == nullptr ? std::string() : DetailsOf(*e).spilled_url;
}

int64_t ReferenceCounter::GetSizeBytes(const ObjectID& id) const {
  TableLock lock(this);
  const Entry* e = FindLocked(id);
  return e == nullptr ? -1 : e->size_bytes;
}

int64_t ReferenceCounter::LocalRefCount(const ObjectID& id) const {
  TableLock lock(this);
  const Entry* e = FindLocked(id);
  return e == nullptr ? 0 : e->local_ref_count;
}

int64_t ReferenceCounter::SubmittedTaskRefCount(const ObjectID& id) const {
  TableLock lock(this);
  const Entry* e = FindLocked(id);
  return e == nullptr ? 0 : e->submitted_task_ref_count;
}

int64_t ReferenceCounter::LineageRefCount(const ObjectID& id) const {
  TableLock lock(this);
  const Entry* e = FindLocked(id);
  return e == nullptr ? 0 : e->lineage_ref_count;
}

size_t ReferenceCounter::NumBorrowers(const ObjectID& id) const {
  TableLock lock(this);
  const Entry* e = FindLocked(id);
  return e == nullptr ? 0 : DetailsOf(*e).borrowers.size();
}

size_t ReferenceCounter::NumContainedIn(const ObjectID& id) const {
  TableLock lock(this);
  const Entry* e = FindLocked(id);
  return e == nullptr ? 0 : DetailsOf(*e).contained_in.size();
}

size_t ReferenceCounter::TableCapacity() const {
  TableLock lock(this);
  return objects_.capacity();
}

}  // namespace manta::core
