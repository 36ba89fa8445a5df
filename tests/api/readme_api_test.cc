// README.md, "The API at a glance": every row's example, verbatim, with the
// declarations it needs, then assertions that it does what the row says. Also the
// table of "Runtime environments", which the `ray::RuntimeEnv` row points to.
//
// A comment `Row: <API column>` marks each example. The rows run in local mode
// (RayConfig::local_mode), except:
//   - rows that need a cluster (ray::Init with an address, ray::Init() with no
//     config): compiled in functions no test calls;
//   - RayConfig fields local mode does not read: checked on a RayConfig.
// Local mode accepts and ignores names, resources, retries, restarts and
// concurrency, so the rows setting them live in functions that a second test calls
// over the fake runtime, which shows what each option handed the runtime.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ray/api.h"
#include "src/api/local_mode_runtime.h"
#include "tests/api/fake_runtime.h"
#include "tests/api/local_mode_fixture.h"

namespace {

using ray::internal::RayActorException;
using ray::internal::RayException;
using ray::internal::RayRuntimeEnvException;
using ray::internal::RayTimeoutException;

constexpr auto kDeadline = std::chrono::seconds(10);
constexpr const char* kEnvVar = "MANTA_README_API_TEST_MODE";

// How often each function ran, for rows that drop their result: a test waits (with
// a deadline) until the function ran.
class RunLog {
 public:
  void Record(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    ++runs_[name];
    cv_.notify_all();
  }
  int Count(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    return runs_[name];
  }
  // Whether `name` has run `count` times (or more) before the deadline.
  bool WaitFor(const std::string& name, int count) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kDeadline, [&] { return runs_[name] >= count; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, int> runs_;
};

RunLog& Runs() {
  static RunLog* const runs = new RunLog;
  return *runs;
}

// Tasks calling Pass() wait there while the gate is closed (ClosedGate).
class Gate {
 public:
  void Set(bool open) {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = open;
    cv_.notify_all();
  }
  void Pass() {
    std::unique_lock<std::mutex> lock(mu_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
    --waiting_;
  }
  // Whether `count` tasks wait at the gate before the deadline.
  bool WaitForWaiting(int count) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kDeadline, [&] { return waiting_ >= count; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  int waiting_ = 0;
};

Gate& TheGate() {
  static Gate* const gate = new Gate;
  return *gate;
}

// Closes the gate for its scope; declared in a test body, it opens before the
// fixture shuts the runtime down (which waits for running tasks).
class ClosedGate {
 public:
  ClosedGate() { TheGate().Set(false); }
  ~ClosedGate() { TheGate().Set(true); }
};

// Shuts the runtime down when a test that called ray::Init itself leaves.
class ShutdownAtExit {
 public:
  ~ShutdownAtExit() { ray::Shutdown(); }
};

// --- The functions and classes the examples name ----------------------------------

int Add(int a, int b) {
  Runs().Record("Add");
  return a + b;
}
double Scale(double x) { return 2 * x; }
double Scale(double x, double factor) { return x * factor; }

class Counter {
 public:
  static Counter* Create(int start) { return new Counter(start); }
  explicit Counter(int start) : count_(start) {}
  int Add(int x) { return count_ += x; }

 private:
  int count_;
};

// Row: `RAY_REMOTE(...)` / `RAY_FUNC(f, args...)`
RAY_REMOTE(Add, Counter::Create, &Counter::Add, RAY_FUNC(Scale, double));

// For the ray::Returns<T> row: splits `data` into 4 buckets by value.
using Bucket = std::vector<int>;
ray::Returns<Bucket> Split(std::vector<int> data) {
  ray::Returns<Bucket> out(4);
  for (int v : data) out[static_cast<size_t>(v) % 4].push_back(v);
  return out;
}
RAY_REMOTE(Split);

int Train() {
  Runs().Record("Train");
  return 1;
}
int Flaky() {
  Runs().Record("Flaky");
  return 1;
}
void Touch() { Runs().Record("Touch"); }
int Fail() { throw std::runtime_error("boom"); }
int Blocked() {
  TheGate().Pass();
  return 1;
}
// The task of the "task level" runtime env row: records what it found in its env.
int f() {
  const char* mode = std::getenv(kEnvVar);
  Runs().Record(std::string("f saw ") + (mode == nullptr ? "nothing" : mode));
  return 1;
}

// An actor that reloads its state when it is a restart, and can end itself.
class Cache {
 public:
  static Cache* Create() { return new Cache; }
  // Whether this instance reloaded its state.
  bool Open() {
    // Row: `ray::ExitActor()` / `ray::WasCurrentActorRestarted()`
    if (ray::WasCurrentActorRestarted()) Reload();
    return reloaded_;
  }
  void Close() { ray::ExitActor(); }

 private:
  void Reload() { reloaded_ = true; }
  bool reloaded_ = false;
};

// The ray::IsCancelled row's task: steps until cancelled (a minute at most).
std::atomic<int> g_steps{0};
void Step() {
  if (++g_steps > 60000) throw std::runtime_error("never cancelled");
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
}
int Crawl() {
  // Row: `ray::IsCancelled()` (in a task)
  while (!ray::IsCancelled()) Step();
  return g_steps.load();
}

RAY_REMOTE(Train, Flaky, Touch, Fail, Blocked, f, Cache::Create, &Cache::Open, &Cache::Close, Crawl);

// What the PlacementGroup::SetWaitCallbak row's callback calls: records its
// arguments and answers false ("not placed").
std::string g_waited_id;
int g_waited_seconds = 0;
bool MyWait(const std::string& id, int timeout_seconds) {
  g_waited_id = id;
  g_waited_seconds = timeout_seconds;
  return false;
}

// --- Rows that need a cluster: compiled, never called ------------------------------

[[maybe_unused]] void InitRow(int argc, char** argv) {
  // Row: `ray::Init()` / `Init(config)` / `Init(config, argc, argv)`
  ray::RayConfig config; config.address = "127.0.0.1:6379"; ray::Init(config, argc, argv);
}

// --- Rows shared by the local-mode tests and the fake-runtime test -----------------

void TaskSetNameRow() {
  // Row: `.SetName(name)` (ray::Task)
  ray::Task(Add).SetName("add").Remote(1, 2);
}
void TaskSetResourceRow() {
  // Row: `.SetResources(map)` / `.SetResource(name, n)` (ray::Task)
  ray::Task(Train).SetResource("GPU", 1).Remote();
}
void TaskSetMaxRetriesRow() {
  // Row: `.SetMaxRetries(n)` (Manta)
  ray::Task(Flaky).SetMaxRetries(5).Remote();
}
void TaskSetPlacementGroupRow(const ray::PlacementGroup& group) {
  // Row: `.SetPlacementGroup(group, index)` (ray::Task)
  ray::Task(Add).SetPlacementGroup(group, 0).Remote(1, 2);
}
void TaskSetRuntimeEnvRow(const ray::RuntimeEnv& env) {
  // Row: `.SetRuntimeEnv(env)` (ray::Task)
  ray::Task(Add).SetRuntimeEnv(env).Remote(1, 2);
}
void ActorSetNameRow() {
  // Row: `.SetName(name[, namespace])` (ray::Actor)
  ray::Actor(Counter::Create).SetName("counter").Remote(0);
}
void ActorSetResourceRow() {
  // Row: `.SetResources` / `.SetResource` (ray::Actor)
  ray::Actor(Counter::Create).SetResource("CPU", 1).Remote(0);
}
void ActorRestartsAndConcurrencyRow() {
  // Row: `.SetMaxRestarts(n)` / `.SetMaxConcurrency(n)`
  ray::Actor(Counter::Create).SetMaxRestarts(-1).SetMaxConcurrency(8).Remote(0);
}
void ActorSetPlacementGroupRow(const ray::PlacementGroup& group) {
  // Row: `.SetPlacementGroup(group, index)` / `.SetRuntimeEnv(env)` (ray::Actor)
  ray::Actor(Counter::Create).SetPlacementGroup(group, -1).Remote(0);
}

ray::RuntimeEnv FastEnv() {
  ray::RuntimeEnv env;
  env.Set(std::string("env_vars"), std::map<std::string, std::string>{{kEnvVar, "fast"}});
  return env;
}

// Local mode in the namespace "readme".
class ReadmeApiTest : public manta::testing::LocalModeFixture {
 protected:
  ReadmeApiTest() : LocalModeFixture("readme") {}
};

// --- Init, Shutdown and RayConfig ---------------------------------------------------

TEST(ReadmeConfigTest, InitWithArgvLetsFlagsOverrideTheConfig) {
  // The Init row itself needs a cluster (InitRow); Init(config, argc, argv) in
  // local mode shows the flags winning over the config.
  ShutdownAtExit shutdown;
  ray::RayConfig config;
  config.local_mode = true;
  config.ray_namespace = "from_config";
  char program[] = "readme_api_test";
  char flag[] = "--ray_job_namespace=from_flag";
  char* argv[] = {program, flag, nullptr};
  ray::Init(config, 2, argv);
  EXPECT_EQ(ray::GetNamespace(), "from_flag");
}

TEST_F(ReadmeApiTest, IsInitializedRow) {
  // Row: `ray::IsInitialized()`
  if (!ray::IsInitialized()) ray::Init();
  EXPECT_TRUE(ray::IsInitialized());
  // Init() was not called: the local-mode runtime is still the one installed.
  EXPECT_TRUE(ray::internal::GetRayRuntime()->IsLocalMode());
}

TEST(ReadmeConfigTest, ShutdownRow) {
  ShutdownAtExit shutdown;
  ray::RayConfig config;
  config.local_mode = true;
  ray::Init(config);
  ASSERT_TRUE(ray::IsInitialized());
  // Row: `ray::Shutdown()`
  ray::Shutdown();
  EXPECT_FALSE(ray::IsInitialized());
  EXPECT_THROW(ray::Put(1), RayException);
  ray::Shutdown();  // a no-op when not initialized
}

TEST(ReadmeConfigTest, LocalModeRow) {
  ShutdownAtExit shutdown;
  ray::RayConfig config;
  // Row: `RayConfig::address` / `local_mode` / `ray_namespace`
  config.local_mode = true;
  ray::Init(config);
  ASSERT_TRUE(ray::IsInitialized());
  EXPECT_TRUE(ray::internal::GetRayRuntime()->IsLocalMode());
  EXPECT_EQ(config.address, "");
  EXPECT_EQ(config.ray_namespace, "");
  EXPECT_FALSE(ray::GetNamespace().empty());  // an anonymous one
}

TEST(ReadmeConfigTest, CodeSearchPathRow) {
  ray::RayConfig config;
  // Row: `RayConfig::code_search_path` / `head_args` / `redis_password_` / `logs_dir`
  config.code_search_path = {"/opt/app/lib"};
  EXPECT_EQ(config.code_search_path, std::vector<std::string>{"/opt/app/lib"});
  EXPECT_TRUE(config.head_args.empty());
  EXPECT_FALSE(config.redis_password_.has_value());
  config.redis_password_ = "secret";  // assignable from a string
  EXPECT_EQ(config.redis_password_.value(), "secret");
  EXPECT_EQ(config.logs_dir, "");
}

TEST(ReadmeConfigTest, NumCpusRow) {
  ray::RayConfig config;
  // Row: `RayConfig::num_cpus` / `num_gpus` / `resources` (private cluster)
  config.num_cpus = 4;
  EXPECT_EQ(config.num_gpus, -1);
  EXPECT_TRUE(config.resources.empty());
  // In local mode num_cpus sizes the task pool: 4 tasks run at once, on 4 threads.
  ShutdownAtExit shutdown;
  config.local_mode = true;
  ray::Init(config);
  ClosedGate gate;
  std::vector<ray::ObjectRef<int>> refs;
  for (int i = 0; i < 6; ++i) refs.push_back(ray::Task(Blocked).Remote());
  ASSERT_TRUE(TheGate().WaitForWaiting(4));
  auto* runtime = dynamic_cast<ray::internal::LocalModeRuntime*>(ray::internal::GetRayRuntime());
  ASSERT_NE(runtime, nullptr);
  EXPECT_EQ(runtime->NumThreads(), 4u);
}

TEST(ReadmeConfigTest, DefaultActorLifetimeRow) {
  ShutdownAtExit shutdown;
  ray::RayConfig config;
  config.local_mode = true;
  // Row: `RayConfig::default_actor_lifetime`
  config.default_actor_lifetime = ray::ActorLifetime::DETACHED;
  EXPECT_EQ(config.default_actor_lifetime, ray::ActorLifetime::DETACHED);
  // Accepted by Init (local mode has no lifetimes: actors live in this process).
  ray::Init(config);
  ray::ActorHandle<Counter> counter = ray::Actor(Counter::Create).Remote(1);
  EXPECT_EQ(*counter.Task(&Counter::Add).Remote(1).Get(), 2);
}

TEST(ReadmeConfigTest, RuntimeEnvRow) {
  unsetenv(kEnvVar);
  ray::RuntimeEnv env = FastEnv();
  {
    ShutdownAtExit shutdown;
    ray::RayConfig config;
    config.local_mode = true;
    // Row: `RayConfig::runtime_env`
    config.runtime_env = env;
    ASSERT_TRUE(config.runtime_env.has_value());
    EXPECT_EQ(config.runtime_env->Serialize(), env.Serialize());
    // Local mode applies the job's env to this process (its only worker).
    ray::Init(config);
    ASSERT_NE(std::getenv(kEnvVar), nullptr);
    EXPECT_STREQ(std::getenv(kEnvVar), "fast");
  }
  EXPECT_EQ(std::getenv(kEnvVar), nullptr);  // undone by Shutdown
}

// --- Registration, objects and tasks -----------------------------------------------

TEST_F(ReadmeApiTest, RayRemoteRow) {
  // The RAY_REMOTE line is at the top of this file; it registered each function
  // under its spelling, the overload Scale(double) as "Scale(double)".
  ray::internal::FunctionManager& functions = ray::internal::FunctionManager::Instance();
  EXPECT_EQ(functions.GetFunctionName(Add), "Add");
  EXPECT_NE(functions.GetActorFactory("Counter::Create"), nullptr);
  EXPECT_NE(functions.GetActorMethod("Counter::Add"), nullptr);
  EXPECT_NE(functions.GetFunction("Scale(double)"), nullptr);
  EXPECT_EQ(functions.GetFunction("Scale(double,double)"), nullptr);  // not listed
  EXPECT_EQ(Scale(1.5, 3.0), 4.5);
  EXPECT_EQ(*ray::Task(RAY_FUNC(Scale, double)).Remote(1.5).Get(), 3.0);
}

TEST_F(ReadmeApiTest, PutRow) {
  // Row: `ray::Put(value)`
  ray::ObjectRef<std::string> ref = ray::Put(std::string("hi"));
  EXPECT_EQ(*ref.Get(), "hi");
}

TEST_F(ReadmeApiTest, GetRow) {
  ray::ObjectRef<int> ref = ray::Task(Add).Remote(40, 2);
  // Row: `ray::Get(ref[, timeout_ms])` / `ref.Get([timeout_ms])`
  int v = *ray::Get(ref, 5000);
  EXPECT_EQ(v, 42);
  EXPECT_EQ(*ray::Get(ref), 42);
  EXPECT_EQ(*ref.Get(), 42);
  EXPECT_EQ(*ref.Get(5000), 42);
  // The timeout: a task that cannot finish yet.
  ClosedGate gate;
  ray::ObjectRef<int> blocked = ray::Task(Blocked).Remote();
  EXPECT_THROW(ray::Get(blocked, 10), RayTimeoutException);
  EXPECT_THROW(blocked.Get(10), RayTimeoutException);
}

TEST_F(ReadmeApiTest, GetListRow) {
  std::vector<ray::ObjectRef<int>> refs{ray::Put(1), ray::Task(Add).Remote(1, 1)};
  // Row: `ray::Get(refs[, timeout_ms])`
  std::vector<std::shared_ptr<int>> all = ray::Get(refs);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(*all[0], 1);
  EXPECT_EQ(*all[1], 2);
  EXPECT_EQ(*ray::Get(refs, 5000)[1], 2);
}

TEST_F(ReadmeApiTest, GetByIdsRow) {
  ray::ObjectRef<int> ref = ray::Put(7);
  // Row: `ray::Get<T>(ids)`
  std::vector<std::shared_ptr<int>> all = ray::Get<int>(std::vector<std::string>{ref.ID()});
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(*all[0], 7);
}

TEST_F(ReadmeApiTest, WaitRow) {
  ClosedGate gate;
  std::vector<ray::ObjectRef<int>> refs{ray::Task(Blocked).Remote(), ray::Put(1)};
  // Row: `ray::Wait(refs, num, timeout_ms)`
  ray::WaitResult<int> r = ray::Wait(refs, 1, 100);  // r.ready, r.unready
  ASSERT_EQ(r.ready.size(), 1u);
  ASSERT_EQ(r.unready.size(), 1u);
  EXPECT_EQ(r.ready.front(), refs[1]);
  EXPECT_EQ(r.unready.front(), refs[0]);
}

TEST_F(ReadmeApiTest, WaitFetchLocalRow) {
  std::vector<ray::ObjectRef<int>> refs{ray::Put(1)};
  // Row: `ray::Wait(refs, num, timeout_ms[, fetch_local])` (the fourth argument)
  EXPECT_EQ(ray::Wait(refs, 1, 100, /*fetch_local=*/false).ready.size(), 1u);
  EXPECT_EQ(ray::Wait(refs, 1, 100, /*fetch_local=*/true).ready.size(), 1u);
}

TEST_F(ReadmeApiTest, ReturnsRow) {
  std::vector<int> data{0, 1, 2, 3, 4, 5};
  // Row: `ray::Returns<T>` + `.SetNumReturns(n)` (Manta)
  std::vector<ray::ObjectRef<Bucket>> parts = ray::Task(Split).SetNumReturns(4).Remote(data);
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(*parts[0].Get(), (Bucket{0, 4}));
  EXPECT_EQ(*parts[1].Get(), (Bucket{1, 5}));
  EXPECT_EQ(*parts[3].Get(), (Bucket{3}));
}

TEST_F(ReadmeApiTest, GetViewRow) {
  const uint8_t buf[] = {1, 2, 3};
  const size_t n = sizeof(buf);
  // Row: `ray::GetView(ref[s][, timeout_ms])` / `ray::PutBytes(data, size)` (Manta)
  ray::ObjectView<uint8_t> v = ray::GetView(ray::PutBytes(buf, n));  // v.data(), v.size()
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v.data()[2], 3);
}

TEST_F(ReadmeApiTest, ObjectRefIdRow) {
  ray::ObjectRef<int> ref = ray::Put(5);
  // Row: `ObjectRef<T>::ID()` / `IsNil()`
  std::string id = ref.ID();
  EXPECT_EQ(id.size(), 28u);  // binary
  EXPECT_FALSE(ref.IsNil());
  EXPECT_TRUE(ray::ObjectRef<int>().IsNil());
}

TEST_F(ReadmeApiTest, ObjectRefFromIdRow) {
  ray::ObjectRef<int> ref = ray::Put(5);
  // Row: `ObjectRef<T>(id)` / `==` / `!=`
  ray::ObjectRef<int> same(ref.ID());  // same == ref
  EXPECT_TRUE(same == ref);
  EXPECT_FALSE(same != ref);
  EXPECT_TRUE(same != ray::Put(5));
  // `same` holds a reference of its own: the object outlives `ref`.
  ref = ray::ObjectRef<int>();
  EXPECT_EQ(*same.Get(), 5);
}

TEST_F(ReadmeApiTest, TaskRow) {
  // Row: `ray::Task(f).Remote(args...)`
  ray::ObjectRef<int> sum = ray::Task(Add).Remote(1, ray::Put(2));
  EXPECT_EQ(*sum.Get(), 3);
}

TEST_F(ReadmeApiTest, VoidTaskRow) {
  const int runs = Runs().Count("Touch");
  // Row: `ray::Get(done[, timeout_ms])` / `done.Get([timeout_ms])` (`ObjectRef<void>`: f returns void)
  ray::ObjectRef<void> done = ray::Task(Touch).Remote(); ray::Get(done);
  EXPECT_EQ(Runs().Count("Touch"), runs + 1);  // Get returned after the task ran
  done.Get();
  ray::Get(done, 5000);
  done.Get(5000);
}

TEST_F(ReadmeApiTest, TaskSetNameRow) {
  const int runs = Runs().Count("Add");
  TaskSetNameRow();
  EXPECT_TRUE(Runs().WaitFor("Add", runs + 1));
}

TEST_F(ReadmeApiTest, TaskSetResourceRow) {
  const int runs = Runs().Count("Train");
  TaskSetResourceRow();
  EXPECT_TRUE(Runs().WaitFor("Train", runs + 1));
}

TEST_F(ReadmeApiTest, TaskSetMaxRetriesRow) {
  const int runs = Runs().Count("Flaky");
  TaskSetMaxRetriesRow();
  EXPECT_TRUE(Runs().WaitFor("Flaky", runs + 1));
}

TEST_F(ReadmeApiTest, TaskSetPlacementGroupRow) {
  ray::PlacementGroup group = ray::CreatePlacementGroup({"", {{{"CPU", 1}}}, ray::PlacementStrategy::PACK});
  const int runs = Runs().Count("Add");
  TaskSetPlacementGroupRow(group);
  EXPECT_TRUE(Runs().WaitFor("Add", runs + 1));
  // The placement is real: in a removed group the same task fails.
  ray::RemovePlacementGroup(group.GetID());
  EXPECT_THROW(ray::Task(Add).SetPlacementGroup(group, 0).Remote(1, 2).Get(), RayException);
}

// --- Actors ---------------------------------------------------------------------

TEST_F(ReadmeApiTest, ActorRow) {
  // Row: `ray::Actor(factory).Remote(args...)`
  ray::ActorHandle<Counter> c = ray::Actor(Counter::Create).Remote(0);
  EXPECT_EQ(c.ID().size(), 16u);
  EXPECT_EQ(*c.Task(&Counter::Add).Remote(5).Get(), 5);
}

TEST_F(ReadmeApiTest, ActorSetNameRow) {
  ActorSetNameRow();
  // Named actors outlive their handles: the dropped one left it alive, findable.
  boost::optional<ray::ActorHandle<Counter>> found = ray::GetActor<Counter>("counter");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(*found->Task(&Counter::Add).Remote(2).Get(), 2);
  // The namespace form.
  ray::Actor(Counter::Create).SetName("counter", "elsewhere").Remote(10);
  boost::optional<ray::ActorHandle<Counter>> other = ray::GetActor<Counter>("counter", "elsewhere");
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(*other->Task(&Counter::Add).Remote(1).Get(), 11);
}

TEST_F(ReadmeApiTest, ActorOptionRows) {
  // Local mode accepts these options (the fake-runtime test shows their values).
  EXPECT_NO_THROW(ActorSetResourceRow());
  EXPECT_NO_THROW(ActorRestartsAndConcurrencyRow());
}

TEST_F(ReadmeApiTest, ActorSetPlacementGroupRow) {
  ray::PlacementGroup group = ray::CreatePlacementGroup({"", {{{"CPU", 1}}}, ray::PlacementStrategy::PACK});
  EXPECT_NO_THROW(ActorSetPlacementGroupRow(group));
  // The placement is checked: -1 is any bundle, 1 is out of range for one bundle.
  EXPECT_THROW(ray::Actor(Counter::Create).SetPlacementGroup(group, 1).Remote(0), RayException);
}

TEST_F(ReadmeApiTest, ActorTaskRow) {
  ray::ActorHandle<Counter> c = ray::Actor(Counter::Create).Remote(0);
  // Row: `handle.Task(&T::M).Remote(args...)` (`SetName`, `SetResource(s)`, `SetMaxRetries` too)
  ray::ObjectRef<int> n = c.Task(&Counter::Add).Remote(1);
  EXPECT_EQ(*n.Get(), 1);
  ray::ObjectRef<int> m = c.Task(&Counter::Add).SetName("add").SetResource("CPU", 1).SetMaxRetries(1).Remote(2);
  EXPECT_EQ(*m.Get(), 3);
}

TEST_F(ReadmeApiTest, KillRow) {
  ray::ActorHandle<Counter> c = ray::Actor(Counter::Create).Remote(0);
  ray::ActorHandle<Counter> copy = c;
  EXPECT_TRUE(copy == c);
  EXPECT_FALSE(copy == ray::Actor(Counter::Create).Remote(0));
  EXPECT_EQ(*c.Task(&Counter::Add).Remote(1).Get(), 1);
  // Row: `handle.ID()` / `==` / `handle.Kill([no_restart])`
  c.Kill();
  EXPECT_THROW(c.Task(&Counter::Add).Remote(1).Get(), RayActorException);
}

TEST_F(ReadmeApiTest, GetActorRow) {
  ray::ActorHandle<Counter> named = ray::Actor(Counter::Create).SetName("counter").Remote(7);
  {
    // Row: `ray::GetActor<T>(name[, namespace])`
    boost::optional<ray::ActorHandle<Counter>> c = ray::GetActor<Counter>("counter");
    ASSERT_TRUE(c.has_value());
    EXPECT_TRUE(*c == named);
    EXPECT_EQ(*c->Task(&Counter::Add).Remote(1).Get(), 8);
  }
  EXPECT_TRUE(ray::GetActor<Counter>("counter", "readme").has_value());
  EXPECT_FALSE(ray::GetActor<Counter>("counter", "elsewhere").has_value());
  EXPECT_FALSE(ray::GetActor<Counter>("nobody").has_value());
}

TEST_F(ReadmeApiTest, WasRestartedAndExitActorRow) {
  // The row's line is in Cache::Open.
  ray::ActorHandle<Cache> cache = ray::Actor(Cache::Create).SetMaxRestarts(1).Remote();
  EXPECT_FALSE(*cache.Task(&Cache::Open).Remote().Get());
  cache.Kill(false);  // its process "dies": the factory runs again
  EXPECT_TRUE(*cache.Task(&Cache::Open).Remote().Get());
  EXPECT_FALSE(ray::WasCurrentActorRestarted());  // outside actors

  // ExitActor: the call ends the actor, for good.
  EXPECT_THROW(cache.Task(&Cache::Close).Remote().Get(), RayActorException);
  EXPECT_THROW(cache.Task(&Cache::Open).Remote().Get(), RayActorException);
  EXPECT_THROW(ray::ExitActor(), RayException);  // not in an actor
}

TEST_F(ReadmeApiTest, CancelAndIsCancelledRows) {
  ray::ObjectRef<int> slow = ray::Task(Crawl).Remote();
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (g_steps.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GT(g_steps.load(), 0);  // it runs
  // Row: `ray::Cancel(ref[, force[, recursive]])`
  ray::Cancel(slow);  // slow.Get() throws RayTaskCancelledException
  EXPECT_THROW(slow.Get(), ray::internal::RayTaskCancelledException);
  EXPECT_LT(g_steps.load(), 60000);  // it stopped when it saw the cancel
}

// Row: `co_await ref` (in a `ray::Coroutine<T>`)
ray::Coroutine<int> Plus1(ray::ObjectRef<int> r) { co_return *co_await r + 1; }

// The combinators' row, in a coroutine: the sum of all, the index WhenAny gave, how
// many WaitAsync found ready.
ray::Coroutine<std::vector<int>> Combine(std::vector<ray::ObjectRef<int>> refs) {
  // Row: `ray::WhenAll(refs)` / `ray::WhenAny(refs)` / `ray::WaitAsync(refs, n)` (awaited)
  std::vector<std::shared_ptr<int>> all = co_await ray::WhenAll(refs);
  size_t first = co_await ray::WhenAny(refs);
  ray::WaitResult<int> two = co_await ray::WaitAsync(refs, 2);
  co_return std::vector<int>{*all[0] + *all[1] + *all[2], static_cast<int>(first), static_cast<int>(two.ready.size())};
}

TEST_F(ReadmeApiTest, CoroutineRows) {
  // Row: `ray::RunAsync(coroutine)` / `ray::Spawn(executor, coroutine)`
  int two = ray::RunAsync(Plus1(ray::Put(1)));
  EXPECT_EQ(two, 2);
  EXPECT_EQ(ray::RunAsync(Plus1(ray::Task(Add).Remote(1, 2))), 4);
  std::vector<ray::ObjectRef<int>> refs = {ray::Put(1), ray::Task(Add).Remote(1, 1), ray::Put(3)};
  std::vector<int> combined = ray::RunAsync(Combine(refs));
  EXPECT_EQ(combined[0], 6);
  EXPECT_LT(combined[1], 3);
  EXPECT_GE(combined[2], 2);  // as ray::Wait: at least the 2 asked for
  // Spawn on an executor this thread drains.
  std::mutex mu;
  std::vector<std::function<void()>> posted;
  ray::Executor executor([&](std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu);
    posted.push_back(std::move(fn));
  });
  std::future<int> three = ray::Spawn(executor, Plus1(ray::Put(2)));
  // Run what was posted until the future is ready (this thread is the executor).
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (three.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready &&
         std::chrono::steady_clock::now() < deadline) {
    std::vector<std::function<void()>> batch;
    {
      std::lock_guard<std::mutex> lock(mu);
      batch.swap(posted);
    }
    for (auto& fn : batch) fn();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(three.get(), 3);
}

// Row: `ray::Generator<T>` (a streaming task) / `co_yield`
ray::Generator<int> Count(int n) { for (int i = 0; i < n; ++i) co_yield i; }
RAY_REMOTE(Count);

TEST_F(ReadmeApiTest, StreamRows) {
  std::vector<int> seen;
  auto Use = [&seen](int value) { seen.push_back(value); };
  // Row: `ray::ObjectRefGenerator<T>`: range-for / `Next([timeout_ms])` / `co_await NextAsync()`
  for (ray::ObjectRef<int> ref : ray::Task(Count).Remote(3)) Use(*ref.Get());
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2}));
  ray::ObjectRefGenerator<int> two = ray::Task(Count).Remote(2);
  EXPECT_EQ(*two.Next(10000)->Get(), 0);
  auto next = [](ray::ObjectRefGenerator<int>& g) -> ray::Coroutine<int> {
    co_return *co_await *co_await g.NextAsync();
  };
  EXPECT_EQ(ray::RunAsync(next(two)), 1);
  EXPECT_EQ(two.Next(), std::nullopt);

