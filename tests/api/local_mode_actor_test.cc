// Actors in local mode (everything in this process): creation, ordered calls with
// values and refs, handles passed to tasks, names and namespaces, kill, restart,
// ExitActor, factories that throw, threaded actors, out of scope; async actors' loops
// (their calls at once on one thread of their own, a killed actor's loop ended, a
// shutdown while calls await).
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <sstream>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ray/api.h"
#include "src/api/local_mode_runtime.h"
#include "tests/api/local_mode_fixture.h"
#include "tests/test_util/test_util.h"

namespace local_mode_actor_test {
namespace {

std::atomic<int> g_live_counters{0};

class Counter {
 public:
  explicit Counter(int start) : count_(start), restarted_(ray::WasCurrentActorRestarted()) { ++g_live_counters; }
  ~Counter() { --g_live_counters; }
  static Counter* Create(int start) { return new Counter(start); }
  static Counter* Broken() { throw std::invalid_argument("cannot build a counter here"); }
  int Add(int x) {
    count_ += x;
    return count_;
  }
  std::vector<int> Record(int x) {
    seen_.push_back(x);
    return seen_;
  }
  bool RestartedAtCreation() const { return restarted_; }
  int Exit() {
    ray::ExitActor();
    return 0;
  }
  std::string Namespace() { return ray::GetNamespace(); }

 private:
  int count_;
  bool restarted_;
  std::vector<int> seen_;
};

class Latch {
 public:
  static Latch* Create(int n) { return new Latch(n); }
  explicit Latch(int n) : left_(n) {}
  std::string Arrive() {
    std::unique_lock<std::mutex> lock(mu_);
    if (--left_ == 0) cv_.notify_all();
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return left_ <= 0; }) ? "met" : "timed out";
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int left_;
};

// An async actor: its calls await; `Threads` says on how many threads they ran.
class Gatherer {
 public:
  static Gatherer* Create() { return new Gatherer(); }
  ray::Coroutine<int> Await(ray::ObjectRef<int> ref) {
    threads_.insert(std::this_thread::get_id());
    ++waiting_;
    int x = *co_await ref;
    threads_.insert(std::this_thread::get_id());
    --waiting_;
    co_return x;
  }
  int Waiting() { return waiting_; }
  int Threads() { return static_cast<int>(threads_.size()); }
  bool OnCallersThread(std::string caller) {
    std::ostringstream id;
    id << std::this_thread::get_id();
    return id.str() == caller;
  }

