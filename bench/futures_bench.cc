// Futures beyond Ray's C++ API (ray/api/coroutine.h), each figure beside its blocking
// equivalent measured in the same run:
//
//   awaits_outstanding            N coroutines on one thread, each awaiting a task that
//                                 waits for its argument (a gate): how many were
//                                 outstanding at once, the heap each took
//                                 (await_heap_bytes_each), and the time from opening
//                                 the gate to the last resumed (awaits_resume_all_s)
//                                 against one thread Getting the same tasks in order
//                                 (blocking_get_all_s).
//   await_tasks_per_s             submit + co_await of trivial tasks, 1,000 in flight
//                                 on one thread, against submit + Get in batches of
//                                 1,000 (blocking_tasks_per_s).
//
//   async_actor_calls_per_s       trivial calls of a coroutine method of an async actor,
//                                 1,000 at a time, against the same call of a plain
//                                 actor (sync_actor_calls_per_s); and
//                                 async_actor_calls_awaiting_at_once: calls of the async
//                                 actor each awaiting a task behind a gate, all at once
//                                 on its one thread (--actor-awaits, 2,000 by default).
//
//   stream_first_item_us_p50/_p99  a generator task's first item: from its co_yield (a
//                                 steady-clock stamp in the item) to the caller's Next()
//                                 returning its ref, over 200 streams, against a trivial
//                                 task's submit + Get (blocking_round_trip_us_p50/_p99);
//   stream_items_per_s            a generator of 200,000 ints consumed by Next + Get
//                                 (stream_items_per_s_backpressure_1000: with
//                                 SetGeneratorBackpressureNumObjects(1000)), against a
//                                 task returning them all in one vector
//                                 (blocking_vector_items_per_s, and its
//                                 blocking_vector_first_item_ms beside
//                                 stream_first_item_ms: when the caller can use the first).
//
//   futures_bench [--seconds S] [--awaits N] [--actor-awaits N] [--items N] [--only name,name]
//   (names: awaits_outstanding, await_tasks_per_s, async_actor, stream)
//
// Prints one JSON object. Starts a private cluster (2 CPUs); also its own worker.
#include <ray/api.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_cluster.h"
#include "bench_main.h"
#include "bench_util.h"

namespace manta::bench::futures_bench {

namespace {

using manta::bench::Clock;
using manta::bench::Since;

int Small() { return 1; }
int Inc(int x) { return x + 1; }
// The gate: returns once `path` exists (at most ten minutes).
int WaitForFile(std::string path) {
  const auto t0 = Clock::now();
  while (!std::filesystem::exists(path) && Since(t0) < 600) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return 0;
}
int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
// `n` items, each the (system-wide monotonic) time it was yielded at.
ray::Generator<int64_t> Stamps(int n) {
  for (int i = 0; i < n; ++i) co_yield NowNs();
}
// The blocking equivalent: every item in one return.
std::vector<int64_t> StampVector(int n) {
  std::vector<int64_t> out(n);
  for (int64_t& stamp : out) stamp = NowNs();
  return out;
}
RAY_REMOTE(Small, Inc, WaitForFile, Stamps, StampVector);

// An async actor (coroutine methods) and a plain one doing the same trivial call.
class AsyncEcho {
 public:
  static AsyncEcho* Create() { return new AsyncEcho(); }
  ray::Coroutine<int> Echo(int x) { co_return x; }
  // The gate: a task this actor owns, so the tasks behind it wait here for it (rather
  // than each in a worker of its own, as they would behind a borrowed ref).
  void MakeGate(std::string path) { gate_ = ray::Task(WaitForFile).Remote(path); }
  // Awaits a task that waits for the gate; counts the calls waiting meanwhile.
  ray::Coroutine<int> AwaitGated() {
    max_waiting_ = std::max(max_waiting_, ++waiting_);
    int x = *co_await ray::Task(Inc).Remote(gate_);
    --waiting_;
    co_return x;
  }
  int Waiting() { return waiting_; }
  int MaxWaiting() { return max_waiting_; }

