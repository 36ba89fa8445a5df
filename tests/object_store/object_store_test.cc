// ObjectStore on a test-driven loop with a FakeSpiller and a malloc'ed arena: the
// CREATED -> SEALED state machine, references, waiting Gets, client disconnects,
// LRU eviction, spilling and restoring pinned objects, and waiting creations.
#include "src/object_store/object_store.h"

#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/common/util.h"
#include "tests/object_store/fake_spiller.h"
#include "tests/test_util/test_util.h"

namespace manta::object_store {
namespace {

using ::testing::HasSubstr;
using testing::FakeSpiller;

constexpr int64_t kUnit = 4096;
// Four one-unit objects fill the store.
constexpr int64_t kStoreCapacity = 4 * kUnit;

constexpr ClientId kWriter = 1;
constexpr ClientId kReader = 2;
constexpr ClientId kOther = 3;

ObjectID Id(uint8_t n) {
  std::string binary(ObjectID::kSize, '\0');
  binary.back() = static_cast<char>(n);
  return ObjectID::FromBinary(binary);
}

// Bytes that differ per object, so a restore from the wrong place shows.
std::string Pattern(const ObjectID& id, int64_t size) {
  std::string bytes(static_cast<size_t>(size), '\0');
  for (int64_t i = 0; i < size; ++i) bytes[i] = static_cast<char>(id.Data()[ObjectID::kSize - 1] * 31 + i * 7);
  return bytes;
}

struct CreateResult {
  bool done = false;
  absl::StatusOr<ObjectLocation> result = absl::UnknownError("not completed");
};

struct GetResult {
  bool done = false;
  std::vector<std::optional<ObjectLocation>> objects;
};

class ObjectStoreTest : public ::testing::Test {
 protected:
  ObjectStoreTest() : arena_(static_cast<uint8_t*>(std::aligned_alloc(64, kStoreCapacity)), &std::free) {
    std::memset(arena_.get(), 0, kStoreCapacity);
    ObjectStoreOptions options;
    // Spill exactly what a creation needs, so tests can predict the batches.
    options.spill_min_bytes = 0;
    MakeStore(options);
  }

  void MakeStore(ObjectStoreOptions options, bool with_spiller = true) {
    store_ = std::make_unique<ObjectStore>(loop_, kStoreCapacity, std::move(options),
                                           with_spiller ? &spiller_ : nullptr, arena_.get());
  }

  // Starts a Create and runs the loop; the result may still be pending.
  std::shared_ptr<CreateResult> StartCreate(ClientId client, const ObjectID& id, int64_t size, bool pin = false) {
    auto r = std::make_shared<CreateResult>();
    store_->Create(client, id, size, 0, pin, [r](absl::StatusOr<ObjectLocation> loc) {
      EXPECT_FALSE(r->done) << "Create callback ran twice";
      r->done = true;
      r->result = std::move(loc);
    });
    loop_.RunUntilIdle();
    return r;
  }
  // A Create expected to complete at once.
  absl::StatusOr<ObjectLocation> Create(ClientId client, const ObjectID& id, int64_t size, bool pin = false) {
    auto r = StartCreate(client, id, size, pin);
    EXPECT_TRUE(r->done) << "Create of " << id.Hex() << " is still waiting";
    return r->result;
  }
  // Creates `id`, writes its pattern and seals it (dropping the creator's reference
  // unless `keep_ref`).
  ObjectLocation Put(ClientId client, const ObjectID& id, int64_t size = kUnit, bool pin = false,
                     bool keep_ref = false) {
    absl::StatusOr<ObjectLocation> loc = Create(client, id, size, pin);
    EXPECT_TRUE(loc.ok()) << loc.status();
    if (!loc.ok()) return {};
    Write(*loc, Pattern(id, size));
    EXPECT_TRUE(store_->Seal(client, id, /*release=*/!keep_ref).ok());
    return *loc;
  }

  std::shared_ptr<GetResult> StartGet(ClientId client, const std::vector<ObjectID>& ids, int64_t timeout_ms) {
    auto r = std::make_shared<GetResult>();
    store_->Get(client, ids, timeout_ms, [r](std::vector<std::optional<ObjectLocation>> objects) {
      EXPECT_FALSE(r->done) << "Get callback ran twice";
      r->done = true;
      r->objects = std::move(objects);
    });
    loop_.RunUntilIdle();
    return r;
  }
  // A non-waiting Get of one object (takes a reference when found).
  std::optional<ObjectLocation> GetNow(ClientId client, const ObjectID& id) {
    auto r = StartGet(client, {id}, 0);
    EXPECT_TRUE(r->done);
    return r->done ? r->objects.at(0) : std::nullopt;
  }

  // Drives the loop (timers use real time) until `condition` holds or 5 s pass.
  bool RunUntil(const std::function<bool()>& condition, int64_t timeout_ms = 5000) {
    return manta::testing::WaitFor(
        [&] {
          loop_.RunUntilIdle();
          return condition();
        },
        timeout_ms);
  }

  void Write(const ObjectLocation& loc, const std::string& bytes) {
    ASSERT_LE(static_cast<int64_t>(bytes.size()), loc.data_size + loc.metadata_size);
    std::memcpy(arena_.get() + loc.offset, bytes.data(), bytes.size());
  }
  std::string Read(const ObjectLocation& loc) const {
    return std::string(reinterpret_cast<const char*>(arena_.get() + loc.offset),
                       static_cast<size_t>(loc.data_size + loc.metadata_size));
  }
  int64_t UsedBytes() const { return store_->Stats().used_bytes; }

  EventLoop loop_;
  FakeSpiller spiller_;
  std::unique_ptr<uint8_t, decltype(&std::free)> arena_;
  std::unique_ptr<ObjectStore> store_;
};

// ---- CREATED -> SEALED, references -------------------------------------------------

TEST_F(ObjectStoreTest, CreateSealGetRelease) {
  absl::StatusOr<ObjectLocation> loc = Create(kWriter, Id(1), 100);
  ASSERT_TRUE(loc.ok()) << loc.status();
  EXPECT_EQ(loc->data_size, 100);
  EXPECT_EQ(loc->offset % Allocator::kAlignment, 0);
  EXPECT_EQ(store_->RefCount(Id(1)), 1);
  Write(*loc, Pattern(Id(1), 100));

  // Created but not sealed: invisible to everyone, its creator included; known to
  // be coming.
  EXPECT_FALSE(store_->Contains(Id(1)));
  EXPECT_TRUE(store_->ContainsOrCreating(Id(1)));
  EXPECT_FALSE(store_->ContainsOrCreating(Id(2)));
  EXPECT_EQ(GetNow(kReader, Id(1)), std::nullopt);
  EXPECT_EQ(GetNow(kWriter, Id(1)), std::nullopt);

  ASSERT_TRUE(store_->Seal(kWriter, Id(1), /*release=*/true).ok());
  EXPECT_TRUE(store_->Contains(Id(1)));
  EXPECT_TRUE(store_->ContainsOrCreating(Id(1)));
  EXPECT_EQ(store_->RefCount(Id(1)), 0);

  std::optional<ObjectLocation> got = GetNow(kReader, Id(1));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->offset, loc->offset);
  EXPECT_EQ(got->data_size, 100);
  EXPECT_EQ(Read(*got), Pattern(Id(1), 100));
  EXPECT_EQ(store_->RefCount(Id(1)), 1);