 private:
  int waiting_ = 0;  // no lock: one thread runs every call
  std::set<std::thread::id> threads_;
};

std::atomic<bool> g_gate_open{false};
// Waits (at most 30 s) until the test opens the gate or shuts the runtime down.
int Gate() {
  for (int i = 0; i < 30000 && !g_gate_open.load() && ray::IsInitialized(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return 7;
}

size_t ProcessThreads() {
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator("/proc/self/task"),
                                           std::filesystem::directory_iterator()));
}

int Ten() { return 10; }
int AddThrough(ray::ActorHandle<Counter> counter, int x) { return *counter.Task(&Counter::Add).Remote(x).Get(); }

RAY_REMOTE(Counter::Create, Counter::Broken, &Counter::Add, &Counter::Record, &Counter::RestartedAtCreation,
           &Counter::Exit, &Counter::Namespace, Latch::Create, &Latch::Arrive, Ten, AddThrough, Gatherer::Create,
           &Gatherer::Await, &Gatherer::Waiting, &Gatherer::Threads, &Gatherer::OnCallersThread, Gate);

class LocalModeActorTest : public manta::testing::LocalModeFixture {
 protected:
  LocalModeActorTest() : LocalModeFixture("local-ns") {}
};

TEST_F(LocalModeActorTest, CallsRunInOrderWithValuesAndRefs) {
  auto counter = ray::Actor(Counter::Create).Remote(ray::Task(Ten).Remote());
  std::vector<ray::ObjectRef<std::vector<int>>> records;
  for (int i = 0; i < 100; ++i) records.push_back(counter.Task(&Counter::Record).Remote(i));
  EXPECT_EQ(records.back().Get()->size(), 100u);
  EXPECT_EQ((*records.back().Get())[42], 42);
  EXPECT_EQ(*counter.Task(&Counter::Add).Remote(ray::Task(Ten).Remote()).Get(), 20);
  EXPECT_EQ(*ray::Task(AddThrough).Remote(counter, 5).Get(), 25);
  EXPECT_EQ(*counter.Task(&Counter::Namespace).Remote().Get(), "local-ns");
  EXPECT_EQ(ray::GetNamespace(), "local-ns");
}

TEST_F(LocalModeActorTest, NamesKillRestartAndExit) {
  auto named = ray::Actor(Counter::Create).SetName("c").SetMaxRestarts(1).Remote(1);
  EXPECT_THROW(ray::Actor(Counter::Create).SetName("c").Remote(0), ray::internal::RayException);
  auto found = ray::GetActor<Counter>("c");
  ASSERT_TRUE(found);
  EXPECT_EQ(*found->Task(&Counter::Add).Remote(1).Get(), 2);
  EXPECT_FALSE(ray::GetActor<Counter>("c", "other-ns"));
  named.Kill(false);  // restarts: the factory runs again
  EXPECT_EQ(*named.Task(&Counter::Add).Remote(1).Get(), 2);
  EXPECT_TRUE(*named.Task(&Counter::RestartedAtCreation).Remote().Get());
  named.Kill();
  EXPECT_THROW(named.Task(&Counter::Add).Remote(1).Get(), ray::internal::RayActorException);
  EXPECT_FALSE(ray::GetActor<Counter>("c"));

  auto exiting = ray::Actor(Counter::Create).SetMaxRestarts(5).Remote(0);
  EXPECT_THROW(exiting.Task(&Counter::Exit).Remote().Get(), ray::internal::RayActorException);
  EXPECT_THROW(exiting.Task(&Counter::Add).Remote(1).Get(), ray::internal::RayActorException);
  EXPECT_THROW(ray::ExitActor(), ray::internal::RayException);
}

TEST_F(LocalModeActorTest, AFactoryThatThrowsFailsEveryCall) {
  auto broken = ray::Actor(Counter::Broken).Remote();
  try {
    broken.Task(&Counter::Add).Remote(1).Get();
    FAIL() << "expected RayActorException";
  } catch (const ray::internal::RayActorException& e) {
    EXPECT_NE(std::string(e.what()).find("cannot build a counter here"), std::string::npos) << e.what();
  }
}

TEST_F(LocalModeActorTest, AThreadedActorRunsCallsAtOnce) {
  auto latch = ray::Actor(Latch::Create).SetMaxConcurrency(3).Remote(3);
  std::vector<ray::ObjectRef<std::string>> arrivals;
  for (int i = 0; i < 3; ++i) arrivals.push_back(latch.Task(&Latch::Arrive).Remote());
  for (auto& arrival : arrivals) EXPECT_EQ(*arrival.Get(), "met");
}

TEST_F(LocalModeActorTest, AnUnnamedActorGoesWithItsLastHandle) {
  {
    auto counter = ray::Actor(Counter::Create).Remote(0);
    auto copy = counter;
    EXPECT_EQ(*copy.Task(&Counter::Add).Remote(1).Get(), 1);
    EXPECT_GE(g_live_counters.load(), 1);
  }
  EXPECT_TRUE(manta::testing::WaitFor([] { return g_live_counters.load() == 0; }, 5000));
  EXPECT_EQ(Runtime().NumObjects(), 0u);
}

TEST_F(LocalModeActorTest, AnAsyncActorRunsItsCallsAtOnceOnAThreadOfItsOwn) {
  g_gate_open = false;
  auto gatherer = ray::Actor(Gatherer::Create).Remote();
  ray::ObjectRef<int> gate = ray::Task(Gate).Remote();
  std::vector<ray::ObjectRef<int>> calls;
  for (int i = 0; i < 300; ++i) calls.push_back(gatherer.Task(&Gatherer::Await).Remote(gate));
  // All 300 wait at once (more than the pool's threads), and a plain method runs
  // between them.
  EXPECT_TRUE(manta::testing::WaitFor([&] { return *gatherer.Task(&Gatherer::Waiting).Remote().Get() == 300; },
                                      30000));
  g_gate_open = true;
  for (auto& call : calls) EXPECT_EQ(*call.Get(), 7);
  EXPECT_EQ(*gatherer.Task(&Gatherer::Threads).Remote().Get(), 1);
  std::ostringstream me;
  me << std::this_thread::get_id();
  EXPECT_FALSE(*gatherer.Task(&Gatherer::OnCallersThread).Remote(me.str()).Get());
}

TEST_F(LocalModeActorTest, ADeadAsyncActorsLoopEnds) {
  const size_t before = ProcessThreads();
  for (int i = 0; i < 40; ++i) {
    auto gatherer = ray::Actor(Gatherer::Create).Remote();
    EXPECT_EQ(*gatherer.Task(&Gatherer::Await).Remote(ray::Put(i)).Get(), i);
    if (i % 2 == 0) gatherer.Kill();  // the others go with their last handle
  }
  // Each loop ended with its actor (and went at the next creation): not 40 threads more.
  EXPECT_LE(ProcessThreads(), before + 4);
}

TEST(LocalModeAsyncActorShutdownTest, ShutdownWhileCallsAwaitEndsThem) {
  ray::RayConfig config;
  config.local_mode = true;
  ray::Init(config);
  g_gate_open = false;
  auto gatherer = ray::Actor(Gatherer::Create).Remote();
  ray::ObjectRef<int> gate = ray::Task(Gate).Remote();
  std::vector<ray::ObjectRef<int>> calls;
  for (int i = 0; i < 20; ++i) calls.push_back(gatherer.Task(&Gatherer::Await).Remote(gate));
  ASSERT_TRUE(manta::testing::WaitFor([&] { return *gatherer.Task(&Gatherer::Waiting).Remote().Get() == 20; },
                                      30000));
  // The awaits resume (their Gets throw, or the gate ends first as Shutdown begins)
  // and the actor's loop ends: Shutdown returns.
  ray::Shutdown();
  calls.clear();
  gate = ray::ObjectRef<int>();
}

TEST(LocalModeActorLifecycleTest, HandlesUsedAfterShutdownThrowAndAreInert) {
  ray::RayConfig config;
  config.local_mode = true;
  ray::Init(config);
  auto counter = ray::Actor(Counter::Create).Remote(0);
  auto copy = counter;
  ray::Shutdown();
  EXPECT_THROW(counter.Task(&Counter::Add).Remote(1), ray::internal::RayException);
  EXPECT_THROW(counter.Kill(), ray::internal::RayException);
  EXPECT_THROW(ray::GetActor<Counter>("x"), ray::internal::RayException);
  EXPECT_THROW(ray::Actor(Counter::Create).Remote(0), ray::internal::RayException);
}  // handles destroyed after Shutdown: nothing happens

}  // namespace
}  // namespace local_mode_actor_test
