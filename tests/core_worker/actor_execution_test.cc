// The actor worker's side: each caller's order (ActorCallOrder) and the pool of a
// threaded actor (ActorThreadPool).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "gtest/gtest.h"
#include "src/core_worker/actor_call_order.h"
#include "src/core_worker/actor_thread_pool.h"

namespace manta::core {
namespace {

TEST(ActorCallOrderTest, EachCallerRunsForwardAndNoCallRunsTwice) {
  ActorCallOrder order;
  std::string why;
  EXPECT_TRUE(order.Accept("a", 1, &why));
  EXPECT_TRUE(order.Accept("b", 1, &why));  // callers are independent
  EXPECT_TRUE(order.Accept("a", 2, &why));
  EXPECT_TRUE(order.Accept("a", 5, &why));  // calls 3, 4 failed at the caller: a gap
  EXPECT_FALSE(order.Accept("a", 5, &why));
  EXPECT_NE(why.find("already ran"), std::string::npos) << why;
  EXPECT_FALSE(order.Accept("a", 4, &why));
  EXPECT_EQ(order.num_callers(), 2u);
  order.Reset();  // a restarted instance
  EXPECT_TRUE(order.Accept("a", 1, &why));
}

TEST(ActorThreadPoolTest, RunsUpToItsThreadsAtOnce) {
  ActorThreadPool pool(3);
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  std::atomic<int> met{0};
  for (int i = 0; i < 3; ++i) {
    pool.Post([&] {
      std::unique_lock<std::mutex> lock(mu);
      if (++arrived == 3) cv.notify_all();
      if (cv.wait_for(lock, std::chrono::seconds(10), [&] { return arrived == 3; })) ++met;
    });
  }
  for (int i = 0; i < 1000 && met.load() < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(met.load(), 3);  // three calls waited for each other: they ran at once
}

}  // namespace
}  // namespace manta::core
