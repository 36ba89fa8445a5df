// Local mode end to end through the public API: ray::Init with local_mode, Put/Get,
// tasks with values and refs, chains, fan-in, void tasks, Wait with timeouts,
// exceptions, nested refs, and freeing (the object table empties when refs go).
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ray/api.h"
#include "src/api/local_mode_runtime.h"
#include "tests/api/local_mode_fixture.h"
#include "tests/test_util/test_util.h"

namespace local_mode_test {
namespace {

struct Account {
  std::string owner;
  std::vector<int64_t> history;
  MSGPACK_DEFINE(owner, history);
};

int Plus(int a, int b) { return a + b; }
int PlusOne(int a) { return a + 1; }
int Sum(std::vector<int> values) {
  int total = 0;
  for (int v : values) total += v;
  return total;
}
Account Deposit(Account account, int64_t amount) {
  account.history.push_back(amount);
  return account;
}
int Throws(int a) {
  if (a > 0) throw std::logic_error("a must not be positive, got " + std::to_string(a));
  return a;
}
int ThrowsInt() { throw 42; }
std::atomic<int> g_void_calls{0};
void CountCall() { ++g_void_calls; }
int SleepThenReturn(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return ms;
}
int64_t SumArray(const std::array<int, 100000>& values) {
  int64_t total = 0;
  for (int v : values) total += v;
  return total;
}
// Returns a ref to a value it put: ObjectRef<ObjectRef<int>> at the caller.
ray::ObjectRef<int> MakeRef(int value) { return ray::Put(value); }
// Takes a ref itself (declared ObjectRef<int>) and reads it.
int ReadRef(ray::ObjectRef<int> ref) { return *ref.Get() * 2; }
// Submits a child task and waits for it: nested tasks on the pool.
int Nested(int depth) {
  if (depth == 0) return 0;
  return *ray::Task(Nested).Remote(depth - 1).Get() + 1;
}

// Several returns: `n` values (i * 10), `extra` more than the caller asked for.
ray::Returns<int> Tens(int n, int extra) {
  ray::Returns<int> out;
  for (int i = 0; i < n + extra; ++i) out.push_back(i * 10);
  return out;
}
std::vector<uint8_t> Bytes(int n) { return std::vector<uint8_t>(n, 7); }

RAY_REMOTE(Plus, PlusOne, Sum, Deposit, Throws, ThrowsInt, CountCall, SleepThenReturn, SumArray, MakeRef,
           ReadRef, Nested, Tens, Bytes);

class LocalModeTest : public manta::testing::LocalModeFixture {
 protected:
  LocalModeTest() : LocalModeFixture("", /*num_cpus=*/2) {}
};

TEST_F(LocalModeTest, SeveralReturns) {
  std::vector<ray::ObjectRef<int>> refs = ray::Task(Tens).SetNumReturns(3).Remote(3, 0);
  ASSERT_EQ(refs.size(), 3u);
  EXPECT_EQ(*refs[2].Get(), 20);
  EXPECT_EQ(*ray::Task(Plus).Remote(refs[1], refs[2]).Get(), 30);
  auto wrong = ray::Task(Tens).SetNumReturns(2).Remote(2, 1);
  for (const auto& ref : wrong) {
    try {
      ref.Get();
      ADD_FAILURE() << "a return of a task giving 3 values for 2 was read";
    } catch (const ray::internal::RayTaskException& e) {
      EXPECT_NE(std::string(e.what()).find("returned 3 values in its ray::Returns, but the caller asked for 2"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(ray::Task(Tens).Remote(1, 0), ray::internal::RayException);  // no SetNumReturns
}

TEST_F(LocalModeTest, ViewsAndPutBytes) {
  const std::string text = "bytes seen in place";
  auto put = ray::PutBytes(text.data(), text.size());
  ray::ObjectView<uint8_t> view = ray::GetView(put);
  EXPECT_EQ(std::string(view.begin(), view.end()), text);
  EXPECT_EQ(*ray::Get(put), std::vector<uint8_t>(text.begin(), text.end()));
  auto made = ray::Task(Bytes).Remote(1000);
  std::vector<ray::ObjectView<uint8_t>> views = ray::GetView(std::vector<ray::ObjectRef<std::vector<uint8_t>>>{made, put});
  ASSERT_EQ(views.size(), 2u);
  EXPECT_EQ(views[0].size(), 1000u);
  EXPECT_EQ(views[0][999], 7);
  EXPECT_EQ(views[1].size(), text.size());
}

TEST_F(LocalModeTest, PutAndGet) {
  EXPECT_TRUE(ray::IsInitialized());
  EXPECT_TRUE(ray::internal::GetRayRuntime()->IsLocalMode());
  ray::ObjectRef<std::string> s = ray::Put(std::string("hello\0world", 11));
  EXPECT_EQ(*ray::Get(s), std::string("hello\0world", 11));
  Account account{"ann", {1, 2}};
  auto back = ray::Put(account).Get();
  EXPECT_EQ(back->owner, "ann");
  EXPECT_EQ(back->history, (std::vector<int64_t>{1, 2}));
  std::vector<ray::ObjectRef<int>> refs{ray::Put(1), ray::Put(2), ray::Put(3)};
  std::vector<std::shared_ptr<int>> values = ray::Get(refs);
  ASSERT_EQ(values.size(), 3u);
  EXPECT_EQ(*values[2], 3);
  // Ray's Get<T> of ids: the objects of refs still alive here.
  std::vector<std::string> ids{refs[0].ID(), refs[2].ID()};
  std::vector<std::shared_ptr<int>> by_id = ray::Get<int>(ids);
  ASSERT_EQ(by_id.size(), 2u);
  EXPECT_EQ(*by_id[0], 1);
  EXPECT_EQ(*by_id[1], 3);
  EXPECT_THROW(ray::Get<int>(std::vector<std::string>{""}), ray::internal::RayException);
}

TEST_F(LocalModeTest, TasksWithValuesRefsChainsAndFanIn) {
  ray::ObjectRef<int> three = ray::Task(Plus).Remote(1, 2);
  EXPECT_EQ(*three.Get(), 3);
  ray::ObjectRef<int> chained = ray::Task(PlusOne).Remote(ray::Task(PlusOne).Remote(ray::Task(PlusOne).Remote(three)));
  EXPECT_EQ(*ray::Get(chained), 6);
  std::vector<ray::ObjectRef<int>> parts;
  for (int i = 0; i < 20; ++i) parts.push_back(ray::Task(Plus).Remote(i, ray::Put(1)));
  int total = 0;
  for (auto& value : ray::Get(parts)) total += *value;
  EXPECT_EQ(total, 190 + 20);
  EXPECT_EQ(*ray::Task(Sum).Remote(std::vector<int>{1, 2, 3}).Get(), 6);
  Account account{"bob", {}};
  auto deposited = ray::Task(Deposit).Remote(ray::Put(account), 50);
  auto again = ray::Task(Deposit).Remote(deposited, int64_t{7});
  EXPECT_EQ(again.Get()->history, (std::vector<int64_t>{50, 7}));
}

TEST_F(LocalModeTest, LargeArrayArgumentAndResult) {
  auto big = std::make_unique<std::array<int, 100000>>();
  for (int i = 0; i < 100000; ++i) (*big)[i] = i;
  EXPECT_EQ(*ray::Task(SumArray).Remote(*big).Get(), int64_t{99999} * 100000 / 2);
  EXPECT_EQ(*ray::Task(SumArray).Remote(ray::Put(*big)).Get(), int64_t{99999} * 100000 / 2);
  EXPECT_EQ((*ray::Put(*big).Get())[99999], 99999);
}

TEST_F(LocalModeTest, VoidTasks) {
  g_void_calls = 0;
  ray::ObjectRef<void> done = ray::Task(CountCall).Remote();
  done.Get();
  ray::Get(ray::Task(CountCall).Remote());
  EXPECT_EQ(g_void_calls.load(), 2);
}

TEST_F(LocalModeTest, WaitWithTimeouts) {
  ray::ObjectRef<int> slow = ray::Task(SleepThenReturn).Remote(800);
  ray::ObjectRef<int> fast = ray::Put(1);
  ray::WaitResult<int> result = ray::Wait(std::vector<ray::ObjectRef<int>>{slow, fast}, 2, 50);
  ASSERT_EQ(result.ready.size(), 1u);
  ASSERT_EQ(result.unready.size(), 1u);
  EXPECT_EQ(result.ready.front(), fast);
  EXPECT_EQ(result.unready.front(), slow);
  EXPECT_THROW(ray::Get(slow, 10), ray::internal::RayTimeoutException);

  ray::ObjectRef<int> quick = ray::Task(SleepThenReturn).Remote(10);
  ray::WaitResult<int> one = ray::Wait(std::vector<ray::ObjectRef<int>>{slow, quick}, 1, -1);
  ASSERT_EQ(one.ready.size(), 1u);
  EXPECT_EQ(one.ready.front(), quick);

  // Duplicates: both entries land on the same side.
  ray::WaitResult<int> dup = ray::Wait(std::vector<ray::ObjectRef<int>>{fast, fast, slow}, 3, 0);
  EXPECT_EQ(dup.ready.size(), 2u);
  EXPECT_EQ(dup.unready.size(), 1u);
}

TEST_F(LocalModeTest, WaitValidatesItsArguments) {
  std::vector<ray::ObjectRef<int>> refs{ray::Put(1), ray::Put(2)};
  try {
    ray::Wait(refs, 3, 0);
    FAIL();
  } catch (const ray::internal::RayException& e) {
    EXPECT_NE(std::string(e.what()).find("num_objects is 3 but must be between 1 and the number of objects (2)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ray::Wait(refs, 0, 0), ray::internal::RayException);
  EXPECT_THROW(ray::Wait(refs, 1, -5), ray::internal::RayException);
  EXPECT_THROW(ray::Wait(std::vector<ray::ObjectRef<int>>{ray::ObjectRef<int>()}, 1, 0), ray::internal::RayException);
}

TEST_F(LocalModeTest, ExceptionsBecomeRayTaskException) {
  ray::ObjectRef<int> failed = ray::Task(Throws).Remote(5);
  try {
    failed.Get();
    FAIL() << "expected RayTaskException";
  } catch (const ray::internal::RayTaskException& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("Throws"), std::string::npos) << what;
    EXPECT_NE(what.find("std::logic_error"), std::string::npos) << what;
    EXPECT_NE(what.find("a must not be positive, got 5"), std::string::npos) << what;
  }
  // Again: a failed future stays failed.
  EXPECT_THROW(ray::Get(failed), ray::internal::RayTaskException);
  // A dependent task fails the same way without running.
  EXPECT_THROW(ray::Task(PlusOne).Remote(failed).Get(), ray::internal::RayTaskException);
  try {
    ray::Task(ThrowsInt).Remote().Get();
    FAIL();
  } catch (const ray::internal::RayTaskException& e) {
    EXPECT_EQ(std::string(e.what()), "ThrowsInt raised int");
  }
  EXPECT_EQ(*ray::Task(Throws).Remote(-1).Get(), -1);
}

TEST_F(LocalModeTest, NestedRefsRoundTrip) {
  ray::ObjectRef<ray::ObjectRef<int>> outer = ray::Task(MakeRef).Remote(21);
  std::shared_ptr<ray::ObjectRef<int>> inner = outer.Get();
  EXPECT_EQ(*inner->Get(), 21);
  EXPECT_EQ(*ray::Task(ReadRef).Remote(*inner).Get(), 42);
  ray::ObjectRef<ray::ObjectRef<int>> put_outer = ray::Put(ray::Put(8));
  EXPECT_EQ(*ray::Get(*ray::Get(put_outer)), 8);
  std::vector<ray::ObjectRef<int>> list{ray::Put(1), ray::Put(2)};
  auto list_ref = ray::Put(list);
  list.clear();  // the outer object keeps the inner ones alive
  auto back = list_ref.Get();
  EXPECT_EQ(*(*back)[1].Get(), 2);
}

TEST_F(LocalModeTest, NestedTasksDoNotStarveThePool) {
  // Each level blocks a pool thread of 2 in Get; the pool grows instead of hanging.
  EXPECT_EQ(*ray::Task(Nested).Remote(6).Get(5000), 6);
}

TEST_F(LocalModeTest, ObjectsAreFreedWhenRefsGo) {
  {
    ray::ObjectRef<int> a = ray::Put(1);
    ray::ObjectRef<int> b = ray::Task(Plus).Remote(a, 2);
    ray::ObjectRef<ray::ObjectRef<int>> nested = ray::Task(MakeRef).Remote(3);
    auto inner = nested.Get();
    EXPECT_EQ(*b.Get(), 3);
    ray::ObjectRef<int> failed = ray::Task(Throws).Remote(1);
    EXPECT_THROW(failed.Get(), ray::internal::RayTaskException);
    ray::ObjectRef<void> v = ray::Task(CountCall).Remote();
    v.Get();
    EXPECT_GE(Runtime().NumObjects(), 5u);
  }
  EXPECT_TRUE(manta::testing::WaitFor([] { return Runtime().NumObjects() == 0; }, 5000))
      << Runtime().NumObjects() << " objects left";
  // A task whose result is dropped while it runs leaves nothing behind either.
  ray::Task(SleepThenReturn).Remote(20);
  EXPECT_TRUE(manta::testing::WaitFor([] { return Runtime().NumObjects() == 0; }, 5000));
}

TEST(LocalModeLifecycleTest, InitShutdownRepeatedly) {
  ray::Shutdown();  // not initialized: a no-op
  for (int i = 0; i < 5; ++i) {
    ray::RayConfig config;
    config.local_mode = true;
    ray::Init(config);
    EXPECT_TRUE(ray::IsInitialized());
    // Initializing again does nothing (as in Ray): the same runtime stays.
    ray::internal::RayRuntime* runtime = ray::internal::GetRayRuntime();
    ray::Init(config);
    EXPECT_EQ(ray::internal::GetRayRuntime(), runtime);
    ray::ObjectRef<int> survivor = ray::Task(Plus).Remote(i, 1);
    EXPECT_EQ(*survivor.Get(), i + 1);
    ray::ObjectRef<int> pending = ray::Task(SleepThenReturn).Remote(30);
    ray::Shutdown();
    EXPECT_FALSE(ray::IsInitialized());
    EXPECT_THROW(survivor.Get(), ray::internal::RayException);
  }  // refs destroyed after Shutdown: inert
}

TEST(LocalModeLifecycleTest, ShutdownWakesBlockedGet) {
  ray::RayConfig config;
  config.local_mode = true;
  ray::Init(config);
  ray::ObjectRef<int> slow = ray::Task(SleepThenReturn).Remote(300);
  std::atomic<bool> threw{false};
  std::thread waiter([&] {
    try {
      slow.Get();
    } catch (const ray::internal::RayException& e) {
      threw = std::string(e.what()).find("ray::Shutdown() was called while waiting") != std::string::npos;
    }
  });
  auto* runtime = dynamic_cast<ray::internal::LocalModeRuntime*>(ray::internal::GetRayRuntime());
  ASSERT_NE(runtime, nullptr);
  ASSERT_TRUE(manta::testing::WaitFor([&] { return runtime->NumActiveCalls() == 1; }, 5000));
  ray::Shutdown();
  waiter.join();
  EXPECT_TRUE(threw.load());
}

}  // namespace
}  // namespace local_mode_test
