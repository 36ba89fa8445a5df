// ObjectStoreClient used by several threads at once, against a real StoreServer:
// a call that waits in the store (a Create waiting for memory, a Get waiting for an
// object) must not hold up the other threads' calls on the same client, as the
// core worker's loop frees objects through the client a user thread may be waiting
// in. Each check is ordered, not timed: the other calls finish while the waiting
// call provably cannot have finished (what it waits for has not happened yet).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "src/object_store/store_client.h"
#include "tests/object_store/store_server_fixture.h"

namespace manta::object_store {
namespace {

using ClientTest = StoreServerTest;
using manta::testing::WaitFor;

bool Pending(const std::future<void>& f) { return f.wait_for(std::chrono::seconds(0)) != std::future_status::ready; }

// An object of 64 bytes of 7s, pinned (as a primary copy is), so that a Create
// waiting for memory does not evict it.
ObjectID PutPinned(ObjectStoreClient& client) {
  ObjectID id = ObjectID::FromRandom();
  auto data = client.Create(id, 64, 0, /*pin_on_seal=*/true);
  EXPECT_TRUE(data.ok()) << data.status();
  if (!data.ok()) return id;
  std::memset(*data, 7, 64);
  EXPECT_TRUE(client.Seal(id, /*release=*/true, /*wait=*/true).ok());
  return id;
}

// The calls the core worker's loop makes (Delete, one-way and waiting; Release),
// and a user thread's quick calls (Contains, Get of a present object, a Put),
// through `client` while another thread waits in it.
void QuickCallsGoThrough(ObjectStoreClient& client, const ObjectID& present, bool can_create) {
  EXPECT_EQ(client.Contains(present).value_or(false), true);
  auto got = client.Get({present}, 0);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->at(0).has_value());
  EXPECT_EQ(got->at(0)->data[0], 7);
  EXPECT_TRUE(client.Release(present).ok());
  ObjectID gone = ObjectID::FromRandom();
  EXPECT_TRUE(client.Delete({gone}, /*wait=*/false).ok());
  EXPECT_TRUE(client.Delete({gone}, /*wait=*/true).ok());
  if (!can_create) return;
  ObjectID fresh = ObjectID::FromRandom();
  auto data = client.Create(fresh, 16);
  ASSERT_TRUE(data.ok()) << data.status();
  std::memset(*data, 9, 16);
  EXPECT_TRUE(client.Seal(fresh, /*release=*/true, /*wait=*/true).ok());
  EXPECT_TRUE(client.Delete({fresh}).ok());
}

TEST_F(ClientTest, CreateWaitingForMemoryDoesNotHoldUpOtherThreads) {
  auto client = Connect();
  auto holder = Connect();
  ASSERT_TRUE(client && holder);
  ObjectID present = PutPinned(*client);
  // Another client's unsealed object takes most of the store, so a large Create
  // waits until it goes.
  ObjectID blocker = ObjectID::FromRandom();
  ASSERT_TRUE(holder->Create(blocker, kCapacity - (8 << 20)).ok());
  ObjectID large = ObjectID::FromRandom();
  auto create = std::async(std::launch::async, [&] {
    auto data = client->Create(large, 16 << 20);
    ASSERT_TRUE(data.ok()) << data.status();
    EXPECT_TRUE(client->Seal(large).ok());
  });
  ASSERT_TRUE(WaitFor([&] { return OnLoop([this] { return store_->Stats().num_pending_creates; }) == 1; }, kTimeoutMs));

  QuickCallsGoThrough(*client, present, /*can_create=*/false);
  EXPECT_TRUE(Pending(create)) << "the large Create cannot finish before the blocker goes";

  ASSERT_TRUE(holder->Abort(blocker).ok());
  ASSERT_EQ(create.wait_for(std::chrono::milliseconds(kTimeoutMs)), std::future_status::ready);
  create.get();
  EXPECT_TRUE(client->Contains(large).value_or(false));
}

TEST_F(ClientTest, GetWaitingForAnObjectDoesNotHoldUpOtherThreads) {
  auto client = Connect();
  auto writer = Connect();
  ASSERT_TRUE(client && writer);
  ObjectID present = PutPinned(*client);
  ObjectID later = ObjectID::FromRandom();
  auto get = std::async(std::launch::async, [&] {
    auto got = client->Get({later}, kTimeoutMs);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(got->at(0).has_value());
    EXPECT_EQ(got->at(0)->data[0], 5);
    EXPECT_TRUE(client->Release(later).ok());
  });
  // The Get is waiting in the store once `later` has a waiter there; until the
  // writer seals it the Get cannot finish.
  auto data = writer->Create(later, 32);
  ASSERT_TRUE(data.ok());
  std::memset(*data, 5, 32);

  QuickCallsGoThrough(*client, present, /*can_create=*/true);
  EXPECT_TRUE(Pending(get)) << "the Get cannot finish before the object is sealed";

  ASSERT_TRUE(writer->Seal(later).ok());
  ASSERT_EQ(get.wait_for(std::chrono::milliseconds(kTimeoutMs)), std::future_status::ready);
  get.get();
}

// Threads sharing one client, each creating, reading, releasing and deleting its
// own objects while also reading a shared one: every value reads back right and
// no reference is left behind.
TEST_F(ClientTest, ManyThreadsShareOneClient) {
  auto client = Connect();
  ASSERT_TRUE(client);
  ObjectID shared = ObjectID::FromRandom();
  Put(*client, shared, 4096, 7);
  constexpr int kThreads = 6;
  constexpr int kRounds = 300;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        ObjectID id = ObjectID::FromRandom();
        const uint8_t fill = static_cast<uint8_t>(t * 31 + r);
        auto data = client->Create(id, 256 + r);
        if (!data.ok()) {
          ++failures;
          continue;
        }
        std::memset(*data, fill, 256 + r);
        if (!client->Seal(id, true, r % 2 == 0).ok()) ++failures;
        auto got = client->Get({id, shared}, kTimeoutMs);
        if (!got.ok() || !got->at(0) || !got->at(1) || got->at(0)->data[255] != fill || got->at(1)->data[4095] != 7) {
          ++failures;
          continue;
        }
        if (!client->Release(id).ok() || !client->Release(shared).ok()) ++failures;
        if (!client->Delete({id}, r % 3 == 0).ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  ASSERT_TRUE(client->Delete({shared}).ok());
  EXPECT_TRUE(client->TakeAsyncError().ok());
  EXPECT_TRUE(WaitFor([&] { return UsedBytes() == 0; }, kTimeoutMs)) << UsedBytes() << " bytes still used";
}

// The store going away fails the call that is waiting in it and every later call,
// whichever thread was reading the socket.
TEST_F(ClientTest, StoreGoingAwayFailsTheWaitingCalls) {
  auto client = Connect();
  ASSERT_TRUE(client);
  std::vector<std::future<absl::Status>> gets;
  for (int i = 0; i < 3; ++i) {
    gets.push_back(std::async(std::launch::async, [&] { return client->Get({ObjectID::FromRandom()}, kTimeoutMs).status(); }));
  }
  ASSERT_TRUE(WaitFor([&] { return NumClients() == 1; }, kTimeoutMs));
  OnLoop([this] {
    server_->Stop();
    return 0;
  });
  for (auto& get : gets) {
    ASSERT_EQ(get.wait_for(std::chrono::milliseconds(kTimeoutMs)), std::future_status::ready);
    absl::Status s = get.get();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  }
  EXPECT_EQ(client->Contains(ObjectID::FromRandom()).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace manta::object_store
