// Tasks and objects through the public API (#include <ray/api.h>) on a real local
// cluster started by ray::Init(). This binary is also its own worker: main() hands
// worker processes to ray::Init() before GoogleTest runs anything.
#include <ray/api.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "driver_main.h"
#include "big_array.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/api/native_runtime.h"
#include "src/core_worker/core_worker.h"
#include "src/common/process.h"
#include "src/common/util.h"
#include "test_util/test_util.h"

namespace api_task_test {
namespace {

// ---- Remote functions -------------------------------------------------------

int TaskPlus(int a, int b) { return a + b; }
int Twice(int x) { return 2 * x; }
std::string Concat(std::string a, std::string b) { return a + b; }
int Sum(std::vector<int> xs) { return std::accumulate(xs.begin(), xs.end(), 0); }

struct Point {
  int x = 0;
  double y = 0;
  std::string label;
  MSGPACK_DEFINE(x, y, label);
};
Point Move(Point p, int dx) {
  p.x += dx;
  p.label += "+moved";
  return p;
}

using manta::testing::Big;
// Registered under these names in this binary.
Big MakeBig(int seed) { return manta::testing::MakeBig(seed); }
long long SumBig(Big b) { return manta::testing::SumBig(b); }

int SleepMs(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return ms;
}
int SleepThenPid(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return getpid();
}
int Throws(int x) {
  if (x >= 0) throw std::logic_error("x must be negative, got " + std::to_string(x));
  return x;
}

// Reads a value through a ref passed as a ref (the parameter is an ObjectRef).
int Deref(ray::ObjectRef<int> ref) { return *ref.Get() + 1; }

// Nested tasks: each level submits the next and waits for it inside the task.
int NestedChain(int depth) {
  if (depth == 0) return 0;
  return *ray::Task(NestedChain).Remote(depth - 1).Get() + 1;
}

// Crashes the worker on the first attempt (a marker file tells attempts apart).
int CrashOnce(std::string marker) {
  struct stat st;
  if (stat(marker.c_str(), &st) != 0) {
    std::ofstream(marker) << getpid();
    raise(SIGKILL);
  }
  return 42;
}
// Sleeps a millisecond; with a `path`, returns once it exists instead (at most a minute).
int ShortOrWait(std::string path) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  if (path.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  while (!path.empty() && !std::filesystem::exists(path) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return 1;
}
int CrashAlways(int) {
  raise(SIGKILL);
  return 0;
}

// Several returns: `n` values, value i is i * seed (`extra` more than asked for).
ray::Returns<int> Multiples(int seed, int n, int extra) {
  ray::Returns<int> out;
  for (int i = 0; i < n + extra; ++i) out.push_back(i * seed);
  return out;
}
// Several returns, some large (in the object store), some small (inline).
ray::Returns<Big> BigsAndSmalls(int seed) {
  Big small{};
  small[0] = seed;
  return {MakeBig(seed), small, MakeBig(seed + 1)};
}
// Several returns holding refs: each value is a ref to a Put made here.
ray::Returns<ray::ObjectRef<int>> PutEach(int n) {
  ray::Returns<ray::ObjectRef<int>> out;
  for (int i = 0; i < n; ++i) out.push_back(ray::Put(100 + i));
  return out;
}
ray::Returns<int> ThrowsMany(int) { throw std::runtime_error("no values today"); }
// `n` bytes, byte i being (i * 7 + seed) % 251.
std::vector<uint8_t> Pattern(size_t n, int seed) {
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>((i * 7 + seed) % 251);
  return out;
}
// Reads a bytes argument in place and sums it.
uint64_t SumViewed(ray::ObjectRef<std::vector<uint8_t>> ref) {
  uint64_t total = 0;
  for (uint8_t b : ray::GetView(ref)) total += b;
  return total;
}
uint64_t SumBytes(const std::vector<uint8_t>& bytes) {
  uint64_t total = 0;
  for (uint8_t b : bytes) total += b;
  return total;
}
std::vector<uint8_t> Failing(int) { throw std::runtime_error("no bytes today"); }
// Numbers: made in a task, summed in place by another.
std::vector<double> Ramp(size_t n) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.5 * static_cast<double>(i);
  return v;
}
double SumViewedDoubles(ray::ObjectRef<std::vector<double>> ref) {
  ray::ObjectView<double> view = ray::GetView(ref);
  return std::accumulate(view.begin(), view.end(), 0.0);
}
int64_t SumInts(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }
// Fills and frees 12 buffers of 4 MiB (as a map task does its buckets): {this
// process's pid, the page faults that took on this thread}.
std::vector<int64_t> FaultsOfBuffers(int seed) {
  rusage before{};
  getrusage(RUSAGE_THREAD, &before);
  int64_t sum = 0;
  {
    std::vector<std::vector<uint8_t>> buffers;
    for (int i = 0; i < 12; ++i) {
      buffers.emplace_back(size_t{4} << 20, static_cast<uint8_t>(seed + i));
      sum += buffers.back()[size_t{1} << 20];
    }
  }
  rusage after{};
  getrusage(RUSAGE_THREAD, &after);
  return {getpid(), after.ru_minflt - before.ru_minflt, sum};
}

// What this process's own static initializers saw of the secrets pipe its raylet
// gave it (a worker runs this binary): it must be gone before any of them runs.
const std::string kSecretsPipeAtStaticInit = [] {
  const char* fd = std::getenv("MANTA_SECRETS_FD");
  return fd == nullptr ? std::string("gone") : "MANTA_SECRETS_FD=" + std::string(fd);
}();
std::string SecretsPipeAtStaticInit() { return kSecretsPipeAtStaticInit; }

// The targets ("socket:[123]", "pipe:[45]") of this process's descriptors.
std::set<std::string> SocketsAndPipes(pid_t pid) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    std::string target = std::filesystem::read_symlink(fd.path(), ec).string();
    if (target.rfind("socket:", 0) == 0 || target.rfind("pipe:", 0) == 0) out.insert(target);
  }
  return out;
}
// Its parent's name (the raylet), then the sockets and pipes this worker shares with
// it, which it could only have inherited: none, or it could accept the raylet's
// store clients.
std::vector<std::string> SharedWithTheRaylet() {
  std::ifstream comm("/proc/" + std::to_string(getppid()) + "/comm");
  std::string name;
  std::getline(comm, name);
  std::set<std::string> parent = SocketsAndPipes(getppid());
  std::vector<std::string> shared = {name};
  for (const std::string& target : SocketsAndPipes(getpid())) {
    if (parent.count(target) > 0) shared.push_back(target);
  }
  return shared;
}

