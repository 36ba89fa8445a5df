// Coroutines over futures through the public API (ray/api/coroutine.h): co_await on
// ObjectRefs, ray::RunAsync, ray::Spawn on an executor of the test's, WhenAll (refs
// and coroutines), WhenAny, WaitAsync, coroutine tasks, awaits of borrowed refs and
// of objects stored on another node. On a real cluster (AwaitTest, two nodes) and in
// local mode (LocalModeAwaitTest). Slow tasks wait for a file `go` in a fresh
// directory (at most a minute). This binary is its own worker.
#include <ray/api.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cluster_harness.h"
#include "gtest/gtest.h"
#include "test_util/test_util.h"

namespace await_test {
namespace {

namespace fs = std::filesystem;

using manta::testing::WaitForFile;

// ---- Remote functions -------------------------------------------------------

int AwaitTwice(int x) { return 2 * x; }
int AwaitFail(std::string why) { throw std::runtime_error(why); }
void Nothing() {}
// Marks `dir`/started-x, waits for `dir`/go (at most a minute), then returns `x`.
int AfterGo(std::string dir, int x) {
  std::ofstream(dir + "/started-" + std::to_string(x)) << "\n";
  WaitForFile(dir + "/go", 60000);
  return x;
}
std::vector<char> Bytes(int n) { return std::vector<char>(n, 'm'); }
std::string NodeOf() { return std::getenv("MANTA_NODE_ID") != nullptr ? std::getenv("MANTA_NODE_ID") : ""; }

// A coroutine task: awaits a child task, then another.
ray::Coroutine<int> TwiceTwice(int x) {
  std::shared_ptr<int> once = co_await ray::Task(AwaitTwice).Remote(x);
  std::shared_ptr<int> again = co_await ray::Task(AwaitTwice).Remote(*once);
  co_return *again;
}
// A coroutine task awaiting refs it borrowed (they came inside its argument).
ray::Coroutine<int> SumOfBorrowed(std::vector<ray::ObjectRef<int>> refs) {
  int sum = 0;
  for (std::shared_ptr<int>& value : co_await ray::WhenAll(refs)) sum += *value;
  co_return sum;
}

// README.md, "Awaiting futures": the example as written (Download stands in for a fetch).
std::string Download(const std::string& url) { return "<html>" + url + "</html>"; }

int PageSize(std::string url) { return static_cast<int>(Download(url).size()); }
RAY_REMOTE(PageSize);

ray::Coroutine<int> TotalSize(std::vector<std::string> urls) {
  std::vector<ray::ObjectRef<int>> sizes;
  for (const std::string& url : urls) sizes.push_back(ray::Task(PageSize).Remote(url));
  int total = 0;
  for (std::shared_ptr<int>& size : co_await ray::WhenAll(sizes)) total += *size;
  co_return total;
}

RAY_REMOTE(AwaitTwice, AwaitFail, Nothing, AfterGo, Bytes, NodeOf, TwiceTwice, SumOfBorrowed);

// An async actor: its methods are coroutines, so its calls run at once on one thread.
class Waiter {
 public:
  static Waiter* Create() { return new Waiter(); }
  // Awaits a task that waits for `dir`/go; returns 10 * i.
  ray::Coroutine<int> WaitFor(std::string dir, int i) {
    Enter();
    int x = *co_await ray::Task(AfterGo).Remote(dir, i);
    Leave();
    co_return 10 * x;
  }
  // Records the order calls start in; awaits a ready object.
  ray::Coroutine<int> Append(int i) {
    started_.push_back(i);
    co_return *co_await ray::Put(i);
  }
  ray::Coroutine<int> Throw() {
    co_await ray::Task(Nothing).Remote();
    throw std::runtime_error("thrown by a coroutine method");
  }
  // Plain methods run on the same thread, between the coroutines.
  int InFlight() { return in_flight_; }
  int MaxInFlight() { return max_in_flight_; }
  int Threads() { return static_cast<int>(threads_.size()); }
  std::vector<int> Started() { return started_; }

