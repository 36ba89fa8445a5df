// The driver program of the multi-host tests: an ordinary Ray C++ program (only
// <ray/api.h>), run on any host of a test bed with RAY_ADDRESS set. Each scenario
// prints progress lines and ends with one line "RESULT <json>" that the test reads.
// Workers are this same binary, started by the raylets of every host.
//
// Hosts: host i offers the custom resource "host<i>"; hosts other than the head
// also offer "worker_host", so work can be kept off the head (whose death would
// end the cluster).
#include <ifaddrs.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <ray/api.h>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "python_free_examples/sort_tasks.h"

namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// This host's address: the first IPv4 address of an interface that is up and not
// loopback (each test host has exactly one).
std::string WhereAmI() {
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return "?";
  std::string found = "?";
  for (ifaddrs* a = all; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    if ((a->ifa_flags & IFF_UP) == 0 || (a->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof(text));
    found = text;
    break;
  }
  freeifaddrs(all);
  return found;
}

void Say(const std::string& line) { std::cout << line << std::endl; }

void Result(const nlohmann::json& result) { std::cout << "RESULT " << result.dump() << std::endl; }

}  // namespace

// ---- remote functions

std::string Where() { return WhereAmI(); }

std::string SlowWhere(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return WhereAmI();
}

// A blob of `bytes` whose content depends on `seed` only (so a rebuilt copy equals
// the first), prefixed by where it was made (which differs when it was rebuilt).
struct Blob {
  std::string made_at;
  std::vector<uint8_t> data;
  MSGPACK_DEFINE(made_at, data);
};

uint64_t Fill(int64_t i, int64_t seed) { return (static_cast<uint64_t>(i) * 2654435761u + static_cast<uint64_t>(seed)) & 0xff; }

uint64_t Checksum(const std::vector<uint8_t>& data) {
  uint64_t sum = 1469598103934665603ull;
  for (size_t i = 0; i < data.size(); i += 4096) sum = (sum ^ data[i]) * 1099511628211ull;
  return sum ^ data.size();
}

