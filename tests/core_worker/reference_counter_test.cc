// Unit tests for ReferenceCounter (ARCHITECTURE.md §4). The borrower protocol is
// driven through FakeBorrowerClient: it records WaitForRefRemoved calls and the test
// releases the replies. No sockets, no sleeps.
#include "src/core_worker/reference_counter.h"

#include <gtest/gtest.h>

#include <deque>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace manta::core {
namespace {

using DoneCallback = std::function<void(absl::Status, std::vector<BorrowedRef>)>;

class FakeBorrowerClient : public BorrowerClientInterface {
 public:
  struct Request {
    Address borrower;
    ObjectID id;
    Address owner;
    DoneCallback done;
  };

  void WaitForRefRemoved(const Address& borrower, const ObjectID& id, const Address& owner,
                         std::optional<ObjectID> /*contained_in*/, DoneCallback done) override {
    absl::MutexLock lock(&mu_);
    requests_.push_back({borrower, id, owner, std::move(done)});
  }

  size_t NumPending() const {
    absl::MutexLock lock(&mu_);
    return requests_.size();
  }
  // REQUIRES: i < NumPending().
  Request Peek(size_t i = 0) const {
    absl::MutexLock lock(&mu_);
    return requests_.at(i);
  }
  // Replies to the oldest pending request (outside the fake's lock, like a real RPC).
  void ReplyNext(absl::Status status, std::vector<BorrowedRef> sub_borrowers = {}) {
    DoneCallback done;
    {
      absl::MutexLock lock(&mu_);
      ASSERT_FALSE(requests_.empty());
      done = std::move(requests_.front().done);
      requests_.pop_front();
    }
    done(std::move(status), std::move(sub_borrowers));
  }

 private:
  mutable absl::Mutex mu_;
  std::deque<Request> requests_ ABSL_GUARDED_BY(mu_);
};

Address MakeAddress(int port) {
  Address a;
  a.node_id = NodeID::FromRandom();
  a.ip = "127.0.0.1";
  a.port = port;
  a.worker_id = WorkerID::FromRandom();
  return a;
}

class ReferenceCounterTest : public ::testing::Test {
 protected:
  ReferenceCounterTest() : self_(MakeAddress(1000)), rc_(self_, &client_) {
    rc_.SetOnObjectFreed([this](const ObjectID& id) {
      // Runs outside the counter's mutex, after the entry is gone.
      bool still_there = rc_.HasReference(id);
      absl::MutexLock lock(&mu_);
      freed_[id]++;
      if (still_there) freed_while_present_++;
    });
    rc_.SetOnObjectOutOfScope([this](const ObjectID& id) {
      absl::MutexLock lock(&mu_);
      out_of_scope_[id]++;
    });
  }

  // An object we own, with one local ref (the ObjectRef handed to the user).
  ObjectID Owned(const std::vector<ObjectID>& contained = {}) {
    ObjectID id = ObjectID::FromRandom();
    EXPECT_TRUE(rc_.AddOwnedObject(id, self_, contained));
    rc_.AddLocalReference(id);
    return id;
  }
  // A ref we borrow from `owner`, with one local ref.
  ObjectID Borrowed(const Address& owner) {
    ObjectID id = ObjectID::FromRandom();
    rc_.AddBorrowedObject(id, owner);
    rc_.AddLocalReference(id);
    return id;
  }
  int Freed(const ObjectID& id) {
    absl::MutexLock lock(&mu_);
    auto it = freed_.find(id);
    return it == freed_.end() ? 0 : it->second;
  }
  int OutOfScope(const ObjectID& id) {
    absl::MutexLock lock(&mu_);
    auto it = out_of_scope_.find(id);
    return it == out_of_scope_.end() ? 0 : it->second;
  }
  void TearDown() override {
    absl::MutexLock lock(&mu_);
    EXPECT_EQ(freed_while_present_, 0);
  }