 private:
  ray::ObjectRef<int> gate_;
  int waiting_ = 0;
  int max_waiting_ = 0;
};
class SyncEcho {
 public:
  static SyncEcho* Create() { return new SyncEcho(); }
  int Echo(int x) { return x; }
};
RAY_REMOTE(AsyncEcho::Create, &AsyncEcho::Echo, &AsyncEcho::MakeGate, &AsyncEcho::AwaitGated, &AsyncEcho::Waiting,
           &AsyncEcho::MaxWaiting, SyncEcho::Create, &SyncEcho::Echo);

size_t HeapBytes() { return mallinfo2().uordblks; }

ray::Coroutine<int> AwaitCounted(ray::ObjectRef<int> ref, std::atomic<int>* suspended) {
  suspended->fetch_add(1);
  co_return *co_await ref;
}

ray::Coroutine<long> SumAll(std::vector<ray::Coroutine<int>> coroutines) {
  long sum = 0;
  for (int v : co_await ray::WhenAll(std::move(coroutines))) sum += v;
  co_return sum;
}

// N tasks behind a gate; returns the tasks' refs (the gate's file is `gate`).
std::vector<ray::ObjectRef<int>> GatedTasks(int n, const std::string& gate) {
  ray::ObjectRef<int> opened = ray::Task(WaitForFile).Remote(gate);
  std::vector<ray::ObjectRef<int>> refs;
  refs.reserve(n);
  for (int i = 0; i < n; ++i) refs.push_back(ray::Task(Inc).Remote(opened));
  return refs;
}

void AwaitsOutstanding(int n, std::vector<std::pair<std::string, double>>* results) {
  const std::string dir = std::filesystem::temp_directory_path() / ("futures-bench-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  // Blocking: one thread Gets each in order.
  std::vector<ray::ObjectRef<int>> refs = GatedTasks(n, dir + "/gate-blocking");
  auto t0 = Clock::now();
  std::ofstream(dir + "/gate-blocking") << "open\n";
  long blocking_sum = 0;
  for (const auto& ref : refs) blocking_sum += *ref.Get();
  const double blocking_s = Since(t0);
  refs.clear();

  refs = GatedTasks(n, dir + "/gate-await");
  std::atomic<int> suspended{0};
  malloc_trim(0);
  const size_t heap0 = HeapBytes();
  std::vector<ray::Coroutine<int>> coroutines;
  coroutines.reserve(n);
  for (const auto& ref : refs) coroutines.push_back(AwaitCounted(ref, &suspended));
  ray::ThreadPoolExecutor thread(1);
  std::future<long> sum = ray::Spawn(thread.executor(), SumAll(std::move(coroutines)));
  while (suspended.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // Every coroutine has registered its await once the executor is idle again.
  std::promise<void> idle;
  thread.executor().Post([&idle] { idle.set_value(); });
  idle.get_future().wait();
  const size_t heap1 = HeapBytes();
  t0 = Clock::now();
  std::ofstream(dir + "/gate-await") << "open\n";
  const long await_sum = sum.get();
  const double await_s = Since(t0);
  if (await_sum != blocking_sum || await_sum != n) {  // each task: 0 + 1
    std::fprintf(stderr, "futures_bench: sums differ: %ld awaited, %ld by Get, %ld expected\n", await_sum,
                 blocking_sum, static_cast<long>(n));
    std::exit(1);
  }
  std::filesystem::remove_all(dir);
  results->emplace_back("awaits_outstanding", n);
  results->emplace_back("await_heap_bytes_each", static_cast<double>(heap1 - heap0) / n);
  results->emplace_back("awaits_resume_all_s", await_s);
  results->emplace_back("blocking_get_all_s", blocking_s);
}

// Keeps `window` trivial tasks in flight from one coroutine thread for `seconds`.
ray::Coroutine<long> AwaitWindow(double seconds, int window) {
  long done = 0;
  const auto t0 = Clock::now();
  while (Since(t0) < seconds) {
    std::vector<ray::ObjectRef<int>> refs;
    refs.reserve(window);
    for (int i = 0; i < window; ++i) refs.push_back(ray::Task(Small).Remote());
    for (const auto& v : co_await ray::WhenAll(std::move(refs))) done += *v;
  }
  co_return done;
}

void AwaitTaskRate(double seconds, std::vector<std::pair<std::string, double>>* results) {
  const int window = 1000;
  ray::RunAsync(AwaitWindow(0.2, window));  // warm-up
  auto t0 = Clock::now();
  long awaited = ray::RunAsync(AwaitWindow(seconds, window));
  results->emplace_back("await_tasks_per_s", awaited / Since(t0));
  results->emplace_back("blocking_tasks_per_s", manta::bench::Rate(seconds, window, [&] {
                          std::vector<ray::ObjectRef<int>> refs;
                          refs.reserve(window);
                          for (int i = 0; i < window; ++i) refs.push_back(ray::Task(Small).Remote());
                          ray::Get(refs);
                        }));
}

// Calls per second: batches of 1,000 submitted, then all read.
template <typename Call>
double CallRate(double seconds, Call call) {
  return manta::bench::Rate(seconds, 1000, [&] {
    std::vector<ray::ObjectRef<int>> refs;
    refs.reserve(1000);
    for (int i = 0; i < 1000; ++i) refs.push_back(call(i));
    ray::Get(refs);
  });
}

void AsyncActorFigures(double seconds, int gated, std::vector<std::pair<std::string, double>>* results) {
  ray::ActorHandle<AsyncEcho> async_actor = ray::Actor(AsyncEcho::Create).Remote();
  ray::ActorHandle<SyncEcho> sync_actor = ray::Actor(SyncEcho::Create).Remote();
  results->emplace_back("async_actor_calls_per_s",
                        CallRate(seconds, [&](int i) { return async_actor.Task(&AsyncEcho::Echo).Remote(i); }));
  results->emplace_back("sync_actor_calls_per_s",
                        CallRate(seconds, [&](int i) { return sync_actor.Task(&SyncEcho::Echo).Remote(i); }));
  // Calls that each await a task behind a gate: how many wait at once on the one
  // thread (an actor allowed all of them, and the call asking how many; the default
  // is 1,000).
  ray::ActorHandle<AsyncEcho> waiter = ray::Actor(AsyncEcho::Create).SetMaxConcurrency(gated + 1).Remote();
  const std::string gate_path =
      std::filesystem::temp_directory_path() / ("futures-bench-actor-gate-" + std::to_string(getpid()));
  waiter.Task(&AsyncEcho::MakeGate).Remote(gate_path).Get();
  std::vector<ray::ObjectRef<int>> refs;
  for (int i = 0; i < gated; ++i) refs.push_back(waiter.Task(&AsyncEcho::AwaitGated).Remote());
  const auto t0 = Clock::now();
  while (*waiter.Task(&AsyncEcho::Waiting).Remote().Get() < gated && Since(t0) < 60) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::ofstream(gate_path) << "open\n";
  for (const auto& ref : refs) ref.Get();
  std::filesystem::remove(gate_path);
  results->emplace_back("async_actor_calls_awaiting_at_once", *waiter.Task(&AsyncEcho::MaxWaiting).Remote().Get());
}

double Percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[static_cast<size_t>(p * static_cast<double>(values.size() - 1))];
}

void StreamFigures(int items, std::vector<std::pair<std::string, double>>* results) {
  std::vector<double> first_us, round_trip_us;
  for (int k = 0; k < 220; ++k) {  // the first 20 warm up
    ray::ObjectRefGenerator<int64_t> stream = ray::Task(Stamps).Remote(1);
    std::optional<ray::ObjectRef<int64_t>> ref = stream.Next();
    const int64_t now = NowNs();
    const auto t0 = Clock::now();
    ray::Task(Small).Remote().Get();
    if (k < 20) continue;
    first_us.push_back(static_cast<double>(now - *ray::Get(*ref)) / 1e3);
    round_trip_us.push_back(Since(t0) * 1e6);
  }
  results->emplace_back("stream_first_item_us_p50", Percentile(first_us, 0.5));
  results->emplace_back("stream_first_item_us_p99", Percentile(first_us, 0.99));
  results->emplace_back("blocking_round_trip_us_p50", Percentile(round_trip_us, 0.5));
  results->emplace_back("blocking_round_trip_us_p99", Percentile(round_trip_us, 0.99));
  for (int64_t backpressure : {int64_t{-1}, int64_t{1000}}) {
    const auto t0 = Clock::now();
    auto stream = ray::Task(Stamps).SetGeneratorBackpressureNumObjects(backpressure).Remote(items);
    double first_ms = 0;
    long taken = 0;
    while (std::optional<ray::ObjectRef<int64_t>> ref = stream.Next()) {
      ray::Get(*ref);
      if (taken++ == 0) first_ms = Since(t0) * 1e3;
    }
    const double rate = static_cast<double>(taken) / Since(t0);
    results->emplace_back(backpressure > 0 ? "stream_items_per_s_backpressure_1000" : "stream_items_per_s", rate);
    if (backpressure <= 0) results->emplace_back("stream_first_item_ms", first_ms);
  }
  const auto t0 = Clock::now();
  std::shared_ptr<std::vector<int64_t>> all = ray::Task(StampVector).Remote(items).Get();
  const double all_s = Since(t0);
  results->emplace_back("blocking_vector_items_per_s", static_cast<double>(all->size()) / all_s);
  results->emplace_back("blocking_vector_first_item_ms", all_s * 1e3);
}

}  // namespace

int Main(int argc, char** argv) {
  const manta::bench::BenchFlags o = manta::bench::BenchFlags::Parse(argc, argv);
  const int awaits = std::stoi(o.Value("--awaits", "100000"));
  manta::bench::BenchCluster cluster;
  cluster.StartHead({"--num-cpus", "2"});
  ray::RayConfig config;
  config.address = cluster.gcs_address();
  ray::Init(config, argc, argv);
  std::vector<std::pair<std::string, double>> results;
  if (o.Want("awaits_outstanding")) AwaitsOutstanding(awaits, &results);
  if (o.Want("await_tasks_per_s")) AwaitTaskRate(o.seconds, &results);
  if (o.Want("async_actor")) AsyncActorFigures(o.seconds, std::stoi(o.Value("--actor-awaits", "2000")), &results);
  if (o.Want("stream")) StreamFigures(std::stoi(o.Value("--items", "200000")), &results);
  ray::Shutdown();
  manta::bench::PrintJson(results);
  return 0;
}

[[maybe_unused]] const bool kRegistered = AddBenchMain("futures_bench", Main);

}  // namespace manta::bench::futures_bench