std::vector<uint8_t> MakeData(int64_t bytes, int64_t seed) {
  std::vector<uint8_t> data(static_cast<size_t>(bytes));
  for (int64_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(Fill(i, seed));
  return data;
}

bool DataIsRight(const std::vector<uint8_t>& data, int64_t bytes, int64_t seed) {
  if (static_cast<int64_t>(data.size()) != bytes) return false;
  for (int64_t i = 0; i < bytes; i += 997) {
    if (data[i] != static_cast<uint8_t>(Fill(i, seed))) return false;
  }
  return true;
}

// Records which attempts of which work ran where and when (a named actor on the
// head): a rebuilt object or a retried task registers again.
class Registry {
 public:
  static Registry* Create() { return new Registry(); }
  bool Record(std::string what, std::string where, int64_t at_ms) {
    log_[what].push_back({where, at_ms});
    return true;
  }
  std::map<std::string, std::vector<std::pair<std::string, int64_t>>> Log() { return log_; }

 private:
  std::map<std::string, std::vector<std::pair<std::string, int64_t>>> log_;
};

void Register(const std::string& what) {
  auto registry = ray::GetActor<Registry>("registry");
  if (registry) registry->Task(&Registry::Record).Remote(what, WhereAmI(), NowMs()).Get();
}

Blob Produce(int64_t index, int64_t bytes) {
  Register("blob" + std::to_string(index));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // long enough to fill every CPU
  return Blob{WhereAmI(), MakeData(bytes, index)};
}

std::string LongTask(int64_t index, int ms) {
  Register("long" + std::to_string(index));
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return "long" + std::to_string(index) + "@" + WhereAmI();
}

// Reads a blob by reference inside a task; returns {checksum, seconds of the first
// Get (a transfer when the blob is elsewhere), seconds of a second, local Get}.
std::vector<double> ReadRemote(std::vector<ray::ObjectRef<std::vector<uint8_t>>> refs) {
  auto t0 = std::chrono::steady_clock::now();
  auto first = ray::Get(refs[0]);
  double fetch = Seconds(t0);
  uint64_t sum = Checksum(*first);
  first.reset();
  auto t1 = std::chrono::steady_clock::now();
  auto again = ray::Get(refs[0]);
  double local = Seconds(t1);
  return {static_cast<double>(sum % 1000000007), fetch, local, static_cast<double>(again->size())};
}

// Reads a blob passed by reference as a task argument (its node pulls it first).
std::vector<std::string> ReadBlob(Blob blob, int64_t index, int64_t bytes) {
  return {WhereAmI(), DataIsRight(blob.data, bytes, index) ? "right" : "wrong"};
}

class Counter {
 public:
  static Counter* Create() { return new Counter(); }
  int Incr() { return ++value_; }
  std::string Where() { return WhereAmI(); }

 private:
  int value_ = 0;
};

// For the capture test: strings made of a marker, and tasks that pass them on.
std::string Marked(std::string marker, int64_t bytes) {
  std::string out;
  out.reserve(static_cast<size_t>(bytes));
  while (static_cast<int64_t>(out.size()) + static_cast<int64_t>(marker.size()) <= bytes) out += marker;
  return out;
}
std::string Echo(std::string text) { return text; }
int64_t CountMarks(std::string text, std::string marker) {
  int64_t n = 0;
  for (size_t at = text.find(marker); at != std::string::npos; at = text.find(marker, at + marker.size())) ++n;
  return n;
}

// For the cancel scenario: runs until cancelled (a minute at most), or ignores
// cancels for a minute; each registers itself first.
std::string UntilCancelledAt(std::string what) {
  Register(what);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < end && !ray::IsCancelled()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return (ray::IsCancelled() ? "saw the cancel at " : "no cancel at ") + WhereAmI();
}
std::string StubbornAt(std::string what) {
  Register(what);
  std::this_thread::sleep_for(std::chrono::seconds(60));
  return WhereAmI();
}

RAY_REMOTE(Where, SlowWhere, Produce, ReadBlob, LongTask, ReadRemote, Registry::Create, &Registry::Record, &Registry::Log,
           Counter::Create, &Counter::Incr, &Counter::Where, Marked, Echo, CountMarks, UntilCancelledAt, StubbornAt);

namespace {

// ---- scenarios

// Tasks submitted here spill back across hosts.
int Spread(int n) {
  std::vector<ray::ObjectRef<std::string>> refs;
  for (int i = 0; i < n; ++i) refs.push_back(ray::Task(SlowWhere).Remote(500));
  std::map<std::string, int> hosts;
  for (auto& r : refs) hosts[*r.Get()]++;
  Result({{"driver_host", WhereAmI()}, {"hosts", hosts}});
  return 0;
}

// A big object moves from this host to `to_host` (by a task pinned there).
int Transfer(int64_t bytes, int to_host) {
  auto t0 = std::chrono::steady_clock::now();
  auto data = std::make_shared<std::vector<uint8_t>>(MakeData(bytes, 7));
  uint64_t expected = Checksum(*data);
  ray::ObjectRef<std::vector<uint8_t>> ref = ray::Put(*data);
  data.reset();
  double put = Seconds(t0);
  auto reader = ray::Task(ReadRemote).SetResource("host" + std::to_string(to_host), 1).Remote(std::vector{ref});
  std::vector<double> r = *reader.Get();
  double transfer = r[1] - r[2];  // the fetch less what a local read costs
  Result({{"from", WhereAmI()},
          {"bytes", bytes},
          {"intact", static_cast<uint64_t>(r[0]) == expected % 1000000007 && static_cast<int64_t>(r[3]) == bytes},
          {"put_s", put},
          {"first_get_s", r[1]},
          {"local_get_s", r[2]},
          {"transfer_gbps", transfer > 0 ? static_cast<double>(bytes) / transfer / 1e9 : 0.0}});
  return 0;
}

// Actors on the given hosts answer from there.
int Actors(const std::vector<int>& hosts) {
  std::map<std::string, std::string> where;
  for (int h : hosts) {
    auto actor = ray::Actor(Counter::Create).SetResource("host" + std::to_string(h), 1).Remote();
    actor.Task(&Counter::Incr).Remote().Get();
    where[std::to_string(h)] = *actor.Task(&Counter::Where).Remote().Get();
    actor.Kill();
  }
  Result({{"actors", where}});
  return 0;
}

// A detached named actor, pinned to `host`, that outlives this driver.
int NamedCreate(int host) {
  auto actor = ray::Actor(Counter::Create)
                   .SetName("mh_counter")
                   .SetResource("host" + std::to_string(host), 1)
                   .Remote();
  int value = *actor.Task(&Counter::Incr).Remote().Get();
  Result({{"created_at", *actor.Task(&Counter::Where).Remote().Get()}, {"value", value}});
  return 0;
}

// Finds the named actor made by another driver (another job, another host).
int NamedGet() {
  auto actor = ray::GetActor<Counter>("mh_counter");
  if (!actor) {
    Result({{"found", false}});
    return 1;
  }
  int value = *actor->Task(&Counter::Incr).Remote().Get();
  std::string where = *actor->Task(&Counter::Where).Remote().Get();
  actor->Kill();
  Result({{"found", true}, {"value", value}, {"actor_host", where}, {"driver_host", WhereAmI()}});
  return 0;
}

int StrictSpread(int bundles) {
  ray::PlacementGroupCreationOptions options;
  options.name = "mh_spread";
  for (int i = 0; i < bundles; ++i) options.bundles.push_back({{"CPU", 1}});
  options.strategy = ray::PlacementStrategy::STRICT_SPREAD;
  ray::PlacementGroup group = ray::CreatePlacementGroup(options);
  if (!group.Wait(60)) {
    Result({{"placed", false}});
    return 1;
  }
  std::vector<std::string> hosts;
  for (int i = 0; i < bundles; ++i) hosts.push_back(*ray::Task(Where).SetPlacementGroup(group, i).Remote().Get());
  ray::RemovePlacementGroup(group.GetID());
  Result({{"placed", true}, {"hosts", hosts}});
  return 0;
}

// Work spread over the worker hosts, for a test that kills or cuts off one of them
// once this prints READY: an actor that may restart, objects that may have to be
// rebuilt, long tasks that may have to run again. Prints what became of each.
int Survive(int num_blobs, int64_t blob_bytes, int num_long, int long_ms) {
  auto registry = ray::Actor(Registry::Create).SetName("registry").SetResource("host0", 1).Remote();
  registry.Task(&Registry::Log).Remote().Get();
  auto actor = ray::Actor(Counter::Create).SetMaxRestarts(1).SetResource("worker_host", 1).Remote();
  actor.Task(&Counter::Incr).Remote().Get();
  int before = *actor.Task(&Counter::Incr).Remote().Get();
  std::string actor_host = *actor.Task(&Counter::Where).Remote().Get();
  Say("ACTOR_HOST " + actor_host);

  // Long tasks (no CPU: they all run at once) land where the scheduler puts them.
  // They are started one after another, each once the one before registered where
  // it runs, until at least `min` are and two of them are on the actor's host (the
  // one the test takes away), or 40 were tried.
  auto start_until_on_actor_host = [&](const std::string& prefix, int min, const std::function<void(int)>& start) {
    int on_actor_host = 0;
    auto t0 = std::chrono::steady_clock::now();
    int n = 0;
    for (; n < 40 && (n < min || on_actor_host < 2) && Seconds(t0) < 60; ++n) {
      start(n);
      const std::string what = prefix + std::to_string(n);
      while (Seconds(t0) < 60) {
        auto log = *registry.Task(&Registry::Log).Remote().Get();
        auto it = log.find(what);
        if (it != log.end()) {
          on_actor_host += it->second[0].first == actor_host ? 1 : 0;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    return n;
  };
  // The blobs take a CPU each for a moment: the worker hosts' 6 CPUs fill up, so
  // every one of them makes some (the actor's host included).
  std::vector<ray::ObjectRef<Blob>> blobs;
  for (int i = 0; i < num_blobs; ++i) {
    blobs.push_back(
        ray::Task(Produce).SetResource("worker_host", 1).SetResource("CPU", 1).Remote(int64_t{i}, blob_bytes));
  }
  ray::Wait(blobs, num_blobs, 60000, /*fetch_local=*/false);  // made where they are
  std::vector<ray::ObjectRef<std::string>> longs;
  start_until_on_actor_host("long", num_long, [&](int i) {
    longs.push_back(ray::Task(LongTask).SetResource("worker_host", 1).Remote(int64_t{i}, long_ms));
  });
  Say("READY " + std::to_string(NowMs()));

  nlohmann::json result;
  std::vector<std::string> long_results;
  for (auto& r : longs) long_results.push_back(*r.Get());
  result["long_done_ms"] = NowMs();
  result["long"] = long_results;
  int right = 0;
  std::vector<std::string> made_at;
  for (size_t i = 0; i < blobs.size(); ++i) {
    auto blob = ray::Get(blobs[i]);
    right += DataIsRight(blob->data, blob_bytes, i) ? 1 : 0;
    made_at.push_back(blob->made_at);
  }
  result["blobs"] = blobs.size();
  result["blobs_right"] = right;
  result["blobs_made_at"] = made_at;
  result["actor_host_before"] = actor_host;
  result["actor_value_before"] = before;
  result["actor_value_after"] = *actor.Task(&Counter::Incr).Remote().Get();
  result["actor_host_after"] = *actor.Task(&Counter::Where).Remote().Get();
  nlohmann::json log = nlohmann::json::object();
  auto attempts_log = registry.Task(&Registry::Log).Remote().Get();  // kept alive through the loop
  for (const auto& [what, attempts] : *attempts_log) {
    for (const auto& [where, at] : attempts) log[what].push_back({{"host", where}, {"at_ms", at}});
  }
  result["attempts"] = log;
  result["done_ms"] = NowMs();
  Result(result);
  return 0;
}

// Runs tasks pinned to `host` one after another, printing each, until one fails.
int Loop(int host, int max_seconds) {
  auto start = std::chrono::steady_clock::now();
  int done = 0;
  try {
    while (Seconds(start) < max_seconds) {
      ray::Task(SlowWhere).SetResource("host" + std::to_string(host), 1).Remote(100).Get();
      if (++done % 10 == 0) Say("LOOP " + std::to_string(done));
    }
  } catch (const std::exception& e) {
    Result({{"done", done}, {"error", e.what()}, {"after_s", Seconds(start)}});
    return 3;
  }
  Result({{"done", done}, {"error", ""}});
  return 0;
}

// A blob made on `maker` is read by a task on `reader`, which cannot reach `maker`
// (the test cut the two apart) but can reach this driver's host, which holds a
// copy: the reader's pull fails over to it.
int PullFailover(int maker, int reader, int64_t bytes) {
  auto blob = ray::Task(Produce).SetResource("host" + std::to_string(maker), 1).Remote(int64_t{1}, bytes);
  auto copy = ray::Get(blob);  // a second copy, on this host
  bool right_here = DataIsRight(copy->data, bytes, 1);
  auto t0 = std::chrono::steady_clock::now();
  auto read = ray::Task(ReadBlob).SetResource("host" + std::to_string(reader), 1).Remote(blob, int64_t{1}, bytes);
  std::vector<std::string> r = *read.Get();
  Result({{"made_at", copy->made_at}, {"right_here", right_here}, {"read_at", r[0]}, {"read", r[1]},
          {"read_s", Seconds(t0)}});
  return 0;
}

// For `seconds`, tasks on the worker hosts and calls to an actor there, one after
// another; records when each finished (the test cuts the GCS's host off meanwhile).
int KeepWorking(int seconds) {
  auto actor = ray::Actor(Counter::Create).SetResource("worker_host", 1).Remote();
  std::vector<int64_t> tasks_done_ms;
  std::vector<int64_t> calls_done_ms;
  std::string error;
  auto start = std::chrono::steady_clock::now();
  int expected = 0;
  try {
    while (Seconds(start) < seconds) {
      std::vector<ray::ObjectRef<std::string>> batch;
      for (int i = 0; i < 4; ++i) batch.push_back(ray::Task(SlowWhere).SetResource("worker_host", 1).Remote(50));
      for (auto& r : batch) r.Get();
      tasks_done_ms.push_back(NowMs());
      Say("WORKING " + std::to_string(tasks_done_ms.size()));
      int value = *actor.Task(&Counter::Incr).Remote().Get();
      if (value != ++expected) error = "the actor lost its state";
      calls_done_ms.push_back(NowMs());
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  Result({{"tasks_done_ms", tasks_done_ms}, {"calls_done_ms", calls_done_ms}, {"error", error}});
  return error.empty() ? 0 : 3;
}

// A blob of `bytes` made on `from` moves to `to` while this driver calls an actor
// on `from` every 20 ms: how long the move takes, and the slowest call meanwhile.
int SlowLink(int from, int to, int64_t bytes) {
  auto actor = ray::Actor(Counter::Create).SetResource("host" + std::to_string(from), 1).Remote();
  actor.Task(&Counter::Incr).Remote().Get();
  auto blob = ray::Task(Produce).SetResource("host" + std::to_string(from), 1).Remote(int64_t{2}, bytes);
  ray::Wait(std::vector{blob}, 1, 60000, /*fetch_local=*/false);  // made on `from`, left there
  auto t0 = std::chrono::steady_clock::now();
  auto read = ray::Task(ReadBlob).SetResource("host" + std::to_string(to), 1).Remote(blob, int64_t{2}, bytes);
  double slowest_call_s = 0;
  int calls = 0;
  while (ray::Wait(std::vector{read}, 1, 0).ready.empty()) {
    auto c0 = std::chrono::steady_clock::now();
    actor.Task(&Counter::Incr).Remote().Get();
    slowest_call_s = std::max(slowest_call_s, Seconds(c0));
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::vector<std::string> r = *read.Get();
  double seconds = Seconds(t0);
  Result({{"bytes", bytes}, {"seconds", seconds}, {"mbit_per_s", static_cast<double>(bytes) * 8 / seconds / 1e6},
          {"read", r[1]}, {"read_at", r[0]}, {"calls", calls}, {"slowest_call_s", slowest_call_s}});
  return 0;
}

// The sort example (python_free_examples/sort_tasks.h) `runs` times in Manta's style
// (the driver owns every bucket, so a bucket lost with its host is made again from
// lineage). Prints "SORT_START i" and "MAPS_DONE i" as run i gets there (a test or
// bench acts in the middle of a run on them); the result has each run's seconds and
// what its check found ("" when right).
int Sort(int64_t bytes, int maps, int reduces, int runs) {
  if (maps <= 0 || reduces <= 0 || bytes < static_cast<int64_t>(sort_example::kRecordBytes) * maps) {
    std::cout << "ERROR sort needs BYTES >= 100 x MAPS, and MAPS and REDUCES > 0" << std::endl;
    return 2;
  }
  const uint64_t per_map = static_cast<uint64_t>(bytes) / sort_example::kRecordBytes / maps;
  nlohmann::json done = nlohmann::json::array();
  bool right = true;
  for (int i = 0; i < runs; ++i) {
    Say("SORT_START " + std::to_string(i));
    const auto t0 = std::chrono::steady_clock::now();
    uint64_t made = 0;
    double map_s = 0;
    const std::string problem = sort_example::RunSort(maps, per_map, reduces, /*ray_style=*/false, &made, &map_s,
                                                      [i] { Say("MAPS_DONE " + std::to_string(i)); });
    done.push_back({{"seconds", Seconds(t0)}, {"map_s", map_s}, {"records", made}, {"problem", problem}});
    right &= problem.empty();
  }
  Result({{"driver_host", WhereAmI()},
          {"bytes", per_map * maps * sort_example::kRecordBytes},
          {"runs", done},
          {"right", right}});
  return right ? 0 : 1;
}

// Task arguments and results carrying `arg_marker` to and from hosts 0 and 1, an
// object of `obj_marker`s put here and read on host 1, and one made on host 0 and
// read here: what a capture of the network must not show.
int Markers(const std::string& arg_marker, const std::string& obj_marker) {
  const std::string argument = Marked(arg_marker + " ", 512);
  bool right = true;
  for (int host : {0, 1}) {
    right &= *ray::Task(Echo).SetResource("host" + std::to_string(host), 1).Remote(argument).Get() == argument;
  }
  const int64_t bytes = 4 << 20;
  auto here = ray::Put(Marked(obj_marker, bytes));
  const int64_t marks = bytes / static_cast<int64_t>(obj_marker.size());
  right &= *ray::Task(CountMarks).SetResource("host1", 1).Remote(here, obj_marker).Get() == marks;
  auto there = ray::Task(Marked).SetResource("host0", 1).Remote(obj_marker, bytes);
  right &= CountMarks(*there.Get(), obj_marker) == marks;
  Result({{"driver_host", WhereAmI()}, {"marks", marks}, {"right", right}});
  return right ? 0 : 1;
}

// Small tasks and actor calls from here to `host` for about `seconds` each: the rate
// of batches in flight together and of one round trip at a time.
int Rates(int host, double seconds) {
  const std::string where = "host" + std::to_string(host);
  auto task = [&] { return ray::Task(Echo).SetResource(where, 0.001).Remote(std::string("x")); };
  auto actor = ray::Actor(Counter::Create).SetResource(where, 1).Remote();
  auto rate = [seconds](const std::function<int()>& round) {
    round();  // warm up: leases, workers, connections
    auto start = std::chrono::steady_clock::now();
    int64_t n = 0;
    while (Seconds(start) < seconds) n += round();
    return static_cast<double>(n) / Seconds(start);
  };
  nlohmann::json out = {{"driver_host", WhereAmI()}};
  out["tasks_per_s"] = rate([&] {
    std::vector<ray::ObjectRef<std::string>> refs;
    for (int i = 0; i < 1000; ++i) refs.push_back(task());
    ray::Get(refs);
    return 1000;
  });
  out["task_round_trips_per_s"] = rate([&] {
    task().Get();
    return 1;
  });
  out["actor_calls_per_s"] = rate([&] {
    std::vector<ray::ObjectRef<int>> refs;
    for (int i = 0; i < 1000; ++i) refs.push_back(actor.Task(&Counter::Incr).Remote());
    ray::Get(refs);
    return 1000;
  });
  out["actor_round_trips_per_s"] = rate([&] {
    actor.Task(&Counter::Incr).Remote().Get();
    return 1;
  });
  actor.Kill();
  Result(out);
  return 0;
}

// A task on `host` cancelled from this host: once cooperatively (it sees
// ray::IsCancelled), once with force (its worker is killed). Reports how each Get
// ended and how long after the cancel.
int Cancel(int host) {
  auto registry = ray::Actor(Registry::Create).SetName("registry").Remote();
  registry.Task(&Registry::Log).Remote().Get();  // it is up
  auto started = [&](const std::string& what) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      if (registry.Task(&Registry::Log).Remote().Get()->count(what) > 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  };
  nlohmann::json result;
  for (bool force : {false, true}) {
    const std::string what = force ? "forced" : "cooperative";
    const std::string resource = "host" + std::to_string(host);
    ray::ObjectRef<std::string> ref = force ? ray::Task(StubbornAt).SetResource(resource, 1).Remote(what)
                                            : ray::Task(UntilCancelledAt).SetResource(resource, 1).Remote(what);
    if (!started(what)) {
      result[what] = "never started";
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    ray::Cancel(ref, force);
    try {
      result[what] = "returned " + *ref.Get(30000);
    } catch (const ray::internal::RayTaskCancelledException& e) {
      result[what] = "cancelled";
    } catch (const std::exception& e) {
      result[what] = std::string("threw ") + e.what();
    }
    result[what + "_ms"] = Seconds(t0) * 1000;
    result[what + "_ran_at"] = (*registry.Task(&Registry::Log).Remote().Get())[what][0].first;
  }
  registry.Kill();
  Result(result);
  return 0;
}

int Usage() {
  std::cerr << "usage: multihost_driver spread N | transfer BYTES TO_HOST | actors H... | named-create HOST | "
               "named-get | strict-spread N | survive BLOBS BYTES LONG MS | loop HOST SECONDS | "
               "pull-failover MAKER READER BYTES | keep-working SECONDS | slow-link FROM TO BYTES | "
               "sort BYTES MAPS REDUCES RUNS | markers ARG_MARKER OBJECT_MARKER | rates HOST SECONDS | cancel HOST"
            << std::endl;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  ray::RayConfig config;
  config.ray_namespace = "multihost";
  std::string cmd = argc > 1 ? argv[1] : "";
  // The named actor outlives the driver that made it.
  if (cmd == "named-create") config.default_actor_lifetime = ray::ActorLifetime::DETACHED;
  ray::Init(config, argc, argv);
  if (argc < 2) return Usage();
  std::vector<std::string> args(argv + 2, argv + argc);
  auto arg = [&](size_t i) { return i < args.size() ? std::stoll(args[i]) : 0; };
  int code = 2;
  try {
    if (cmd == "spread") {
      code = Spread(static_cast<int>(arg(0)));
    } else if (cmd == "transfer") {
      code = Transfer(arg(0), static_cast<int>(arg(1)));
    } else if (cmd == "actors") {
      std::vector<int> hosts;
      for (size_t i = 0; i < args.size(); ++i) hosts.push_back(static_cast<int>(arg(i)));
      code = Actors(hosts);
    } else if (cmd == "named-create") {
      code = NamedCreate(static_cast<int>(arg(0)));
    } else if (cmd == "named-get") {
      code = NamedGet();
    } else if (cmd == "strict-spread") {
      code = StrictSpread(static_cast<int>(arg(0)));
    } else if (cmd == "survive") {
      code = Survive(static_cast<int>(arg(0)), arg(1), static_cast<int>(arg(2)), static_cast<int>(arg(3)));
    } else if (cmd == "pull-failover") {
      code = PullFailover(static_cast<int>(arg(0)), static_cast<int>(arg(1)), arg(2));
    } else if (cmd == "keep-working") {
      code = KeepWorking(static_cast<int>(arg(0)));
    } else if (cmd == "slow-link") {
      code = SlowLink(static_cast<int>(arg(0)), static_cast<int>(arg(1)), arg(2));
    } else if (cmd == "loop") {
      code = Loop(static_cast<int>(arg(0)), static_cast<int>(arg(1)));
    } else if (cmd == "rates") {
      code = Rates(static_cast<int>(arg(0)), static_cast<double>(arg(1)));
    } else if (cmd == "cancel") {
      code = Cancel(static_cast<int>(arg(0)));
    } else if (cmd == "markers") {
      code = args.size() == 2 ? Markers(args[0], args[1]) : Usage();
    } else if (cmd == "sort") {
      code = Sort(arg(0), static_cast<int>(arg(1)), static_cast<int>(arg(2)), static_cast<int>(arg(3)));
    } else {
      code = Usage();
    }
  } catch (const std::exception& e) {
    std::cout << "ERROR " << e.what() << std::endl;
    code = 1;
  }
  ray::Shutdown();
  return code;
}
