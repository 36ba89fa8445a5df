// StreamTable (the owner's side of streaming tasks) and StreamProducers (the
// worker's): order, duplicates from a retried attempt, the end and its error,
// back-pressure counts sent only when the producer may be paused, the consumer
// leaving, waiting with a timeout, and NotifyNext.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "src/core_worker/stream_producers.h"
#include "src/core_worker/stream_table.h"

namespace manta::core {
namespace {

struct Ack {
  int attempt;
  int64_t consumed;
};

class StreamTableTest : public ::testing::Test {
 protected:
  StreamTableTest() {
    StreamTable::Hooks hooks;
    hooks.store = [this](const ObjectID& id, const rpc::ReturnObject&) { stored.push_back(id); };
    hooks.discard = [this](const ObjectID& id, const rpc::ReturnObject&) { discarded.push_back(id); };
    hooks.release = [this](const ObjectID& id) { released.push_back(id); };
    hooks.consumed = [this](const rpc::Address&, const TaskID&, int attempt, int64_t consumed) {
      acks.push_back({attempt, consumed});
    };
    table = std::make_unique<StreamTable>(std::move(hooks));
  }
  // One reply carrying items [first, last) of `attempt`.
  void Items(int64_t first, int64_t last, int attempt = 0) {
    google::protobuf::RepeatedPtrField<rpc::StreamItem> items;
    for (int64_t i = first; i < last; ++i) {
      rpc::StreamItem* item = items.Add();
      item->set_task_id(task.Binary());
      item->set_attempt_number(attempt);
      item->set_index(i);
      item->mutable_object()->set_object_id(Item(i).Binary());
      item->mutable_worker()->set_worker_id(std::string(WorkerID::kSize, static_cast<char>('w' + attempt)));
    }
    table->OnItems(items);
  }
  ObjectID Item(int64_t i) const { return ObjectID::FromIndex(task, static_cast<uint32_t>(i + 2)); }
  StreamTable::Next Take() { return table->TryNext(task); }

  TaskID task = TaskID::ForDriver(JobID::FromInt(1));
  std::vector<ObjectID> stored, discarded, released;
  std::vector<Ack> acks;
  std::unique_ptr<StreamTable> table;
};

TEST_F(StreamTableTest, ItemsInOrderThenTheEnd) {
  table->Add(task, 0);
  EXPECT_EQ(Take().kind, StreamTable::Next::Kind::kWait);
  google::protobuf::RepeatedPtrField<rpc::StreamItem> wrong;  // item 0 naming another object
  wrong.Add()->set_task_id(task.Binary());
  wrong[0].mutable_object()->set_object_id(Item(5).Binary());
  table->OnItems(wrong);
  EXPECT_TRUE(stored.empty());
  Items(0, 3);
  ASSERT_EQ(stored.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    StreamTable::Next next = Take();
    ASSERT_EQ(next.kind, StreamTable::Next::Kind::kItem);
    EXPECT_EQ(next.id, Item(i));
  }
  EXPECT_EQ(Take().kind, StreamTable::Next::Kind::kWait);
  table->OnEnd(task, /*failed=*/false);
  EXPECT_EQ(Take().kind, StreamTable::Next::Kind::kEnd);
  EXPECT_EQ(Take().kind, StreamTable::Next::Kind::kEnd);
  EXPECT_TRUE(acks.empty());  // no back-pressure: nothing sent
}

TEST_F(StreamTableTest, AFailureGivesTheEndOnceAfterTheItems) {
  table->Add(task, 0);
  Items(0, 1);
  table->OnEnd(task, /*failed=*/true);
  EXPECT_EQ(Take().kind, StreamTable::Next::Kind::kItem);
  StreamTable::Next error = Take();
  EXPECT_EQ(error.kind, StreamTable::Next::Kind::kError);
  EXPECT_EQ(error.id, ObjectID::FromIndex(task, 1));
  EXPECT_EQ(Take().kind, StreamTable::Next::Kind::kEnd);
}

TEST_F(StreamTableTest, ARetryDeliversNothingTwice) {
  table->Add(task, 0);
  Items(0, 3, /*attempt=*/0);
  Items(0, 5, /*attempt=*/1);  // the retry yields from its first item again
  EXPECT_EQ(stored, (std::vector<ObjectID>{Item(0), Item(1), Item(2), Item(3), Item(4)}));
  EXPECT_EQ(discarded, (std::vector<ObjectID>{Item(0), Item(1), Item(2)}));
  Items(3, 4, /*attempt=*/0);  // a late item of the old attempt
  EXPECT_EQ(discarded.size(), 4u);
  table->OnEnd(task, false);
  Items(5, 6, /*attempt=*/1);  // after the end: not taken
  EXPECT_EQ(stored.size(), 5u);
}

TEST_F(StreamTableTest, BackPressureCountsGoOnlyWhenTheProducerMayBePaused) {
  table->Add(task, 2);
  Items(0, 1);
  EXPECT_EQ(Take().kind, StreamTable::Next::Kind::kItem);
  EXPECT_TRUE(acks.empty());  // one reported, one consumed: the producer never paused
  Items(1, 3);
  // Item 1 made two unconsumed as far as its worker knew (it counted none): it may be
  // paused, and one was consumed, so the count goes. Item 2 changes nothing more.
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].consumed, 1);
  EXPECT_EQ(Take().kind, StreamTable::Next::Kind::kItem);  // 2 consumed, the worker knows 1: paused at item 2
  ASSERT_EQ(acks.size(), 2u);
  EXPECT_EQ(acks[1].consumed, 2);
  EXPECT_EQ(Take().kind, StreamTable::Next::Kind::kItem);  // 3 consumed, 3 reported: never paused again
  EXPECT_EQ(acks.size(), 2u);
  // A retry starts counting again: its worker has seen no count.
  Items(0, 2, /*attempt=*/1);
  ASSERT_EQ(acks.size(), 3u);
  EXPECT_EQ(acks[2].attempt, 1);
  EXPECT_EQ(acks[2].consumed, 3);
}