  // Row: `SetGeneratorBackpressureNumObjects(n)` / `Completed()` / `ray::Cancel(stream)`
  auto s = ray::Task(Count).SetGeneratorBackpressureNumObjects(8).Remote(1000);
  int taken = 0;
  while (s.Next()) ++taken;
  EXPECT_EQ(taken, 1000);
  EXPECT_EQ(*s.Completed().Get(), 1000);
  auto stopped = ray::Task(Count).SetGeneratorBackpressureNumObjects(1).Remote(1000000);
  EXPECT_EQ(*stopped.Next()->Get(), 0);
  ray::Cancel(stopped);
  EXPECT_THROW(stopped.Completed().Get(), ray::internal::RayTaskCancelledException);
}

TEST_F(ReadmeApiTest, GetNamespaceRow) {
  // Row: `ray::GetNamespace()`
  std::string ns = ray::GetNamespace();
  EXPECT_EQ(ns, "readme");
}

// --- Placement groups ---------------------------------------------------------------

TEST_F(ReadmeApiTest, CreatePlacementGroupRow) {
  // Row: `ray::CreatePlacementGroup(options)`
  ray::PlacementGroup g = ray::CreatePlacementGroup({"g", {{{"CPU", 1}}}, ray::PlacementStrategy::PACK});
  EXPECT_FALSE(g.Empty());
  EXPECT_EQ(g.GetID().size(), 18u);
  EXPECT_EQ(g.GetName(), "g");
  ASSERT_EQ(g.GetBundles().size(), 1u);
  EXPECT_EQ(g.GetBundles()[0], (std::unordered_map<std::string, double>{{"CPU", 1}}));
  EXPECT_EQ(g.GetStrategy(), ray::PlacementStrategy::PACK);
  EXPECT_EQ(g.GetState(), ray::PlacementGroupState::CREATED);  // local mode: at once
}

TEST_F(ReadmeApiTest, PlacementGroupWaitRow) {
  ray::PlacementGroup g = ray::CreatePlacementGroup({"g", {{{"CPU", 1}}}, ray::PlacementStrategy::PACK});
  testing::internal::CaptureStdout();
  // Row: `PlacementGroup::Wait(seconds)` / `GetID()` / `GetName()` / `GetBundles()` / `GetStrategy()` / `GetState()` / `Empty()`
  if (g.Wait(10)) std::cout << g.GetName();
  std::cout << std::flush;
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "g");
  EXPECT_TRUE(ray::PlacementGroup().Empty());
}

