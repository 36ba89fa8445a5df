// MemoryStore: immutable values, blocking and asynchronous gets, error values.
#include "src/core_worker/memory_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace manta::core {
namespace {

StoredObjectPtr Value(const std::string& data) {
  auto o = std::make_shared<StoredObject>();
  o->data = data;
  return o;
}

std::vector<ObjectID> Ids(int n) {
  std::vector<ObjectID> ids;
  for (int i = 0; i < n; ++i) ids.push_back(ObjectID::FromRandom());
  return ids;
}

TEST(MemoryStoreTest, PutThenGetReturnsTheSameValueWithoutCopying) {
  MemoryStore store;
  auto id = ObjectID::FromRandom();
  auto v = Value("hello");
  ASSERT_TRUE(store.Put(id, v));
  auto got = store.Get({id}, 1, 0);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], v);
  EXPECT_TRUE(store.Contains(id));
  EXPECT_EQ(store.GetIfExists(id), v);
}

TEST(MemoryStoreTest, ValuesAreImmutable) {
  MemoryStore store;
  auto id = ObjectID::FromRandom();
  ASSERT_TRUE(store.Put(id, Value("first")));
  EXPECT_FALSE(store.Put(id, Value("second")));
  EXPECT_EQ(store.GetIfExists(id)->data, "first");
}

TEST(MemoryStoreTest, GetWithoutWaitingReturnsNullForMissing) {
  MemoryStore store;
  auto ids = Ids(2);
  store.Put(ids[0], Value("a"));
  auto got = store.Get(ids, 2, 0);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_NE(got[0], nullptr);
  EXPECT_EQ(got[1], nullptr);
  EXPECT_EQ(store.GetIfExists(ids[1]), nullptr);
}

TEST(MemoryStoreTest, GetWaitsForAPutFromAnotherThread) {
  MemoryStore store;
  auto ids = Ids(3);
  std::vector<StoredObjectPtr> got;
  std::thread getter([&] { got = store.Get(ids, ids.size(), -1); });
  for (const auto& id : ids) store.Put(id, Value(id.Hex()));
  getter.join();
  ASSERT_EQ(got.size(), 3u);
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_NE(got[i], nullptr);
    EXPECT_EQ(got[i]->data, ids[i].Hex());
  }
}

TEST(MemoryStoreTest, GetReturnsOnceEnoughArePresent) {
  MemoryStore store;
  auto ids = Ids(2);
  std::vector<StoredObjectPtr> got;
  std::thread getter([&] { got = store.Get(ids, 1, -1); });
  store.Put(ids[1], Value("b"));
  getter.join();
  EXPECT_EQ(got[0], nullptr);
  ASSERT_NE(got[1], nullptr);
  EXPECT_EQ(got[1]->data, "b");
}

TEST(MemoryStoreTest, GetTimesOutWithNulls) {
  MemoryStore store;
  auto ids = Ids(1);
  auto start = std::chrono::steady_clock::now();
  auto got = store.Get(ids, 1, 20);
  auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(got[0], nullptr);
  EXPECT_GE(waited, std::chrono::milliseconds(15));
}

TEST(MemoryStoreTest, DuplicateIdsCountOncePerPosition) {
  MemoryStore store;
  auto ids = Ids(2);
  std::vector<ObjectID> request = {ids[0], ids[0], ids[1]};
  std::vector<StoredObjectPtr> got;
  // Two of three positions are the same id: its one Put satisfies both.
  std::thread getter([&] { got = store.Get(request, 2, -1); });
  store.Put(ids[0], Value("a"));
  getter.join();
  ASSERT_NE(got[0], nullptr);
  ASSERT_NE(got[1], nullptr);
  EXPECT_EQ(got[2], nullptr);
}

