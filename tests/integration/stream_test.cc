// Streaming through the public API (ray/api/generator.h): ray::Generator tasks and
// actor methods, ray::ObjectRefGenerator (Next, range-for, NextAsync), items as they
// are yielded, back-pressure, failure part way (with and without a retry), cancel,
// the consumer leaving, and items freed by reference counting. On a real cluster
// (StreamTest, two nodes) and in local mode (LocalModeStreamTest). Producers signal
// progress with files in a fresh directory and wait for a file `go` (at most a
// minute). This binary is its own worker.
#include <ray/api.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cluster_harness.h"
#include "gtest/gtest.h"
#include "src/api/native_runtime.h"
#include "src/core_worker/core_worker.h"
#include "test_util/test_util.h"

namespace stream_test {
namespace {

namespace fs = std::filesystem;

using manta::testing::WaitForFile;
void Touch(const std::string& path) { std::ofstream(path) << "\n"; }

// ---- Remote generators --------------------------------------------------------

ray::Generator<int> Range(int n) {
  for (int i = 0; i < n; ++i) co_yield i;
}
// Yields 0, then waits for `dir`/go before yielding 1.
ray::Generator<int> FirstThenGo(std::string dir) {
  co_yield 0;
  WaitForFile(dir + "/go", 60000);
  co_yield 1;
}
// Yields n items, marking `dir`/after-i once co_yield i returned, and `dir`/done.
ray::Generator<int> Marked(std::string dir, int n) {
  for (int i = 0; i < n; ++i) {
    co_yield i;
    Touch(dir + "/after-" + std::to_string(i));
  }
  Touch(dir + "/done");
}
// Yields `good` items, then throws.
ray::Generator<int> ThrowAfter(int good) {
  for (int i = 0; i < good; ++i) co_yield i;
  throw std::runtime_error("the generator broke after " + std::to_string(good) + " items");
}
// Yields 0..n-1; its first run (no `dir`/died yet) dies after yielding `die_after`.
ray::Generator<int> DieOnce(std::string dir, int n, int die_after) {
  const bool first = !fs::exists(dir + "/died");
  for (int i = 0; i < n; ++i) {
    co_yield i;
    if (first && i + 1 == die_after) {
      Touch(dir + "/died");
      _exit(1);
    }
  }
}
// Yields 1 MiB items, each filled with its index.
ray::Generator<std::vector<char>> Blocks(int n) {
  for (int i = 0; i < n; ++i) co_yield std::vector<char>(1 << 20, static_cast<char>('a' + i % 26));
}
// Awaits a task between its items (a generator is a coroutine too).
int StreamTwice(int x) { return 2 * x; }
ray::Generator<int> Doubles(int n) {
  for (int i = 0; i < n; ++i) co_yield *co_await ray::Task(StreamTwice).Remote(i);
}
RAY_REMOTE(Range, FirstThenGo, Marked, ThrowAfter, DieOnce, Blocks, StreamTwice, Doubles);

class Source {
 public:
  static Source* Create(int base) { return new Source(base); }
  ray::Generator<int> Count(int n) {
    for (int i = 0; i < n; ++i) co_yield base_ + i;
    base_ += n;
  }
  int Base() { return base_; }

 private:
  int base_;
  explicit Source(int base) : base_(base) {}
};
RAY_REMOTE(Source::Create, &Source::Count, &Source::Base);

// An async actor (it has a coroutine method): its generators run on its loop.
class AsyncSource {
 public:
  static AsyncSource* Create() { return new AsyncSource(); }
  ray::Coroutine<int> Ping() { co_return 1; }
  ray::Generator<int> WaitingCount(std::string dir, int n) {
    for (int i = 0; i < n; ++i) {
      co_yield i;
      if (i == 0) co_await ray::Task(StreamTwice).Remote(0);  // others run meanwhile
    }
  }
};
RAY_REMOTE(AsyncSource::Create, &AsyncSource::Ping, &AsyncSource::WaitingCount);

std::vector<int> Values(ray::ObjectRefGenerator<int>& stream) {
  std::vector<int> out;
  for (const ray::ObjectRef<int>& ref : stream) out.push_back(*ray::Get(ref));
  return out;
}
std::vector<int> Iota(int n) {
  std::vector<int> out(n);
  for (int i = 0; i < n; ++i) out[i] = i;
  return out;
}

// ---- Test bodies, shared by the cluster and local mode -------------------------

class StreamTestBase : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = std::make_unique<manta::testing::TempDir>();
    dir_ = tmp_->path();
  }
  void TearDown() override { tmp_.reset(); }
  void Go() { Touch(dir_ + "/go"); }

