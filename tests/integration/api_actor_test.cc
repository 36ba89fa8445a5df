// Actors through the public API (#include <ray/api.h>) on a real private cluster
// started by ray::Init(): creation, ordered calls, arguments by value and by ref,
// handles passed to tasks and actors, names and namespaces, kill and restart,
// ExitActor, factories that throw, threaded actors and out-of-scope cleanup. This
// binary is its own worker.
#include <ray/api.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "src/api/native_runtime.h"
#include "src/common/security.h"
#include "src/core_worker/core_worker.h"
#include "test_util/test_util.h"

namespace api_actor_test {
namespace {

// ---- The actors ---------------------------------------------------------------

class ActorCounter {
 public:
  explicit ActorCounter(int start) : count_(start), restarted_(ray::WasCurrentActorRestarted()) {}
  static ActorCounter* Create(int start) { return new ActorCounter(start); }
  static ActorCounter* CreateThrowing(std::string why) { throw std::invalid_argument(why); }
  int Add(int x) {
    count_ += x;
    return count_;
  }
  int Get() const { return count_; }
  // The values it saw, in order.
  std::vector<int> Record(int x) {
    seen_.push_back(x);
    return seen_;
  }
  int Pid() { return getpid(); }
  bool RestartedAtCreation() { return restarted_; }
  bool RestartedNow() { return ray::WasCurrentActorRestarted(); }
  int SlowAdd(int x) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return Add(x);
  }
  int AddAfter2Ms(int x) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return Add(x);
  }
  int Exit() {
    ray::ExitActor();
    return 0;
  }
  int Throw(int x) { throw std::runtime_error("bad value " + std::to_string(x)); }
  // Calls another actor through a handle it received.
  int AddThrough(ray::ActorHandle<ActorCounter> other, int x) {
    return *other.Task(&ActorCounter::Add).Remote(x).Get();
  }
  // Creates an actor and returns its handle.
  ray::ActorHandle<ActorCounter> MakeChild(int start) { return ray::Actor(ActorCounter::Create).Remote(start); }
  std::string Namespace() { return ray::GetNamespace(); }
  int NotRegistered() { return 0; }

 private:
  int count_;
  bool restarted_;
  std::vector<int> seen_;
};

// Meets `n` concurrent callers (needs max_concurrency >= n).
class Latch {
 public:
  static Latch* Create(int n) { return new Latch(n); }
  explicit Latch(int n) : left_(n) {}
  std::string Arrive() {
    std::unique_lock<std::mutex> lock(mu_);
    if (--left_ == 0) cv_.notify_all();
    bool met = cv_.wait_for(lock, std::chrono::seconds(20), [&] { return left_ <= 0; });
    return met ? "met" : "timed out";
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int left_;
};

// A threaded actor's calls: each sleeps, then counts itself.
class Busy {
 public:
  static Busy* Create() { return new Busy(); }
  int Work(int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return ++done_;
  }
  int Exit() {
    ray::ExitActor();
    return 0;
  }
  int Pid() { return getpid(); }

 private:
  std::atomic<int> done_{0};
};

int Double(int x) { return 2 * x; }
int CallCounter(ray::ActorHandle<ActorCounter> counter, int x) {
  return *counter.Task(&ActorCounter::Add).Remote(x).Get();
}

RAY_REMOTE(ActorCounter::Create, ActorCounter::CreateThrowing, &ActorCounter::Add, &ActorCounter::Get,
           &ActorCounter::Record, &ActorCounter::Pid, &ActorCounter::RestartedAtCreation, &ActorCounter::RestartedNow,
           &ActorCounter::SlowAdd, &ActorCounter::AddAfter2Ms, &ActorCounter::Exit, &ActorCounter::Throw,
           &ActorCounter::AddThrough, &ActorCounter::MakeChild, &ActorCounter::Namespace);
RAY_REMOTE(Latch::Create, &Latch::Arrive);
RAY_REMOTE(Busy::Create, &Busy::Work, &Busy::Exit, &Busy::Pid);
RAY_REMOTE(Double, CallCounter);

bool ProcessAlive(int pid) { return kill(pid, 0) == 0; }

// Lines of this test's cluster's logs (workers and daemons) that report a crash or
// a sanitizer's finding.
std::string CrashReportsInLogs() {
  namespace fs = std::filesystem;
  const std::string prefix = std::to_string(getpid()) + "-";
  std::string found;
  std::error_code ec;
  for (const auto& root : fs::directory_iterator(manta::TempRoot() + "/private", ec)) {
    if (root.path().filename().string().rfind(prefix, 0) != 0) continue;
    for (const auto& e : fs::recursive_directory_iterator(root.path(), ec)) {
      if (!e.is_regular_file() || e.path().extension() != ".log") continue;
      std::ifstream in(e.path());
      for (std::string line; std::getline(in, line);) {
        for (const char* marker : {"AddressSanitizer", "ThreadSanitizer", "runtime error:", "*** SIGSEGV", "*** SIGABRT",
                                   "*** Aborted", "Check failed"}) {
          if (line.find(marker) != std::string::npos) found += e.path().filename().string() + ": " + line + "\n";
        }
      }
    }
  }
  return found;
}

class ApiActorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ray::RayConfig config;
    config.head_args = {"--num-cpus=2", "--object-store-memory=134217728"};
    ray::Init(config);
  }
  static void TearDownTestSuite() { ray::Shutdown(); }
};