  EXPECT_TRUE(store_->Release(kReader, Id(1)).ok());
  EXPECT_EQ(store_->RefCount(Id(1)), 0);
  EXPECT_EQ(store_->Release(kReader, Id(1)).code(), absl::StatusCode::kNotFound);
  // Unreferenced sealed objects stay cached.
  EXPECT_TRUE(store_->Contains(Id(1)));
}

TEST_F(ObjectStoreTest, MetadataFollowsData) {
  auto r = std::make_shared<CreateResult>();
  store_->Create(kWriter, Id(1), 100, 28, false, [r](absl::StatusOr<ObjectLocation> loc) { r->result = loc; });
  ASSERT_TRUE(r->result.ok());
  EXPECT_EQ(r->result->data_size, 100);
  EXPECT_EQ(r->result->metadata_size, 28);
  EXPECT_EQ(UsedBytes(), Allocator::RoundUp(128));
}

TEST_F(ObjectStoreTest, SealErrors) {
  ASSERT_TRUE(Create(kWriter, Id(1), 10).ok());
  EXPECT_EQ(store_->Seal(kWriter, Id(2), true).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Seal(kOther, Id(1), true).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_FALSE(store_->Contains(Id(1)));
  ASSERT_TRUE(store_->Seal(kWriter, Id(1), true).ok());
  EXPECT_EQ(store_->Seal(kWriter, Id(1), true).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ObjectStoreTest, CreateErrors) {
  ASSERT_TRUE(Create(kWriter, Id(1), 10).ok());
  // Existing id, created or sealed, by the same or another client.
  EXPECT_EQ(Create(kOther, Id(1), 10).status().code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(store_->Seal(kWriter, Id(1), true).ok());
  EXPECT_EQ(Create(kWriter, Id(1), 10).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(Create(kWriter, Id(2), -1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(UsedBytes(), Allocator::kAlignment);
}

TEST_F(ObjectStoreTest, ReleaseErrors) {
  ASSERT_TRUE(Create(kWriter, Id(1), 10).ok());
  EXPECT_EQ(store_->Release(kWriter, Id(1)).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->Release(kReader, Id(1)).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Release(kReader, Id(9)).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(store_->Seal(kWriter, Id(1), /*release=*/false).ok());
  EXPECT_TRUE(store_->Release(kWriter, Id(1)).ok());
  EXPECT_EQ(store_->Release(kWriter, Id(1)).code(), absl::StatusCode::kNotFound);
}

TEST_F(ObjectStoreTest, AbortFreesMemoryAndTheId) {
  ASSERT_TRUE(Create(kWriter, Id(1), 1000).ok());
  EXPECT_EQ(UsedBytes(), 1024);
  EXPECT_EQ(store_->Abort(kOther, Id(1)).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(store_->Abort(kWriter, Id(2)).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(store_->Abort(kWriter, Id(1)).ok());
  EXPECT_FALSE(store_->ContainsOrCreating(Id(1)));
  EXPECT_EQ(UsedBytes(), 0);
  EXPECT_EQ(store_->RefCount(Id(1)), 0);
  EXPECT_EQ(store_->Release(kWriter, Id(1)).code(), absl::StatusCode::kNotFound);
  // The id can be created again; a sealed object cannot be aborted.
  Put(kWriter, Id(1), 1000);
  EXPECT_EQ(store_->Abort(kWriter, Id(1)).code(), absl::StatusCode::kFailedPrecondition);
}

// ---- Get ----------------------------------------------------------------------------

TEST_F(ObjectStoreTest, GetWaitsUntilSeal) {
  ASSERT_TRUE(Create(kWriter, Id(1), 10).ok());
  auto get = StartGet(kReader, {Id(1)}, /*timeout_ms=*/-1);
  EXPECT_FALSE(get->done);
  ASSERT_TRUE(store_->Seal(kWriter, Id(1), true).ok());
  loop_.RunUntilIdle();
  ASSERT_TRUE(get->done);
  ASSERT_TRUE(get->objects.at(0).has_value());
  EXPECT_EQ(store_->RefCount(Id(1)), 1);
}

TEST_F(ObjectStoreTest, GetWaitsForAllIdsEvenOnesNotYetCreated) {
  Put(kWriter, Id(1), 10);
  auto get = StartGet(kReader, {Id(1), Id(2)}, -1);
  EXPECT_FALSE(get->done);
  Put(kWriter, Id(2), 10);
  ASSERT_TRUE(get->done);
  EXPECT_TRUE(get->objects.at(0).has_value());
  EXPECT_TRUE(get->objects.at(1).has_value());
  EXPECT_EQ(store_->RefCount(Id(1)), 1);
  EXPECT_EQ(store_->RefCount(Id(2)), 1);
}

TEST_F(ObjectStoreTest, GetTimeoutReturnsWhatIsSealed) {
  Put(kWriter, Id(1), 10);
  ASSERT_TRUE(Create(kWriter, Id(2), 10).ok());
  auto start = std::chrono::steady_clock::now();
  auto get = StartGet(kReader, {Id(1), Id(2), Id(3)}, /*timeout_ms=*/30);
  EXPECT_FALSE(get->done);
  ASSERT_TRUE(RunUntil([&] { return get->done; }));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(30));
  ASSERT_EQ(get->objects.size(), 3u);
  EXPECT_TRUE(get->objects[0].has_value());
  EXPECT_FALSE(get->objects[1].has_value());
  EXPECT_FALSE(get->objects[2].has_value());
  // References only for what was returned; a late Seal does not add one.
  EXPECT_EQ(store_->RefCount(Id(1)), 1);
  ASSERT_TRUE(store_->Seal(kWriter, Id(2), true).ok());
  loop_.RunUntilIdle();
  EXPECT_EQ(store_->RefCount(Id(2)), 0);
}

// A Get that timed out must not stay registered as a waiter (with its callback and
// everything the callback holds) for ids that may never appear.
TEST_F(ObjectStoreTest, TimedOutGetIsForgotten) {
  auto token = std::make_shared<int>(0);
  bool done = false;
  store_->Get(kReader, {Id(7)}, 10, [token, &done](std::vector<std::optional<ObjectLocation>>) { done = true; });
  ASSERT_TRUE(RunUntil([&] { return done; }));
  EXPECT_EQ(token.use_count(), 1) << "the store still holds the timed-out Get";
}

// ---- Clients that go away -----------------------------------------------------------

TEST_F(ObjectStoreTest, DisconnectReleasesReferencesAndAbortsUnsealed) {
  Put(kOther, Id(1), kUnit);
  ASSERT_TRUE(GetNow(kWriter, Id(1)).has_value());
  ASSERT_TRUE(GetNow(kWriter, Id(1)).has_value());  // two references
  ASSERT_TRUE(GetNow(kReader, Id(1)).has_value());
  ASSERT_TRUE(Create(kWriter, Id(2), kUnit).ok());
  Put(kWriter, Id(3), kUnit, false, /*keep_ref=*/true);
  EXPECT_EQ(store_->RefCount(Id(1)), 3);
  EXPECT_EQ(UsedBytes(), 3 * kUnit);

  store_->DisconnectClient(kWriter);
  EXPECT_EQ(store_->RefCount(Id(1)), 1);  // the reader's
  EXPECT_EQ(store_->RefCount(Id(3)), 0);
  EXPECT_TRUE(store_->Contains(Id(3)));  // sealed: stays, now unreferenced
  EXPECT_EQ(UsedBytes(), 2 * kUnit);     // the unsealed one is gone
  EXPECT_EQ(store_->Release(kWriter, Id(1)).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Create(kOther, Id(2), kUnit).ok());
  ASSERT_TRUE(store_->Abort(kOther, Id(2)).ok());

  store_->DisconnectClient(kReader);
  EXPECT_EQ(store_->RefCount(Id(1)), 0);
  store_->Delete({Id(1), Id(3)});
  EXPECT_EQ(UsedBytes(), 0);
  EXPECT_EQ(store_->Stats().num_objects, 0);
}

TEST_F(ObjectStoreTest, DisconnectCancelsWaitingGet) {
  auto token = std::make_shared<int>(0);
  bool called = false;
  store_->Get(kReader, {Id(1)}, -1,
              [token, &called](std::vector<std::optional<ObjectLocation>>) { called = true; });
  store_->DisconnectClient(kReader);
  EXPECT_EQ(token.use_count(), 1) << "the store still holds the gone client's Get";
  Put(kWriter, Id(1), 10);
  loop_.RunUntilIdle();
  EXPECT_FALSE(called);
  EXPECT_EQ(store_->RefCount(Id(1)), 0);
}

TEST_F(ObjectStoreTest, DisconnectDropsQueuedCreates) {
  Put(kOther, Id(1), kStoreCapacity, false, /*keep_ref=*/true);
  auto create = StartCreate(kWriter, Id(2), kUnit);
  EXPECT_FALSE(create->done);
  store_->DisconnectClient(kWriter);
  EXPECT_EQ(store_->Stats().num_pending_creates, 0);
  ASSERT_TRUE(store_->Release(kOther, Id(1)).ok());
  loop_.RunUntilIdle();
  EXPECT_FALSE(create->done);
  EXPECT_FALSE(store_->Contains(Id(2)));
}

// ---- Delete -------------------------------------------------------------------------

TEST_F(ObjectStoreTest, DeleteUnreferencedFreesAtOnce) {
  Put(kWriter, Id(1), kUnit);
  store_->Delete({Id(1), Id(9)});  // unknown ids are ignored
  EXPECT_FALSE(store_->Contains(Id(1)));
  EXPECT_EQ(UsedBytes(), 0);
}

TEST_F(ObjectStoreTest, DeleteOfReferencedObjectWaitsForRelease) {
  Put(kWriter, Id(1), kUnit);
  ASSERT_TRUE(GetNow(kReader, Id(1)).has_value());
  store_->Delete({Id(1)});
  // Gone for everyone else, but the reader's memory stays valid.
  EXPECT_FALSE(store_->Contains(Id(1)));
  EXPECT_EQ(GetNow(kOther, Id(1)), std::nullopt);
  EXPECT_EQ(UsedBytes(), kUnit);
  EXPECT_EQ(store_->RefCount(Id(1)), 1);
  ASSERT_TRUE(store_->Release(kReader, Id(1)).ok());
  EXPECT_EQ(UsedBytes(), 0);
  EXPECT_TRUE(Create(kWriter, Id(1), kUnit).ok());
}

// ---- Eviction -------------------------------------------------------------------------

TEST_F(ObjectStoreTest, EvictsUnreferencedObjectsInLruOrder) {
  for (uint8_t i = 1; i <= 4; ++i) Put(kWriter, Id(i), kUnit);
  // Use object 1 again: LRU order becomes 2, 3, 4, 1.
  ASSERT_TRUE(GetNow(kReader, Id(1)).has_value());
  ASSERT_TRUE(store_->Release(kReader, Id(1)).ok());

  Put(kWriter, Id(5), kUnit);
  EXPECT_FALSE(store_->Contains(Id(2)));
  for (uint8_t i : {1, 3, 4, 5}) EXPECT_TRUE(store_->Contains(Id(i))) << int(i);

  Put(kWriter, Id(6), 2 * kUnit);  // two more: 3 and 4
  EXPECT_FALSE(store_->Contains(Id(3)));
  EXPECT_FALSE(store_->Contains(Id(4)));
  for (uint8_t i : {1, 5, 6}) EXPECT_TRUE(store_->Contains(Id(i))) << int(i);
  EXPECT_EQ(store_->Stats().evicted_bytes_total, 3 * kUnit);
  EXPECT_EQ(UsedBytes(), kStoreCapacity);
}

TEST_F(ObjectStoreTest, ReferencedObjectsAreNotEvictedCreateWaitsForRelease) {
  for (uint8_t i = 1; i <= 4; ++i) Put(kWriter, Id(i), kUnit, false, /*keep_ref=*/true);
  auto create = StartCreate(kOther, Id(5), kUnit);
  EXPECT_FALSE(create->done);
  EXPECT_EQ(store_->Stats().num_pending_creates, 1);
  ASSERT_TRUE(store_->Release(kWriter, Id(3)).ok());
  ASSERT_TRUE(create->done);
  ASSERT_TRUE(create->result.ok()) << create->result.status();
  EXPECT_FALSE(store_->Contains(Id(3)));
  for (uint8_t i : {1, 2, 4}) EXPECT_TRUE(store_->Contains(Id(i)));
}

TEST_F(ObjectStoreTest, PinnedObjectsAreSkippedByEviction) {
  Put(kWriter, Id(1), kUnit, /*pin=*/true);
  for (uint8_t i = 2; i <= 4; ++i) Put(kWriter, Id(i), kUnit);
  Put(kWriter, Id(5), kUnit);
  EXPECT_TRUE(store_->Contains(Id(1)));
  EXPECT_FALSE(store_->Contains(Id(2)));
  EXPECT_EQ(spiller_.num_spill_calls(), 0);
  EXPECT_EQ(store_->Stats().num_pinned, 1);
}

TEST_F(ObjectStoreTest, PinAndUnpin) {
  EXPECT_EQ(store_->Pin(Id(1)).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(Create(kWriter, Id(1), kUnit).ok());
  EXPECT_EQ(store_->Pin(Id(1)).code(), absl::StatusCode::kNotFound);  // not sealed
  ASSERT_TRUE(store_->Seal(kWriter, Id(1), true).ok());
  ASSERT_TRUE(store_->Pin(Id(1)).ok());
  Put(kWriter, Id(2), 3 * kUnit, false, /*keep_ref=*/true);
  // Only the pinned object could make room: it is spilled, not evicted.
  auto create = StartCreate(kOther, Id(3), kUnit);
  EXPECT_FALSE(create->done);
  ASSERT_EQ(spiller_.pending_spills().size(), 1u);
  spiller_.FailNextSpill(absl::ResourceExhaustedError("disk full"));
  // Unpinned, it is evictable again.
  store_->Unpin(Id(1));
  ASSERT_TRUE(Create(kOther, Id(4), kUnit).ok());
  EXPECT_FALSE(store_->Contains(Id(1)));
}

// A copy pulled for a reader (the raylet's client) is held for it: creates that
// need room do not evict it until a worker takes it; then it is evictable again.
TEST_F(ObjectStoreTest, AnObjectHeldForAReaderIsNotEvictedUntilAWorkerTakesIt) {
  constexpr ClientId kPuller = -1;
  Put(kPuller, Id(1), kUnit);
  store_->HoldForReader(Id(1), 60000);
  EXPECT_EQ(store_->NumReaderHolds(), 1u);
  EXPECT_EQ(store_->InUseBytes(), kUnit);
  for (uint8_t i = 2; i <= 4; ++i) Put(kWriter, Id(i), kUnit);
  Put(kWriter, Id(5), kUnit);  // evicts 2, not the held 1
  EXPECT_TRUE(store_->Contains(Id(1)));
  EXPECT_FALSE(store_->Contains(Id(2)));
  // Another transfer of the raylet (a negative client) does not take it.
  ASSERT_TRUE(GetNow(-7, Id(1)).has_value());
  ASSERT_TRUE(store_->Release(-7, Id(1)).ok());
  EXPECT_EQ(store_->NumReaderHolds(), 1u);
  // The reader's Get does: once it lets go, the copy is evictable like any other.
  ASSERT_TRUE(GetNow(kReader, Id(1)).has_value());
  EXPECT_EQ(store_->NumReaderHolds(), 0u);
  EXPECT_EQ(store_->RefCount(Id(1)), 1);
  ASSERT_TRUE(store_->Release(kReader, Id(1)).ok());
  for (uint8_t i = 6; i <= 9; ++i) Put(kWriter, Id(i), kUnit);  // a store's worth
  EXPECT_FALSE(store_->Contains(Id(1)));
}

TEST_F(ObjectStoreTest, AHoldNobodyTakesEndsAfterItsTimeout) {
  Put(-1, Id(1), kUnit);
  store_->HoldForReader(Id(1), 50);
  store_->HoldForReader(Id(9), 50);  // unknown: ignored
  EXPECT_EQ(store_->NumReaderHolds(), 1u);
  ASSERT_TRUE(RunUntil([&] { return store_->NumReaderHolds() == 0; }));
  EXPECT_EQ(store_->RefCount(Id(1)), 0);
  for (uint8_t i = 2; i <= 5; ++i) Put(kWriter, Id(i), kUnit);
  EXPECT_FALSE(store_->Contains(Id(1)));
}

TEST_F(ObjectStoreTest, AHeldObjectDeletedIsFreedWhenItsHoldEnds) {
  Put(-1, Id(1), kUnit);
  store_->HoldForReader(Id(1), 50);
  store_->Delete({Id(1)});
  EXPECT_EQ(store_->InUseBytes(), kUnit);
  EXPECT_EQ(UsedBytes(), kUnit) << "freed before its hold ended";
  ASSERT_TRUE(RunUntil([&] { return UsedBytes() == 0; }));
  EXPECT_EQ(store_->NumReaderHolds(), 0u);
}

// ---- Spilling and restoring ---------------------------------------------------------

// Fills the store with four pinned one-unit objects 1..4 and queues a Create of 5,
// which makes the store spill the least recently used one, 1.
class SpillTest : public ObjectStoreTest {
 protected:
  void FillWithPinned() {
    for (uint8_t i = 1; i <= 4; ++i) locations_[i] = Put(kWriter, Id(i), kUnit, /*pin=*/true);
  }
  std::shared_ptr<CreateResult> SpillOneForCreate(const ObjectID& id, bool pin = true) {
    auto create = StartCreate(kOther, id, kUnit, pin);
    EXPECT_FALSE(create->done);
    EXPECT_EQ(spiller_.pending_spills().size(), 1u);
    return create;
  }
  ObjectLocation locations_[5];
};

TEST_F(SpillTest, PinnedObjectsAreSpilledAndTheCreateCompletes) {
  FillWithPinned();
  auto create = SpillOneForCreate(Id(5));
  ASSERT_EQ(spiller_.pending_spills().size(), 1u);
  const auto& items = spiller_.pending_spills().front().items;
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].id, Id(1));
  EXPECT_EQ(items[0].size, kUnit);
  EXPECT_EQ(items[0].data, arena_.get() + locations_[1].offset);
  // Nothing was evicted while the spill runs.
  for (uint8_t i = 1; i <= 4; ++i) EXPECT_TRUE(store_->Contains(Id(i)));
  EXPECT_EQ(UsedBytes(), kStoreCapacity);

  spiller_.CompleteNextSpill();
  loop_.RunUntilIdle();
  ASSERT_TRUE(create->done);
  ASSERT_TRUE(create->result.ok()) << create->result.status();
  EXPECT_EQ(create->result->offset, locations_[1].offset);
  EXPECT_TRUE(store_->Contains(Id(1)));  // on disk now
  ObjectStoreStats stats = store_->Stats();
  EXPECT_EQ(stats.num_spilled, 1);
  EXPECT_EQ(stats.spilled_bytes_total, kUnit);
  EXPECT_EQ(stats.spilled_bytes_current, kUnit);
  EXPECT_EQ(stats.num_objects, 4);
  EXPECT_EQ(stats.evicted_bytes_total, 0);
  EXPECT_EQ(spiller_.num_spill_calls(), 1);
}

TEST_F(SpillTest, SpillsAtLeastSpillMinBytesInOneBatch) {
  ObjectStoreOptions options;
  options.spill_min_bytes = 2 * kUnit;
  MakeStore(options);
  FillWithPinned();
  auto create = SpillOneForCreate(Id(5));
  ASSERT_EQ(spiller_.pending_spills().front().items.size(), 2u);
  EXPECT_EQ(spiller_.pending_spills().front().items[0].id, Id(1));
  EXPECT_EQ(spiller_.pending_spills().front().items[1].id, Id(2));
  spiller_.CompleteNextSpill();
  ASSERT_TRUE(create->done);
  EXPECT_EQ(spiller_.num_files(), 1u);
  EXPECT_EQ(store_->Stats().num_spilled, 2);
  EXPECT_EQ(UsedBytes(), 3 * kUnit);
}

TEST_F(SpillTest, GetOfSpilledObjectRestoresTheOriginalBytes) {
  FillWithPinned();
  auto create = SpillOneForCreate(Id(5), /*pin=*/false);
  spiller_.CompleteNextSpill();
  ASSERT_TRUE(create->done && create->result.ok());
  ASSERT_TRUE(store_->Seal(kOther, Id(5), true).ok());
  std::memset(arena_.get() + locations_[1].offset, 0, kUnit);  // the old copy is gone

  // The restore takes memory from the only unpinned object, 5.
  auto get = StartGet(kReader, {Id(1)}, -1);
  EXPECT_FALSE(get->done);
  ASSERT_EQ(spiller_.pending_restores().size(), 1u);
  EXPECT_FALSE(store_->Contains(Id(5)));
  spiller_.CompleteNextRestore();
  loop_.RunUntilIdle();
  ASSERT_TRUE(get->done);
  ASSERT_TRUE(get->objects.at(0).has_value());
  EXPECT_EQ(Read(*get->objects[0]), Pattern(Id(1), kUnit));
  EXPECT_EQ(store_->RefCount(Id(1)), 1);
  EXPECT_EQ(store_->Stats().restored_bytes_total, kUnit);
}

TEST_F(SpillTest, RestoreWaitsForAnotherSpill) {
  FillWithPinned();
  auto create = SpillOneForCreate(Id(5));  // pinned too: nothing is evictable
  spiller_.CompleteNextSpill();
  ASSERT_TRUE(create->done && create->result.ok());
  ASSERT_TRUE(store_->Seal(kOther, Id(5), true).ok());

  auto get = StartGet(kReader, {Id(1)}, -1);
  EXPECT_TRUE(spiller_.pending_restores().empty());
  ASSERT_EQ(spiller_.pending_spills().size(), 1u);
  EXPECT_EQ(spiller_.pending_spills().front().items.at(0).id, Id(2));
  spiller_.CompleteNextSpill();
  ASSERT_EQ(spiller_.pending_restores().size(), 1u);
  spiller_.CompleteNextRestore();
  loop_.RunUntilIdle();
  ASSERT_TRUE(get->done);
  ASSERT_TRUE(get->objects.at(0).has_value());
  EXPECT_EQ(Read(*get->objects[0]), Pattern(Id(1), kUnit));
  EXPECT_EQ(store_->Stats().num_spilled, 2);
}

TEST_F(SpillTest, FailedRestoreFreesItsMemory) {
  FillWithPinned();
  auto create = SpillOneForCreate(Id(5));
  spiller_.CompleteNextSpill();
  ASSERT_TRUE(store_->Abort(kOther, Id(5)).ok());
  EXPECT_EQ(UsedBytes(), 3 * kUnit);
  auto get = StartGet(kReader, {Id(1)}, 20);
  ASSERT_EQ(spiller_.pending_restores().size(), 1u);
  spiller_.FailNextRestore(absl::DataLossError("spill file truncated"));
  ASSERT_TRUE(RunUntil([&] { return get->done; }));
  EXPECT_FALSE(get->objects.at(0).has_value());
  EXPECT_EQ(UsedBytes(), 3 * kUnit);
  EXPECT_TRUE(store_->Contains(Id(1)));
}

TEST_F(SpillTest, DeleteRemovesSpilledBytes) {
  FillWithPinned();
  auto create = SpillOneForCreate(Id(5));
  spiller_.CompleteNextSpill();
  ASSERT_EQ(spiller_.num_files(), 1u);
  store_->Delete({Id(1)});
  ASSERT_EQ(spiller_.deleted().size(), 1u);
  EXPECT_EQ(spiller_.deleted()[0].size, kUnit);
  EXPECT_EQ(spiller_.num_files(), 0u);
  EXPECT_FALSE(store_->Contains(Id(1)));
  EXPECT_EQ(store_->Stats().num_spilled, 0);
}

TEST_F(SpillTest, SpillFailureFailsWaitingCreateWithoutRetrying) {
  FillWithPinned();
  auto create = SpillOneForCreate(Id(5));
  spiller_.FailNextSpill(absl::ResourceExhaustedError("disk full"));
  loop_.RunUntilIdle();
  ASSERT_TRUE(create->done);
  EXPECT_EQ(create->result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(create->result.status().message()), HasSubstr("spill"));
  EXPECT_THAT(std::string(create->result.status().message()), HasSubstr("disk full"));
  // No retry loop: one attempt, nothing pending, the objects still in memory.
  loop_.RunUntilIdle();
  EXPECT_EQ(spiller_.num_spill_calls(), 1);
  EXPECT_TRUE(spiller_.pending_spills().empty());
  EXPECT_EQ(store_->Stats().num_pending_creates, 0);
  EXPECT_EQ(store_->Stats().num_spilled, 0);
  EXPECT_EQ(UsedBytes(), kStoreCapacity);
  EXPECT_FALSE(store_->Contains(Id(5)));

  // A later Create tries again, once.
  auto again = SpillOneForCreate(Id(6));
  EXPECT_EQ(spiller_.num_spill_calls(), 2);
  spiller_.CompleteNextSpill();
  ASSERT_TRUE(again->done);
  EXPECT_TRUE(again->result.ok()) << again->result.status();
}

// An object being spilled can be read (Get), deleted and released (or its reader
// can go away) before the spill finishes: its memory is still being written to disk,
// so it must stay allocated until then, and the spilled copy must be removed after.
class DeleteWhileSpillingTest : public SpillTest, public ::testing::WithParamInterface<bool> {};

TEST_P(DeleteWhileSpillingTest, LastReferenceDroppedWhileSpillingWaitsForTheSpill) {
  bool by_disconnect = GetParam();
  FillWithPinned();
  auto create = SpillOneForCreate(Id(5));
  ASSERT_TRUE(GetNow(kReader, Id(1)).has_value());
  store_->Delete({Id(1)});
  if (by_disconnect) {
    store_->DisconnectClient(kReader);
  } else {
    ASSERT_TRUE(store_->Release(kReader, Id(1)).ok());
  }
  loop_.RunUntilIdle();
  EXPECT_FALSE(create->done) << "the memory of an object being spilled was reused";
  EXPECT_EQ(UsedBytes(), kStoreCapacity);

  spiller_.CompleteNextSpill();
  loop_.RunUntilIdle();
  ASSERT_TRUE(create->done);
  EXPECT_TRUE(create->result.ok()) << create->result.status();
  EXPECT_EQ(spiller_.deleted().size(), 1u);
  EXPECT_EQ(spiller_.num_files(), 0u) << "the deleted object's spill file leaked";
  EXPECT_FALSE(store_->Contains(Id(1)));

  // Spilling still works afterwards (the in-flight byte count was settled).
  ASSERT_TRUE(store_->Seal(kOther, Id(5), true).ok());
  auto next = SpillOneForCreate(Id(6));
  EXPECT_EQ(spiller_.num_spill_calls(), 2);
}

INSTANTIATE_TEST_SUITE_P(ReleaseOrDisconnect, DeleteWhileSpillingTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Disconnect" : "Release"; });

TEST_F(SpillTest, DeleteWhileRestoringFreesOnceRestored) {
  FillWithPinned();
  auto create = SpillOneForCreate(Id(5));
  spiller_.CompleteNextSpill();
  ASSERT_TRUE(store_->Abort(kOther, Id(5)).ok());
  auto get = StartGet(kReader, {Id(1)}, -1);
  ASSERT_EQ(spiller_.pending_restores().size(), 1u);
  store_->Delete({Id(1)});
  EXPECT_FALSE(store_->Contains(Id(1)));
  spiller_.CompleteNextRestore();
  loop_.RunUntilIdle();
  EXPECT_EQ(UsedBytes(), 3 * kUnit);
  EXPECT_EQ(spiller_.num_files(), 0u);
  EXPECT_EQ(store_->RefCount(Id(1)), 0);
}

// A restored pinned object keeps its spilled copy: under pressure its memory copy
// is dropped without writing it again, and it can be restored again.
TEST_F(SpillTest, RestoredCopyIsDroppedWithoutSpillingAgain) {
  FillWithPinned();
  auto create = SpillOneForCreate(Id(5), /*pin=*/false);
  spiller_.CompleteNextSpill();
  ASSERT_TRUE(store_->Seal(kOther, Id(5), true).ok());
  auto get = StartGet(kReader, {Id(1)}, -1);
  spiller_.CompleteNextRestore();  // took object 5's memory
  ASSERT_TRUE(get->done);
  ASSERT_TRUE(store_->Release(kReader, Id(1)).ok());

  // Object 1 is now the least recently used pinned object, already on disk.
  ASSERT_TRUE(Create(kOther, Id(6), kUnit).ok());
  EXPECT_EQ(spiller_.num_spill_calls(), 1);
  EXPECT_TRUE(store_->Contains(Id(1)));
  ASSERT_TRUE(store_->Abort(kOther, Id(6)).ok());
  auto again = StartGet(kReader, {Id(1)}, -1);
  spiller_.CompleteNextRestore();
  ASSERT_TRUE(again->done);
  ASSERT_TRUE(again->objects.at(0).has_value());
  EXPECT_EQ(Read(*again->objects[0]), Pattern(Id(1), kUnit));
}

// A Get of several spilled objects holds each one as soon as it is restored: a
// creation meanwhile must not evict it (a restored copy is on disk, so it is the
// cheapest to drop, and the Get then waited for it forever: "fetched but not
// readable").
TEST_F(SpillTest, AGetHoldsWhatWasRestoredForItWhileTheRestIsRestored) {
  // 1 and 2 on disk; 3 and 4 in use by their writer; 5 and 6 evictable copies.
  locations_[1] = Put(kWriter, Id(1), kUnit, /*pin=*/true);
  locations_[2] = Put(kWriter, Id(2), kUnit, /*pin=*/true);
  Put(kWriter, Id(3), kUnit, /*pin=*/true, /*keep_ref=*/true);
  Put(kWriter, Id(4), kUnit, /*pin=*/true, /*keep_ref=*/true);
  for (uint8_t id : {5, 6}) {  // each pushes one of 1 and 2 to disk
    auto create = SpillOneForCreate(Id(id), /*pin=*/false);
    spiller_.CompleteNextSpill();
    ASSERT_TRUE(create->done && create->result.ok());
    ASSERT_TRUE(store_->Seal(kOther, Id(id), /*release=*/false).ok());
  }
  ASSERT_TRUE(store_->Release(kOther, Id(5)).ok());
  ASSERT_TRUE(store_->Release(kOther, Id(6)).ok());
  ASSERT_EQ(store_->Stats().num_spilled, 2);

  auto get = StartGet(kReader, {Id(1), Id(2)}, -1);
  ASSERT_EQ(spiller_.pending_restores().size(), 2u);  // room made by evicting 5 and 6
  spiller_.CompleteNextRestore();
  loop_.RunUntilIdle();
  // Another client needs memory now: the restored 1 must not be what it gets.
  auto seven = StartCreate(kOther, Id(7), kUnit);
  spiller_.CompleteNextRestore();
  loop_.RunUntilIdle();
  ASSERT_TRUE(get->done) << "the Get lost an object restored for it";
  ASSERT_TRUE(get->objects.at(0).has_value());
  ASSERT_TRUE(get->objects.at(1).has_value());
  EXPECT_EQ(Read(*get->objects[0]), Pattern(Id(1), kUnit));
  EXPECT_EQ(Read(*get->objects[1]), Pattern(Id(2), kUnit));
  EXPECT_FALSE(seven->done) << "it waits for memory (nothing is free to take)";
  ASSERT_TRUE(store_->Release(kReader, Id(1)).ok());
  loop_.RunUntilIdle();
  EXPECT_TRUE(seven->done) << "the reader's release made room";
}

// A Get that times out returns what it holds (with its references) and nothing else.
TEST_F(SpillTest, ATimedOutGetReturnsWhatItHeld) {
  FillWithPinned();
  auto five = SpillOneForCreate(Id(5));
  spiller_.CompleteNextSpill();
  ASSERT_TRUE(store_->Seal(kOther, Id(5), true).ok());
  auto get = StartGet(kReader, {Id(1), Id(9)}, 50);  // 9 never comes
  ASSERT_EQ(spiller_.pending_spills().size(), 1u);     // room for 1's restore
  spiller_.CompleteNextSpill();
  spiller_.CompleteNextRestore();
  ASSERT_TRUE(RunUntil([&] { return get->done; }));
  ASSERT_TRUE(get->objects.at(0).has_value());
  EXPECT_FALSE(get->objects.at(1).has_value());
  EXPECT_EQ(store_->RefCount(Id(1)), 1);
  ASSERT_TRUE(store_->Release(kReader, Id(1)).ok());
  EXPECT_EQ(store_->RefCount(Id(1)), 0);
}

class AdmissionTest : public SpillTest {
 protected:
  // Puts pinned one-unit objects `first`..`first + 3` and pushes all of them to disk
  // with a creation as large as the store, which is then aborted: the store is empty.
  void SpillFour(uint8_t first) {
    for (uint8_t i = first; i < first + 4; ++i) Put(kWriter, Id(i), kUnit, /*pin=*/true);
    auto big = StartCreate(kOther, Id(100 + first), kStoreCapacity);
    ASSERT_EQ(spiller_.pending_spills().size(), 1u);
    spiller_.CompleteNextSpill();
    loop_.RunUntilIdle();
    ASSERT_TRUE(big->done && big->result.ok()) << big->result.status();
    ASSERT_TRUE(store_->Abort(kOther, Id(100 + first)).ok());
    ASSERT_EQ(UsedBytes(), 0);
  }
};

// Gets are admitted to restore in turn: one whose objects do not fit beside what
// the admitted ones restore waits (restoring nothing, so it cannot take memory the
// first needs), and one behind it waits too, even if it would fit (no overtaking).
TEST_F(AdmissionTest, GetsRestoreInTurnWhileTheyFitAndNoneOvertakes) {
  SpillFour(1);
  SpillFour(5);
  ASSERT_EQ(store_->Stats().num_spilled, 8);
  auto a = StartGet(kReader, {Id(1), Id(2), Id(3)}, -1);
  auto b = StartGet(kOther, {Id(4), Id(5)}, -1);  // 3 + 2 units > 4
  auto c = StartGet(kWriter, {Id(6)}, -1);        // would fit, but comes after b
  EXPECT_EQ(spiller_.pending_restores().size(), 3u) << "only a's objects are restored";
  for (int i = 0; i < 3; ++i) spiller_.CompleteNextRestore();
  loop_.RunUntilIdle();
  ASSERT_TRUE(a->done);
  for (const auto& o : a->objects) ASSERT_TRUE(o.has_value());
  // b is admitted now; a's reader still holds three units, so one restore fits.
  ASSERT_EQ(spiller_.pending_restores().size(), 1u);
  spiller_.CompleteNextRestore();
  loop_.RunUntilIdle();
  EXPECT_FALSE(b->done);
  EXPECT_FALSE(c->done);
  for (uint8_t i = 1; i <= 3; ++i) ASSERT_TRUE(store_->Release(kReader, Id(i)).ok());
  loop_.RunUntilIdle();
  // 5 and then 6 (admitted beside b) are restored into the memory a's reader gave back.
  ASSERT_EQ(spiller_.pending_restores().size(), 2u);
  spiller_.CompleteNextRestore();
  spiller_.CompleteNextRestore();
  loop_.RunUntilIdle();
  ASSERT_TRUE(b->done);
  ASSERT_TRUE(c->done);
  EXPECT_EQ(Read(*b->objects.at(0)), Pattern(Id(4), kUnit));
  EXPECT_EQ(Read(*b->objects.at(1)), Pattern(Id(5), kUnit));
  EXPECT_EQ(Read(*c->objects.at(0)), Pattern(Id(6), kUnit));
}

// A Get waiting for its turn holds nothing, not even what others restored: many Gets
// each holding part of what they need could fill the store and none complete.
TEST_F(AdmissionTest, AGetWaitingForItsTurnHoldsNothing) {
  SpillFour(1);
  SpillFour(5);
  auto a = StartGet(kReader, {Id(1), Id(2), Id(3)}, -1);
  auto b = StartGet(kOther, {Id(1), Id(4), Id(5)}, -1);  // 1 is being restored for a
  ASSERT_EQ(spiller_.pending_restores().size(), 3u);
  spiller_.CompleteNextRestore();  // 1
  loop_.RunUntilIdle();
  EXPECT_EQ(store_->RefCount(Id(1)), 1) << "only a holds it; b waits for its turn";
  spiller_.CompleteNextRestore();
  spiller_.CompleteNextRestore();
  loop_.RunUntilIdle();
  ASSERT_TRUE(a->done);
  // a returned: b's turn. It holds 1, in memory, and restores 4 (5 waits for a's
  // reader to let go).
  ASSERT_FALSE(b->done);
  EXPECT_EQ(store_->RefCount(Id(1)), 2);
  ASSERT_EQ(spiller_.pending_restores().size(), 1u);
  spiller_.CompleteNextRestore();
  for (uint8_t i = 1; i <= 3; ++i) ASSERT_TRUE(store_->Release(kReader, Id(i)).ok());
  loop_.RunUntilIdle();
  ASSERT_EQ(spiller_.pending_restores().size(), 1u);
  spiller_.CompleteNextRestore();
  loop_.RunUntilIdle();
  ASSERT_TRUE(b->done);
  EXPECT_EQ(Read(*b->objects.at(0)), Pattern(Id(1), kUnit));
  EXPECT_EQ(Read(*b->objects.at(2)), Pattern(Id(5), kUnit));
}

// A copy held for its reader is the reader's Get's to hold once the Get comes: one
// waiting for its turn to restore holds nothing, the pulled copy included.
TEST_F(AdmissionTest, AReadersHoldEndsWhenItsGetWaitsForItsTurn) {
  SpillFour(1);
  Put(-1, Id(9), kUnit);  // pulled here for kReader
  store_->HoldForReader(Id(9), 60000);
  auto a = StartGet(kOther, {Id(1), Id(2), Id(3)}, -1);  // admitted: restores 3 units
  auto b = StartGet(kReader, {Id(9), Id(4)}, -1);         // 2 more do not fit: waits
  ASSERT_FALSE(b->done);
  EXPECT_EQ(store_->NumReaderHolds(), 0u);
  EXPECT_EQ(store_->RefCount(Id(9)), 0) << "a Get waiting for its turn holds nothing";
}

// Memory that frees up goes to an admitted Get's restore before a create that came
// first: the create may wait for memory such a Get holds (a deadlock until a timeout).
TEST_F(AdmissionTest, ARestoreGoesBeforeACreateThatCameFirst) {
  SpillFour(1);
  for (uint8_t i = 5; i <= 8; ++i) Put(kWriter, Id(i), kUnit, /*pin=*/false, /*keep_ref=*/true);
  auto nine = StartCreate(kOther, Id(9), kUnit);
  EXPECT_FALSE(nine->done);
  auto a = StartGet(kReader, {Id(1)}, -1);
  EXPECT_TRUE(spiller_.pending_restores().empty()) << "no memory yet";
  ASSERT_TRUE(store_->Release(kWriter, Id(5)).ok());
  loop_.RunUntilIdle();
  ASSERT_EQ(spiller_.pending_restores().size(), 1u) << "the freed unit went to the create";
  EXPECT_FALSE(nine->done);
  spiller_.CompleteNextRestore();
  loop_.RunUntilIdle();
  ASSERT_TRUE(a->done);
  EXPECT_EQ(Read(*a->objects.at(0)), Pattern(Id(1), kUnit));
  ASSERT_TRUE(store_->Release(kWriter, Id(6)).ok());
  loop_.RunUntilIdle();
  EXPECT_TRUE(nine->done) << "then the create";
}

// An object in memory when a Get came, spilled while the Get waited for its turn, is
// restored for it and held when its turn comes (it waited for ever before).
TEST_F(AdmissionTest, AnObjectSpilledWhileItsGetWaitsIsRestoredForIt) {
  SpillFour(1);
  auto a = StartGet(kReader, {Id(1), Id(2), Id(3)}, -1);
  ASSERT_EQ(spiller_.pending_restores().size(), 3u);
  Put(kWriter, Id(5), kUnit, /*pin=*/true);       // in memory, unreferenced
  auto b = StartGet(kOther, {Id(5), Id(4)}, -1);  // waits for its turn: 3 + 2 > 4
  // A creation pushes 5 to disk meanwhile.
  auto six = StartCreate(kWriter, Id(6), kUnit);
  ASSERT_EQ(spiller_.pending_spills().size(), 1u);
  spiller_.CompleteNextSpill();
  loop_.RunUntilIdle();
  ASSERT_TRUE(six->done && six->result.ok());
  for (int i = 0; i < 3; ++i) spiller_.CompleteNextRestore();
  loop_.RunUntilIdle();
  ASSERT_TRUE(a->done);
  for (uint8_t i = 1; i <= 3; ++i) ASSERT_TRUE(store_->Release(kReader, Id(i)).ok());
  loop_.RunUntilIdle();
  // b's turn: 5 and 4 are restored for it. A creation once 5 is back must not push
  // it out again.
  ASSERT_EQ(spiller_.pending_restores().size(), 2u);
  spiller_.CompleteNextRestore();
  loop_.RunUntilIdle();
  auto seven = StartCreate(kWriter, Id(7), 2 * kUnit);
  spiller_.CompleteNextRestore();
  loop_.RunUntilIdle();
  ASSERT_TRUE(b->done) << "b waits for an object restored for it but not held";
  ASSERT_TRUE(b->objects.at(0).has_value());
  EXPECT_EQ(Read(*b->objects.at(0)), Pattern(Id(5), kUnit));
  EXPECT_EQ(Read(*b->objects.at(1)), Pattern(Id(4), kUnit));
}

// A Get that only looks (timeout 0) restores nothing: it would bypass the turns.
TEST_F(AdmissionTest, AGetThatDoesNotWaitRestoresNothing) {
  SpillFour(1);
  EXPECT_FALSE(GetNow(kReader, Id(1)).has_value());
  EXPECT_TRUE(spiller_.pending_restores().empty());
}

// A queued Get that times out or whose client leaves gives its turn away.
TEST_F(AdmissionTest, AQueuedGetThatEndsGivesItsTurnAway) {
  SpillFour(1);
  SpillFour(5);
  auto a = StartGet(kReader, {Id(1), Id(2), Id(3)}, -1);
  auto b = StartGet(kOther, {Id(4), Id(5)}, 30);
  auto c = StartGet(kWriter, {Id(6), Id(7)}, -1);
  ASSERT_TRUE(RunUntil([&] { return b->done; }));
  store_->DisconnectClient(kWriter);
  auto d = StartGet(kWriter, {Id(8)}, -1);  // admitted beside a at once
  EXPECT_EQ(spiller_.pending_restores().size(), 4u);
  for (int i = 0; i < 4; ++i) spiller_.CompleteNextRestore();
  loop_.RunUntilIdle();
  EXPECT_TRUE(a->done);
  EXPECT_FALSE(c->done) << "its client left";
  ASSERT_TRUE(d->done);
  EXPECT_EQ(Read(*d->objects.at(0)), Pattern(Id(8), kUnit));
}

// A restore that fails ends the Gets waiting for it (without the object) instead of
// leaving them waiting for ever.
TEST_F(AdmissionTest, AFailedRestoreEndsItsGets) {
  SpillFour(1);
  auto a = StartGet(kReader, {Id(1), Id(2)}, -1);
  ASSERT_EQ(spiller_.pending_restores().size(), 2u);
  spiller_.FailNextRestore(absl::DataLossError("bad sector"));
  spiller_.CompleteNextRestore();
  loop_.RunUntilIdle();
  ASSERT_TRUE(a->done);
  EXPECT_FALSE(a->objects.at(0).has_value());
}

// A creation waits as long as spilling makes room, past create_timeout_ms; the
// timeout counts only once nothing can be spilled.
TEST_F(SpillTest, ACreateWaitsForASlowSpillPastTheTimeout) {
  ObjectStoreOptions options;
  options.create_timeout_ms = 30;
  options.create_check_ms = 5;
  options.spill_min_bytes = 0;
  MakeStore(options);
  FillWithPinned();
  auto create = SpillOneForCreate(Id(5));
  RunUntil([] { return false; }, 150);  // the disk is slow
  EXPECT_FALSE(create->done) << create->result.status();
  spiller_.CompleteNextSpill();
  loop_.RunUntilIdle();
  ASSERT_TRUE(create->done);
  EXPECT_TRUE(create->result.ok()) << create->result.status();
}

TEST_F(SpillTest, ACreateFailsAfterTheTimeoutWhenNothingCanBeSpilled) {
  ObjectStoreOptions options;
  options.create_timeout_ms = 30;
  options.create_check_ms = 5;
  MakeStore(options);
  for (uint8_t i = 1; i <= 4; ++i) Put(kWriter, Id(i), kUnit, /*pin=*/true, /*keep_ref=*/true);  // all in use
  auto create = StartCreate(kOther, Id(5), kUnit);
  EXPECT_TRUE(spiller_.pending_spills().empty());
  ASSERT_TRUE(RunUntil([&] { return create->done; }));
  EXPECT_EQ(create->result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(create->result.status().message()), HasSubstr("nothing could be spilled"));
}

// ---- Waiting creations --------------------------------------------------------------

TEST_F(ObjectStoreTest, CreateLargerThanTheStoreFailsAtOnce) {
  bool done = false;
  store_->Create(kWriter, Id(1), kStoreCapacity + 1, 0, false, [&](absl::StatusOr<ObjectLocation> loc) {
    done = true;
    EXPECT_EQ(loc.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(std::string(loc.status().message()), HasSubstr("larger than the object store"));
  });
  EXPECT_TRUE(done);  // inline, without running the loop
  EXPECT_EQ(store_->Stats().num_pending_creates, 0);
  EXPECT_TRUE(Create(kWriter, Id(2), kStoreCapacity).ok());
}

TEST_F(ObjectStoreTest, CreateWithSizesNearTheLimitIsRefused) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const std::pair<int64_t, int64_t> sizes[] = {{kMax, kMax}, {kMax - 62, 0}, {kMax / 2 + 1, kMax / 2 + 1}, {0, kMax}};
  int id = 10;
  for (const auto& [data, metadata] : sizes) {
    bool done = false;
    store_->Create(kWriter, Id(id++), data, metadata, false, [&](absl::StatusOr<ObjectLocation> loc) {
      done = true;
      EXPECT_EQ(loc.status().code(), absl::StatusCode::kResourceExhausted) << data << " + " << metadata;
    });
    EXPECT_TRUE(done);
  }
  EXPECT_EQ(store_->Stats().used_bytes, 0);
  EXPECT_TRUE(Create(kWriter, Id(2), kStoreCapacity).ok());  // the whole store is still there
}

TEST_F(ObjectStoreTest, CreateFailsAfterCreateTimeout) {
  ObjectStoreOptions options;
  options.create_timeout_ms = 60;
  MakeStore(options, /*with_spiller=*/false);
  Put(kWriter, Id(1), 3 * kUnit, false, /*keep_ref=*/true);
  auto start = std::chrono::steady_clock::now();
  auto create = StartCreate(kOther, Id(2), 2 * kUnit);
  EXPECT_FALSE(create->done);
  EXPECT_EQ(store_->Stats().num_pending_creates, 1);
  ASSERT_TRUE(RunUntil([&] { return create->done; }));
  // The deadline is kept in whole milliseconds: allow for the truncation.
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(59));
  EXPECT_EQ(create->result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(create->result.status().message()), HasSubstr("object store full"));
  EXPECT_EQ(store_->Stats().num_pending_creates, 0);
  EXPECT_EQ(UsedBytes(), 3 * kUnit);
}

TEST_F(ObjectStoreTest, QueuedCreatesCompleteInOrder) {
  Put(kWriter, Id(1), kStoreCapacity, false, /*keep_ref=*/true);
  auto first = StartCreate(kOther, Id(2), 2 * kUnit);
  auto second = StartCreate(kOther, Id(3), kUnit);
  EXPECT_FALSE(first->done);
  EXPECT_FALSE(second->done);
  ASSERT_TRUE(store_->Release(kWriter, Id(1)).ok());
  ASSERT_TRUE(first->done && second->done);
  EXPECT_TRUE(first->result.ok());
  EXPECT_TRUE(second->result.ok());
  EXPECT_FALSE(store_->Contains(Id(1)));
}

// Aborting an unsealed object frees memory that a waiting Create can use.
TEST_F(ObjectStoreTest, AbortWakesWaitingCreate) {
  ASSERT_TRUE(Create(kWriter, Id(1), kStoreCapacity).ok());
  auto create = StartCreate(kOther, Id(2), kUnit);
  EXPECT_FALSE(create->done);
  ASSERT_TRUE(store_->Abort(kWriter, Id(1)).ok());
  loop_.RunUntilIdle();
  ASSERT_TRUE(create->done);
  EXPECT_TRUE(create->result.ok()) << create->result.status();
}

// A queued Create that times out must not keep smaller ones behind it waiting for
// memory that is free.
TEST_F(ObjectStoreTest, ExpiredCreateUnblocksTheOnesBehindIt) {
  ObjectStoreOptions options;
  options.create_timeout_ms = 400;
  MakeStore(options, /*with_spiller=*/false);
  Put(kWriter, Id(1), 2 * kUnit, false, /*keep_ref=*/true);
  auto big = StartCreate(kOther, Id(2), 3 * kUnit);
  // Give the second one a clearly later deadline than the first (expiry is checked
  // every 50 ms).
  int64_t first_ms = MonotonicMs();
  ASSERT_TRUE(manta::testing::WaitFor([&] { return MonotonicMs() >= first_ms + 200; }, 5000));
  auto small = StartCreate(kOther, Id(3), kUnit);
  EXPECT_FALSE(small->done);  // FIFO: behind the big one
  ASSERT_TRUE(RunUntil([&] { return big->done; }));
  EXPECT_EQ(big->result.status().code(), absl::StatusCode::kResourceExhausted);
  loop_.RunUntilIdle();
  ASSERT_TRUE(small->done) << "still waiting though the memory is free";
  EXPECT_TRUE(small->result.ok()) << small->result.status();
}

// A client that goes away with only a queued Create must not block the queue.
TEST_F(ObjectStoreTest, DisconnectOfQueuedCreatorUnblocksTheQueue) {
  Put(kWriter, Id(1), 2 * kUnit, false, /*keep_ref=*/true);
  auto big = StartCreate(kOther, Id(2), 3 * kUnit);
  auto small = StartCreate(kReader, Id(3), kUnit);
  EXPECT_FALSE(small->done);
  store_->DisconnectClient(kOther);
  loop_.RunUntilIdle();
  EXPECT_FALSE(big->done);
  ASSERT_TRUE(small->done) << "still waiting behind a gone client's Create";
  EXPECT_TRUE(small->result.ok()) << small->result.status();
}

// Sealing (and releasing) an object hands it to the Gets waiting for it before it
// becomes evictable for a waiting Create.
TEST_F(ObjectStoreTest, SealServesWaitingGetBeforeEviction) {
  Put(kOther, Id(1), 2 * kUnit, false, /*keep_ref=*/true);
  ASSERT_TRUE(Create(kWriter, Id(2), 2 * kUnit).ok());
  auto get = StartGet(kReader, {Id(2)}, -1);
  auto create = StartCreate(kOther, Id(3), 2 * kUnit);
  EXPECT_FALSE(create->done);
  ASSERT_TRUE(store_->Seal(kWriter, Id(2), /*release=*/true).ok());
  loop_.RunUntilIdle();
  ASSERT_TRUE(get->done);
  ASSERT_TRUE(get->objects.at(0).has_value()) << "evicted before the waiting Get saw it";
  EXPECT_EQ(store_->RefCount(Id(2)), 1);
  EXPECT_FALSE(create->done);
}

TEST_F(ObjectStoreTest, OnAllocateGetsEachBlockAndAllocatedEndFollowsTheData) {
  std::vector<std::pair<int64_t, int64_t>> blocks;
  ObjectStoreOptions options;
  options.on_allocate = [&](int64_t offset, int64_t size) { blocks.emplace_back(offset, size); };
  MakeStore(options);
  EXPECT_EQ(store_->allocated_end(), 0);
  absl::StatusOr<ObjectLocation> a = Create(kWriter, Id(1), 100);
  absl::StatusOr<ObjectLocation> b = Create(kWriter, Id(2), 1000);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(blocks, (std::vector<std::pair<int64_t, int64_t>>{{a->offset, 100}, {b->offset, 1000}}));
  EXPECT_EQ(b->offset, 128);
  EXPECT_EQ(store_->allocated_end(), 128 + Allocator::RoundUp(1000));
  // The highest object gone, the data ends where the first one does.
  ASSERT_TRUE(store_->Seal(kWriter, Id(2), /*release=*/true).ok());
  store_->Delete({Id(2)});
  EXPECT_EQ(store_->allocated_end(), Allocator::RoundUp(100));
}

}  // namespace
}  // namespace manta::object_store