TEST(MemoryStoreTest, ManyIdGetWakesOnlyWhenTheLastArrives) {
  MemoryStore store;
  auto ids = Ids(2000);
  std::atomic<bool> done{false};
  std::vector<StoredObjectPtr> got;
  std::thread getter([&] {
    got = store.Get(ids, ids.size(), -1);
    done = true;
  });
  for (size_t i = 0; i + 1 < ids.size(); ++i) store.Put(ids[i], Value("x"));
  EXPECT_FALSE(done.load());
  store.Put(ids.back(), Value("last"));
  getter.join();
  for (const auto& v : got) ASSERT_NE(v, nullptr);
  // A later Get of a Put id after a timed-out Get leaves no waiter behind.
  auto more = Ids(1);
  EXPECT_EQ(store.Get(more, 1, 1)[0], nullptr);
  store.Put(more[0], Value("late"));
  EXPECT_EQ(store.Get(more, 1, 0)[0]->data, "late");
}

TEST(MemoryStoreTest, RequiredCountIsClampedToTheNumberOfIds) {
  MemoryStore store;
  auto ids = Ids(1);
  store.Put(ids[0], Value("x"));
  auto got = store.Get(ids, 5, -1);  // would wait forever without the clamp
  ASSERT_NE(got[0], nullptr);
}

TEST(MemoryStoreTest, GetAsyncRunsInlineWhenPresentAndOnPutOtherwise) {
  MemoryStore store;
  auto ids = Ids(2);
  store.Put(ids[0], Value("now"));
  std::string inline_value;
  store.GetAsync(ids[0], [&](StoredObjectPtr o) { inline_value = o->data; });
  EXPECT_EQ(inline_value, "now");

  int calls = 0;
  std::string later_value;
  store.GetAsync(ids[1], [&](StoredObjectPtr o) {
    ++calls;
    later_value = o->data;
  });
  EXPECT_EQ(calls, 0);
  store.Put(ids[1], Value("later"));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(later_value, "later");
  store.Put(ids[1], Value("ignored"));  // immutable: no second call
  EXPECT_EQ(calls, 1);
}

TEST(MemoryStoreTest, AfterResolvingAllWaitersAtShutdownNothingWaits) {
  MemoryStore store;
  auto ids = Ids(3);
  std::vector<std::string> seen;
  store.GetAsync(ids[0], [&](StoredObjectPtr o) { seen.push_back(o->data); });
  store.ResolveAllAsyncWaiters([](const ObjectID&) { return Value("shutting down"); });
  EXPECT_EQ(seen, std::vector<std::string>{"shutting down"});
  // A GetAsync arriving afterwards is answered at once; a present value still wins.
  store.GetAsync(ids[1], [&](StoredObjectPtr o) { seen.push_back(o->data); });
  store.Put(ids[2], Value("here"));
  store.GetAsync(ids[2], [&](StoredObjectPtr o) { seen.push_back(o->data); });
  EXPECT_EQ(seen, (std::vector<std::string>{"shutting down", "shutting down", "here"}));
}

TEST(MemoryStoreTest, CallbacksMayCallBackIntoTheStore) {
  MemoryStore store;
  auto ids = Ids(2);
  store.GetAsync(ids[0], [&](StoredObjectPtr o) { store.Put(ids[1], Value(o->data + "!")); });
  store.Put(ids[0], Value("chain"));
  ASSERT_NE(store.GetIfExists(ids[1]), nullptr);
  EXPECT_EQ(store.GetIfExists(ids[1])->data, "chain!");
}

TEST(MemoryStoreTest, ErrorValuesAreStoredAndReturned) {
  MemoryStore store;
  auto id = ObjectID::FromRandom();
  auto error = std::make_shared<StoredObject>();
  error->error = absl::InternalError("task failed: std::logic_error: boom");
  store.Put(id, error);
  auto got = store.Get({id}, 1, 0);
  ASSERT_NE(got[0], nullptr);
  EXPECT_EQ(got[0]->error.code(), absl::StatusCode::kInternal);
  EXPECT_NE(got[0]->error.message().find("boom"), std::string::npos);
}

TEST(MemoryStoreTest, DeleteForgetsValues) {
  MemoryStore store;
  auto ids = Ids(3);
  for (const auto& id : ids) store.Put(id, Value("v"));
  EXPECT_EQ(store.Size(), 3u);
  store.Delete({ids[0], ids[2]});
  EXPECT_EQ(store.Size(), 1u);
  EXPECT_FALSE(store.Contains(ids[0]));
  EXPECT_TRUE(store.Contains(ids[1]));
  store.Delete({ObjectID::FromRandom()});  // unknown: ignored
  EXPECT_EQ(store.Size(), 1u);
}