  void ItemsComeInOrder() {
    ray::ObjectRefGenerator<int> stream = ray::Task(Range).Remote(100);
    EXPECT_EQ(Values(stream), Iota(100));
    EXPECT_EQ(stream.Next(), std::nullopt);  // ended: stays ended
    EXPECT_EQ(*stream.Completed().Get(), 100);
    ray::ObjectRefGenerator<int> empty = ray::Task(Range).Remote(0);
    EXPECT_EQ(empty.Next(), std::nullopt);
  }
  void AnItemComesBeforeTheTaskEnds() {
    ray::ObjectRefGenerator<int> stream = ray::Task(FirstThenGo).Remote(dir_);
    std::optional<ray::ObjectRef<int>> first = stream.Next(30000);
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(*first->Get(), 0);
    EXPECT_FALSE(fs::exists(dir_ + "/go"));  // the task still waits
    EXPECT_THROW(stream.Next(50), ray::internal::RayTimeoutException);
    Go();
    std::optional<ray::ObjectRef<int>> second = stream.Next(30000);
    ASSERT_TRUE(second.has_value());
    EXPECT_EQ(*second->Get(), 1);
    EXPECT_EQ(stream.Next(30000), std::nullopt);
  }
  void BackPressurePausesTheProducer() {
    ray::ObjectRefGenerator<int> stream = ray::Task(Marked).SetGeneratorBackpressureNumObjects(2).Remote(dir_, 10);
    // Items 0 and 1 are yielded; the co_yield of item 1 waits until one is consumed.
    ASSERT_TRUE(WaitForFile(dir_ + "/after-0", 30000));
    EXPECT_FALSE(WaitForFile(dir_ + "/after-1", 300)) << "the producer did not pause";
    for (int i = 0; i < 10; ++i) {
      std::optional<ray::ObjectRef<int>> ref = stream.Next(30000);
      ASSERT_TRUE(ref.has_value()) << i;
      EXPECT_EQ(*ref->Get(), i);
      // Taking item i lets co_yield i+1 return: never more than two ahead.
      if (i + 1 < 10) {
        ASSERT_TRUE(WaitForFile(dir_ + "/after-" + std::to_string(i + 1), 30000)) << i;
      }
      if (i + 2 < 10) {
        EXPECT_FALSE(fs::exists(dir_ + "/after-" + std::to_string(i + 2))) << i;
      }
    }
    EXPECT_EQ(stream.Next(30000), std::nullopt);
  }
  void AFailureGivesTheItemsThenTheError() {
    ray::ObjectRefGenerator<int> stream = ray::Task(ThrowAfter).Remote(3);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(*ray::Get(*stream.Next()), i);
    std::optional<ray::ObjectRef<int>> error = stream.Next();
    ASSERT_TRUE(error.has_value());
    try {
      ray::Get(*error);
      ADD_FAILURE() << "no exception";
    } catch (const ray::internal::RayTaskException& e) {
      EXPECT_NE(std::string(e.what()).find("broke after 3 items"), std::string::npos) << e.what();
    }
    EXPECT_EQ(stream.Next(), std::nullopt);
    EXPECT_THROW(stream.Completed().Get(), ray::internal::RayTaskException);
  }
  void ActorMethodsStream() {
    ray::ActorHandle<Source> source = ray::Actor(Source::Create).Remote(100);
    ray::ObjectRefGenerator<int> first = source.Task(&Source::Count).Remote(3);
    ray::ObjectRefGenerator<int> second = source.Task(&Source::Count).Remote(2);
    EXPECT_EQ(Values(first), (std::vector<int>{100, 101, 102}));
    EXPECT_EQ(Values(second), (std::vector<int>{103, 104}));
    EXPECT_EQ(*source.Task(&Source::Base).Remote().Get(), 105);
  }
  void AsyncActorGeneratorsRunOnItsLoop() {
    ray::ActorHandle<AsyncSource> source = ray::Actor(AsyncSource::Create).Remote();
    ray::ObjectRefGenerator<int> a = source.Task(&AsyncSource::WaitingCount).Remote(dir_, 5);
    ray::ObjectRefGenerator<int> b = source.Task(&AsyncSource::WaitingCount).Remote(dir_, 5);
    EXPECT_EQ(*source.Task(&AsyncSource::Ping).Remote().Get(), 1);
    EXPECT_EQ(Values(a), Iota(5));
    EXPECT_EQ(Values(b), Iota(5));
  }
  void ACoroutineAwaitsTheItems() {
    auto sum = [](ray::ObjectRefGenerator<int> stream) -> ray::Coroutine<int> {
      int total = 0;
      while (std::optional<ray::ObjectRef<int>> ref = co_await stream.NextAsync()) total += *co_await *ref;
      co_return total;
    };
    EXPECT_EQ(ray::RunAsync(sum(ray::Task(Doubles).Remote(10))), 90);
    EXPECT_EQ(ray::RunAsync(sum(ray::Task(Range).Remote(0))), 0);
  }
  void CancelStopsAPausedGenerator() {
    ray::ObjectRefGenerator<int> stream = ray::Task(Marked).SetGeneratorBackpressureNumObjects(1).Remote(dir_, 1000);
    EXPECT_EQ(*ray::Get(*stream.Next(30000)), 0);
    ASSERT_TRUE(WaitForFile(dir_ + "/after-0", 30000));
    ray::Cancel(stream);
    // What it yielded before, then the cancelled error, then the end.
    std::vector<int> rest;
    bool cancelled = false;
    while (std::optional<ray::ObjectRef<int>> ref = stream.Next(30000)) {
      try {
        rest.push_back(*ray::Get(*ref));
      } catch (const ray::internal::RayTaskCancelledException&) {
        cancelled = true;
      }
    }
    EXPECT_TRUE(cancelled);
    // Taking items lets it go on until the cancel reaches its worker (ray::Cancel
    // returns once it is under way): it stops long before its 1,000 items.
    EXPECT_LT(rest.size(), 500u);
    EXPECT_FALSE(fs::exists(dir_ + "/done"));
  }
  void TheProducerGoesOnWhenTheConsumerLeaves() {
    {
      ray::ObjectRefGenerator<int> stream = ray::Task(Marked).SetGeneratorBackpressureNumObjects(1).Remote(dir_, 50);
      EXPECT_EQ(*ray::Get(*stream.Next(30000)), 0);
    }  // dropped: the paused producer is let go, its further items dropped
    EXPECT_TRUE(WaitForFile(dir_ + "/done", 30000));
  }
  void YieldOutsideAStreamIsRefused() {
    auto drive = []() -> ray::Coroutine<int64_t> { co_return co_await ray::internal::DriveGenerator(Range(3)); };
    try {
      ray::RunAsync(drive());
      ADD_FAILURE() << "no exception";
    } catch (const ray::internal::RayException& e) {
      EXPECT_NE(std::string(e.what()).find("outside a task or actor method that streams"), std::string::npos)
          << e.what();
    }
  }

