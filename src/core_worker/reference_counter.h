// ReferenceCounter: the core worker's ownership table (ARCHITECTURE.md §4).
//
// Every driver and worker process has one. For each ObjectID this process knows
// about it records who owns the object and what keeps it alive here:
//   - local refs:          live ObjectRef copies in this process;
//   - submitted-task refs: pending tasks we submitted that take it as an argument;
//   - borrowers:           other workers that still hold the ref (see below);
//   - contained-in:        live objects whose serialized value contains this ref;
//   - lineage refs:        task specs that may need this object for reconstruction.
// Plus bookkeeping the owner needs later: locations, pinned primary copy, spilled
// URL, size and state (pending / ready / failed).
//
// Lifetime. An entry goes *out of scope* when local, submitted, borrowers and
// contained-in are all zero/empty. At that moment the refs its value contains are
// released (which may cascade). If lineage refs remain, `on_object_out_of_scope`
// runs once and the entry is kept (only for lineage); when the lineage count then
// drops to zero the entry is erased. Whenever an entry is erased `on_object_freed`
// runs exactly once for it. The callbacks run for borrowed entries too (a borrower
// drops its cached value); owners also unpin the primary copy and delete spill files.
// An entry kept for lineage comes back in scope when a local or submitted-task ref
// is added (a task kept for lineage runs again and needs it); when it leaves scope
// again, `on_object_out_of_scope` runs again.
//
// Borrowing (owner side). When a borrower is recorded for an object we own (a
// finished task's report, a nested return, or a sub-borrower), we call
// `BorrowerClientInterface::WaitForRefRemoved`; when that replies the borrower is
// removed and any sub-borrowers in the reply are added (and waited on) in the same
// critical section, so the object cannot be freed in between. A failed reply means
// the borrower died: it is removed too.
//
// Borrowing (borrower side). Borrowers recorded for an object we merely borrow are
// not waited on; they are handed to the owner in our `HandleWaitForRefRemoved`
// reply, which is sent once our own counts (local, submitted, contained-in) are zero.
//
// Threading. ObjectRef copies are made and destroyed on user threads, so every
// public method is thread-safe: state is guarded by one absl::Mutex, except the task
// returns AddOwnedTaskReturn adds, which wait in a small inbox (its own mutex) until
// the next holder of the table mutex takes them in (TableLock). All callbacks
// (`on_object_freed`, `on_object_out_of_scope`, calls into the borrower client and
// HandleWaitForRefRemoved replies) run on the calling thread *after* the mutex is
// released, so they may call back into the counter. The borrower client's `done`
// callback may run on any thread.
//
// Ownership. The counter does not own the borrower client. REQUIRES: the client
// and this counter outlive every outstanding WaitForRefRemoved callback.
//
// Known limitations (left for the task path): a borrower that re-borrows an object
// while its WaitForRefRemoved reply is in flight is not re-counted; refs nested in an
// object we borrow and return to a third party are not reported to their owner.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "src/common/id.h"
#include "src/core_worker/table_inbox.h"

namespace manta::core {

// The RPC address of a worker (ARCHITECTURE.md §3): identifies an owner or borrower.
struct Address {
  NodeID node_id;
  std::string ip;
  int port = 0;
  WorkerID worker_id;

  std::string ToString() const;
  friend bool operator==(const Address& a, const Address& b) {
    return a.node_id == b.node_id && a.ip == b.ip && a.port == b.port &&
           a.worker_id == b.worker_id;
  }
  friend bool operator!=(const Address& a, const Address& b) { return !(a == b); }
  template <typename H>
  friend H AbslHashValue(H h, const Address& a) {
    return H::combine(std::move(h), a.node_id, a.ip, a.port, a.worker_id);
  }
};

// "`borrower` holds a ref to `object_id`". Used in finished-task reports and in
// WaitForRefRemoved replies (sub-borrowers).
struct BorrowedRef {
  ObjectID object_id;
  Address borrower;
};

// The owner's channel to its borrowers. Real: a gRPC client; tests: a fake.
class BorrowerClientInterface {
 public:
  virtual ~BorrowerClientInterface() = default;
  // Asks `borrower` to reply once it no longer holds `id` (owned by `owner`). On
  // success `new_borrowers` lists the sub-borrowers the borrower created and hands
  // over to the owner. A non-OK status means the borrower is unreachable (dead).
  // `done` is called exactly once, on any thread.
  // `contained_in`, when set, is the object (owned by the borrower) whose value
  // carries the ref: a borrower that has not yet seen the ref records it as
  // contained in that object instead of replying at once.
  virtual void WaitForRefRemoved(
      const Address& borrower, const ObjectID& id, const Address& owner, std::optional<ObjectID> contained_in,
      std::function<void(absl::Status, std::vector<BorrowedRef> new_borrowers)> done) = 0;
};

class ReferenceCounter {
 public:
  enum class State : uint8_t { kPending, kReady, kFailed };
  using ObjectCallback = std::function<void(const ObjectID&)>;
  using WaitReply = std::function<void(std::vector<BorrowedRef> sub_borrowers)>;