TEST_F(ApiActorTest, CallsRunInOrderAndKeepState) {
  ray::ActorHandle<ActorCounter> counter = ray::Actor(ActorCounter::Create).Remote(10);
  EXPECT_FALSE(counter.ID().empty());
  std::vector<ray::ObjectRef<std::vector<int>>> records;
  for (int i = 0; i < 200; ++i) records.push_back(counter.Task(&ActorCounter::Record).Remote(i));
  std::vector<int> expected;
  for (int i = 0; i < 200; ++i) expected.push_back(i);
  EXPECT_EQ(*records.back().Get(), expected);
  EXPECT_EQ(*counter.Task(&ActorCounter::Add).Remote(5).Get(), 15);
  EXPECT_EQ(*counter.Task(&ActorCounter::Get).Remote().Get(), 15);
}

TEST_F(ApiActorTest, ArgumentsByValueAndByRef) {
  auto start = ray::Task(Double).Remote(21);  // pending when the actor is created
  ray::ActorHandle<ActorCounter> counter = ray::Actor(ActorCounter::Create).Remote(start);
  auto x = ray::Task(Double).Remote(4);
  EXPECT_EQ(*counter.Task(&ActorCounter::Add).Remote(x).Get(), 50);
  EXPECT_EQ(*counter.Task(&ActorCounter::Add).Remote(ray::Put(50)).Get(), 100);
}

TEST_F(ApiActorTest, HandlesArePassedToTasksAndActorsAndReturned) {
  ray::ActorHandle<ActorCounter> counter = ray::Actor(ActorCounter::Create).Remote(0);
  EXPECT_EQ(*ray::Task(CallCounter).Remote(counter, 3).Get(), 3);
  ray::ActorHandle<ActorCounter> other = ray::Actor(ActorCounter::Create).Remote(100);
  EXPECT_EQ(*other.Task(&ActorCounter::AddThrough).Remote(counter, 4).Get(), 7);
  std::shared_ptr<ray::ActorHandle<ActorCounter>> child = counter.Task(&ActorCounter::MakeChild).Remote(1000).Get();
  EXPECT_EQ(*child->Task(&ActorCounter::Add).Remote(1).Get(), 1001);
  ray::ActorHandle<ActorCounter> copy = counter;
  EXPECT_TRUE(copy == counter);
  EXPECT_FALSE(copy != counter);
  EXPECT_FALSE(other == counter);
}

TEST_F(ApiActorTest, AFactoryThatThrowsFailsEveryCall) {
  auto broken = ray::Actor(ActorCounter::CreateThrowing).Remote(std::string("no start value"));
  auto call = broken.Task(&ActorCounter::Get).Remote();
  try {
    call.Get(20000);
    FAIL() << "expected RayActorException";
  } catch (const ray::internal::RayActorException& e) {
    EXPECT_NE(std::string(e.what()).find("no start value"), std::string::npos) << e.what();
  }
  EXPECT_THROW(broken.Task(&ActorCounter::Add).Remote(1).Get(20000), ray::internal::RayActorException);
}

TEST_F(ApiActorTest, MethodExceptionsAreTaskErrorsAndTheActorLivesOn) {
  auto counter = ray::Actor(ActorCounter::Create).Remote(1);
  try {
    counter.Task(&ActorCounter::Throw).Remote(7).Get();
    FAIL() << "expected RayTaskException";
  } catch (const ray::internal::RayTaskException& e) {
    EXPECT_NE(std::string(e.what()).find("bad value 7"), std::string::npos) << e.what();
  }
  EXPECT_EQ(*counter.Task(&ActorCounter::Add).Remote(1).Get(), 2);
}