TEST_F(ReadmeApiTest, SetWaitCallbakRow) {
  ray::PlacementGroup g = ray::CreatePlacementGroup({"g", {{{"CPU", 1}}}, ray::PlacementStrategy::PACK});
  EXPECT_TRUE(g.Wait(3));  // CREATED
  // Row: `PlacementGroup::SetWaitCallbak(callback)` (Ray's spelling)
  g.SetWaitCallbak([](const std::string& id, int timeout_seconds) { return MyWait(id, timeout_seconds); });
  EXPECT_FALSE(g.Wait(3));  // the callback's answer
  EXPECT_EQ(g_waited_id, g.GetID());
  EXPECT_EQ(g_waited_seconds, 3);
}

TEST_F(ReadmeApiTest, RemovePlacementGroupRow) {
  ray::PlacementGroup g = ray::CreatePlacementGroup({"g", {{{"CPU", 1}}}, ray::PlacementStrategy::PACK});
  // Row: `ray::RemovePlacementGroup(id)`
  ray::RemovePlacementGroup(g.GetID());
  EXPECT_EQ(ray::GetPlacementGroupById(g.GetID()).GetState(), ray::PlacementGroupState::REMOVED);
  EXPECT_TRUE(ray::GetPlacementGroup("g").Empty());
  EXPECT_THROW(g.Wait(1), RayException);
}