  FakeBorrowerClient client_;
  Address self_;
  ReferenceCounter rc_;
  absl::Mutex mu_;
  absl::flat_hash_map<ObjectID, int> freed_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<ObjectID, int> out_of_scope_ ABSL_GUARDED_BY(mu_);
  int freed_while_present_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST_F(ReferenceCounterTest, LocalAddRemoveFreesExactlyOnce) {
  ObjectID id = Owned();
  rc_.AddLocalReference(id);
  EXPECT_EQ(rc_.LocalRefCount(id), 2);
  EXPECT_TRUE(rc_.IsOwnedByUs(id));
  rc_.RemoveLocalReference(id);
  EXPECT_TRUE(rc_.HasReference(id));
  EXPECT_EQ(Freed(id), 0);
  rc_.RemoveLocalReference(id);
  EXPECT_FALSE(rc_.HasReference(id));
  EXPECT_EQ(Freed(id), 1);
  rc_.RemoveLocalReference(id);  // One too many: ignored.
  EXPECT_EQ(Freed(id), 1);
  EXPECT_EQ(rc_.NumObjects(), 0u);
  EXPECT_EQ(OutOfScope(id), 0);  // No lineage: straight to freed.
}

TEST_F(ReferenceCounterTest, UnknownIdsAreIgnored) {
  ObjectID unknown = ObjectID::FromRandom();
  rc_.RemoveLocalReference(unknown);
  rc_.AddLocalReference(unknown);  // Does not create an entry.
  rc_.UpdateSubmittedTaskReferences({unknown});
  rc_.UpdateFinishedTaskReferences({unknown}, {{unknown, MakeAddress(2)}});
  rc_.RemoveLineageReference(unknown);
  rc_.AddNestedObjectIds(unknown, {unknown}, self_);
  EXPECT_EQ(rc_.NumObjects(), 0u);
  EXPECT_EQ(client_.NumPending(), 0u);
  EXPECT_EQ(rc_.GetOwner(unknown).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(rc_.GetOwnerStatus(unknown).code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(rc_.UpdateObjectReady(unknown, 1));
  EXPECT_EQ(Freed(unknown), 0);
}

TEST_F(ReferenceCounterTest, AddOwnedObjectTwiceIsRejected) {
  ObjectID id = Owned();
  EXPECT_FALSE(rc_.AddOwnedObject(id, self_, {}));
  EXPECT_EQ(rc_.LocalRefCount(id), 1);
  rc_.RemoveLocalReference(id);
  EXPECT_EQ(rc_.NumObjects(), 0u);
}

TEST_F(ReferenceCounterTest, SubmittedTaskRefsKeepObjectAliveUntilTaskFinishes) {
  ObjectID id = Owned();
  rc_.UpdateSubmittedTaskReferences({id, id});  // Passed twice to the same task.
  EXPECT_EQ(rc_.SubmittedTaskRefCount(id), 2);
  rc_.RemoveLocalReference(id);
  EXPECT_TRUE(rc_.HasReference(id));
  rc_.UpdateFinishedTaskReferences({id}, {});
  EXPECT_TRUE(rc_.HasReference(id));
  rc_.UpdateFinishedTaskReferences({id}, {});
  EXPECT_FALSE(rc_.HasReference(id));
  EXPECT_EQ(Freed(id), 1);
  rc_.UpdateFinishedTaskReferences({id}, {});  // Duplicate finish: ignored.
  EXPECT_EQ(Freed(id), 1);
}

TEST_F(ReferenceCounterTest, ATaskReturnIsOwnedPendingWithOneLocalRefAndItsArgumentsAreHeld) {
  ObjectID arg = Owned();
  ObjectID ret = ObjectID::FromRandom();
  rc_.AddOwnedTaskReturn(ret, {arg, arg});
  EXPECT_TRUE(rc_.IsOwnedByUs(ret));
  EXPECT_EQ(rc_.LocalRefCount(ret), 1);
  EXPECT_EQ(rc_.GetState(ret), ReferenceCounter::State::kPending);
  EXPECT_EQ(rc_.SubmittedTaskRefCount(arg), 2);
  rc_.RemoveLocalReference(arg);
  EXPECT_TRUE(rc_.HasReference(arg));  // the task still holds it
  rc_.UpdateFinishedTaskReferences({arg, arg}, {});
  EXPECT_EQ(Freed(arg), 1);
  rc_.AddOwnedTaskReturn(ret, {});  // the same id again: ignored
  EXPECT_EQ(rc_.LocalRefCount(ret), 1);
  rc_.RemoveLocalReference(ret);
  EXPECT_EQ(Freed(ret), 1);
  EXPECT_EQ(rc_.NumObjects(), 0u);
}

TEST_F(ReferenceCounterTest, ReportedBorrowKeepsObjectUntilWaitForRefRemovedReplies) {
  Address worker = MakeAddress(2001);
  ObjectID id = Owned();
  rc_.UpdateSubmittedTaskReferences({id});
  rc_.UpdateFinishedTaskReferences({id}, {{id, worker}});
  EXPECT_EQ(rc_.NumBorrowers(id), 1u);
  ASSERT_EQ(client_.NumPending(), 1u);
  FakeBorrowerClient::Request req = client_.Peek();
  EXPECT_EQ(req.borrower, worker);
  EXPECT_EQ(req.id, id);
  EXPECT_EQ(req.owner, self_);

  rc_.RemoveLocalReference(id);
  EXPECT_TRUE(rc_.HasReference(id));
  EXPECT_EQ(Freed(id), 0);

  client_.ReplyNext(absl::OkStatus());
  EXPECT_FALSE(rc_.HasReference(id));
  EXPECT_EQ(Freed(id), 1);
  EXPECT_EQ(rc_.NumObjects(), 0u);
}

TEST_F(ReferenceCounterTest, SameBorrowerReportedTwiceIsWaitedOnOnce) {
  Address worker = MakeAddress(2001);
  ObjectID id = Owned();
  rc_.UpdateSubmittedTaskReferences({id});
  rc_.UpdateSubmittedTaskReferences({id});
  rc_.UpdateFinishedTaskReferences({id}, {{id, worker}});
  rc_.UpdateFinishedTaskReferences({id}, {{id, worker}});
  EXPECT_EQ(client_.NumPending(), 1u);
  rc_.RemoveLocalReference(id);
  client_.ReplyNext(absl::OkStatus());
  EXPECT_EQ(rc_.NumObjects(), 0u);
}

TEST_F(ReferenceCounterTest, SubBorrowersInReplyAreWaitedOnToo) {
  Address worker = MakeAddress(2001);
  Address sub1 = MakeAddress(2002);
  Address sub2 = MakeAddress(2003);
  ObjectID id = Owned();
  rc_.UpdateSubmittedTaskReferences({id});
  rc_.UpdateFinishedTaskReferences({id}, {{id, worker}});
  rc_.RemoveLocalReference(id);

  client_.ReplyNext(absl::OkStatus(), {{id, sub1}, {id, sub2}});
  EXPECT_TRUE(rc_.HasReference(id));
  EXPECT_EQ(rc_.NumBorrowers(id), 2u);
  ASSERT_EQ(client_.NumPending(), 2u);
  EXPECT_EQ(client_.Peek(0).borrower, sub1);
  EXPECT_EQ(client_.Peek(1).borrower, sub2);

  client_.ReplyNext(absl::OkStatus());
  EXPECT_TRUE(rc_.HasReference(id));
  // sub2 itself lent the ref on to sub3.
  Address sub3 = MakeAddress(2004);
  client_.ReplyNext(absl::OkStatus(), {{id, sub3}});
  EXPECT_TRUE(rc_.HasReference(id));
  ASSERT_EQ(client_.NumPending(), 1u);
  EXPECT_EQ(client_.Peek().borrower, sub3);
  client_.ReplyNext(absl::OkStatus());
  EXPECT_FALSE(rc_.HasReference(id));
  EXPECT_EQ(Freed(id), 1);
}

TEST_F(ReferenceCounterTest, BorrowerDeathReleasesBorrow) {
  Address worker = MakeAddress(2001);
  ObjectID id = Owned();
  rc_.UpdateSubmittedTaskReferences({id});
  rc_.UpdateFinishedTaskReferences({id}, {{id, worker}});
  rc_.RemoveLocalReference(id);
  EXPECT_TRUE(rc_.HasReference(id));
  client_.ReplyNext(absl::UnavailableError("borrower died"));
  EXPECT_FALSE(rc_.HasReference(id));
  EXPECT_EQ(Freed(id), 1);
}

TEST_F(ReferenceCounterTest, BorrowerReplyWhileLocalRefHeldKeepsObject) {
  Address worker = MakeAddress(2001);
  ObjectID id = Owned();
  rc_.UpdateSubmittedTaskReferences({id});
  rc_.UpdateFinishedTaskReferences({id}, {{id, worker}});
  client_.ReplyNext(absl::OkStatus());  // Borrower gone; we still hold a local ref.
  EXPECT_EQ(rc_.NumBorrowers(id), 0u);
  EXPECT_TRUE(rc_.HasReference(id));
  rc_.RemoveLocalReference(id);
  EXPECT_EQ(rc_.NumObjects(), 0u);
  EXPECT_EQ(Freed(id), 1);
}

TEST_F(ReferenceCounterTest, NestedRefKeepsInnerAliveUntilOuterIsFreed) {
  ObjectID inner = Owned();
  ObjectID outer = Owned({inner});
  EXPECT_EQ(rc_.NumContainedIn(inner), 1u);
  rc_.RemoveLocalReference(inner);
  EXPECT_TRUE(rc_.HasReference(inner));
  EXPECT_EQ(Freed(inner), 0);
  rc_.RemoveLocalReference(outer);
  EXPECT_FALSE(rc_.HasReference(outer));
  EXPECT_FALSE(rc_.HasReference(inner));
  EXPECT_EQ(Freed(outer), 1);
  EXPECT_EQ(Freed(inner), 1);
}

TEST_F(ReferenceCounterTest, InnerWithOwnRefsSurvivesOuter) {
  ObjectID inner = Owned();
  ObjectID outer = Owned();
  rc_.AddNestedObjectIds(outer, {inner}, self_);
  rc_.RemoveLocalReference(outer);
  EXPECT_FALSE(rc_.HasReference(outer));
  EXPECT_TRUE(rc_.HasReference(inner));
  EXPECT_EQ(rc_.NumContainedIn(inner), 0u);
  rc_.RemoveLocalReference(inner);
  EXPECT_EQ(rc_.NumObjects(), 0u);
}

TEST_F(ReferenceCounterTest, NestedRefsCascade) {
  ObjectID c = Owned();
  ObjectID b = Owned();
  ObjectID a = Owned();
  rc_.AddNestedObjectIds(b, {c}, self_);
  rc_.AddNestedObjectIds(a, {b}, self_);
  rc_.RemoveLocalReference(c);
  rc_.RemoveLocalReference(b);
  EXPECT_EQ(rc_.NumObjects(), 3u);
  rc_.RemoveLocalReference(a);
  EXPECT_EQ(rc_.NumObjects(), 0u);
  EXPECT_EQ(Freed(a), 1);
  EXPECT_EQ(Freed(b), 1);
  EXPECT_EQ(Freed(c), 1);
}

TEST_F(ReferenceCounterTest, LongNestedChainCascadesWithoutRecursion) {
  constexpr int kDepth = 10000;
  std::vector<ObjectID> ids;
  ids.push_back(Owned());
  for (int i = 1; i < kDepth; ++i) {
    ids.push_back(Owned({ids.back()}));
    rc_.RemoveLocalReference(ids[i - 1]);
  }
  EXPECT_EQ(rc_.NumObjects(), static_cast<size_t>(kDepth));
  rc_.RemoveLocalReference(ids.back());
  EXPECT_EQ(rc_.NumObjects(), 0u);
}

TEST_F(ReferenceCounterTest, RefNestedInForeignObjectMakesItsOwnerABorrower) {
  // We return a value containing our ref; the caller (owner of the return) borrows it.
  Address caller = MakeAddress(3000);
  ObjectID inner = Owned();
  ObjectID foreign_outer = ObjectID::FromRandom();
  rc_.AddNestedObjectIds(foreign_outer, {inner}, caller);
  EXPECT_EQ(rc_.NumBorrowers(inner), 1u);
  ASSERT_EQ(client_.NumPending(), 1u);
  EXPECT_EQ(client_.Peek().borrower, caller);
  rc_.RemoveLocalReference(inner);
  EXPECT_TRUE(rc_.HasReference(inner));
  client_.ReplyNext(absl::OkStatus());
  EXPECT_EQ(rc_.NumObjects(), 0u);
}

TEST_F(ReferenceCounterTest, BorrowedRefInsideBorrowedObjectLivesWithIt) {
  Address owner = MakeAddress(4000);
  ObjectID outer = Borrowed(owner);
  ObjectID inner = ObjectID::FromRandom();
  rc_.AddBorrowedObject(inner, owner, outer);
  EXPECT_EQ(rc_.NumContainedIn(inner), 1u);
  EXPECT_FALSE(rc_.IsOwnedByUs(inner));
  rc_.RemoveLocalReference(outer);
  EXPECT_EQ(rc_.NumObjects(), 0u);
  EXPECT_EQ(Freed(inner), 1);
}

TEST_F(ReferenceCounterTest, BorrowerRepliesImmediatelyWhenAlreadyZero) {
  Address owner = MakeAddress(4000);
  ObjectID id = ObjectID::FromRandom();
  rc_.AddBorrowedObject(id, owner);  // Deserialized, but no ObjectRef kept.
  int replies = 0;
  rc_.HandleWaitForRefRemoved(id, [&](std::vector<BorrowedRef> subs) {
    replies++;
    EXPECT_TRUE(subs.empty());
  });
  EXPECT_EQ(replies, 1);
  EXPECT_EQ(rc_.NumObjects(), 0u);
}

TEST_F(ReferenceCounterTest, BorrowerAnswersEveryWaitingOwnerAtShutdown) {
  // A process that exits holds nothing: owners waiting on it are answered, and its
  // server can stop.
  ObjectID a = Borrowed(MakeAddress(4000));
  ObjectID b = Borrowed(MakeAddress(4001));
  rc_.AddLocalReference(a);
  rc_.AddLocalReference(b);
  int replies = 0;
  for (const ObjectID& id : {a, b}) rc_.HandleWaitForRefRemoved(id, [&](std::vector<BorrowedRef>) { replies++; });
  EXPECT_EQ(replies, 0);
  rc_.AnswerWaitersAtShutdown();
  EXPECT_EQ(replies, 2);
  rc_.AnswerWaitersAtShutdown();  // once only
  EXPECT_EQ(replies, 2);
  // A wait arriving afterwards (a call in flight at shutdown) is not held either.
  rc_.HandleWaitForRefRemoved(a, [&](std::vector<BorrowedRef>) { replies++; });
  EXPECT_EQ(replies, 3);
}

TEST_F(ReferenceCounterTest, BorrowerRepliesWhenLastLocalRefDrops) {
  Address owner = MakeAddress(4000);
  ObjectID id = Borrowed(owner);
  rc_.AddLocalReference(id);
  EXPECT_EQ(rc_.GetOwner(id).value(), owner);
  int replies = 0;
  rc_.HandleWaitForRefRemoved(id, [&](std::vector<BorrowedRef> subs) {
    replies++;
    EXPECT_TRUE(subs.empty());
    EXPECT_FALSE(rc_.HasReference(id));  // Reply runs outside the mutex.
  });
  EXPECT_EQ(replies, 0);
  rc_.RemoveLocalReference(id);
  EXPECT_EQ(replies, 0);
  rc_.RemoveLocalReference(id);
  EXPECT_EQ(replies, 1);
  EXPECT_EQ(rc_.NumObjects(), 0u);
  EXPECT_EQ(client_.NumPending(), 0u);  // Borrowers never send WaitForRefRemoved.
}

TEST_F(ReferenceCounterTest, BorrowerWaitsForItsSubmittedTasksAndReportsSubBorrowers) {
  Address owner = MakeAddress(4000);
  Address sub = MakeAddress(4001);
  ObjectID id = Borrowed(owner);
  rc_.UpdateSubmittedTaskReferences({id});
  std::vector<BorrowedRef> reply;
  int replies = 0;
  rc_.HandleWaitForRefRemoved(id, [&](std::vector<BorrowedRef> subs) {
    replies++;
    reply = std::move(subs);
  });
  rc_.RemoveLocalReference(id);
  EXPECT_EQ(replies, 0);  // Our task still holds it.
  rc_.UpdateFinishedTaskReferences({id}, {{id, sub}});
  EXPECT_EQ(client_.NumPending(), 0u);  // Not ours: the owner will wait on `sub`.
  ASSERT_EQ(replies, 1);
  ASSERT_EQ(reply.size(), 1u);
  EXPECT_EQ(reply[0].object_id, id);
  EXPECT_EQ(reply[0].borrower, sub);
  EXPECT_EQ(rc_.NumObjects(), 0u);
}

TEST_F(ReferenceCounterTest, WaitForRefRemovedBeforeBorrowIsRecorded) {
  Address owner = MakeAddress(4000);
  ObjectID id = ObjectID::FromRandom();
  int replies = 0;
  rc_.HandleWaitForRefRemoved(id, [&](std::vector<BorrowedRef>) { replies++; });
  EXPECT_EQ(replies, 1);  // Nothing held here yet: answered at once.
  rc_.AddBorrowedObject(id, owner);
  rc_.AddLocalReference(id);
  EXPECT_TRUE(rc_.HasReference(id));
  rc_.RemoveLocalReference(id);
  EXPECT_EQ(rc_.NumObjects(), 0u);
  EXPECT_EQ(replies, 1);
}

TEST_F(ReferenceCounterTest, WaitForRefRemovedOnOwnObjectRepliesAndKeepsIt) {
  ObjectID id = Owned();
  int replies = 0;
  rc_.HandleWaitForRefRemoved(id, [&](std::vector<BorrowedRef>) { replies++; });
  EXPECT_EQ(replies, 1);
  EXPECT_TRUE(rc_.HasReference(id));
  rc_.RemoveLocalReference(id);
  EXPECT_EQ(rc_.NumObjects(), 0u);
}

TEST_F(ReferenceCounterTest, LineageKeepsEntryAfterOutOfScope) {
  ObjectID inner = Owned();
  ObjectID id = Owned({inner});
  rc_.RemoveLocalReference(inner);
  rc_.AddLineageReference(id);
  rc_.RemoveLocalReference(id);
  EXPECT_TRUE(rc_.HasReference(id));
  EXPECT_EQ(OutOfScope(id), 1);
  EXPECT_EQ(Freed(id), 0);
  // Out of scope releases the refs its value contains.
  EXPECT_FALSE(rc_.HasReference(inner));
  EXPECT_EQ(Freed(inner), 1);
  EXPECT_EQ(rc_.LineageRefCount(id), 1);
  rc_.RemoveLineageReference(id);
  EXPECT_FALSE(rc_.HasReference(id));
  EXPECT_EQ(Freed(id), 1);
  EXPECT_EQ(OutOfScope(id), 1);
}

TEST_F(ReferenceCounterTest, EntryBackInScopeReportsLeavingScopeAgain) {
  ObjectID id = Owned();
  rc_.AddLineageReference(id);
  rc_.RemoveLocalReference(id);
  EXPECT_EQ(OutOfScope(id), 1);
  // A task kept for lineage runs again and takes it as an argument; it is rebuilt,
  // and when that task finishes its value must be freed again.
  rc_.UpdateSubmittedTaskReferences({id});
  rc_.UpdateFinishedTaskReferences({id}, {});
  EXPECT_EQ(OutOfScope(id), 2);
  rc_.AddLocalReference(id);
  rc_.RemoveLocalReference(id);
  EXPECT_EQ(OutOfScope(id), 3);
  rc_.RemoveLineageReference(id);
  EXPECT_EQ(Freed(id), 1);
}

TEST_F(ReferenceCounterTest, OwnerDeathIsReportedForItsObjectsOnly) {
  Address dead = MakeAddress(5000);
  Address alive = MakeAddress(5001);
  ObjectID x = Borrowed(dead);
  ObjectID y = Borrowed(alive);
  ObjectID mine = Owned();
  rc_.HandleOwnerDied(dead);
  absl::Status s = rc_.GetOwnerStatus(x);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("owner died"), std::string_view::npos);
  EXPECT_TRUE(rc_.GetOwnerStatus(y).ok());
  EXPECT_TRUE(rc_.GetOwnerStatus(mine).ok());
  EXPECT_EQ(rc_.GetOwner(x).value(), dead);
  for (const ObjectID& id : {x, y, mine}) rc_.RemoveLocalReference(id);
  EXPECT_EQ(rc_.NumObjects(), 0u);
}

TEST_F(ReferenceCounterTest, ObjectMetadata) {
  ObjectID id = Owned();
  NodeID n1 = NodeID::FromRandom();
  NodeID n2 = NodeID::FromRandom();
  EXPECT_EQ(rc_.GetState(id), ReferenceCounter::State::kPending);
  EXPECT_EQ(rc_.GetSizeBytes(id), -1);
  EXPECT_TRUE(rc_.UpdateObjectReady(id, 128));
  EXPECT_EQ(rc_.GetState(id), ReferenceCounter::State::kReady);
  EXPECT_EQ(rc_.GetSizeBytes(id), 128);
  EXPECT_TRUE(rc_.AddObjectLocation(id, n1));
  EXPECT_TRUE(rc_.AddObjectLocation(id, n2));
  EXPECT_EQ(rc_.GetLocations(id).size(), 2u);
  EXPECT_TRUE(rc_.RemoveObjectLocation(id, n1));
  EXPECT_EQ(rc_.GetLocations(id), std::vector<NodeID>{n2});
  EXPECT_TRUE(rc_.UpdatePinnedAt(id, n2));
  EXPECT_EQ(rc_.GetPinnedAt(id), n2);
  EXPECT_TRUE(rc_.UpdateSpilledUrl(id, "file:///tmp/spill/1?offset=0&size=128"));
  EXPECT_EQ(rc_.GetSpilledUrl(id), "file:///tmp/spill/1?offset=0&size=128");
  EXPECT_TRUE(rc_.UpdateObjectFailed(id));
  EXPECT_EQ(rc_.GetState(id), ReferenceCounter::State::kFailed);
  rc_.RemoveLocalReference(id);
  EXPECT_EQ(rc_.GetState(id), std::nullopt);
}

TEST_F(ReferenceCounterTest, NoLeaksAfterMixedWorkload) {
  Address owner = MakeAddress(4000);
  Address worker = MakeAddress(2001);
  ObjectID a = Owned();
  ObjectID b = Owned();
  ObjectID c = Owned({a, b});
  ObjectID d = Borrowed(owner);
  rc_.AddBorrowedObject(ObjectID::FromRandom(), owner, d);
  rc_.UpdateSubmittedTaskReferences({a, c, d});
  rc_.UpdateFinishedTaskReferences({a, c, d}, {{c, worker}, {d, worker}});
  for (const ObjectID& id : {a, b, c, d}) rc_.RemoveLocalReference(id);
  // c (borrowed by worker) holds a and b; d (borrowed by worker) holds its inner ref.
  EXPECT_EQ(rc_.NumObjects(), 5u);
  // Only c is ours, so only c is waited on; d's borrower goes to d's owner.
  ASSERT_EQ(client_.NumPending(), 1u);
  int replies = 0;
  rc_.HandleWaitForRefRemoved(d, [&](std::vector<BorrowedRef> subs) {
    replies++;
    EXPECT_EQ(subs.size(), 1u);
  });
  EXPECT_EQ(replies, 1);
  EXPECT_EQ(rc_.NumObjects(), 3u);
  client_.ReplyNext(absl::OkStatus());
  EXPECT_EQ(rc_.NumObjects(), 0u);
}

TEST_F(ReferenceCounterTest, EndToEndBetweenOwnerAndBorrower) {
  // Route the owner's WaitForRefRemoved straight into a second counter.
  class Loopback : public BorrowerClientInterface {
   public:
    ReferenceCounter* borrower = nullptr;
    void WaitForRefRemoved(const Address&, const ObjectID& id, const Address& owner,
                           std::optional<ObjectID> contained_in, DoneCallback done) override {
      borrower->HandleWaitForRefRemoved(
          id, [done](std::vector<BorrowedRef> subs) { done(absl::OkStatus(), subs); }, contained_in, owner);
    }
  };
  Loopback to_borrower;
  FakeBorrowerClient unused;
  Address owner_addr = MakeAddress(6000);
  Address borrower_addr = MakeAddress(6001);
  ReferenceCounter owner(owner_addr, &to_borrower);
  ReferenceCounter borrower(borrower_addr, &unused);
  to_borrower.borrower = &borrower;

  ObjectID id = ObjectID::FromRandom();
  owner.AddOwnedObject(id, owner_addr, {});
  owner.AddLocalReference(id);
  owner.UpdateSubmittedTaskReferences({id});
  // The task runs on the borrower, which keeps the ref (e.g. in an actor field).
  borrower.AddBorrowedObject(id, owner_addr);
  borrower.AddLocalReference(id);
  owner.UpdateFinishedTaskReferences({id}, {{id, borrower_addr}});
  owner.RemoveLocalReference(id);
  EXPECT_TRUE(owner.HasReference(id));
  borrower.RemoveLocalReference(id);
  EXPECT_FALSE(borrower.HasReference(id));
  EXPECT_FALSE(owner.HasReference(id));
}

TEST_F(ReferenceCounterTest, ConcurrentLocalRefsEndWithEmptyTable) {
  constexpr int kObjects = 16;
  constexpr int kThreads = 8;
  constexpr int kIterations = 2000;
  std::vector<ObjectID> ids;
  for (int i = 0; i < kObjects; ++i) ids.push_back(Owned());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIterations; ++i) {
        const ObjectID& id = ids[(i + t) % kObjects];
        rc_.AddLocalReference(id);
        rc_.AddLocalReference(id);
        rc_.UpdateSubmittedTaskReferences({id});
        rc_.RemoveLocalReference(id);
        rc_.UpdateFinishedTaskReferences({id}, {});
        rc_.RemoveLocalReference(id);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const ObjectID& id : ids) {
    EXPECT_EQ(rc_.LocalRefCount(id), 1);
    EXPECT_EQ(rc_.SubmittedTaskRefCount(id), 0);
    EXPECT_EQ(Freed(id), 0);
    rc_.RemoveLocalReference(id);
    EXPECT_EQ(Freed(id), 1);
  }
  EXPECT_EQ(rc_.NumObjects(), 0u);
}

TEST_F(ReferenceCounterTest, ConcurrentBorrowRepliesAndLocalRefs) {
  constexpr int kObjects = 32;
  std::vector<ObjectID> ids;
  for (int i = 0; i < kObjects; ++i) {
    ids.push_back(Owned());
    rc_.UpdateSubmittedTaskReferences({ids.back()});
    rc_.UpdateFinishedTaskReferences({ids.back()}, {{ids.back(), MakeAddress(7000 + i)}});
  }
  ASSERT_EQ(client_.NumPending(), static_cast<size_t>(kObjects));
  std::thread replier([&] {
    for (int i = 0; i < kObjects; ++i) client_.ReplyNext(absl::OkStatus());
  });
  std::thread user([&] {
    for (const ObjectID& id : ids) {
      for (int i = 0; i < 100; ++i) {
        rc_.AddLocalReference(id);
        rc_.RemoveLocalReference(id);
      }
      rc_.RemoveLocalReference(id);
    }
  });
  replier.join();
  user.join();
  EXPECT_EQ(rc_.NumObjects(), 0u);
  for (const ObjectID& id : ids) EXPECT_EQ(Freed(id), 1);
}


TEST_F(ReferenceCounterTest, WaitForRefRemovedBeforeTheNestedReturnIsReadKeepsTheRef) {
  // The owner of `inner` returned it inside `outer` (owned by the borrower); its
  // WaitForRefRemoved can reach the borrower before the task reply does.
  Address owner_addr = MakeAddress(6100);
  ObjectID outer = ObjectID::FromRandom();
  ObjectID inner = ObjectID::FromRandom();
  rc_.AddOwnedObject(outer, self_, {});
  rc_.AddLocalReference(outer);
  bool replied = false;
  rc_.HandleWaitForRefRemoved(inner, [&](std::vector<BorrowedRef>) { replied = true; }, outer, owner_addr);
  EXPECT_FALSE(replied);
  EXPECT_TRUE(rc_.HasReference(inner));
  // The reply is read: the ref is deserialized (borrowed, local ref) and dropped.
  rc_.AddBorrowedObject(inner, owner_addr, outer);
  rc_.AddLocalReference(inner);
  rc_.RemoveLocalReference(inner);
  EXPECT_FALSE(replied);  // still inside `outer`
  rc_.RemoveLocalReference(outer);
  EXPECT_TRUE(replied);
  EXPECT_EQ(rc_.NumObjects(), 0u);
}

TEST_F(ReferenceCounterTest, WaitForRefRemovedAfterTheOuterIsGoneRepliesAtOnce) {
  bool replied = false;
  rc_.HandleWaitForRefRemoved(ObjectID::FromRandom(), [&](std::vector<BorrowedRef>) { replied = true; },
                              ObjectID::FromRandom(), MakeAddress(6101));
  EXPECT_TRUE(replied);
  EXPECT_EQ(rc_.NumObjects(), 0u);
}

TEST_F(ReferenceCounterTest, OwnerOfOwnedAndBorrowedObjects) {
  ObjectID mine = Owned();
  Address other = MakeAddress(6201);
  ObjectID theirs = Borrowed(other);
  ObjectID recorded_for_other = ObjectID::FromRandom();
  ASSERT_TRUE(rc_.AddOwnedObject(recorded_for_other, other, {}));
  EXPECT_EQ(rc_.GetOwner(mine).value(), self_);
  EXPECT_EQ(rc_.GetOwner(theirs).value(), other);
  EXPECT_EQ(rc_.GetOwner(recorded_for_other).value(), other);
}

TEST_F(ReferenceCounterTest, TableShrinksOnceABurstIsFreed) {
  const size_t empty_capacity = rc_.TableCapacity();
  std::vector<ObjectID> ids;
  for (int i = 0; i < 100000; ++i) ids.push_back(Owned());
  const size_t burst_capacity = rc_.TableCapacity();
  EXPECT_GE(burst_capacity, ids.size());
  // All but the last ten go: the table gives its slots back, and what is left works.
  for (size_t i = 0; i + 10 < ids.size(); ++i) rc_.RemoveLocalReference(ids[i]);
  EXPECT_EQ(rc_.NumObjects(), 10u);
  EXPECT_LT(rc_.TableCapacity(), burst_capacity / 16);
  for (size_t i = ids.size() - 10; i < ids.size(); ++i) {
    EXPECT_EQ(rc_.LocalRefCount(ids[i]), 1);
    rc_.RemoveLocalReference(ids[i]);
    EXPECT_EQ(Freed(ids[i]), 1);
  }
  EXPECT_EQ(rc_.NumObjects(), 0u);
  EXPECT_LE(rc_.TableCapacity(), std::max<size_t>(empty_capacity, 4096));
}

}  // namespace
}  // namespace manta::core