TEST_F(ApiActorTest, UnregisteredThingsAreRefusedAtRemote) {
  auto counter = ray::Actor(ActorCounter::Create).Remote(1);
  EXPECT_THROW(counter.Task(&ActorCounter::NotRegistered).Remote(), ray::internal::RayFunctionNotFound);
  ray::ActorHandle<ActorCounter> empty;
  EXPECT_THROW(empty.Task(&ActorCounter::Get).Remote(), ray::internal::RayException);
}

TEST_F(ApiActorTest, NamedActorsAreFoundPerNamespace) {
  auto named = ray::Actor(ActorCounter::Create).SetName("shared-counter").Remote(5);
  EXPECT_EQ(*named.Task(&ActorCounter::Add).Remote(1).Get(), 6);
  auto found = ray::GetActor<ActorCounter>("shared-counter");
  ASSERT_TRUE(found);
  EXPECT_EQ(*found->Task(&ActorCounter::Add).Remote(1).Get(), 7);
  EXPECT_FALSE(ray::GetActor<ActorCounter>("no-such-actor"));
  EXPECT_FALSE(ray::GetActor<ActorCounter>("shared-counter", "another-namespace"));
  EXPECT_FALSE(ray::GetActor<ActorCounter>(""));  // as Ray: no actor has the empty name
  // The name is taken in this namespace, free in another.
  EXPECT_THROW(ray::Actor(ActorCounter::Create).SetName("shared-counter").Remote(0), ray::internal::RayException);
  auto elsewhere = ray::Actor(ActorCounter::Create).SetName("shared-counter", "another-namespace").Remote(50);
  auto found_elsewhere = ray::GetActor<ActorCounter>("shared-counter", "another-namespace");
  ASSERT_TRUE(found_elsewhere);
  EXPECT_EQ(*found_elsewhere->Task(&ActorCounter::Get).Remote().Get(), 50);
  // Tasks and actors see the driver's namespace.
  EXPECT_EQ(*named.Task(&ActorCounter::Namespace).Remote().Get(), ray::GetNamespace());
  EXPECT_FALSE(ray::GetNamespace().empty());
  named.Kill();
  elsewhere.Kill();
  EXPECT_TRUE(manta::testing::WaitFor([] { return !ray::GetActor<ActorCounter>("shared-counter"); }, 10000));
}

