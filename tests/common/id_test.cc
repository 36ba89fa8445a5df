// Tests of the fixed-size identifiers (src/common/id.h, ARCHITECTURE.md §3).
#include "src/common/id.h"

#include <gtest/gtest.h>

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
  for (uint64_t counter = 0; counter < 1000; ++counter) {
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
  // whichever process runs it.
  JobID job = JobID::FromInt(1);
  TaskID parent = TaskID::FromBinary(std::string(24, '\x01'));
  // 8 derived bytes, then the nil actor's 12 bytes, then the job (little-endian 1).
  EXPECT_EQ(TaskID::ForNormalTask(job, parent, 0).Hex(), "5a0b66da5da43ce5ffffffffffffffffffffffff01000000");
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