RAY_REMOTE(ShortOrWait);
RAY_REMOTE(TaskPlus, Twice, Concat, Sum, Move, MakeBig, SumBig, SleepMs, SleepThenPid, Throws, Deref, NestedChain, CrashOnce,
           CrashAlways, Multiples, BigsAndSmalls, PutEach, ThrowsMany, Pattern, SumViewed, Failing, Ramp, SumViewedDoubles, SumInts,
           FaultsOfBuffers, SecretsPipeAtStaticInit, SharedWithTheRaylet);

int NotRegistered(int x) { return x; }

// ---- Fixture: one private cluster for the whole suite -------------------------

class ApiTaskTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ray::RayConfig config;
    config.head_args = {"--num-cpus=2", "--object-store-memory=268435456"};
    ray::Init(config);
  }
  static void TearDownTestSuite() { ray::Shutdown(); }

  static manta::core::CoreWorker& Core() { return *ray::internal::GetCoreWorkerForTesting(); }

  // Objects in the node's object store, per `manta status --json`.
  static int64_t StoreObjectCount() {
    auto result = manta::testing::RunCommand(
        {manta::testing::BinaryPath("manta"), "status", "--json", "--address", ray::internal::GetClusterAddress()}, {},
        10000);
    if (result.exit_code != 0) return -1;
    auto status = nlohmann::json::parse(result.output, nullptr, false);
    if (status.is_discarded()) return -1;
    int64_t n = 0;
    for (const auto& node : status["nodes"]) n += node["object_store"]["num_objects"].get<int64_t>();
    return n;
  }
};