TEST_F(ApiActorTest, KillMakesEveryLaterCallFail) {
  auto counter = ray::Actor(ActorCounter::Create).Remote(0);
  int pid = *counter.Task(&ActorCounter::Pid).Remote().Get();
  counter.Kill();
  try {
    counter.Task(&ActorCounter::Add).Remote(1).Get(20000);
    FAIL() << "expected RayActorException";
  } catch (const ray::internal::RayActorException& e) {
    EXPECT_NE(std::string(e.what()).find("Kill"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(manta::testing::WaitFor([&] { return !ProcessAlive(pid); }, 10000));
}

TEST_F(ApiActorTest, KillWithoutNoRestartRestartsTheActor) {
  auto counter = ray::Actor(ActorCounter::Create).SetMaxRestarts(1).Remote(0);
  EXPECT_EQ(*counter.Task(&ActorCounter::Add).Remote(5).Get(), 5);
  EXPECT_FALSE(*counter.Task(&ActorCounter::RestartedAtCreation).Remote().Get());
  int pid = *counter.Task(&ActorCounter::Pid).Remote().Get();
  counter.Kill(false);
  // Calls made after the restart reach the new instance (its state starts over).
  EXPECT_EQ(*counter.Task(&ActorCounter::Add).Remote(1).Get(20000), 1);
  EXPECT_NE(*counter.Task(&ActorCounter::Pid).Remote().Get(), pid);
  EXPECT_TRUE(*counter.Task(&ActorCounter::RestartedAtCreation).Remote().Get());
  EXPECT_TRUE(*counter.Task(&ActorCounter::RestartedNow).Remote().Get());
  counter.Kill(false);  // no restarts left: dead
  EXPECT_THROW(counter.Task(&ActorCounter::Add).Remote(1).Get(20000), ray::internal::RayActorException);
}

TEST_F(ApiActorTest, AKilledProcessRestartsAndCallsInFlightFail) {
  auto counter = ray::Actor(ActorCounter::Create).SetMaxRestarts(-1).Remote(0);
  int pid = *counter.Task(&ActorCounter::Pid).Remote().Get();
  auto in_flight = counter.Task(&ActorCounter::SlowAdd).Remote(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the call start
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  EXPECT_THROW(in_flight.Get(20000), ray::internal::RayActorException);
  EXPECT_EQ(*counter.Task(&ActorCounter::Add).Remote(2).Get(20000), 2);
  EXPECT_TRUE(*counter.Task(&ActorCounter::RestartedNow).Remote().Get());
}

TEST_F(ApiActorTest, KillDuringABurstOfCallsNeverHangs) {
  auto counter = ray::Actor(ActorCounter::Create).Remote(0);
  counter.Task(&ActorCounter::Add).Remote(0).Get();
  // 1000 calls of 2 ms: the kill lands while most of them wait.
  std::vector<ray::ObjectRef<int>> burst;
  for (int i = 0; i < 1000; ++i) burst.push_back(counter.Task(&ActorCounter::AddAfter2Ms).Remote(1));
  counter.Kill();
  // Every call either ran (its value counts the calls before it, in order) or failed
  // with RayActorException; none stays pending.
  int ran = 0, failed = 0, last = 0;
  for (auto& call : burst) {
    try {
      int value = *call.Get(20000);
      EXPECT_EQ(value, last + 1);
      last = value;
      ++ran;
    } catch (const ray::internal::RayActorException&) {
      ++failed;
    }
  }
  EXPECT_EQ(ran + failed, 1000);
  EXPECT_GT(failed, 0);
  EXPECT_THROW(counter.Task(&ActorCounter::Add).Remote(1).Get(20000), ray::internal::RayActorException);
}

TEST_F(ApiActorTest, ExitActorEndsItWithoutRestart) {
  auto counter = ray::Actor(ActorCounter::Create).SetMaxRestarts(3).Remote(0);
  int pid = *counter.Task(&ActorCounter::Pid).Remote().Get();
  auto exit = counter.Task(&ActorCounter::Exit).Remote();
  EXPECT_THROW(exit.Get(20000), ray::internal::RayActorException);
  EXPECT_TRUE(manta::testing::WaitFor([&] { return !ProcessAlive(pid); }, 10000));
  try {
    counter.Task(&ActorCounter::Add).Remote(1).Get(20000);
    FAIL() << "expected RayActorException";
  } catch (const ray::internal::RayActorException& e) {
    EXPECT_NE(std::string(e.what()).find("ExitActor"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ray::ExitActor(), ray::internal::RayException);  // not in an actor
}

TEST_F(ApiActorTest, AThreadedActorRunsCallsAtOnce) {
  auto latch = ray::Actor(Latch::Create).SetMaxConcurrency(4).Remote(4);
  std::vector<ray::ObjectRef<std::string>> arrivals;
  for (int i = 0; i < 4; ++i) arrivals.push_back(latch.Task(&Latch::Arrive).Remote());
  for (auto& arrival : arrivals) EXPECT_EQ(*arrival.Get(30000), "met");
}

// ray::ExitActor() in one call of a threaded actor while others run and more are
// queued: the running calls finish or fail, those not started fail, every caller
// hears, and the worker leaves cleanly (the core worker is not destroyed under its
// pool's threads: nothing in any log, under a sanitizer build too).
TEST_F(ApiActorTest, AThreadedActorExitsCleanlyWhileItsCallsRun) {
  for (int round = 0; round < 3; ++round) {
    auto busy = ray::Actor(Busy::Create).SetMaxConcurrency(4).Remote();
    const int pid = *busy.Task(&Busy::Pid).Remote().Get(30000);
    std::vector<ray::ObjectRef<int>> calls;
    for (int i = 0; i < 30; ++i) {
      calls.push_back(busy.Task(&Busy::Work).Remote(i % 2 == 0 ? 200 : 2));
      if (i == 8 + 6 * round) calls.push_back(busy.Task(&Busy::Exit).Remote());
    }
    int finished = 0, failed = 0;
    for (size_t i = 0; i < calls.size(); ++i) {
      try {
        calls[i].Get(30000);
        ++finished;
      } catch (const ray::internal::RayActorException&) {
        ++failed;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "round " << round << ", call " << i << " of " << calls.size() << ": " << e.what();
      }
    }
    EXPECT_EQ(finished + failed, static_cast<int>(calls.size()));
    EXPECT_GT(failed, 0) << "the call that exited fails";
    EXPECT_TRUE(manta::testing::WaitFor([&] { return !ProcessAlive(pid); }, 20000)) << "the actor's worker stays";
  }
  EXPECT_EQ(CrashReportsInLogs(), "");
}

TEST_F(ApiActorTest, AnActorOutOfScopeExits) {
  int pid = 0;
  {
    auto counter = ray::Actor(ActorCounter::Create).Remote(0);
    pid = *counter.Task(&ActorCounter::Pid).Remote().Get();
    EXPECT_TRUE(ProcessAlive(pid));
  }
  EXPECT_TRUE(manta::testing::WaitFor([&] { return !ProcessAlive(pid); }, 10000));
}

}  // namespace
}  // namespace api_actor_test