  std::unique_ptr<manta::testing::TempDir> tmp_;
  std::string dir_;
};

// ---- On a cluster -------------------------------------------------------------

class StreamTest : public StreamTestBase {
 protected:
  static void SetUpTestSuite() {
    harness_ = new manta::testing::ClusterHarness();
    harness_->StartHead({"--num-cpus=2", "--object-store-memory", "134217728"});
    harness_->StartNode({"--num-cpus=1", "--object-store-memory", "134217728"});
    ray::RayConfig config;
    config.address = harness_->gcs_address();
    ray::Init(config);
  }
  static void TearDownTestSuite() {
    ray::Shutdown();
    delete harness_;
  }
  static size_t OwnedObjects() { return ray::internal::GetCoreWorkerForTesting()->reference_counter().NumObjects(); }
  static manta::testing::ClusterHarness* harness_;
};
manta::testing::ClusterHarness* StreamTest::harness_ = nullptr;

TEST_F(StreamTest, ItemsComeInOrder) { ItemsComeInOrder(); }
TEST_F(StreamTest, AnItemComesBeforeTheTaskEnds) { AnItemComesBeforeTheTaskEnds(); }
TEST_F(StreamTest, BackPressurePausesTheProducer) { BackPressurePausesTheProducer(); }
TEST_F(StreamTest, AFailureGivesTheItemsThenTheError) { AFailureGivesTheItemsThenTheError(); }
TEST_F(StreamTest, ActorMethodsStream) { ActorMethodsStream(); }
TEST_F(StreamTest, AsyncActorGeneratorsRunOnItsLoop) { AsyncActorGeneratorsRunOnItsLoop(); }
TEST_F(StreamTest, ACoroutineAwaitsTheItems) { ACoroutineAwaitsTheItems(); }
TEST_F(StreamTest, CancelStopsAPausedGenerator) { CancelStopsAPausedGenerator(); }
TEST_F(StreamTest, TheProducerGoesOnWhenTheConsumerLeaves) { TheProducerGoesOnWhenTheConsumerLeaves(); }
TEST_F(StreamTest, YieldOutsideAStreamIsRefused) { YieldOutsideAStreamIsRefused(); }

