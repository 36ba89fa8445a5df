// Tests of the fixed-size identifiers (src/common/id.h, ARCHITECTURE.md §3).
#include "src/common/id.h"

#include <gtest/gtest.h>

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

namespace manta {
namespace {

TEST(IdTest, SizesFollowTheArchitecture) {
  EXPECT_EQ(JobID::Size(), 4u);
  EXPECT_EQ(ActorID::Size(), 16u);
  EXPECT_EQ(TaskID::Size(), 24u);
  EXPECT_EQ(ObjectID::Size(), 28u);
  EXPECT_EQ(NodeID::Size(), 28u);
  EXPECT_EQ(NodeID::FromRandom().Binary().size(), 28u);
  EXPECT_EQ(JobID::FromInt(7).Hex().size(), 8u);
}

TEST(IdTest, DefaultIsNilAndRandomIsNot) {
  EXPECT_TRUE(NodeID().IsNil());
  EXPECT_TRUE(NodeID::Nil().IsNil());
  EXPECT_EQ(NodeID::Nil().Hex(), std::string(56, 'f'));
  NodeID a = NodeID::FromRandom();
  NodeID b = NodeID::FromRandom();
  EXPECT_FALSE(a.IsNil());
  EXPECT_NE(a, b);
}

TEST(IdTest, HexRoundTrip) {
  NodeID id = NodeID::FromRandom();
  std::string hex = id.Hex();
  ASSERT_EQ(hex.size(), 56u);
  EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos) << hex;
  absl::StatusOr<NodeID> back = NodeID::FromHex(hex);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, id);
}

TEST(IdTest, FromHexAcceptsUpperCase) {
  absl::StatusOr<JobID> id = JobID::FromHex("0A0B0C0D");
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->Hex(), "0a0b0c0d");
}