 private:
  void Enter() {
    threads_.insert(std::this_thread::get_id());
    max_in_flight_ = std::max(max_in_flight_, ++in_flight_);
  }
  void Leave() {
    threads_.insert(std::this_thread::get_id());
    --in_flight_;
  }
  // No locks: one thread runs every call.
  int in_flight_ = 0;
  int max_in_flight_ = 0;
  std::set<std::thread::id> threads_;
  std::vector<int> started_;
};
RAY_REMOTE(Waiter::Create, &Waiter::WaitFor, &Waiter::Append, &Waiter::Throw, &Waiter::InFlight,
           &Waiter::MaxInFlight, &Waiter::Threads, &Waiter::Started);

// ---- Coroutines of the driver -------------------------------------------------

ray::Coroutine<int> Sum(ray::ObjectRef<int> a, ray::ObjectRef<int> b) {
  std::shared_ptr<int> x = co_await a;
  std::shared_ptr<int> y = co_await b;
  co_return *x + *y;
}

ray::Coroutine<std::string> CatchTaskError() {
  try {
    co_await ray::Task(AwaitFail).Remote(std::string("broken on purpose"));
  } catch (const ray::internal::RayTaskException& e) {
    co_return std::string(e.what());
  }
  co_return std::string("no exception");
}

ray::Coroutine<int> Inner(int x) {
  if (x < 0) throw std::invalid_argument("negative");
  co_return *co_await ray::Task(AwaitTwice).Remote(x);
}
ray::Coroutine<int> Outer(int x) { co_return 1 + co_await Inner(x); }

ray::Coroutine<int> AwaitOne(ray::ObjectRef<int> ref) { co_return *co_await ref; }
ray::Coroutine<int> CountThenAwait(ray::ObjectRef<int> ref, std::atomic<int>* counted) {
  counted->fetch_add(1);
  co_return *co_await ref;
}

ray::Coroutine<std::thread::id> ThreadAfterAwait(ray::ObjectRef<int> ref) {
  co_await ref;
  co_return std::this_thread::get_id();
}

// ---- Test bodies, shared by the cluster and local mode -------------------------

class AwaitTestBase : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = std::make_unique<manta::testing::TempDir>();
    dir_ = tmp_->path();
  }
  // Every test leaves no task waiting for `go`.
  void TearDown() override { tmp_.reset(); }
  void Go() { std::ofstream(dir_ + "/go") << "go\n"; }