TEST_F(ReadmeApiTest, GetPlacementGroupRow) {
  ray::PlacementGroup g = ray::CreatePlacementGroup({"g", {{{"CPU", 1}}}, ray::PlacementStrategy::PACK});
  // Row: `ray::GetPlacementGroupById(id)` / `ray::GetPlacementGroup(name)`
  bool created = ray::GetPlacementGroup("g").GetState() == ray::PlacementGroupState::CREATED;
  EXPECT_TRUE(created);
  EXPECT_EQ(ray::GetPlacementGroup("g").GetID(), g.GetID());
  EXPECT_EQ(ray::GetPlacementGroupById(g.GetID()).GetName(), "g");
  EXPECT_TRUE(ray::GetPlacementGroup("nothing").Empty());
}

TEST_F(ReadmeApiTest, GetAllPlacementGroupsRow) {
  ray::CreatePlacementGroup({"a", {{{"CPU", 1}}}, ray::PlacementStrategy::PACK});
  ray::CreatePlacementGroup({"b", {{{"CPU", 1}}}, ray::PlacementStrategy::SPREAD});
  testing::internal::CaptureStdout();
  // Row: `ray::GetAllPlacementGroups()`
  for (auto& g : ray::GetAllPlacementGroups()) std::cout << g.GetName();
  std::cout << std::flush;
  std::string names = testing::internal::GetCapturedStdout();
  EXPECT_TRUE(names == "ab" || names == "ba") << names;
}