  // `self` is this process's address; `borrower_client` must not be null.
  ReferenceCounter(Address self, BorrowerClientInterface* borrower_client);
  ReferenceCounter(const ReferenceCounter&) = delete;
  ReferenceCounter& operator=(const ReferenceCounter&) = delete;

  // Callbacks run outside the mutex, on the thread whose call released the object.
  // Set them before the counter is shared between threads.
  void SetOnObjectFreed(ObjectCallback cb);
  void SetOnObjectOutOfScope(ObjectCallback cb);

  // --- Creating entries -----------------------------------------------------

  // Records an object this process owns (task return or Put). `contained_ids` are
  // refs serialized inside its value: each is kept alive while this object is in
  // scope (unknown ids are logged and skipped). Adds no local ref: the caller adds
  // one for the ObjectRef it hands out. A second call for an existing id is logged
  // and ignored; returns false in that case.
  bool AddOwnedObject(const ObjectID& id, const Address& owner_address,
                      const std::vector<ObjectID>& contained_ids,
                      std::optional<int64_t> size_bytes = std::nullopt,
                      bool pending = true);

  // Records a ref we deserialized but do not own. If `outer_id` is given and known,
  // the ref was found inside that object and is kept alive while it is. Calling it
  // for an id already present only adds the outer link. Ids we own are ignored.
  void AddBorrowedObject(const ObjectID& id, const Address& owner_address,
                         std::optional<ObjectID> outer_id = std::nullopt);

  // The return of a task we submit: an owned pending object holding one local ref
  // (for the ObjectRef handed out), and a submitted ref on each of the task's
  // `argument_ids`. AddOwnedObject, AddLocalReference and
  // UpdateSubmittedTaskReferences in one lock: the submitting thread's one call per
  // task here.
  void AddOwnedTaskReturn(const ObjectID& return_id, const std::vector<ObjectID>& argument_ids);

  // --- Counts ---------------------------------------------------------------

  // Unknown ids are logged and ignored (no entry is created).
  void AddLocalReference(const ObjectID& id);
  // Removing a ref that is not held is logged and ignored.
  void RemoveLocalReference(const ObjectID& id);

  // A task taking `argument_ids` was submitted: each known id gets a submitted ref.
  void UpdateSubmittedTaskReferences(const std::vector<ObjectID>& argument_ids);
  // That task finished (or failed for good). Releases the submitted refs, after first
  // recording `borrowed_refs`, the refs the executing worker reports it still holds,
  // so the arguments never go out of scope in between. For objects we own, each
  // borrower is waited on via the borrower client; for objects we borrow, they are
  // passed on to our owner in our HandleWaitForRefRemoved reply.
  void UpdateFinishedTaskReferences(const std::vector<ObjectID>& argument_ids,
                                    const std::vector<BorrowedRef>& borrowed_refs);

  // The refs `inner_ids` were serialized inside `outer`, owned by `owner_address`.
  // If we own `outer`: each inner stays alive while `outer` is in scope. Otherwise
  // (e.g. a task return owned by our caller): for each inner we own, the outer's
  // owner becomes a borrower of it. Other cases are logged and ignored.
  void AddNestedObjectIds(const ObjectID& outer, const std::vector<ObjectID>& inner_ids,
                          const Address& owner_address);

  void AddLineageReference(const ObjectID& id);
  void RemoveLineageReference(const ObjectID& id);

