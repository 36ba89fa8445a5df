// The actor worker's side: each caller's order (ActorCallOrder), the pool of a
// threaded actor (ActorThreadPool) and the loop of an async actor (AsyncActorLoop).
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "src/core_worker/actor_call_order.h"
#include "src/core_worker/actor_thread_pool.h"
#include "src/core_worker/async_actor_loop.h"

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

// Stop drops the calls that have not started, waits for the running ones (a call
// finishing late still finds the pool's owner alive), then joins the threads; a
// stop that times out says so, and a later one finishes the job.
TEST(ActorThreadPoolTest, StopDropsQueuedCallsAndWaitsForRunningOnes) {
  auto pool = std::make_unique<ActorThreadPool>(2);
  absl::Mutex mu;
  bool release = false;
  int started = 0;
  std::atomic<int> finished{0};
  std::atomic<int> dropped_ran{0};
  for (int i = 0; i < 2; ++i) {
    pool->Post([&] {
      absl::MutexLock lock(&mu);
      ++started;
      mu.Await(absl::Condition(&release));
      ++finished;
    });
  }
  {
    absl::MutexLock lock(&mu);
    auto two_started = [&started]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return started == 2; };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&two_started), absl::Seconds(10)));
  }
  for (int i = 0; i < 5; ++i) pool->Post([&] { ++dropped_ran; });
  EXPECT_EQ(pool->NumBusy(), 7);
  EXPECT_FALSE(pool->Stop(50)) << "two calls still run";
  EXPECT_EQ(pool->NumBusy(), 2) << "the queued calls are dropped";
  pool->Post([&] { ++dropped_ran; });  // a stopping pool takes no more
  {
    absl::MutexLock lock(&mu);
    release = true;
  }
  EXPECT_TRUE(pool->Stop(10000));
  EXPECT_EQ(finished.load(), 2);
  EXPECT_EQ(dropped_ran.load(), 0);
  EXPECT_EQ(pool->NumBusy(), 0);
  pool.reset();  // already stopped: nothing to wait for
}

// A pool destroyed while a call runs waits for it (the call's thread is joined).
TEST(ActorThreadPoolTest, DestructionWaitsForTheRunningCall) {
  std::atomic<bool> done{false};
  std::atomic<bool> running{false};
  {
    ActorThreadPool pool(1);
    pool.Post([&] {
      running = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      done = true;
    });
    for (int i = 0; i < 1000 && !running.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_TRUE(running.load());
  }
  EXPECT_TRUE(done.load());
}

TEST(AsyncActorLoopTest, StartsCallsInOrderUpToItsBound) {
  int wakes = 0;
  AsyncActorLoop loop(3, [&] { ++wakes; });
  std::vector<int> started;
  std::vector<std::function<void()>> unfinished;  // each call's `finished`
  for (int i = 0; i < 5; ++i) {
    loop.Submit([&, i](std::function<void()> finished) {
      started.push_back(i);
      unfinished.push_back(std::move(finished));
    });
  }
  EXPECT_EQ(started, (std::vector<int>{0, 1, 2}));  // the others wait for room
  EXPECT_EQ(loop.NumBusy(), 5);
  // A call ends later (its coroutine resumed): the next one starts from the queue.
  unfinished[1]();
  EXPECT_EQ(started.size(), 3u);
  EXPECT_EQ(wakes, 1);  // the execution thread is told to look at the queue
  EXPECT_TRUE(loop.RunQueued());
  EXPECT_EQ(started, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(loop.NumBusy(), 4);
  EXPECT_FALSE(loop.RunQueued());
}

TEST(AsyncActorLoopTest, PostsFromOtherThreadsRunOnTheLoopAndStopDropsThem) {
  std::atomic<int> wakes{0};
  AsyncActorLoop loop(10, [&] { wakes.fetch_add(1); });
  int ran = 0;  // the loop's thread (this one) only
  std::thread poster([&] {
    for (int i = 0; i < 1000; ++i) loop.Post([&] { ++ran; });
  });
  poster.join();
  EXPECT_GE(wakes.load(), 1);
  while (loop.RunQueued()) {
  }
  EXPECT_EQ(ran, 1000);
  loop.Stop();
  loop.Post([&] { ++ran; });
  EXPECT_FALSE(loop.RunQueued());
  EXPECT_EQ(ran, 1000);
}

TEST(AsyncActorLoopTest, CallsThatEndAtOnceDoNotNest) {
  AsyncActorLoop loop(1, nullptr);
  const int n = 100000;
  int ran = 0;
  for (int i = 0; i < n; ++i) {
    loop.Submit([&](std::function<void()> finished) {
      ++ran;
      finished();
    });
  }
  EXPECT_EQ(ran, n);
  EXPECT_EQ(loop.NumBusy(), 0);
  EXPECT_FALSE(loop.RunQueued());  // nothing left to start
}

}  // namespace
}  // namespace manta::core