// --- Runtime environments (README "Runtime environments", its table) --------------

TEST(ReadmeRuntimeEnvTest, FieldRows) {
  using EnvVars = std::map<std::string, std::string>;
  ray::RuntimeEnv env;
  // Row: `Set<T>(name, value)`
  env.Set<std::map<std::string, std::string>>("env_vars", {{"MODE", "fast"}});
  // Row: `Get<T>(name)`
  auto vars = env.Get<std::map<std::string, std::string>>("env_vars");
  EXPECT_EQ(vars, (EnvVars{{"MODE", "fast"}}));

  ASSERT_TRUE(env.Remove("env_vars"));
  // Row: `SetJsonStr(name, json)`
  env.SetJsonStr("env_vars", R"({"MODE": "fast"})");
  EXPECT_EQ(env.Get<EnvVars>("env_vars"), vars);

  // Row: `GetJsonStr(name)`
  std::string text = env.GetJsonStr("env_vars");  // {"MODE":"fast"}
  EXPECT_EQ(text, R"({"MODE":"fast"})");

  env.Set("working_dir", std::string("/tmp"));
  // Row: `Contains(name)` / `Remove(name)` / `Empty()`
  if (env.Contains("working_dir")) env.Remove("working_dir");
  EXPECT_FALSE(env.Contains("working_dir"));
  EXPECT_FALSE(env.Empty());
  EXPECT_TRUE(ray::RuntimeEnv().Empty());

  // Row: `Serialize()` / `Deserialize(text)`
  auto copy = ray::RuntimeEnv::Deserialize(env.Serialize());
  EXPECT_EQ(copy.Serialize(), env.Serialize());
  EXPECT_EQ(copy.Get<EnvVars>("env_vars"), vars);

  // Row: `SerializeToRuntimeEnvInfo()`
  std::string info = env.SerializeToRuntimeEnvInfo();  // {"serializedRuntimeEnv":"..."}
  EXPECT_EQ(nlohmann::json::parse(info), (nlohmann::json{{"serializedRuntimeEnv", env.Serialize()}}));
}