  // --- Borrower side --------------------------------------------------------

  // The owner asks to be told when we stop holding `id`. `reply` runs (outside the
  // mutex) once local, submitted and contained-in counts for `id` are zero —
  // immediately if they already are or if `id` is unknown here — with the
  // sub-borrowers we recorded, which are then forgotten here.
  // If `id` is unknown here but `contained_in` is an object we hold, the borrow is
  // recorded first (the ref is inside that object's value, which we have not read
  // yet) and the reply waits until that object is gone too.
  void HandleWaitForRefRemoved(const ObjectID& id, WaitReply reply, std::optional<ObjectID> contained_in = std::nullopt,
                               std::optional<Address> owner = std::nullopt);

  // This process is going away: every pending HandleWaitForRefRemoved reply is sent
  // now (a process that exits holds nothing), so no owner waits on us for ever, and
  // later ones are answered at once (a held call would keep the RPC server from
  // stopping).
  void AnswerWaitersAtShutdown();

  // The owner `owner` died: GetOwnerStatus of its objects returns Unavailable.
  // Matched by worker id.
  void HandleOwnerDied(const Address& owner);

  // --- Object metadata (no effect on lifetime; unknown ids return false) -----
  bool UpdateObjectReady(const ObjectID& id, int64_t size_bytes);
  // Starts fetching the entries of `ids` into the cache (a batch about to be updated).
  void Prefetch(const std::vector<ObjectID>& ids) const;
  bool UpdateObjectFailed(const ObjectID& id);
  bool AddObjectLocation(const ObjectID& id, const NodeID& node_id);
  bool RemoveObjectLocation(const ObjectID& id, const NodeID& node_id);
  bool UpdatePinnedAt(const ObjectID& id, const NodeID& node_id);
  bool UpdateSpilledUrl(const ObjectID& id, const std::string& url);

  // --- Queries --------------------------------------------------------------
  // This process's address (fixed at construction).
  const Address& self() const { return self_; }
  bool HasReference(const ObjectID& id) const;
  size_t NumObjects() const;
  bool IsOwnedByUs(const ObjectID& id) const;
  // NotFound if unknown.
  absl::StatusOr<Address> GetOwner(const ObjectID& id) const;
  // OK if we own it or its owner is believed alive; Unavailable("owner died") after
  // HandleOwnerDied; NotFound if unknown.
  absl::Status GetOwnerStatus(const ObjectID& id) const;
  std::optional<State> GetState(const ObjectID& id) const;
  std::vector<NodeID> GetLocations(const ObjectID& id) const;
  std::optional<NodeID> GetPinnedAt(const ObjectID& id) const;
  std::string GetSpilledUrl(const ObjectID& id) const;
  int64_t GetSizeBytes(const ObjectID& id) const;  // -1 if unknown size or id.

  // Counts for tests and debugging; 0 for unknown ids.
  int64_t LocalRefCount(const ObjectID& id) const;
  int64_t SubmittedTaskRefCount(const ObjectID& id) const;
  int64_t LineageRefCount(const ObjectID& id) const;
  size_t NumBorrowers(const ObjectID& id) const;
  size_t NumContainedIn(const ObjectID& id) const;
  // Slots allocated in the table (it shrinks once mostly empty: table_shrink.h).
  size_t TableCapacity() const;

  // An object this process owns, as `manta list objects` shows it.
  struct OwnedObject {
    ObjectID id;
    State state = State::kPending;
    int64_t size_bytes = -1;
    int32_t local_refs = 0;
    int32_t submitted_task_refs = 0;
    bool captured = false;  // inside another object
    std::vector<Address> borrowers;
    std::vector<NodeID> locations;
    std::optional<NodeID> pinned_at;
    std::string spilled_url;
  };
  // Every object we own that is in scope (those kept only as lineage hold no value).
  std::vector<OwnedObject> OwnedObjects() const;

