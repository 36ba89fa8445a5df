// Tests of EventLoop and Timer (src/common/event_loop.h).
//
// Tests that need timers to expire run the loop on a helper thread and wait on an
// atomic with a deadline (WaitFor); none sleeps to synchronise.
#include "src/common/event_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "src/common/util.h"
#include "test_util/test_util.h"

namespace manta {
namespace {

using ::manta::testing::WaitFor;

// Runs `loop` on its own thread for the lifetime of the object.
class LoopThread {
 public:
  explicit LoopThread(EventLoop& loop) : loop_(loop), thread_([this] { loop_.Run(); }) {}
  ~LoopThread() {
    loop_.Stop();
    thread_.join();
  }

 private:
  EventLoop& loop_;
  std::thread thread_;
};

TEST(EventLoopTest, PostRunsOnRunUntilIdle) {
  EventLoop loop;
  bool ran = false;
  loop.Post("test.Set", [&] { ran = true; });
  EXPECT_FALSE(ran);  // never inline
  EXPECT_EQ(loop.RunUntilIdle(), 1u);
  EXPECT_TRUE(ran);
  EXPECT_EQ(loop.RunUntilIdle(), 0u);
}

TEST(EventLoopTest, PostPreservesOrder) {
  EventLoop loop;
  std::vector<int> order;
  for (int i = 0; i < 10; ++i) loop.Post("test.Append", [&order, i] { order.push_back(i); });
  loop.RunUntilIdle();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(EventLoopTest, RunUntilIdleRunsWhatHandlersPost) {
  EventLoop loop;
  std::vector<std::string> order;
  loop.Post("test.Outer", [&] {
    order.push_back("outer");
    loop.Post("test.Inner", [&] { order.push_back("inner"); });
  });
  EXPECT_EQ(loop.RunUntilIdle(), 2u);
  EXPECT_EQ(order, (std::vector<std::string>{"outer", "inner"}));
}

TEST(EventLoopTest, PostAcceptsMoveOnlyHandlers) {
  EventLoop loop;
  auto value = std::make_unique<int>(5);
  int seen = 0;
  loop.Post("test.MoveOnly", [&seen, value = std::move(value)] { seen = *value; });
  loop.RunUntilIdle();
  EXPECT_EQ(seen, 5);
}

TEST(EventLoopTest, PostFromOtherThreadsWhileRunning) {
  EventLoop loop;
  std::atomic<int> count{0};
  std::atomic<bool> wrong_thread{false};
  std::thread runner([&] { loop.Run(); });
  constexpr int kPerThread = 200;
  std::vector<std::thread> posters;
  for (int t = 0; t < 3; ++t) {
    posters.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        loop.Post("test.Count", [&] {
          if (std::this_thread::get_id() != runner.get_id()) wrong_thread = true;
          ++count;
        });
      }
    });
  }
  for (auto& t : posters) t.join();
  EXPECT_TRUE(WaitFor([&] { return count.load() == 3 * kPerThread; }, 5000)) << count.load();
  loop.Stop();
  runner.join();
  EXPECT_FALSE(wrong_thread);
  EXPECT_TRUE(loop.stopped());
}

TEST(EventLoopTest, StopBeforeRunMakesRunReturn) {
  EventLoop loop;
  loop.Stop();
  loop.Run();  // must not block
  EXPECT_TRUE(loop.stopped());
}

TEST(EventLoopTest, RunUntilIdleAfterStopRunsReadyHandlers) {
  // A test may Run() the loop until some condition, Stop() it, and then keep driving
  // it with RunUntilIdle(): the handlers that are ready must still run.
  EventLoop loop;
  loop.Post("test.Stop", [&] { loop.Stop(); });
  loop.Run();
  bool ran = false;
  loop.Post("test.Set", [&] { ran = true; });
  EXPECT_EQ(loop.RunUntilIdle(), 1u);
  EXPECT_TRUE(ran);
}

TEST(EventLoopTest, StopFromAHandlerEndsRunUntilIdleEarly) {
  EventLoop loop;
  bool second_ran = false;
  loop.Post("test.Stop", [&] { loop.Stop(); });
  loop.Post("test.Second", [&] { second_ran = true; });
  EXPECT_EQ(loop.RunUntilIdle(), 1u);
  EXPECT_FALSE(second_ran);
  EXPECT_EQ(loop.RunUntilIdle(), 1u);  // the next call picks it up
  EXPECT_TRUE(second_ran);
}