TEST(ReadmeRuntimeEnvTest, JobTaskAndActorLevelRows) {
  unsetenv(kEnvVar);
  ShutdownAtExit shutdown;
  ray::RuntimeEnv env = FastEnv();
  ray::RayConfig config;
  config.local_mode = true;
  // Row: job level
  config.runtime_env = env; ray::Init(config);
  EXPECT_STREQ(std::getenv(kEnvVar), "fast");

  // Local mode runs a task or actor only in the job's env: these rows ask for it.
  const int runs = Runs().Count("f saw fast");
  // Row: task level
  ray::Task(f).SetRuntimeEnv(env).Remote();
  EXPECT_TRUE(Runs().WaitFor("f saw fast", runs + 1));

  // Row: actor level
  ray::Actor(Counter::Create).SetRuntimeEnv(env).Remote(0);

  // The "API at a glance" row of the task option.
  const int adds = Runs().Count("Add");
  TaskSetRuntimeEnvRow(env);
  EXPECT_TRUE(Runs().WaitFor("Add", adds + 1));

  // Another env is refused here, so the env above was really looked at.
  ray::RuntimeEnv slow;
  slow.Set(std::string("env_vars"), std::map<std::string, std::string>{{kEnvVar, "slow"}});
  EXPECT_THROW(ray::Task(f).SetRuntimeEnv(slow).Remote(), RayRuntimeEnvException);
  EXPECT_THROW(ray::Actor(Counter::Create).SetRuntimeEnv(slow).Remote(0), RayRuntimeEnvException);
}