 private:
  // What only some objects need: a borrowed object's owner, borrowers, nested refs,
  // copies in plasma, a spill URL, pending WaitForRefRemoved replies. Kept out of
  // Entry so that the entry of a plain task return is a few words: a million tasks
  // in flight are a million entries.
  struct Details {
    // Set only when the owner is another process (objects we own are owned by self_).
    std::optional<Address> owner;
    absl::flat_hash_set<Address> borrowers;
    absl::flat_hash_set<ObjectID> contained_in;
    absl::flat_hash_set<ObjectID> contains;
    absl::flat_hash_set<NodeID> locations;
    std::optional<NodeID> pinned_at;
    std::string spilled_url;
    // Borrower side: pending HandleWaitForRefRemoved replies.
    std::vector<WaitReply> wait_replies;
  };
  struct Entry {
    // 32 bits each: a count of 2^31 references would take ~100 GB of refs holding it.
    int32_t local_ref_count = 0;
    int32_t submitted_task_ref_count = 0;
    int32_t lineage_ref_count = 0;
    State state = State::kPending;
    bool owned_by_us = false;
    bool owner_dead = false;
    // Set once the entry went out of scope and only lineage keeps it.
    bool out_of_scope = false;
    int64_t size_bytes = -1;
    std::unique_ptr<Details> details;  // null until something above is needed

    Details& MutableDetails() {
      if (!details) details = std::make_unique<Details>();
      return *details;
    }
  };
  // The details of `e`, or an empty set of them.
  static const Details& DetailsOf(const Entry& e);

  // Work collected under the mutex and run after it is released.
  struct Deferred {
    std::vector<std::function<void()>> actions;
    // Due on_object_out_of_scope / on_object_freed calls, made after the actions
    // (kept apart: one object freed is the common case, and costs no allocation).
    absl::InlinedVector<ObjectID, 1> out_of_scope;
    absl::InlinedVector<ObjectID, 1> freed;
  };
  void Run(Deferred& deferred) const;

  // Records `borrower` for `id`; if we own it, arranges a WaitForRefRemoved.
  void AddBorrowerLocked(const ObjectID& id, Entry& entry, const Address& borrower, Deferred& deferred,
                         std::optional<ObjectID> contained_in = std::nullopt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The reply to our WaitForRefRemoved(borrower, id).
  void OnBorrowerReply(const ObjectID& id, const Address& borrower,
                       const absl::Status& status, std::vector<BorrowedRef> new_borrowers);
  // Re-evaluates `id` after a count dropped: answers waiting owners, releases nested
  // refs, fires callbacks and erases the entry as due (cascading to inner objects).
  // May shrink the table: references into objects_ are invalid afterwards.
  void ReleaseIfUnusedLocked(const ObjectID& id, Deferred& deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static bool HeldLocally(const Entry& e) {
    return e.local_ref_count > 0 || e.submitted_task_ref_count > 0 || !DetailsOf(e).contained_in.empty();
  }
  static bool InScope(const Entry& e) { return HeldLocally(e) || !DetailsOf(e).borrowers.empty(); }
  const Entry* FindLocked(const ObjectID& id) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  const Address& OwnerOf(const Entry& e) const {
    return e.details && e.details->owner ? *e.details->owner : self_;
  }

  const Address self_;
  BorrowerClientInterface* const borrower_client_;
  ObjectCallback on_object_freed_;
  ObjectCallback on_object_out_of_scope_;

  // Holds mu_, with the task returns added since it was last held taken into
  // objects_ first.
  using TableLock = InboxTableLock<ReferenceCounter>;
  friend TableLock;
  void TakeInLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A task return added by AddOwnedTaskReturn, not yet in objects_.
  struct AddedReturn {
    ObjectID id;
    std::vector<ObjectID> argument_ids;
  };
  void AddOwnedTaskReturnLocked(const ObjectID& return_id, const std::vector<ObjectID>& argument_ids) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddSubmittedRefsLocked(const std::vector<ObjectID>& argument_ids) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  // Task returns added and not yet in objects_ (table_inbox.h): every section under
  // mu_ takes them in first (TableLock), so they are part of the table for every
  // reader. (Hence objects_ is mutable: a const query may take them in.)
  mutable TableInbox<AddedReturn> inbox_;
  mutable absl::flat_hash_map<ObjectID, Entry, IdHash> objects_ ABSL_GUARDED_BY(mu_);
  // Set by AnswerWaitersAtShutdown.
  bool answer_waits_at_once_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace manta::core