TEST(MemoryStoreTest, ManyPuttersAndGettersAgree) {
  MemoryStore store;
  auto ids = Ids(200);
  std::atomic<int> complete{0};
  std::vector<std::thread> threads;
  for (int g = 0; g < 4; ++g) {
    threads.emplace_back([&] {
      auto got = store.Get(ids, ids.size(), -1);
      bool all = true;
      for (const auto& o : got) all &= o != nullptr;
      complete += all ? 1 : 0;
    });
  }
  for (int p = 0; p < 4; ++p) {
    threads.emplace_back([&, p] {
      for (size_t i = p; i < ids.size(); i += 4) store.Put(ids[i], Value("x"));
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(complete, 4);
  EXPECT_EQ(store.Size(), ids.size());
}

TEST(MemoryStoreTest, ResolveAsyncWaitersAnswersWithoutStoring) {
  MemoryStore store;
  ObjectID id = ObjectID::FromIndex(TaskID::ForDriver(JobID::FromInt(1)), 1);
  StoredObjectPtr seen;
  store.GetAsync(id, [&](StoredObjectPtr v) { seen = std::move(v); });
  auto freed = std::make_shared<StoredObject>();
  freed->error = absl::InternalError("freed");
  int made = 0;
  auto make_freed = [&] {
    ++made;
    return freed;
  };
  store.ResolveAsyncWaiters(ObjectID::FromRandom(), make_freed);  // nobody waits: no value made
  EXPECT_EQ(made, 0);
  store.ResolveAsyncWaiters(id, make_freed);
  EXPECT_EQ(made, 1);
  ASSERT_NE(seen, nullptr);
  EXPECT_FALSE(seen->error.ok());
  EXPECT_FALSE(store.Contains(id));
  // The waiter ran once: a later Put does not call it again.
  seen = nullptr;
  auto value = std::make_shared<StoredObject>();
  value->data = "v";
  EXPECT_TRUE(store.Put(id, value));
  EXPECT_EQ(seen, nullptr);
}

TEST(MemoryStoreTest, AbsentPositionsListsWhatIsNotHereInOrder) {
  MemoryStore store;
  std::vector<ObjectID> ids;
  for (int i = 0; i < 40; ++i) {
    ids.push_back(ObjectID::FromRandom());
    if (i % 3 == 0) store.Put(ids.back(), Value("v"));
  }
  ids.push_back(ids[1]);  // twice, absent both times
  std::vector<size_t> expected;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!store.Contains(ids[i])) expected.push_back(i);
  }
  EXPECT_EQ(store.AbsentPositions(ids), expected);
  EXPECT_EQ(expected.size(), 27u);
}

TEST(MemoryStoreTest, TakeRemovesAndReturnsTheValue) {
  MemoryStore store;
  ObjectID id = ObjectID::FromRandom();
  EXPECT_EQ(store.Take(id), nullptr);
  store.Put(id, Value("x"));
  StoredObjectPtr taken = store.Take(id);
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(taken->data, "x");
  EXPECT_FALSE(store.Contains(id));
  EXPECT_TRUE(store.Put(id, Value("y")));  // gone: a new value may come (a rebuilt object)
}

TEST(MemoryStoreTest, TablesShrinkOnceABurstIsGone) {
  MemoryStore store;
  const size_t empty_capacity = store.TableCapacity();
  std::vector<ObjectID> ids;
  for (int i = 0; i < 50000; ++i) ids.push_back(ObjectID::FromRandom());
  // A Get that times out leaves no waiters behind, and their table shrinks too.
  EXPECT_EQ(store.Get(ids, ids.size(), 1)[0], nullptr);
  for (const ObjectID& id : ids) store.Put(id, Value("x"));
  EXPECT_GE(store.TableCapacity(), ids.size());
  std::vector<ObjectID> all_but_one(ids.begin(), ids.end() - 1);
  store.Delete(all_but_one);
  EXPECT_EQ(store.Size(), 1u);
  EXPECT_EQ(store.GetIfExists(ids.back())->data, "x");
  EXPECT_LE(store.TableCapacity(), std::max<size_t>(empty_capacity, 3 * 4096));
}

}  // namespace
}  // namespace manta::core
