// PrimaryMover with fakes: an owner moves the primary copies it owns off a draining
// node (MemoryStore::Replace, PrimariesOn, the FetchObjects it sends, the marker and
// ReferenceCounter updates, frees of the old copy, refusals and failed RPCs handed to
// the next target, an object freed while its fetch is in flight, FirstDrain). One
// EventLoop driven by the test; the fake raylets hold fetches until the test answers.
#include "src/core_worker/primary_mover.h"

#include <algorithm>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"
#include "src/core_worker/common.h"
#include "src/object_store/fake_store_client.h"
#include "src/raylet/fake_raylet_client.h"
#include "tests/core_worker/noop_borrower_client.h"

namespace manta::core {
namespace {

using FakeRaylet = raylet::FakeRayletClient;

constexpr char kLocalRaylet[] = "10.0.0.9:9";  // the freer's own node: never used here
constexpr char kDrainingRaylet[] = "10.0.0.1:1";
constexpr char kFirstRaylet[] = "10.0.0.2:2";
constexpr char kSecondRaylet[] = "10.0.0.3:3";

std::vector<ObjectID> IdsOf(const google::protobuf::RepeatedPtrField<std::string>& binaries) {
  std::vector<ObjectID> ids;
  for (const std::string& b : binaries) ids.push_back(ObjectID::FromBinary(b));
  return ids;
}

std::vector<ObjectID> Sorted(std::vector<ObjectID> ids) {
  std::sort(ids.begin(), ids.end(), [](const ObjectID& a, const ObjectID& b) { return a.Binary() < b.Binary(); });
  return ids;
}

rpc::FetchObjectsReply Refuse(const std::vector<ObjectID>& ids) {
  rpc::FetchObjectsReply reply;
  for (const ObjectID& id : ids) {
    auto* f = reply.add_failures();
    f->set_object_id(id.Binary());
    f->set_code(static_cast<int>(absl::StatusCode::kResourceExhausted));
    f->set_message("no room");
  }
  return reply;
}

class PrimaryMoverTest : public ::testing::Test {
 protected:
  PrimaryMoverTest()
      : raylets_([](const std::string& address) {
          auto r = std::make_shared<FakeRaylet>(address);
          r->hold_fetches = true;
          return r;
        }),
        self_{NodeID::FromRandom(), "127.0.0.1", 1000, WorkerID::FromRandom()},
        refs_(self_, &borrowers_),
        freer_(loop_, store_client_, raylets_, kLocalRaylet),
        mover_(store_, refs_, raylets_, freer_, ToRpc(self_), /*batch_timeout_ms=*/1000) {}

  // An object owned here, in scope, whose primary copy is pinned at `node`.
  ObjectID Own(const NodeID& node, const std::string& raylet, int64_t size_bytes) {
    ObjectID id = ObjectID::FromRandom();
    refs_.AddOwnedObject(id, self_, {}, size_bytes, /*pending=*/false);
    refs_.AddLocalReference(id);
    refs_.AddObjectLocation(id, node);
    refs_.UpdatePinnedAt(id, node);
    store_.Put(id, Marker(node, raylet, size_bytes));
    return id;
  }
  static StoredObjectPtr Marker(const NodeID& node, const std::string& raylet, int64_t size_bytes,
                                bool owner_copy = true) {
    auto marker = std::make_shared<StoredObject>();
    marker->in_plasma = true;
    marker->owner_copy = owner_copy;
    marker->size_bytes = size_bytes;
    marker->SetPlasmaLocation(node, raylet);
    return marker;
  }

  FakeRaylet& Raylet(const std::string& address) { return static_cast<FakeRaylet&>(*raylets_.Get(address)); }
  // The objects whose deletion reached `address` (after the freer's loop turn).
  std::vector<ObjectID> FreedAt(const std::string& address) {
    loop_.RunUntilIdle();
    std::vector<ObjectID> ids;
    for (const auto& q : Raylet(address).frees) {
      for (const ObjectID& id : IdsOf(q.object_ids())) ids.push_back(id);
    }
    return Sorted(ids);
  }

  void Move(std::vector<PrimaryMover::Target> targets) {
    mover_.Move(draining_, kDrainingRaylet, std::move(targets), [this](int64_t moved, int64_t left) {
      ASSERT_FALSE(result_.has_value()) << "done called twice";
      result_ = std::make_pair(moved, left);
    });
  }
  std::vector<PrimaryMover::Target> Targets() { return {{first_, kFirstRaylet}, {second_, kSecondRaylet}}; }