  void AwaitGivesTheValue() {
    EXPECT_EQ(ray::RunAsync(Sum(ray::Task(AwaitTwice).Remote(1), ray::Task(AwaitTwice).Remote(20))), 42);
    EXPECT_EQ(ray::RunAsync(Sum(ray::Put(1), ray::Put(2))), 3);  // ready already
    ray::RunAsync([]() -> ray::Coroutine<> { co_await ray::Task(Nothing).Remote(); }());
  }
  void AwaitThrowsTheObjectsError() {
    std::string message = ray::RunAsync(CatchTaskError());
    EXPECT_NE(message.find("broken on purpose"), std::string::npos) << message;
    // Uncaught, it leaves RunAsync.
    EXPECT_THROW(ray::RunAsync(AwaitOne(ray::Task(AwaitFail).Remote(std::string("x")))),
                 ray::internal::RayTaskException);
  }
  void CoroutinesAwaitCoroutines() {
    EXPECT_EQ(ray::RunAsync(Outer(5)), 11);
    EXPECT_THROW(ray::RunAsync(Outer(-1)), std::invalid_argument);
  }
  void WhenAllGivesEveryValueInOrder() {
    std::vector<ray::ObjectRef<int>> refs;
    for (int i = 0; i < 20; ++i) refs.push_back(ray::Task(AwaitTwice).Remote(i));
    auto all = [](std::vector<ray::ObjectRef<int>> refs) -> ray::Coroutine<std::vector<int>> {
      std::vector<int> out;
      for (std::shared_ptr<int>& v : co_await ray::WhenAll(refs)) out.push_back(*v);
      co_return out;
    };
    std::vector<int> values = ray::RunAsync(all(refs));
    ASSERT_EQ(values.size(), 20u);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(values[i], 2 * i);
    refs.push_back(ray::Task(AwaitFail).Remote(std::string("one failed")));
    EXPECT_THROW(ray::RunAsync(all(refs)), ray::internal::RayTaskException);
  }
  void WhenAnyGivesAReadyOne() {
    std::vector<ray::ObjectRef<int>> refs = {ray::Task(AfterGo).Remote(dir_, 1), ray::Task(AwaitTwice).Remote(21)};
    auto any = [](std::vector<ray::ObjectRef<int>> refs) -> ray::Coroutine<int> {
      size_t i = co_await ray::WhenAny(refs);
      co_return static_cast<int>(i) * 1000 + *co_await refs[i];
    };
    EXPECT_EQ(ray::RunAsync(any(refs)), 1042);
    EXPECT_FALSE(fs::exists(dir_ + "/go"));  // the first is still waiting
    auto wait = [](std::vector<ray::ObjectRef<int>> refs) -> ray::Coroutine<ray::WaitResult<int>> {
      co_return co_await ray::WaitAsync(refs, 1);
    };
    ray::WaitResult<int> result = ray::RunAsync(wait(refs));
    ASSERT_EQ(result.ready.size(), 1u);
    EXPECT_EQ(*result.ready.front().Get(), 42);
    ASSERT_EQ(result.unready.size(), 1u);
    Go();
    EXPECT_GE(ray::RunAsync(wait(refs)).ready.size(), 1u);  // as ray::Wait: at least one
    EXPECT_EQ(ray::RunAsync(AwaitOne(refs[0])), 1);
  }
  // Many coroutines on one thread, each awaiting a task in flight.
  void ManyAwaitsOnOneThread() {
    const int n = 2000;
    std::vector<ray::ObjectRef<int>> refs;
    for (int i = 0; i < n; ++i) refs.push_back(ray::Task(AfterGo).Remote(dir_, i));
    std::atomic<int> suspended{0};
    std::vector<ray::Coroutine<int>> coroutines;
    for (const ray::ObjectRef<int>& ref : refs) coroutines.push_back(CountThenAwait(ref, &suspended));
    // The tasks finish once every coroutine is about to await (at most 30 s).
    std::thread go([this, &suspended, n] {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (suspended.load() < n && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      Go();
    });
    auto all = [](std::vector<ray::Coroutine<int>> cs) -> ray::Coroutine<std::vector<int>> {
      co_return co_await ray::WhenAll(std::move(cs));
    };
    std::vector<int> values;
    try {
      values = ray::RunAsync(all(std::move(coroutines)));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "an await threw: " << e.what();
    }
    go.join();
    ASSERT_EQ(values.size(), static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) ASSERT_EQ(values[i], i);
  }
  void SpawnRunsOnTheGivenExecutor() {
    ray::ThreadPoolExecutor pool(2);
    std::future<std::thread::id> where = ray::Spawn(pool.executor(), ThreadAfterAwait(ray::Task(AwaitTwice).Remote(1)));
    ASSERT_EQ(where.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    std::vector<std::thread::id> ids = pool.thread_ids();
    EXPECT_NE(std::find(ids.begin(), ids.end(), where.get()), ids.end());
    std::future<int> failed = ray::Spawn(pool.executor(), AwaitOne(ray::Task(AwaitFail).Remote(std::string("y"))));
    EXPECT_THROW(failed.get(), ray::internal::RayTaskException);
  }
  void CoroutineTasksAndBorrowedRefs() {
    EXPECT_EQ(*ray::Task(TwiceTwice).Remote(5).Get(), 20);
    std::vector<ray::ObjectRef<int>> refs = {ray::Put(1), ray::Task(AwaitTwice).Remote(10), ray::Put(100)};
    EXPECT_EQ(*ray::Task(SumOfBorrowed).Remote(refs).Get(), 121);
  }
  void TheReadmeExample() {
    std::vector<std::string> urls = {"a.example", "bb.example", "ccc.example"};
    int total = ray::RunAsync(TotalSize(urls));  // runs it, and its awaits, on this thread
    EXPECT_EQ(total, 3 * 13 + 9 + 10 + 11);  // "<html>" and "</html>" around each
  }
  // Polls the actor until `count` calls are in flight (at most 30 s).
  static bool InFlightReaches(ray::ActorHandle<Waiter>& actor, int count) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (*actor.Task(&Waiter::InFlight).Remote().Get() < count) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }
  void AsyncActorRunsCallsAtOnceOnOneThread() {
    ray::ActorHandle<Waiter> actor = ray::Actor(Waiter::Create).Remote();
    const int n = 50;
    std::vector<ray::ObjectRef<int>> results;
    for (int i = 0; i < n; ++i) results.push_back(actor.Task(&Waiter::WaitFor).Remote(dir_, i));
    ASSERT_TRUE(InFlightReaches(actor, n)) << "in flight: " << *actor.Task(&Waiter::InFlight).Remote().Get();
    Go();
    for (int i = 0; i < n; ++i) EXPECT_EQ(*results[i].Get(), 10 * i);
    EXPECT_EQ(*actor.Task(&Waiter::MaxInFlight).Remote().Get(), n);
    EXPECT_EQ(*actor.Task(&Waiter::Threads).Remote().Get(), 1);
  }
  void AsyncActorKeepsItsMaxConcurrency() {
    ray::ActorHandle<Waiter> actor = ray::Actor(Waiter::Create).SetMaxConcurrency(3).Remote();
    std::vector<ray::ObjectRef<int>> results;
    for (int i = 0; i < 10; ++i) results.push_back(actor.Task(&Waiter::WaitFor).Remote(dir_, i));
    // Three start (their tasks run); the others wait for one to finish, which waits
    // for `go`. (The caller sends no more than three calls at once either, so the
    // actor cannot be asked meanwhile.)
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(WaitForFile(dir_ + "/started-" + std::to_string(i), 30000)) << i;
    Go();
    for (int i = 0; i < 10; ++i) EXPECT_EQ(*results[i].Get(), 10 * i);
    EXPECT_EQ(*actor.Task(&Waiter::MaxInFlight).Remote().Get(), 3);
  }
  void AsyncActorStartsCallsInTheCallersOrder() {
    ray::ActorHandle<Waiter> actor = ray::Actor(Waiter::Create).Remote();
    std::vector<ray::ObjectRef<int>> results;
    for (int i = 0; i < 200; ++i) results.push_back(actor.Task(&Waiter::Append).Remote(i));
    for (int i = 0; i < 200; ++i) EXPECT_EQ(*results[i].Get(), i);
    std::vector<int> started = *actor.Task(&Waiter::Started).Remote().Get();
    ASSERT_EQ(started.size(), 200u);
    for (int i = 0; i < 200; ++i) EXPECT_EQ(started[i], i);
  }
  void AsyncActorPassesAnExceptionOn() {
    ray::ActorHandle<Waiter> actor = ray::Actor(Waiter::Create).Remote();
    try {
      actor.Task(&Waiter::Throw).Remote().Get();
      ADD_FAILURE() << "no exception";
    } catch (const ray::internal::RayTaskException& e) {
      EXPECT_NE(std::string(e.what()).find("thrown by a coroutine method"), std::string::npos) << e.what();
    }
    EXPECT_EQ(*actor.Task(&Waiter::Append).Remote(7).Get(), 7);  // it lives on
  }
  void AwaitOutsideAnExecutorIsRefused() {
    ray::ObjectRef<int> ref = ray::Put(1);
    // Resumed by hand, not by RunAsync or Spawn: nowhere to resume after the await.
    auto coroutine = AwaitOne(ref);
    auto outer = [](ray::Coroutine<int> c) -> ray::internal::Detached {
      try {
        co_await std::move(c);
        ADD_FAILURE() << "the await did not throw";
      } catch (const ray::internal::RayException& e) {
        EXPECT_NE(std::string(e.what()).find("outside ray::RunAsync"), std::string::npos) << e.what();
      }
    };
    outer(std::move(coroutine));
  }

  std::unique_ptr<manta::testing::TempDir> tmp_;
  std::string dir_;
};

// ---- On a cluster -------------------------------------------------------------

class AwaitTest : public AwaitTestBase {
 protected:
  static void SetUpTestSuite() {
    harness_ = new manta::testing::ClusterHarness();
    harness_->StartHead({"--num-cpus=2", "--object-store-memory", "134217728", "--resources={\"await_head\": 1}"});
    harness_->StartNode({"--num-cpus=1", "--object-store-memory", "134217728", "--resources={\"await_other\": 1}"});
    ray::RayConfig config;
    config.address = harness_->gcs_address();
    ray::Init(config);
  }
  static void TearDownTestSuite() {
    ray::Shutdown();
    delete harness_;
  }
  static manta::testing::ClusterHarness* harness_;
};
manta::testing::ClusterHarness* AwaitTest::harness_ = nullptr;

TEST_F(AwaitTest, AwaitGivesTheValue) { AwaitGivesTheValue(); }
TEST_F(AwaitTest, AwaitThrowsTheObjectsError) { AwaitThrowsTheObjectsError(); }
TEST_F(AwaitTest, CoroutinesAwaitCoroutines) { CoroutinesAwaitCoroutines(); }
TEST_F(AwaitTest, WhenAllGivesEveryValueInOrder) { WhenAllGivesEveryValueInOrder(); }
TEST_F(AwaitTest, WhenAnyAndWaitAsyncGiveAReadyOne) { WhenAnyGivesAReadyOne(); }
TEST_F(AwaitTest, ManyAwaitsOnOneThread) { ManyAwaitsOnOneThread(); }
TEST_F(AwaitTest, SpawnRunsOnTheGivenExecutor) { SpawnRunsOnTheGivenExecutor(); }
TEST_F(AwaitTest, CoroutineTasksAndBorrowedRefs) { CoroutineTasksAndBorrowedRefs(); }
TEST_F(AwaitTest, AwaitOutsideAnExecutorIsRefused) { AwaitOutsideAnExecutorIsRefused(); }
TEST_F(AwaitTest, TheReadmeExample) { TheReadmeExample(); }
TEST_F(AwaitTest, AsyncActorRunsCallsAtOnceOnOneThread) { AsyncActorRunsCallsAtOnceOnOneThread(); }
TEST_F(AwaitTest, AsyncActorKeepsItsMaxConcurrency) { AsyncActorKeepsItsMaxConcurrency(); }
TEST_F(AwaitTest, AsyncActorStartsCallsInTheCallersOrder) { AsyncActorStartsCallsInTheCallersOrder(); }
TEST_F(AwaitTest, AsyncActorPassesAnExceptionOn) { AsyncActorPassesAnExceptionOn(); }

// An object stored on the other node is pulled here before the coroutine resumes.
TEST_F(AwaitTest, AnObjectOnAnotherNodeIsPulledBeforeTheAwaitResumes) {
  const std::string here = *ray::Task(NodeOf).SetResource("await_head", 1).Remote().Get();  // the driver's node
  ASSERT_NE(*ray::Task(NodeOf).SetResource("await_other", 1).Remote().Get(), here);
  ray::ObjectRef<std::vector<char>> big = ray::Task(Bytes).SetResource("await_other", 1).Remote(4 << 20);
  auto size = [](ray::ObjectRef<std::vector<char>> ref) -> ray::Coroutine<size_t> {
    std::shared_ptr<std::vector<char>> bytes = co_await ref;
    co_return bytes->size();
  };
  EXPECT_EQ(ray::RunAsync(size(big)), static_cast<size_t>(4 << 20));
}

// ---- In local mode --------------------------------------------------------------

class LocalModeAwaitTest : public AwaitTestBase {
 protected:
  static void SetUpTestSuite() {
    ray::RayConfig config;
    config.local_mode = true;
    // Tasks waiting for `go` hold a pool thread each: AsyncActorKeepsItsMaxConcurrency
    // has three wait at once (on a cluster, in three workers).
    config.num_cpus = 4;
    ray::Init(config);
  }
  static void TearDownTestSuite() { ray::Shutdown(); }
};

TEST_F(LocalModeAwaitTest, AwaitGivesTheValue) { AwaitGivesTheValue(); }
TEST_F(LocalModeAwaitTest, AwaitThrowsTheObjectsError) { AwaitThrowsTheObjectsError(); }
TEST_F(LocalModeAwaitTest, CoroutinesAwaitCoroutines) { CoroutinesAwaitCoroutines(); }
TEST_F(LocalModeAwaitTest, WhenAllGivesEveryValueInOrder) { WhenAllGivesEveryValueInOrder(); }
TEST_F(LocalModeAwaitTest, WhenAnyAndWaitAsyncGiveAReadyOne) { WhenAnyGivesAReadyOne(); }
TEST_F(LocalModeAwaitTest, ManyAwaitsOnOneThread) { ManyAwaitsOnOneThread(); }
TEST_F(LocalModeAwaitTest, SpawnRunsOnTheGivenExecutor) { SpawnRunsOnTheGivenExecutor(); }
TEST_F(LocalModeAwaitTest, CoroutineTasksAndBorrowedRefs) { CoroutineTasksAndBorrowedRefs(); }
TEST_F(LocalModeAwaitTest, AwaitOutsideAnExecutorIsRefused) { AwaitOutsideAnExecutorIsRefused(); }
TEST_F(LocalModeAwaitTest, TheReadmeExample) { TheReadmeExample(); }
TEST_F(LocalModeAwaitTest, AsyncActorRunsCallsAtOnceOnOneThread) { AsyncActorRunsCallsAtOnceOnOneThread(); }
TEST_F(LocalModeAwaitTest, AsyncActorKeepsItsMaxConcurrency) { AsyncActorKeepsItsMaxConcurrency(); }
TEST_F(LocalModeAwaitTest, AsyncActorStartsCallsInTheCallersOrder) { AsyncActorStartsCallsInTheCallersOrder(); }
TEST_F(LocalModeAwaitTest, AsyncActorPassesAnExceptionOn) { AsyncActorPassesAnExceptionOn(); }

}  // namespace
}  // namespace await_test