TEST_F(ApiTaskTest, TaskWithValues) {
  EXPECT_EQ(*ray::Task(TaskPlus).Remote(1, 2).Get(), 3);
  EXPECT_EQ(*ray::Get(ray::Task(Concat).Remote(std::string("ab"), std::string("cd"))), "abcd");
  Point p = *ray::Task(Move).Remote(Point{1, 2.5, "p"}, 10).Get();
  EXPECT_EQ(p.x, 11);
  EXPECT_EQ(p.y, 2.5);
  EXPECT_EQ(p.label, "p+moved");
  EXPECT_EQ(*ray::Task(Sum).Remote(std::vector<int>{1, 2, 3, 4}).Get(), 10);
}

TEST_F(ApiTaskTest, PutAndRefArguments) {
  auto five = ray::Put(5);
  EXPECT_EQ(*five.Get(), 5);
  EXPECT_EQ(*ray::Task(TaskPlus).Remote(five, 1).Get(), 6);
  EXPECT_EQ(*ray::Task(Deref).Remote(five).Get(), 6);  // the callee gets the ref itself
}

TEST_F(ApiTaskTest, ChainAndFanIn) {
  ray::ObjectRef<int> x = ray::Task(Twice).Remote(1);
  for (int i = 0; i < 10; ++i) x = ray::Task(Twice).Remote(x);
  EXPECT_EQ(*x.Get(), 2048);

  std::vector<ray::ObjectRef<int>> parts;
  for (int i = 0; i < 20; ++i) parts.push_back(ray::Task(TaskPlus).Remote(i, 0));
  auto values = ray::Get(parts);
  int total = 0;
  for (const auto& v : values) total += *v;
  EXPECT_EQ(total, 190);
}

TEST_F(ApiTaskTest, WaitWithTimeout) {
  auto fast = ray::Task(SleepMs).Remote(0);
  auto slow = ray::Task(SleepMs).Remote(3000);
  fast.Get();
  std::vector<ray::ObjectRef<int>> refs = {fast, slow};
  auto t0 = std::chrono::steady_clock::now();
  auto result = ray::Wait(refs, 2, 300);
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(result.ready.size(), 1u);
  EXPECT_EQ(result.unready.size(), 1u);
  EXPECT_LT(waited, std::chrono::seconds(2));
  result = ray::Wait(refs, 1, 0);
  EXPECT_EQ(result.ready.size(), 1u);
  slow.Get();  // frees its CPU for the next tests
}

TEST_F(ApiTaskTest, LongTasksSubmittedTogetherRunInParallel) {
  // The cluster has 2 CPUs: two long tasks go to two workers, not one after the other.
  auto a = ray::Task(SleepThenPid).Remote(400);
  auto b = ray::Task(SleepThenPid).Remote(400);
  EXPECT_NE(*a.Get(), *b.Get());
}