// --- Logging and errors -----------------------------------------------------------

TEST(ReadmeLoggingTest, RaylogRow) {
  int sum = 3;
  testing::internal::CaptureStderr();
  // Row: `RAYLOG(level)`
  RAYLOG(INFO) << "sum is " << sum;
  std::string logged = testing::internal::GetCapturedStderr();
  if (ray::internal::RayLogMessage::IsEnabled(ray::RayLogLevel::INFO)) {
    EXPECT_NE(logged.find("sum is 3"), std::string::npos) << logged;
    EXPECT_EQ(logged[0], 'I') << logged;
  } else {  // RAY_LOG_LEVEL hides INFO
    EXPECT_EQ(logged, "");
  }
}

TEST_F(ReadmeApiTest, ExceptionsRow) {
  ray::ObjectRef<int> ref = ray::Task(Fail).Remote();
  testing::internal::CaptureStderr();
  // Row: `ray::internal::RayException` and subclasses (`RayTaskException`, `RayActorException`, `RayTimeoutException`, ...)
  try { ray::Get(ref); } catch (const ray::internal::RayTaskException& e) { std::cerr << e.what(); }
  std::string printed = testing::internal::GetCapturedStderr();
  EXPECT_NE(printed.find("boom"), std::string::npos) << printed;
  EXPECT_NE(printed.find("Fail"), std::string::npos) << printed;
}