  // `id`'s marker and ReferenceCounter entry say its primary copy is at `node`.
  void ExpectPrimaryAt(const ObjectID& id, const NodeID& node, const std::string& raylet, int64_t size_bytes) {
    StoredObjectPtr marker = store_.GetIfExists(id);
    ASSERT_NE(marker, nullptr);
    EXPECT_TRUE(marker->in_plasma);
    EXPECT_TRUE(marker->owner_copy);
    EXPECT_EQ(marker->plasma_node(), node);
    EXPECT_EQ(marker->plasma_raylet_address(), raylet);
    EXPECT_EQ(marker->size_bytes, size_bytes);
    EXPECT_EQ(refs_.GetPinnedAt(id), std::optional<NodeID>(node));
    EXPECT_EQ(refs_.GetLocations(id), std::vector<NodeID>{node});
  }

  EventLoop loop_;
  raylet::RayletClientPool raylets_;
  Address self_;
  NoopBorrowerClient borrowers_;
  ReferenceCounter refs_;
  MemoryStore store_;
  object_store::FakeObjectStoreClient store_client_;
  ObjectFreer freer_;
  PrimaryMover mover_;
  NodeID draining_ = NodeID::FromRandom();
  NodeID first_ = NodeID::FromRandom();
  NodeID second_ = NodeID::FromRandom();
  std::optional<std::pair<int64_t, int64_t>> result_;  // (moved, left) once done
};

TEST(MemoryStoreReplaceTest, SwapsOnlyTheExpectedValue) {
  MemoryStore store;
  const ObjectID id = ObjectID::FromRandom();
  auto a = std::make_shared<StoredObject>();
  auto b = std::make_shared<StoredObject>();
  auto c = std::make_shared<StoredObject>();
  ASSERT_TRUE(store.Put(id, a));
  EXPECT_TRUE(store.Replace(id, a, b));
  EXPECT_EQ(store.GetIfExists(id), b);
  EXPECT_FALSE(store.Replace(id, a, c));  // `a` is no longer there
  EXPECT_EQ(store.GetIfExists(id), b);
  auto equal_to_b = std::make_shared<StoredObject>();  // same contents, another pointer
  EXPECT_FALSE(store.Replace(id, equal_to_b, c));
  EXPECT_EQ(store.GetIfExists(id), b);
}

TEST(MemoryStoreReplaceTest, AbsentObjectIsNotCreated) {
  MemoryStore store;
  const ObjectID id = ObjectID::FromRandom();
  auto a = std::make_shared<StoredObject>();
  EXPECT_FALSE(store.Replace(id, a, std::make_shared<StoredObject>()));
  EXPECT_FALSE(store.Replace(id, nullptr, std::make_shared<StoredObject>()));
  EXPECT_FALSE(store.Contains(id));
  EXPECT_EQ(store.Size(), 0u);
}

TEST_F(PrimaryMoverTest, PrimariesOnListsOnlyOwnedInScopeOwnerMarkersOnTheNode) {
  const ObjectID on_node = Own(draining_, kDrainingRaylet, 10);
  Own(first_, kFirstRaylet, 10);  // on another node
  const ObjectID inline_value = Own(draining_, kDrainingRaylet, 10);
  store_.Delete({inline_value});
  store_.Put(inline_value, std::make_shared<StoredObject>());  // value held here, pinned_at left set
  const ObjectID freed = Own(draining_, kDrainingRaylet, 10);
  store_.Delete({freed});
  const ObjectID out_of_scope = Own(draining_, kDrainingRaylet, 10);
  refs_.RemoveLocalReference(out_of_scope);  // marker left behind on purpose
  const ObjectID not_owner_copy = Own(draining_, kDrainingRaylet, 10);
  store_.Delete({not_owner_copy});
  store_.Put(not_owner_copy, Marker(draining_, kDrainingRaylet, 10, /*owner_copy=*/false));
  const ObjectID borrowed = ObjectID::FromRandom();
  refs_.AddBorrowedObject(borrowed, Address{first_, "10.0.0.2", 7, WorkerID::FromRandom()});
  refs_.AddLocalReference(borrowed);
  store_.Put(borrowed, Marker(draining_, kDrainingRaylet, 10));

  EXPECT_EQ(mover_.PrimariesOn(draining_), std::vector<ObjectID>{on_node});
  EXPECT_TRUE(mover_.PrimariesOn(second_).empty());
}

TEST_F(PrimaryMoverTest, MoveFetchesFromTheDrainingRayletPinsForTheOwnerAndFreesTheOldCopy) {
  const ObjectID a = Own(draining_, kDrainingRaylet, 100);
  const ObjectID b = Own(draining_, kDrainingRaylet, 200);
  Move(Targets());

  ASSERT_EQ(Raylet(kFirstRaylet).fetches.size(), 1u);
  EXPECT_TRUE(Raylet(kSecondRaylet).fetch_requests.empty());
  const rpc::FetchObjectsRequest& q = Raylet(kFirstRaylet).fetches.front().request;
  EXPECT_EQ(Sorted(IdsOf(q.object_ids())), Sorted({a, b}));
  ASSERT_EQ(q.object_sizes_size(), q.object_ids_size());
  const absl::flat_hash_map<ObjectID, int64_t> sizes = {{a, 100}, {b, 200}};
  for (int i = 0; i < q.object_ids_size(); ++i) {
    EXPECT_EQ(q.object_sizes(i), sizes.at(ObjectID::FromBinary(q.object_ids(i))));
  }
  EXPECT_EQ(std::vector<std::string>(q.locations().begin(), q.locations().end()),
            std::vector<std::string>{kDrainingRaylet});
  EXPECT_EQ(q.pin_for_owner().SerializeAsString(), ToRpc(self_).SerializeAsString());
  EXPECT_FALSE(result_.has_value());  // not before the reply

  ASSERT_TRUE(Raylet(kFirstRaylet).ReplyFetch());
  ExpectPrimaryAt(a, first_, kFirstRaylet, 100);
  ExpectPrimaryAt(b, first_, kFirstRaylet, 200);
  EXPECT_EQ(FreedAt(kDrainingRaylet), Sorted({a, b}));
  EXPECT_TRUE(FreedAt(kFirstRaylet).empty());
  EXPECT_EQ(result_, std::make_pair(int64_t{2}, int64_t{0}));
}

TEST_F(PrimaryMoverTest, LargeDrainsGoInBatchesOneAtATime) {
  std::vector<ObjectID> ids;
  for (int i = 0; i < 70; ++i) ids.push_back(Own(draining_, kDrainingRaylet, 1));
  Move(Targets());
  FakeRaylet& first = Raylet(kFirstRaylet);
  ASSERT_EQ(first.fetches.size(), 1u);
  EXPECT_EQ(first.fetches.front().request.object_ids_size(), 64);
  ASSERT_TRUE(first.ReplyFetch());
  ASSERT_EQ(first.fetches.size(), 1u);
  EXPECT_EQ(first.fetches.front().request.object_ids_size(), 6);
  ASSERT_TRUE(first.ReplyFetch());
  EXPECT_EQ(FreedAt(kDrainingRaylet), Sorted(ids));
  EXPECT_EQ(result_, std::make_pair(int64_t{70}, int64_t{0}));
}

TEST_F(PrimaryMoverTest, ObjectsTheFirstTargetRefusesGoToTheNext) {
  const ObjectID taken = Own(draining_, kDrainingRaylet, 100);
  const ObjectID refused = Own(draining_, kDrainingRaylet, 200);
  Move(Targets());
  ASSERT_TRUE(Raylet(kFirstRaylet).ReplyFetch(absl::OkStatus(), Refuse({refused})));
  ExpectPrimaryAt(taken, first_, kFirstRaylet, 100);
  EXPECT_FALSE(result_.has_value());

  ASSERT_EQ(Raylet(kSecondRaylet).fetches.size(), 1u);
  const rpc::FetchObjectsRequest& q = Raylet(kSecondRaylet).fetches.front().request;
  EXPECT_EQ(IdsOf(q.object_ids()), std::vector<ObjectID>{refused});
  EXPECT_EQ(q.object_sizes(0), 200);
  ASSERT_TRUE(Raylet(kSecondRaylet).ReplyFetch());
  ExpectPrimaryAt(refused, second_, kSecondRaylet, 200);
  EXPECT_EQ(FreedAt(kDrainingRaylet), Sorted({taken, refused}));
  EXPECT_EQ(result_, std::make_pair(int64_t{2}, int64_t{0}));
}

TEST_F(PrimaryMoverTest, AFailedFetchGoesToTheNextTargetAndWhatNoneTakesStays) {
  const ObjectID a = Own(draining_, kDrainingRaylet, 100);
  const ObjectID b = Own(draining_, kDrainingRaylet, 200);
  const StoredObjectPtr marker_a = store_.GetIfExists(a);
  const StoredObjectPtr marker_b = store_.GetIfExists(b);
  Move(Targets());
  ASSERT_TRUE(Raylet(kFirstRaylet).ReplyFetch(absl::UnavailableError("raylet gone")));
  ASSERT_EQ(Raylet(kSecondRaylet).fetches.size(), 1u);
  EXPECT_EQ(Sorted(IdsOf(Raylet(kSecondRaylet).fetches.front().request.object_ids())), Sorted({a, b}));
  ASSERT_TRUE(Raylet(kSecondRaylet).ReplyFetch(absl::OkStatus(), Refuse({a, b})));

  EXPECT_EQ(result_, std::make_pair(int64_t{0}, int64_t{2}));
  EXPECT_EQ(store_.GetIfExists(a), marker_a);  // untouched: the very same markers
  EXPECT_EQ(store_.GetIfExists(b), marker_b);
  ExpectPrimaryAt(a, draining_, kDrainingRaylet, 100);
  ExpectPrimaryAt(b, draining_, kDrainingRaylet, 200);
  for (const char* r : {kDrainingRaylet, kSecondRaylet}) EXPECT_TRUE(FreedAt(r).empty()) << r;
  // The first target may still pin them after the failed call: freed there at once,
  // and recorded as copies, freed again with the objects.
  EXPECT_EQ(FreedAt(kFirstRaylet), Sorted({a, b}));
  EXPECT_EQ(freer_.CopiesOf(a), std::vector<std::string>{kFirstRaylet});
  EXPECT_EQ(freer_.CopiesOf(b), std::vector<std::string>{kFirstRaylet});
}

TEST_F(PrimaryMoverTest, WithNoTargetEveryObjectStays) {
  const ObjectID a = Own(draining_, kDrainingRaylet, 100);
  Move({});
  EXPECT_EQ(result_, std::make_pair(int64_t{0}, int64_t{1}));
  ExpectPrimaryAt(a, draining_, kDrainingRaylet, 100);
}

TEST_F(PrimaryMoverTest, AnObjectFreedDuringItsFetchHasItsNewCopyFreed) {
  const ObjectID deleted = Own(draining_, kDrainingRaylet, 100);
  const ObjectID taken = Own(draining_, kDrainingRaylet, 200);
  const ObjectID kept = Own(draining_, kDrainingRaylet, 300);
  Move(Targets());
  ASSERT_EQ(Raylet(kFirstRaylet).fetches.size(), 1u);
  store_.Delete({deleted});  // freed while the fetch is in flight
  ASSERT_NE(store_.Take(taken), nullptr);
  ASSERT_TRUE(Raylet(kFirstRaylet).ReplyFetch());

  EXPECT_FALSE(store_.Contains(deleted));  // not recreated
  EXPECT_FALSE(store_.Contains(taken));
  ExpectPrimaryAt(kept, first_, kFirstRaylet, 300);
  EXPECT_EQ(FreedAt(kFirstRaylet), Sorted({deleted, taken}));  // the new copies
  EXPECT_EQ(FreedAt(kDrainingRaylet), std::vector<ObjectID>{kept});
  EXPECT_EQ(result_, std::make_pair(int64_t{1}, int64_t{0}));
}

TEST_F(PrimaryMoverTest, FirstDrainIsTrueOncePerNode) {
  EXPECT_TRUE(mover_.FirstDrain(draining_));
  EXPECT_FALSE(mover_.FirstDrain(draining_));
  EXPECT_TRUE(mover_.FirstDrain(first_));
  EXPECT_FALSE(mover_.FirstDrain(first_));
  EXPECT_FALSE(mover_.FirstDrain(draining_));
}

}  // namespace
}  // namespace manta::core