// Short tasks are pipelined, many per worker; those that went to a worker behind one
// that turns out long are taken back and run elsewhere: they finish while it runs.
TEST_F(ApiTaskTest, TasksQueuedBehindALongOneRunElsewhere) {
  manta::testing::TempDir dir;
  const std::string go = dir.path() + "/go";
  std::vector<ray::ObjectRef<int>> warm;  // the owner learns they take a millisecond
  for (int i = 0; i < 50; ++i) warm.push_back(ray::Task(ShortOrWait).Remote(""));
  ray::Get(warm);
  // One function, so one queue: pipelined ~10 per worker, some short ones go to the
  // worker running the long one (it looks the least busy).
  ray::ObjectRef<int> long_one = ray::Task(ShortOrWait).Remote(go);
  std::vector<ray::ObjectRef<int>> shorts;
  for (int i = 0; i < 300; ++i) shorts.push_back(ray::Task(ShortOrWait).Remote(""));
  ray::WaitResult<int> done = ray::Wait(shorts, static_cast<int>(shorts.size()), 30000);
  EXPECT_EQ(done.ready.size(), shorts.size());
  EXPECT_FALSE(std::filesystem::exists(go));  // it still runs
  std::ofstream(go) << "go\n";
  EXPECT_EQ(*long_one.Get(), 1);
  ray::Get(shorts);
}

TEST_F(ApiTaskTest, LargeArgumentsAndResults) {
  auto big = ray::Task(MakeBig).Remote(7);
  std::shared_ptr<Big> value = big.Get();
  EXPECT_EQ((*value)[0], 7);
  EXPECT_EQ((*value)[99999], 7 + 99999);
  long long expected = 0;
  for (int i = 0; i < 100000; ++i) expected += 7 + i;
  EXPECT_EQ(*ray::Task(SumBig).Remote(big).Get(), expected);     // big ref argument
  EXPECT_EQ(*ray::Task(SumBig).Remote(*value).Get(), expected);  // big value argument
}

TEST_F(ApiTaskTest, TaskExceptionReachesGetAndWorkerSurvives) {
  auto failed = ray::Task(Throws).Remote(3);
  try {
    failed.Get();
    FAIL() << "expected RayTaskException";
  } catch (const ray::internal::RayTaskException& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("std::logic_error"), std::string::npos) << what;
    EXPECT_NE(what.find("x must be negative, got 3"), std::string::npos) << what;
  }
  // A dependent task fails with the same error.
  EXPECT_THROW(ray::Task(Twice).Remote(failed).Get(), ray::internal::RayTaskException);
  EXPECT_EQ(*ray::Task(Throws).Remote(-1).Get(), -1);
}

TEST_F(ApiTaskTest, UnregisteredFunctionFailsAtRemote) {
  EXPECT_THROW(ray::Task(NotRegistered).Remote(1), ray::internal::RayFunctionNotFound);
}

TEST_F(ApiTaskTest, UnknownFunctionAtWorkerIsRayFunctionNotFound) {
  ray::internal::TaskArgument arg;
  auto id = ray::internal::GetRayRuntime()->SubmitTask("NoSuchFunction", {}, {}).at(0);
  ray::ObjectRef<int> ref(id);
  ray::internal::GetRayRuntime()->RemoveLocalReference(id);  // the ref adopted it
  EXPECT_THROW(ref.Get(), ray::internal::RayFunctionNotFound);
  EXPECT_EQ(*ray::Task(TaskPlus).Remote(2, 2).Get(), 4);
}

TEST_F(ApiTaskTest, InfeasibleTaskStaysPending) {
  auto never = ray::Task(TaskPlus).SetResource("CPU", 10000).Remote(1, 1);
  std::vector<ray::ObjectRef<int>> refs = {never};
  auto result = ray::Wait(refs, 1, 500);
  EXPECT_EQ(result.ready.size(), 0u);
  EXPECT_EQ(result.unready.size(), 1u);
}

TEST_F(ApiTaskTest, NestedTasksDeeperThanCpuCount) {
  EXPECT_EQ(*ray::Task(NestedChain).Remote(5).Get(), 5);
}

TEST_F(ApiTaskTest, WorkerKilledMidTaskIsRetried) {
  manta::testing::TempDir dir;
  std::string marker = dir.path() + "/crashed";
  EXPECT_EQ(*ray::Task(CrashOnce).Remote(marker).Get(), 42);
  struct stat st;
  EXPECT_EQ(stat(marker.c_str(), &st), 0);  // the first attempt did run and die
}