// --- The option rows over the fake runtime: what each hands the runtime --------------

TEST(ReadmeOptionsTest, OptionRowsHandTheRuntimeTheirValues) {
  manta::testing::ScopedFakeRuntime fake;
  auto last_task = [&]() -> const manta::testing::FakeRuntime::SubmittedTask& { return fake->tasks().back(); };

  TaskSetNameRow();
  EXPECT_EQ(last_task().function_name, "Add");
  EXPECT_EQ(last_task().options.name, "add");

  TaskSetResourceRow();
  EXPECT_EQ(last_task().function_name, "Train");
  EXPECT_EQ(last_task().options.resources, (std::unordered_map<std::string, double>{{"GPU", 1}}));

  TaskSetMaxRetriesRow();
  EXPECT_EQ(last_task().function_name, "Flaky");
  EXPECT_EQ(last_task().options.max_retries, 5);

  ray::PlacementGroup group = ray::CreatePlacementGroup({"", {{{"CPU", 1}}}, ray::PlacementStrategy::PACK});
  TaskSetPlacementGroupRow(group);
  EXPECT_EQ(last_task().options.placement.group_id, group.GetID());
  EXPECT_EQ(last_task().options.placement.bundle_index, 0);

  ray::RuntimeEnv env = FastEnv();
  TaskSetRuntimeEnvRow(env);
  EXPECT_EQ(last_task().options.serialized_runtime_env, env.Serialize());

  ActorSetNameRow();
  EXPECT_EQ(fake->created_actors().back().name, "counter");
  EXPECT_EQ(fake->created_actors().back().ray_namespace, "");  // the job's

  ActorSetResourceRow();
  EXPECT_EQ(fake->created_actors().back().resources, (std::unordered_map<std::string, double>{{"CPU", 1}}));

  ActorRestartsAndConcurrencyRow();
  EXPECT_EQ(fake->created_actors().back().max_restarts, -1);
  EXPECT_EQ(fake->created_actors().back().max_concurrency, 8);

  ActorSetPlacementGroupRow(group);
  EXPECT_EQ(fake->created_actors().back().placement.group_id, group.GetID());
  EXPECT_EQ(fake->created_actors().back().placement.bundle_index, -1);

  // The actor call options of the handle.Task row.
  ray::ActorHandle<Counter> c = ray::Actor(Counter::Create).Remote(0);
  c.Task(&Counter::Add).SetName("add").SetResource("CPU", 1).SetMaxRetries(2).Remote(1);
  EXPECT_EQ(last_task().function_name, "Counter::Add");
  EXPECT_EQ(last_task().options.name, "add");
  EXPECT_EQ(last_task().options.max_retries, 2);
  c.Kill(false);
  ASSERT_FALSE(fake->kills().empty());
  EXPECT_EQ(fake->kills().back(), std::make_pair(c.ID(), false));
}

}  // namespace