TEST(EventLoopTest, RunAfterFires) {
  EventLoop loop;
  std::atomic<bool> fired{false};
  int64_t start = MonotonicMs();
  std::atomic<int64_t> fired_at{0};
  auto timer = loop.RunAfter("test.After", 20, [&] {
    fired_at = MonotonicMs();
    fired = true;
  });
  LoopThread thread(loop);
  ASSERT_TRUE(WaitFor([&] { return fired.load(); }, 5000));
  EXPECT_GE(fired_at.load() - start, 20);
}

TEST(EventLoopTest, DestroyedTimerNeverFires) {
  EventLoop loop;
  std::atomic<bool> cancelled_fired{false};
  std::atomic<bool> later_fired{false};
  auto cancelled = loop.RunAfter("test.Cancelled", 10, [&] { cancelled_fired = true; });
  // Timers fire in deadline order, so once `later` fired, `cancelled` would have too.
  auto later = loop.RunAfter("test.Later", 40, [&] { later_fired = true; });
  cancelled.reset();
  LoopThread thread(loop);
  ASSERT_TRUE(WaitFor([&] { return later_fired.load(); }, 5000));
  EXPECT_FALSE(cancelled_fired);
}

TEST(EventLoopTest, CancelledTimerNeverFires) {
  EventLoop loop;
  bool fired = false;
  auto timer = loop.RunAfter("test.Cancelled", 0, [&] { fired = true; });
  timer->Cancel();
  loop.RunUntilIdle();
  EXPECT_FALSE(fired);
}

TEST(EventLoopTest, RunEveryFiresRepeatedlyUntilDestroyed) {
  EventLoop loop;
  std::atomic<int> ticks{0};
  std::atomic<bool> sentinel{false};
  auto timer = loop.RunEvery("test.Every", 2, [&] { ++ticks; });
  {
    LoopThread thread(loop);
    ASSERT_TRUE(WaitFor([&] { return ticks.load() >= 3; }, 5000)) << ticks.load();
    // Destroy the timer on the loop thread, where the no-more-callbacks guarantee holds.
    std::atomic<bool> destroyed{false};
    int at_destruction = 0;
    loop.Post("test.Destroy", [&] {
      timer.reset();
      at_destruction = ticks.load();
      destroyed = true;
    });
    ASSERT_TRUE(WaitFor([&] { return destroyed.load(); }, 5000));
    // Several periods later, nothing more has ticked.
    auto after = loop.RunAfter("test.Sentinel", 20, [&] { sentinel = true; });
    ASSERT_TRUE(WaitFor([&] { return sentinel.load(); }, 5000));
    EXPECT_EQ(ticks.load(), at_destruction);
  }
}

TEST(EventLoopTest, PostAfterRunsAfterTheDelay) {
  EventLoop loop;
  std::atomic<int64_t> ran_at{0};
  int64_t start = MonotonicMs();
  loop.PostAfter("test.PostAfter", 20, [&] { ran_at = MonotonicMs(); });
  LoopThread thread(loop);
  ASSERT_TRUE(WaitFor([&] { return ran_at.load() != 0; }, 5000));
  EXPECT_GE(ran_at.load() - start, 20);
}

TEST(EventLoopTest, PostAfterWithoutDelayIsAPost) {
  EventLoop loop;
  bool ran = false;
  loop.PostAfter("test.Now", 0, [&] { ran = true; });
  loop.RunUntilIdle();
  EXPECT_TRUE(ran);
}

TEST(EventLoopTest, StatsCountRunsByName) {
  EventLoop loop;
  loop.Post("test.A", [] {});
  loop.Post("test.A", [] {});
  loop.Post("test.B", [] {});
  loop.RunUntilIdle();
  std::map<std::string, int64_t> stats = loop.Stats();
  EXPECT_EQ(stats["test.A"], 2);
  EXPECT_EQ(stats["test.B"], 1);
  EXPECT_EQ(stats.count("test.C"), 0u);
}

TEST(EventLoopTest, StatsCountTimerCallbacks) {
  EventLoop loop;
  std::atomic<bool> fired{false};
  auto timer = loop.RunAfter("test.Timer", 1, [&] { fired = true; });
  {
    LoopThread thread(loop);
    ASSERT_TRUE(WaitFor([&] { return fired.load(); }, 5000));
  }
  EXPECT_EQ(loop.Stats()["test.Timer"], 1);
}

}  // namespace
}  // namespace manta