TEST_F(ApiTaskTest, WorkerKilledMoreThanMaxRetriesIsRayWorkerException) {
  EXPECT_THROW(ray::Task(CrashAlways).SetMaxRetries(1).Remote(0).Get(), ray::internal::RayWorkerException);
}

TEST_F(ApiTaskTest, SeveralReturnsEachTheirOwnObject) {
  std::vector<ray::ObjectRef<int>> refs = ray::Task(Multiples).SetNumReturns(5).Remote(7, 5, 0);
  ASSERT_EQ(refs.size(), 5u);
  std::vector<std::shared_ptr<int>> values = ray::Get(refs);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(*values[i], 7 * i);
  // Each is a ref like any other: passed on to another task, waited on, dropped.
  EXPECT_EQ(*ray::Task(TaskPlus).Remote(refs[3], refs[4]).Get(), 49);
  std::set<std::string> ids;
  for (const auto& ref : refs) ids.insert(ref.ID());
  EXPECT_EQ(ids.size(), 5u);
  // Large values go to the store, small ones inline, each read alone.
  auto bigs = ray::Task(BigsAndSmalls).SetNumReturns(3).Remote(4);
  EXPECT_EQ(*bigs[2].Get(), MakeBig(5));
  EXPECT_EQ((*bigs[1].Get())[0], 4);
  EXPECT_EQ(*bigs[0].Get(), MakeBig(4));
  EXPECT_EQ(*ray::Task(SumBig).Remote(bigs[0]).Get(), SumBig(MakeBig(4)));
  // Values holding refs keep what they point to alive.
  auto puts = ray::Task(PutEach).SetNumReturns(2).Remote(2);
  EXPECT_EQ(*puts[1].Get()->Get(), 101);
  EXPECT_EQ(*puts[0].Get()->Get(), 100);
}