// The worker dies part way and no retry is left: the items so far, then the error.
TEST_F(StreamTest, AWorkerDyingGivesTheItemsThenTheError) {
  ray::ObjectRefGenerator<int> stream = ray::Task(DieOnce).SetMaxRetries(0).Remote(dir_, 10, 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(*ray::Get(*stream.Next(30000)), i);
  std::optional<ray::ObjectRef<int>> error = stream.Next(30000);
  ASSERT_TRUE(error.has_value());
  EXPECT_THROW(ray::Get(*error), ray::internal::RayWorkerException);
  EXPECT_EQ(stream.Next(30000), std::nullopt);
}

// With a retry the task runs again from its first item; nothing comes twice.
TEST_F(StreamTest, ARetryDeliversEachItemOnce) {
  ray::ObjectRefGenerator<int> stream = ray::Task(DieOnce).SetMaxRetries(1).Remote(dir_, 8, 5);
  EXPECT_EQ(Values(stream), Iota(8));
  EXPECT_TRUE(fs::exists(dir_ + "/died"));
  EXPECT_EQ(*stream.Completed().Get(), 8);
}

// Items live in the node's store (1 MiB each), owned here: unconsumed ones are held
// by the generator, consumed ones by their refs, and all go with the last ref.
TEST_F(StreamTest, ItemsAreFreedByReferenceCounting) {
  const size_t before = OwnedObjects();
  {
    ray::ObjectRefGenerator<std::vector<char>> stream = ray::Task(Blocks).Remote(20);
    ASSERT_EQ(*stream.Completed().Get(), 20);
    EXPECT_GE(OwnedObjects(), before + 21);  // every item and the end
    std::optional<ray::ObjectRef<std::vector<char>>> first = stream.Next();
    ASSERT_TRUE(first.has_value());
    std::shared_ptr<std::vector<char>> bytes = ray::Get(*first);
    EXPECT_EQ(bytes->size(), size_t{1} << 20);
    EXPECT_EQ(bytes->front(), 'a');
  }
  EXPECT_TRUE(manta::testing::WaitFor([&] { return OwnedObjects() <= before; }, 10000))
      << OwnedObjects() << " objects owned, " << before << " before";
}

// ---- In local mode --------------------------------------------------------------

class LocalModeStreamTest : public StreamTestBase {
 protected:
  static void SetUpTestSuite() {
    ray::RayConfig config;
    config.local_mode = true;
    ray::Init(config);
  }
  static void TearDownTestSuite() { ray::Shutdown(); }
};

TEST_F(LocalModeStreamTest, ItemsComeInOrder) { ItemsComeInOrder(); }
TEST_F(LocalModeStreamTest, AnItemComesBeforeTheTaskEnds) { AnItemComesBeforeTheTaskEnds(); }
TEST_F(LocalModeStreamTest, BackPressurePausesTheProducer) { BackPressurePausesTheProducer(); }
TEST_F(LocalModeStreamTest, AFailureGivesTheItemsThenTheError) { AFailureGivesTheItemsThenTheError(); }
TEST_F(LocalModeStreamTest, ActorMethodsStream) { ActorMethodsStream(); }
TEST_F(LocalModeStreamTest, AsyncActorGeneratorsRunOnItsLoop) { AsyncActorGeneratorsRunOnItsLoop(); }
TEST_F(LocalModeStreamTest, ACoroutineAwaitsTheItems) { ACoroutineAwaitsTheItems(); }
TEST_F(LocalModeStreamTest, CancelStopsAPausedGenerator) { CancelStopsAPausedGenerator(); }
TEST_F(LocalModeStreamTest, TheProducerGoesOnWhenTheConsumerLeaves) { TheProducerGoesOnWhenTheConsumerLeaves(); }
TEST_F(LocalModeStreamTest, YieldOutsideAStreamIsRefused) { YieldOutsideAStreamIsRefused(); }

}  // namespace
}  // namespace stream_test