TEST(IdTest, FromHexRejectsWrongLength) {
  absl::StatusOr<NodeID> short_id = NodeID::FromHex("abcd");
  EXPECT_EQ(short_id.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<JobID> long_id = JobID::FromHex("0102030405");
  EXPECT_EQ(long_id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(JobID::FromHex("").ok());
}

TEST(IdTest, FromHexRejectsNonHexDigits) {
  absl::StatusOr<JobID> id = JobID::FromHex("0102030g");
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(JobID::FromHex("01 20304").ok());
  EXPECT_FALSE(JobID::FromHex("-1020304").ok());
}

TEST(IdTest, FromBinaryCheckedRejectsWrongSize) {
  absl::StatusOr<JobID> id = JobID::FromBinaryChecked("abc");
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(NodeID::FromBinaryChecked(std::string(29, 'x')).ok());
  EXPECT_FALSE(NodeID::FromBinaryChecked("").ok());

  NodeID node = NodeID::FromRandom();
  absl::StatusOr<NodeID> back = NodeID::FromBinaryChecked(node.Binary());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, node);
}

TEST(IdDeathTest, FromBinaryOfTheWrongSizeDiesSayingSo) {
  EXPECT_DEATH(TaskID::FromBinary("abc"), "an id of 3 bytes where 24 were expected");
}

TEST(IdTest, JobIdIntRoundTrip) {
  for (uint32_t v : {0u, 1u, 2u, 255u, 256u, 0x12345678u, 0xfffffffeu}) {
    EXPECT_EQ(JobID::FromInt(v).ToInt(), v);
  }
  EXPECT_NE(JobID::FromInt(1), JobID::FromInt(2));
  EXPECT_FALSE(JobID::FromInt(1).IsNil());
}

TEST(IdTest, NormalTaskIdIsDeterministic) {
  JobID job = JobID::FromInt(3);
  TaskID parent = TaskID::ForDriver(job);
  EXPECT_EQ(TaskID::ForNormalTask(job, parent, 0), TaskID::ForNormalTask(job, parent, 0));
  EXPECT_EQ(TaskID::ForNormalTask(job, parent, 41), TaskID::ForNormalTask(job, parent, 41));
}

TEST(IdTest, NormalTaskIdDiffersByCounterAndParent) {
  JobID job = JobID::FromInt(3);
  TaskID parent = TaskID::ForDriver(job);
  TaskID other_parent = TaskID::ForDriver(job);
  ASSERT_NE(parent, other_parent);
  absl::flat_hash_set<TaskID> seen;
  // Across many blocks of TaskID::kSequenceBits, and at block edges.
  for (uint64_t counter = 0; counter < 100000; ++counter) {
    ASSERT_TRUE(seen.insert(TaskID::ForNormalTask(job, parent, counter)).second) << counter;
  }
  for (uint64_t counter : {uint64_t{1} << 32, (uint64_t{1} << 32) + 63, uint64_t{1} << 40, ~uint64_t{0}}) {
    EXPECT_TRUE(seen.insert(TaskID::ForNormalTask(job, parent, counter)).second) << counter;
  }
  EXPECT_NE(TaskID::ForNormalTask(job, parent, 5), TaskID::ForNormalTask(job, other_parent, 5));
  // Counters whose decimal renderings share a prefix must not collide.
  EXPECT_NE(TaskID::ForNormalTask(job, parent, 1), TaskID::ForNormalTask(job, parent, 11));
}

TEST(IdTest, TaskIdEmbedsJob) {
  JobID job = JobID::FromInt(42);
  TaskID driver = TaskID::ForDriver(job);
  EXPECT_EQ(driver.Job(), job);
  // The actor part is "nil but carrying the job", so it is not the all-0xff Nil().
  EXPECT_FALSE(driver.Actor().IsNil());
  EXPECT_EQ(driver.Actor(), ActorID::NilFromJob(job));
  TaskID child = TaskID::ForNormalTask(job, driver, 0);
  EXPECT_EQ(child.Job(), job);
  EXPECT_EQ(child.Actor(), ActorID::NilFromJob(job));
}

TEST(IdTest, ActorIdEmbedsJobAndIsDeterministic) {
  JobID job = JobID::FromInt(9);
  TaskID parent = TaskID::ForDriver(job);
  ActorID actor = ActorID::Of(job, parent, 1);
  EXPECT_EQ(actor.Job(), job);
  EXPECT_EQ(actor, ActorID::Of(job, parent, 1));
  EXPECT_NE(actor, ActorID::Of(job, parent, 2));
  EXPECT_NE(actor, ActorID::NilFromJob(job));

  TaskID actor_task = TaskID::ForActorTask(actor, parent, 0);
  EXPECT_EQ(actor_task.Actor(), actor);
  EXPECT_EQ(actor_task.Job(), job);
}

TEST(IdTest, ObjectIdFromIndex) {
  JobID job = JobID::FromInt(1);
  TaskID task = TaskID::ForNormalTask(job, TaskID::ForDriver(job), 7);
  ObjectID obj = ObjectID::FromIndex(task, 3);
  EXPECT_EQ(obj.Task(), task);
  EXPECT_EQ(obj.Index(), 3u);
  EXPECT_FALSE(obj.IsPut());
  EXPECT_NE(obj, ObjectID::FromIndex(task, 4));
  EXPECT_EQ(obj, ObjectID::FromIndex(task, 3));
  EXPECT_EQ(ObjectID::FromIndex(task, 0x01020304).Index(), 0x01020304u);
}

TEST(IdTest, PutObjectIdsUseTheirOwnRange) {
  JobID job = JobID::FromInt(1);
  TaskID task = TaskID::ForDriver(job);
  ObjectID put = ObjectID::ForPut(task, 1);
  EXPECT_TRUE(put.IsPut());
  EXPECT_EQ(put.Task(), task);
  EXPECT_EQ(put.Index(), ObjectID::kPutIndexBase + 1);
  EXPECT_NE(put, ObjectID::FromIndex(task, 1));
}

TEST(IdTest, StableHash64IsStable) {
  // Values computed once (and checked against an independent re-implementation of
  // FNV-1a + splitmix64); they must never change, since other processes and hosts
  // derive the same TaskIDs from them.
  EXPECT_EQ(StableHash64(""), 0x5b21f68ffa77f14cull);
  EXPECT_EQ(StableHash64("manta"), 0x3ad200b712a6f06full);
  EXPECT_EQ(StableHash64("manta", 1), 0x9a1def59c1d32101ull);
  EXPECT_NE(StableHash64("manta", 1), StableHash64("manta", 0));
  EXPECT_NE(StableHash64("a"), StableHash64("b"));
}

TEST(IdTest, DerivedIdsAreStableAcrossProcesses) {
  // Fixed inputs give fixed outputs: a re-executed task recreates the same ObjectIDs
  // whichever process runs it. (Every process of a cluster runs the same build.)
  JobID job = JobID::FromInt(1);
  TaskID parent = TaskID::FromBinary(std::string(24, '\x01'));
  // 8 derived bytes, then the nil actor's 12 bytes, then the job (little-endian 1).
  EXPECT_EQ(TaskID::ForNormalTask(job, parent, 0).Hex(), "c0734bc6b60801ecffffffffffffffffffffffff01000000");
}

TEST(IdTest, IdHashPutsConsecutiveTasksInNeighbouringSlots) {
  // absl's swiss tables place an entry at (hash >> 7) and filter by the low 7 bits.
  JobID job = JobID::FromInt(1);
  TaskID parent = TaskID::ForDriver(job);
  IdHash hash;
  constexpr uint64_t kBlock = uint64_t{1} << TaskID::kSequenceBits;
  for (uint64_t block_start : {uint64_t{0}, 5 * kBlock, uint64_t{1} << 33}) {
    TaskID first = TaskID::ForNormalTask(job, parent, block_start);
    ObjectID first_return = ObjectID::FromIndex(first, 1);
    absl::flat_hash_set<size_t> control_bytes;
    for (uint64_t i = 1; i < kBlock; ++i) {
      TaskID task = TaskID::ForNormalTask(job, parent, block_start + i);
      EXPECT_EQ((hash(task) >> 7) - (hash(first) >> 7), i);
      EXPECT_EQ((hash(ObjectID::FromIndex(task, 1)) >> 7) - (hash(first_return) >> 7), i);
      control_bytes.insert(hash(task) & 0x7f);
    }
    EXPECT_EQ(control_bytes.size(), kBlock - 1);  // they never all match the filter
  }
  // The next block lands elsewhere.
  uint64_t a = hash(TaskID::ForNormalTask(job, parent, 0)) >> 7;
  uint64_t b = hash(TaskID::ForNormalTask(job, parent, kBlock)) >> 7;
  EXPECT_GT(a > b ? a - b : b - a, 1u << 20);
  // A run of puts by one task is a block too.
  TaskID driver = TaskID::ForDriver(job);
  EXPECT_EQ((hash(ObjectID::ForPut(driver, 1)) >> 7) - (hash(ObjectID::ForPut(driver, 0)) >> 7), 1u);
}

TEST(IdTest, IdHashKeepsATasksManyReturnsApart) {
  // 64 consecutive tasks with 50 returns each: 3,200 entries, each with a place of
  // its own (a return index per block), not piled onto the 64 places of one block.
  JobID job = JobID::FromInt(1);
  TaskID parent = TaskID::ForDriver(job);
  IdHash hash;
  absl::flat_hash_set<size_t> places;
  for (uint64_t t = 0; t < 64; ++t) {
    TaskID task = TaskID::ForNormalTask(job, parent, t);
    for (uint32_t i = 1; i <= 50; ++i) places.insert(hash(ObjectID::FromIndex(task, i)) >> 7);
  }
  EXPECT_EQ(places.size(), 64u * 50u);
}

TEST(IdTest, IdHashSpreadsRandomIds) {
  // Ids with random bytes (drivers, actors' tasks, other owners' objects) fill the
  // buckets evenly.
  constexpr int kBuckets = 256, kIds = 256 * 200;
  std::vector<int> count(kBuckets);
  IdHash hash;
  for (int i = 0; i < kIds; ++i) ++count[(hash(ObjectID::FromRandom()) >> 7) % kBuckets];
  for (int c : count) {
    EXPECT_GT(c, 100);
    EXPECT_LT(c, 300);
  }
}

TEST(IdTest, IdHashTableHoldsAMillionTasksInFlight) {
  // Submission order in, completion order out, with a window in flight: the owner's
  // pattern. Every lookup finds its own entry.
  JobID job = JobID::FromInt(1);
  TaskID parent = TaskID::ForDriver(job);
  absl::flat_hash_map<ObjectID, uint64_t, IdHash> table;
  constexpr uint64_t kTotal = 1000000, kWindow = 100000;
  for (uint64_t i = 0; i < kTotal; ++i) {
    table.emplace(ObjectID::FromIndex(TaskID::ForNormalTask(job, parent, i), 1), i);
    if (i >= kWindow) {
      auto it = table.find(ObjectID::FromIndex(TaskID::ForNormalTask(job, parent, i - kWindow), 1));
      ASSERT_NE(it, table.end()) << i;
      ASSERT_EQ(it->second, i - kWindow);
      table.erase(it);
    }
  }
  EXPECT_EQ(table.size(), kWindow);
  EXPECT_FALSE(table.contains(ObjectID::FromIndex(TaskID::ForNormalTask(job, parent, kTotal), 1)));
}

TEST(IdTest, WorksInFlatHashSet) {
  absl::flat_hash_set<ObjectID> set;
  TaskID task = TaskID::ForDriver(JobID::FromInt(1));
  for (uint32_t i = 0; i < 100; ++i) set.insert(ObjectID::FromIndex(task, i));
  set.insert(ObjectID::FromIndex(task, 5));  // duplicate
  EXPECT_EQ(set.size(), 100u);
  EXPECT_TRUE(set.contains(ObjectID::FromIndex(task, 42)));
  EXPECT_FALSE(set.contains(ObjectID::FromIndex(task, 100)));
  EXPECT_FALSE(set.contains(ObjectID::Nil()));
}

}  // namespace
}  // namespace manta