TEST_F(ApiTaskTest, SeveralReturnsFailTogether) {
  // Another number of values than asked for: every ref throws, naming both numbers.
  auto refs = ray::Task(Multiples).SetNumReturns(3).Remote(1, 3, 1);
  for (const auto& ref : refs) {
    try {
      ref.Get();
      ADD_FAILURE() << "a return of a task giving 4 values for 3 was read";
    } catch (const ray::internal::RayTaskException& e) {
      EXPECT_NE(std::string(e.what()).find("returned 4 values in its ray::Returns, but the caller asked for 3"),
                std::string::npos)
          << e.what();
    }
  }
  auto thrown = ray::Task(ThrowsMany).SetNumReturns(2).Remote(0);
  EXPECT_THROW(thrown[0].Get(), ray::internal::RayTaskException);
  EXPECT_THROW(thrown[1].Get(), ray::internal::RayTaskException);
  // No SetNumReturns, or a number out of range: Remote says so.
  try {
    ray::Task(Multiples).Remote(1, 1, 0);
    ADD_FAILURE() << "Remote without SetNumReturns";
  } catch (const ray::internal::RayException& e) {
    EXPECT_NE(std::string(e.what()).find("SetNumReturns(n)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ray::Task(Multiples).SetNumReturns(0).Remote(1, 0, 0), ray::internal::RayException);
}

TEST_F(ApiTaskTest, ViewsReadBytesInPlace) {
  const std::vector<uint8_t> expected = Pattern(size_t{24} << 20, 3);
  const uint64_t expected_sum = SumBytes(expected);
  // Put straight from a buffer, read back as a view and as a vector.
  auto put = ray::PutBytes(expected.data(), expected.size());
  {
    ray::ObjectView<uint8_t> view = ray::GetView(put);
    ASSERT_EQ(view.size(), expected.size());
    EXPECT_TRUE(std::equal(view.begin(), view.end(), expected.begin()));
    // No copy: a second view of the object sees the very same bytes.
    EXPECT_EQ(ray::GetView(put).data(), view.data());
  }
  EXPECT_EQ(*ray::Get(put), expected);
  // A task's large return, viewed by the driver and by another task.
  auto made = ray::Task(Pattern).Remote(expected.size(), 3);
  EXPECT_EQ(*ray::Task(SumViewed).Remote(made).Get(), expected_sum);
  std::vector<ray::ObjectView<uint8_t>> views = ray::GetView(std::vector<ray::ObjectRef<std::vector<uint8_t>>>{made, put});
  ASSERT_EQ(views.size(), 2u);
  EXPECT_TRUE(std::equal(views[0].begin(), views[0].end(), expected.begin(), expected.end()));
  // The view keeps the object readable after every ref to it is gone.
  ray::ObjectView<uint8_t> kept = views[0];
  views.clear();
  made = {};
  put = {};
  EXPECT_TRUE(manta::testing::WaitFor([] { return Core().reference_counter().NumObjects() == 0; }, 10000));
  EXPECT_TRUE(std::equal(kept.begin(), kept.end(), expected.begin(), expected.end()));
  kept.Release();
  EXPECT_TRUE(manta::testing::WaitFor([] { return StoreObjectCount() == 0; }, 10000))
      << StoreObjectCount() << " objects left in the object store once the view went";
  // Small objects (inline) have views too; errors come out as from ray::Get.
  auto small = ray::PutBytes("abc", 3);
  EXPECT_EQ(std::string(ray::GetView(small).begin(), ray::GetView(small).end()), "abc");
  EXPECT_THROW(ray::GetView(ray::Task(Failing).Remote(0)), ray::internal::RayTaskException);
}

TEST_F(ApiTaskTest, ViewsReadNumbersInPlace) {
  const size_t n = size_t{3} << 20;  // 24 MiB of doubles: in the object store
  const std::vector<double> expected = Ramp(n);
  const double expected_sum = std::accumulate(expected.begin(), expected.end(), 0.0);
  auto put = ray::Put(expected);
  {
    ray::ObjectView<double> view = ray::GetView(put);
    ASSERT_EQ(view.size(), n);
    EXPECT_TRUE(std::equal(view.begin(), view.end(), expected.begin()));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(view.data()) % alignof(double), 0u);
    EXPECT_EQ(ray::GetView(put).data(), view.data()) << "two views of one object are one copy";
  }
  EXPECT_EQ(*ray::Get(put), expected);
  // A task's return, viewed in another task and by the driver.
  auto made = ray::Task(Ramp).Remote(n);
  EXPECT_EQ(*ray::Task(SumViewedDoubles).Remote(made).Get(), expected_sum);
  EXPECT_EQ(*ray::Task(SumViewedDoubles).Remote(put).Get(), expected_sum);
  std::vector<ray::ObjectView<double>> views = ray::GetView(std::vector<ray::ObjectRef<std::vector<double>>>{made, put});
  ASSERT_EQ(views.size(), 2u);
  EXPECT_TRUE(std::equal(views[0].begin(), views[0].end(), expected.begin(), expected.end()));
  views.clear();
  // PutArray from a buffer; integers as arguments by value and by reference.
  std::vector<int64_t> ints(200000);
  std::iota(ints.begin(), ints.end(), -1000);
  const int64_t ints_sum = std::accumulate(ints.begin(), ints.end(), int64_t{0});
  auto put_ints = ray::PutArray(ints.data(), ints.size());
  ray::ObjectView<int64_t> ints_view = ray::GetView(put_ints);
  EXPECT_TRUE(std::equal(ints_view.begin(), ints_view.end(), ints.begin(), ints.end()));
  EXPECT_EQ(*ray::Task(SumInts).Remote(put_ints).Get(), ints_sum);
  EXPECT_EQ(*ray::Task(SumInts).Remote(ints).Get(), ints_sum);
  EXPECT_EQ(*ray::PutArray(std::span<const int64_t>(ints)).Get(), ints);
  // Small (inline) vectors have views too.
  auto small = ray::Put(std::vector<float>{1.5f, 2.5f});
  ray::ObjectView<float> small_view = ray::GetView(small);
  EXPECT_EQ(std::vector<float>(small_view.begin(), small_view.end()), (std::vector<float>{1.5f, 2.5f}));
  EXPECT_EQ(ray::GetView(ray::Put(std::vector<double>{})).size(), 0u);
  // Once every view and ref is gone, nothing is left in the store.
  ints_view.Release();
  made = {};
  put = {};
  put_ints = {};
  EXPECT_TRUE(manta::testing::WaitFor([] { return StoreObjectCount() == 0; }, 10000))
      << StoreObjectCount() << " objects left in the object store";
}

TEST_F(ApiTaskTest, AWorkerReusesTheHeapItsLastTaskFreed) {
  // The first task on a worker faults in its 12,288 pages; a later task on the same
  // worker finds them in the heap (with glibc's defaults it faults them in again).
  constexpr int64_t kPages = 12 * (int64_t{4} << 20) / 4096;
  std::map<int64_t, int> runs_by_pid;
  int repeated = 0;
  for (int i = 0; i < 20 && repeated < 3; ++i) {
    std::vector<int64_t> run = *ray::Get(ray::Task(FaultsOfBuffers).Remote(i));
    ASSERT_EQ(run.size(), 3u);
    EXPECT_EQ(run[2], 12 * i + 66);
    if (runs_by_pid[run[0]]++ == 0) continue;
    ++repeated;
    EXPECT_LT(run[1], kPages / 4) << "task " << i << " on worker " << run[0] << " faulted in " << run[1] << " pages";
  }
  EXPECT_EQ(repeated, 3);
}

TEST_F(ApiTaskTest, AWorkerTakesItsSecretsBeforeTheProgramRunsAndInheritsNothing) {
  EXPECT_EQ(*ray::Task(SecretsPipeAtStaticInit).Remote().Get(), "gone");
  // Its descriptors share no socket or pipe with the raylet that started it (it held
  // the store's listening socket once); the raylet is its parent.
  std::vector<std::string> shared = *ray::Task(SharedWithTheRaylet).Remote().Get();
  ASSERT_FALSE(shared.empty());
  ASSERT_EQ(shared[0], "manta_raylet");
  EXPECT_EQ(shared.size(), 1u) << "a worker holds its raylet's " << shared.back();
}

TEST_F(ApiTaskTest, NoLeaksAfterRefsGoOutOfScope) {
  {
    auto big = ray::Task(MakeBig).Remote(1);
    auto put = ray::Put(MakeBig(2));
    auto several = ray::Task(BigsAndSmalls).SetNumReturns(3).Remote(8);
    EXPECT_EQ(*several[2].Get(), MakeBig(9));
    several.pop_back();  // one goes first; the others stay readable
    EXPECT_EQ(*several[0].Get(), MakeBig(8));
    // Two large returns dropped before their task ends: their copies go too.
    auto dropped = ray::Task(BigsAndSmalls).SetNumReturns(3).Remote(10);
    dropped.erase(dropped.begin() + 2);
    dropped.erase(dropped.begin());
    EXPECT_EQ((*dropped[0].Get())[0], 10);
    auto small = ray::Task(TaskPlus).Remote(big.Get()->at(0), 1);
    EXPECT_EQ(*ray::Task(SumBig).Remote(put).Get(), SumBig(MakeBig(2)));
    small.Get();
  }
  EXPECT_TRUE(manta::testing::WaitFor([] { return Core().reference_counter().NumObjects() == 0; }, 10000))
      << Core().reference_counter().NumObjects() << " objects still in the ownership table";
  EXPECT_TRUE(manta::testing::WaitFor([] { return Core().memory_store().Size() == 0; }, 10000));
  // And the node's object store holds none of them.
  EXPECT_TRUE(manta::testing::WaitFor([] { return StoreObjectCount() == 0; }, 10000))
      << StoreObjectCount() << " objects left in the object store";
}

// The pids of `root`'s descendants (children, their children, ...), from /proc.
std::vector<pid_t> Descendants(pid_t root) {
  std::map<pid_t, std::vector<pid_t>> children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    const size_t close_paren = line.rfind(')');
    if (close_paren == std::string::npos) continue;
    std::istringstream rest(line.substr(close_paren + 2));
    char state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    children[ppid].push_back(static_cast<pid_t>(std::stol(name)));
  }
  std::vector<pid_t> out;
  std::vector<pid_t> todo = {root};
  while (!todo.empty()) {
    const pid_t pid = todo.back();
    todo.pop_back();
    for (pid_t child : children[pid]) {
      out.push_back(child);
      todo.push_back(child);
    }
  }
  return out;
}

// A driver (this binary in child mode) starts a private cluster and is killed with
// SIGKILL, so ray::Shutdown() never runs: the watchdog must stop the cluster. With
// `whole_tree`, every descendant of the driver dies with it, as when a test runner
// (CTest) kills a test that ran over its time.
void KillDriverAndExpectItsClusterStopped(bool whole_tree) {
  manta::testing::TempDir dir;
  std::string ready = dir.path() + "/address";
  manta::ProcessOptions child;
  child.argv = {manta::SelfExecutablePath(), "--child-private-cluster=" + ready};
  auto pid = manta::StartProcess(child);
  ASSERT_TRUE(pid.ok()) << pid.status();
  std::string address;
  ASSERT_TRUE(manta::testing::WaitFor(
      [&] {
        auto content = manta::ReadFile(ready);
        if (content.ok() && !content->empty() && content->back() == '\n') address = content->substr(0, content->size() - 1);
        return !address.empty();
      },
      60000));
  auto host_port = manta::ParseHostPort(address);
  ASSERT_TRUE(host_port.ok()) << address;
  ASSERT_TRUE(manta::IsPortOpen(host_port->host, host_port->port));
  std::vector<pid_t> tree = whole_tree ? Descendants(*pid) : std::vector<pid_t>{};
  ASSERT_TRUE(manta::SignalProcess(*pid, SIGKILL).ok());
  for (pid_t p : tree) (void)manta::SignalProcess(p, SIGKILL);
  manta::WaitForExit(*pid, 5000);
  EXPECT_TRUE(manta::testing::WaitFor(
      [&] { return !manta::IsPortOpen(host_port->host, host_port->port); }, 20000))
      << "the private cluster's GCS at " << address << " outlived its driver";
}

TEST(PrivateClusterTest, StopsWhenItsDriverIsKilled) { KillDriverAndExpectItsClusterStopped(false); }

TEST(PrivateClusterTest, StopsWhenItsDriverIsKilledWithEveryProcessItStarted) {
  KillDriverAndExpectItsClusterStopped(true);
}


// Child mode (StopsWhenItsDriverIsKilled): start a private cluster, report its
// address, and wait to be killed.
const bool kChildMode = manta::testing::AddChildMode([](int argc, char** argv) -> std::optional<int> {
  if (argc != 2 || std::string(argv[1]).rfind("--child-private-cluster=", 0) != 0) return std::nullopt;
  std::string file = std::string(argv[1]).substr(std::string("--child-private-cluster=").size());
  ray::RayConfig config;
  config.head_args = {"--num-cpus=1", "--object-store-memory=67108864"};
  ray::Init(config, argc, argv);
  (void)manta::WriteFileAtomic(file, ray::internal::GetClusterAddress() + "\n");
  while (true) pause();
});

}  // namespace
}  // namespace api_task_test