TEST_F(StreamTableTest, TheConsumerLeaving) {
  table->Add(task, 1);
  Items(0, 3);
  EXPECT_EQ(Take().kind, StreamTable::Next::Kind::kItem);
  acks.clear();
  table->Release(task);
  EXPECT_EQ(released, (std::vector<ObjectID>{Item(1), Item(2)}));
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].consumed, kStreamConsumerGone);
  Items(3, 4);
  EXPECT_EQ(discarded, (std::vector<ObjectID>{Item(3)}));
  EXPECT_FALSE(table->Contains(task));
}

TEST_F(StreamTableTest, WaitNextWaitsTimesOutAndWakes) {
  table->Add(task, 0);
  auto timed_out = table->WaitNext(task, 20);
  EXPECT_EQ(timed_out.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(table->WaitNext(TaskID::ForDriver(JobID::FromInt(2)), 0).status().code(), absl::StatusCode::kNotFound);
  std::thread producer([this] { Items(0, 1); });
  auto next = table->WaitNext(task, 10000);
  producer.join();
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->kind, StreamTable::Next::Kind::kItem);
  std::atomic<int> ready{0};
  table->NotifyNext(task, [&] { ++ready; });
  EXPECT_EQ(ready.load(), 0);
  table->OnEnd(task, false);
  EXPECT_EQ(ready.load(), 1);
  table->NotifyNext(task, [&] { ++ready; });  // has something: at once
  EXPECT_EQ(ready.load(), 2);
  table->Shutdown();
}

TEST(StreamProducersTest, PausesAtTheLimitAndGoesOnWhenConsumed) {
  StreamProducers producers;
  const TaskID task = TaskID::ForDriver(JobID::FromInt(1));
  int resumed = 0;
  EXPECT_EQ(producers.NextIndex(task, 0), 0);
  EXPECT_TRUE(producers.MayGoOn(task, 0, 2, [&] { ++resumed; }));
  EXPECT_EQ(producers.NextIndex(task, 0), 1);
  EXPECT_FALSE(producers.MayGoOn(task, 1, 2, [&] { ++resumed; }));  // two unconsumed
  producers.Consumed(task, /*attempt=*/1, 5);                       // another attempt's count
  EXPECT_EQ(resumed, 0);
  producers.Consumed(task, 0, 1);
  EXPECT_EQ(resumed, 1);
  EXPECT_EQ(producers.NextIndex(task, 0), 2);
  EXPECT_FALSE(producers.MayGoOn(task, 2, 2, [&] { ++resumed; }));
  producers.Wake(task);  // cancelled: goes on, and never pauses again
  EXPECT_EQ(resumed, 2);
  EXPECT_EQ(producers.NextIndex(task, 0), 3);
  EXPECT_TRUE(producers.MayGoOn(task, 3, 2, [&] { ++resumed; }));
  producers.Finished(task);
  EXPECT_EQ(producers.Size(), 0u);
}

}  // namespace
}  // namespace manta::core
