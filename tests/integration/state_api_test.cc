// The state API on a real cluster, through the CLI as a user runs it: tasks that
// finish and fail, actors and their calls, `manta list/get/summary` with filters,
// limits and formats, the errors bad input gets, and the case Ray gets wrong:
// 200,000 finished tasks and 10 running, `--filter state=RUNNING` finds the 10.
// This binary is its own worker.
#include <ray/api.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "driver_main.h"
#include "cluster_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "protos/node_manager.grpc.pb.h"
#include "src/common/id.h"
#include "src/common/node_address.h"
#include "src/common/process.h"
#include "src/common/rpc/auth.h"
#include "src/common/rpc/grpc_client.h"
#include "src/api/native_runtime.h"
#include "src/core_worker/core_worker.h"
#include "src/common/util.h"

namespace state_api_test {
namespace {

using ::testing::HasSubstr;

int Plus(int a, int b) { return a + b; }
int Fail(int code) { throw std::runtime_error("task failed on purpose with code " + std::to_string(code)); }
// Runs until `path` exists (at most 120 s).
int Block(std::string path) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (access(path.c_str(), F_OK) != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return 1;
}
int Nop() { return 0; }
// About a millisecond; with a `path`, runs until it exists (at most 60 s).
int ShortOrBlock(std::string path) {
  if (path.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return 1;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (access(path.c_str(), F_OK) != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return 1;
}
// Holds `data` (an argument the driver no longer refers to) until `path` exists.
int Hold(std::vector<char> data, std::string path) { return Block(path) + static_cast<int>(data.size() > 0); }
// Prints `text` on stdout and returns its worker's pid.
int Say(std::string text) {
  std::cout << text << std::endl;
  return getpid();
}

// Prints `text` on stderr and returns its worker's pid.
int SayOnStderr(std::string text) {
  std::cerr << text << std::endl;
  return getpid();
}

// Prints `lines` lines of about 100 bytes with printf (no flush), numbered after
// `text`, then `text` and "end" with no newline (flushed), and returns its worker's pid.
int SayUnflushed(std::string text, int lines) {
  for (int i = 0; i < lines; ++i) std::printf("%s %d %s\n", text.c_str(), i, std::string(80, '.').c_str());
  std::printf("%s end", text.c_str());
  std::fflush(stdout);
  return getpid();
}

class Counter {
 public:
  static Counter* Create() { return new Counter(); }
  int Add(int x) { return total_ += x; }
  int Say(std::string text) {
    std::cerr << text << std::endl;
    return getpid();
  }

 private:
  int total_ = 0;
};

RAY_REMOTE(Plus, Fail, Block, Nop, ShortOrBlock, Hold, Say, SayOnStderr, SayUnflushed, Counter::Create, &Counter::Add, &Counter::Say);

std::string Hex(const std::string& binary) { return manta::BinaryHex(binary); }

std::string FlagValue(int argc, char** argv, const std::string& name) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind(name + "=", 0) == 0) return arg.substr(name.size() + 1);
  }
  return "";
}

// A second driver: runs Say(marker) and SayOnStderr("on stderr: " + marker), then
// waits (at most 60 s) for `release` to exist.
int RunChildDriver(const std::string& gcs, const std::string& marker, const std::string& release) {
  ray::RayConfig config;
  config.address = gcs;
  ray::Init(config);
  ray::Task(Say).Remote(marker).Get();
  ray::Task(SayOnStderr).Remote("on stderr: " + marker).Get();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (access(release.c_str(), F_OK) != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ray::Shutdown();
  return 0;
}

// A driver that exits right after its task printed `marker` (with printf, unflushed).
int RunQuickChildDriver(const std::string& gcs, const std::string& marker) {
  ray::RayConfig config;
  config.address = gcs;
  ray::Init(config);
  ray::Task(SayUnflushed).Remote(marker, 40).Get();
  ray::Shutdown();
  return 0;
}

// Task events reach the GCS within a fifth of a second; dead nodes are found in a
// few seconds; a raylet passes on 1 KiB of workers' output a round; tasks queued
// behind a long one are taken back after 0.6 s (reported in flight by then).
const char kSystemConfig[] =
    R"({"task_events_report_ms": 200, "health_check_period_ms": 200, "health_check_timeout_ms": 1000,)"
    R"( "task_steal_after_ms": 600,)"
    R"( "health_check_failure_threshold": 5, "health_check_initial_delay_ms": 0, "log_to_driver_max_bytes": 1024})";

class StateApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    harness_ = new manta::testing::ClusterHarness();
    harness_->StartHead({"--num-cpus=12", "--system-config", kSystemConfig});
    ray::RayConfig config;
    config.address = harness_->gcs_address();
    ray::Init(config);
  }
  static void TearDownTestSuite() {
    ray::Shutdown();
    delete harness_;
  }

  // `manta <args> --address <gcs>`.
  static manta::testing::CommandResult Manta(std::vector<std::string> args) {
    args.push_back("--address");
    args.push_back(harness_->gcs_address());
    return harness_->Manta(args, {}, 60000);
  }
  // The JSON value the command printed first (notes on stderr may follow it).
  static nlohmann::json Json(const manta::testing::CommandResult& r) {
    std::istringstream in(r.output);
    nlohmann::json j;
    try {
      in >> j;
    } catch (const nlohmann::json::exception&) {
      return nlohmann::json();
    }
    return j;
  }
  // `manta list tasks --format json` with `filters`, once it returns `n` rows (or the last answer).
  static nlohmann::json TasksOnce(const std::vector<std::string>& filters, size_t n) {
    nlohmann::json rows;
    manta::testing::WaitFor(
        [&] {
          std::vector<std::string> args = {"list", "tasks", "--format", "json", "--limit", "10000"};
          for (const std::string& f : filters) {
            args.push_back("--filter");
            args.push_back(f);
          }
          auto r = Manta(args);
          rows = Json(r);
          return r.exit_code == 0 && rows.is_array() && rows.size() == n;
        },
        30000);
    return rows;
  }
  static manta::testing::ClusterHarness* harness_;
};
manta::testing::ClusterHarness* StateApiTest::harness_ = nullptr;

TEST_F(StateApiTest, FinishedAndFailedTasksAndActorCallsAreListedWithTheirErrors) {
  std::vector<ray::ObjectRef<int>> sums;
  for (int i = 0; i < 20; ++i) sums.push_back(ray::Task(Plus).Remote(i, 1));
  for (auto& s : sums) s.Get();
  std::vector<ray::ObjectRef<int>> failures;
  for (int i = 0; i < 3; ++i) failures.push_back(ray::Task(Fail).SetMaxRetries(0).Remote(i));
  for (auto& f : failures) EXPECT_THROW(f.Get(), ray::internal::RayTaskException);
  auto counter = ray::Actor(Counter::Create).Remote();
  EXPECT_EQ(*counter.Task(&Counter::Add).Remote(5).Get(), 5);

  // Each attempt's end reaches the GCS with its owner's next report, a moment after
  // its result did: wait for the state asserted below, not only for the count.
  nlohmann::json plus = TasksOnce({"func_or_class_name=Plus", "state=FINISHED"}, 20);
  ASSERT_EQ(plus.size(), 20u) << plus.dump(2);
  for (const auto& t : plus) {
    EXPECT_EQ(t["state"], "FINISHED");
    EXPECT_EQ(t["type"], "NORMAL_TASK");
    EXPECT_EQ(t["node_id"].get<std::string>().size(), 56u);
    EXPECT_GT(t["worker_pid"].get<int>(), 0);
    EXPECT_GT(t["end_time_ms"].get<int64_t>(), 0);
  }
  nlohmann::json failed = TasksOnce({"state=FAILED", "name=Fail"}, 3);
  ASSERT_EQ(failed.size(), 3u) << failed.dump(2);
  EXPECT_EQ(failed[0]["error_type"], "TASK_EXECUTION_EXCEPTION");
  EXPECT_THAT(failed[0]["error_message"].get<std::string>(), HasSubstr("task failed on purpose"));

  nlohmann::json creation = TasksOnce({"type=ACTOR_CREATION_TASK", "state=FINISHED"}, 1);
  ASSERT_EQ(creation.size(), 1u);
  EXPECT_GT(creation[0]["worker_pid"].get<int>(), 0);
  nlohmann::json calls = TasksOnce({"type=actor_task", "state=FINISHED"}, 1);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["state"], "FINISHED");
  nlohmann::json drivers = TasksOnce({"type=DRIVER_TASK", "state=RUNNING"}, 1);
  EXPECT_EQ(drivers.size(), 1u);

  // One task whole, by its id; then the summary.
  auto got = Manta({"get", "task", failed[0]["task_id"]});
  EXPECT_EQ(got.exit_code, 0) << got.output;
  EXPECT_THAT(got.output, HasSubstr("error_message:"));
  EXPECT_THAT(got.output, HasSubstr("task failed on purpose"));
  EXPECT_THAT(got.output, HasSubstr("PENDING_ARGS_AVAIL"));
  auto summary = Manta({"summary", "tasks"});
  EXPECT_EQ(summary.exit_code, 0) << summary.output;
  EXPECT_THAT(summary.output, HasSubstr("Plus"));
  EXPECT_THAT(summary.output, HasSubstr("FINISHED: 20"));
  EXPECT_THAT(summary.output, HasSubstr("FAILED: 3"));
  auto table = Manta({"list", "tasks", "--filter", "name=Fail"});
  EXPECT_EQ(table.exit_code, 0) << table.output;
  EXPECT_THAT(table.output, HasSubstr("TASK_ID"));
  EXPECT_THAT(table.output, HasSubstr("FAILED"));
  auto yaml = Manta({"list", "tasks", "--filter", "name=Fail", "--format", "yaml", "--limit", "1"});
  EXPECT_EQ(yaml.exit_code, 0) << yaml.output;
  EXPECT_THAT(yaml.output, HasSubstr("- task_id: "));
  EXPECT_THAT(yaml.output, HasSubstr("(1 of 3 matching rows shown"));

  // The other resources.
  auto actors = Json(Manta({"list", "actors", "--format", "json", "--filter", "state=alive"}));
  ASSERT_EQ(actors.size(), 1u) << actors.dump();
  EXPECT_THAT(actors[0]["class_name"].get<std::string>(), HasSubstr("Counter"));
  auto by_class = Json(Manta({"list", "actors", "--format", "json", "--filter",
                              "class_name=" + actors[0]["class_name"].get<std::string>()}));
  EXPECT_EQ(by_class.size(), 1u) << by_class.dump();
  auto nodes = Json(Manta({"list", "nodes", "--format", "json", "--filter", "state=alive"}));
  ASSERT_EQ(nodes.size(), 1u) << nodes.dump();
  EXPECT_EQ(nodes[0]["is_head_node"], true);
  auto jobs = Json(Manta({"list", "jobs", "--format", "json", "--filter", "status=RUNNING"}));
  EXPECT_EQ(jobs.size(), 1u) << jobs.dump();
  auto actor_summary = Manta({"summary", "actors"});
  EXPECT_THAT(actor_summary.output, HasSubstr("ALIVE: 1"));
  counter.Kill();
}

// Tasks queued behind a long one, reported in flight, are taken back and run
// elsewhere as their next attempt: the attempts taken back are no failures, and
// leave no row (every task is listed once, FINISHED).
TEST_F(StateApiTest, TasksTakenBackFromABusyWorkerAreNotFailures) {
  manta::testing::TempDir dir;
  const std::string go = dir.path() + "/go";
  std::vector<ray::ObjectRef<int>> warm;  // the owner learns they are short
  for (int i = 0; i < 50; ++i) warm.push_back(ray::Task(ShortOrBlock).Remote(""));
  ray::Get(warm);
  ray::ObjectRef<int> long_one = ray::Task(ShortOrBlock).Remote(go);
  std::vector<ray::ObjectRef<int>> shorts;
  for (int i = 0; i < 300; ++i) shorts.push_back(ray::Task(ShortOrBlock).Remote(""));
  ray::WaitResult<int> done = ray::Wait(shorts, static_cast<int>(shorts.size()), 30000);
  EXPECT_EQ(done.ready.size(), shorts.size());
  std::ofstream(go) << "go\n";
  EXPECT_EQ(*long_one.Get(), 1);
  nlohmann::json finished = TasksOnce({"func_or_class_name=ShortOrBlock", "state=FINISHED"}, 351);
  ASSERT_EQ(finished.size(), 351u) << finished.dump(2);
  std::set<std::string> ids;
  int moved = 0;
  for (const auto& t : finished) {
    ids.insert(t["task_id"].get<std::string>());
    moved += t["attempt_number"].get<int>() > 0;
  }
  EXPECT_EQ(ids.size(), 351u);  // each task once
  EXPECT_GT(moved, 0) << "no task was taken back from the busy worker";
  auto all = Json(Manta({"list", "tasks", "--format", "json", "--limit", "10000", "--filter",
                         "func_or_class_name=ShortOrBlock"}));
  EXPECT_EQ(all.size(), 351u) << all.dump(2);
}

TEST_F(StateApiTest, TheTimelineIsChromeTraceJsonWithATrackPerWorkerAndAnArrowPerTask) {
  std::vector<ray::ObjectRef<int>> sums;
  for (int i = 0; i < 30; ++i) sums.push_back(ray::Task(Plus).Remote(i, 2));
  for (auto& s : sums) s.Get();
  auto jobs = Json(Manta({"list", "jobs", "--format", "json", "--filter", "status=RUNNING"}));
  ASSERT_EQ(jobs.size(), 1u) << jobs.dump();
  manta::testing::TempDir dir;
  const std::string file = dir.path() + "/trace.json";
  std::string text;
  nlohmann::json trace;
  // The last of the 30 finish within a report (a fifth of a second).
  auto count_plus = [&] {
    auto r = Manta({"timeline", "--job", jobs[0]["job_id"].get<std::string>(), "-o", file});
    if (r.exit_code != 0) return 0;
    std::ifstream in(file);
    text.assign(std::istreambuf_iterator<char>(in), {});
    trace = nlohmann::json::parse(text, nullptr, false);
    int n = 0;
    if (trace.is_array()) {
      for (const auto& e : trace) n += e.value("ph", "") == "X" && e.value("name", "") == "Plus" ? 1 : 0;
    }
    return n;
  };
  ASSERT_TRUE(manta::testing::WaitFor([&] { return count_plus() >= 30; }, 20000)) << text.substr(0, 300);
  ASSERT_TRUE(trace.is_array());
  std::set<int> named_processes;
  std::set<std::pair<int, int>> named_threads, used_threads;
  std::map<int64_t, int> flows;  // id -> +1 per start, -1 per finish
  std::map<std::pair<int, int>, int64_t> last_ts;
  int slices = 0, plus = 0;
  for (const auto& e : trace) {
    ASSERT_TRUE(e.contains("name") && e.contains("ph") && e["pid"].is_number_integer() &&
                e["tid"].is_number_integer())
        << e.dump();
    const std::string ph = e["ph"];
    const std::pair<int, int> track{e["pid"].get<int>(), e["tid"].get<int>()};
    if (ph == "M") {
      if (e["name"] == "process_name") named_processes.insert(track.first);
      if (e["name"] == "thread_name") named_threads.insert(track);
      continue;
    }
    ASSERT_TRUE(e["ts"].is_number_integer()) << e.dump();
    const int64_t ts = e["ts"];
    EXPECT_LE(last_ts[track], ts) << "out of order on its track: " << e.dump();
    last_ts[track] = ts;
    used_threads.insert(track);
    if (ph == "X") {
      ++slices;
      plus += e["name"] == "Plus" ? 1 : 0;
      EXPECT_GT(e["dur"].get<int64_t>(), 0);
      if (e["cat"] == "task") {
        EXPECT_EQ(e["args"]["task_id"].get<std::string>().size(), 48u);
      }
    } else if (ph == "s" || ph == "f") {
      flows[e["id"].get<int64_t>()] += ph == "s" ? 1 : -1;
    }
  }
  EXPECT_GE(plus, 30);
  EXPECT_GE(flows.size(), 30u);
  for (const auto& [id, balance] : flows) EXPECT_EQ(balance, 0) << "flow " << id << " is not matched";
  for (const auto& track : used_threads) {
    EXPECT_TRUE(named_processes.count(track.first) > 0) << "process " << track.first << " has no name";
    EXPECT_TRUE(named_threads.count(track) > 0) << "thread " << track.second << " has no name";
  }
  EXPECT_LT(text.size() / static_cast<size_t>(slices), 1024u) << "bytes per task";
  auto bad = Manta({"timeline", "--job", "xyz", "-o", file});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("not a job id"));
}

TEST_F(StateApiTest, ObjectPullsAreSlicesOnTheRayletsTracks) {
  harness_->StartNode({"--num-cpus=1", "--resources={\"puller\": 1}"});
  auto big = ray::Put(std::vector<char>(4 << 20, 'p'));
  manta::testing::TempDir dir;
  const std::string release = dir.path() + "/release";
  std::ofstream(release).put('x');
  // Hold runs on the other node, which pulls its argument from the head's store.
  EXPECT_EQ(*ray::Task(Hold).SetResource("puller", 1).Remote(big, release).Get(), 2);
  const std::string file = dir.path() + "/trace.json";
  nlohmann::json pull;
  std::string names;
  ASSERT_TRUE(manta::testing::WaitFor(
      [&] {
        if (Manta({"timeline", "-o", file}).exit_code != 0) return false;
        std::ifstream in(file);
        nlohmann::json trace = nlohmann::json::parse(in, nullptr, false);
        if (!trace.is_array()) return false;
        std::map<std::pair<int, int>, std::string> threads;
        for (const auto& e : trace) {
          if (e.value("name", "") == "thread_name") threads[{e["pid"], e["tid"]}] = e["args"]["name"];
        }
        for (const auto& e : trace) {
          if (e.value("cat", "") != "pull" || e["args"]["object_id"] != Hex(big.ID())) continue;
          pull = e;
          names = threads[{e["pid"], e["tid"]}];
          return true;
        }
        return false;
      },
      20000));
  EXPECT_EQ(pull["ph"], "X") << pull.dump();
  EXPECT_GE(pull["args"]["bytes"].get<int64_t>(), 4 << 20) << pull.dump();
  EXPECT_FALSE(pull["args"]["from"].get<std::string>().empty()) << pull.dump();
  EXPECT_EQ(pull["args"]["ok"], true);
  EXPECT_EQ(names, "object transfers");
}

TEST_F(StateApiTest, WorkersAndObjectsAreListedWithWhatHoldsThem) {
  manta::testing::TempDir dir;
  const std::string release = dir.path() + "/release";
  // A large object the driver holds, a small one, and one only a running task holds.
  auto big = ray::Put(std::vector<char>(3 << 20, 'x'));
  auto small = ray::Put(42);
  ray::ObjectRef<int> held;
  std::string argument_id;
  {
    auto argument = ray::Put(std::vector<char>(2 << 20, 'y'));
    argument_id = Hex(argument.ID());
    held = ray::Task(Hold).Remote(argument, release);
  }
  const std::string big_id = Hex(big.ID());

  nlohmann::json rows;
  manta::testing::CommandResult listed;
  ASSERT_TRUE(manta::testing::WaitFor(
      [&] {
        listed = Manta({"list", "objects", "--format", "json", "--filter", "object_id=" + argument_id});
        rows = Json(listed);
        return rows.is_array() && rows.size() == 1 && rows[0]["reference_type"] == "USED_BY_PENDING_TASK";
      },
      30000))
      << listed.output;
  auto objects = Json(Manta({"list", "objects", "--format", "json", "--filter", "pid=" + std::to_string(getpid())}));
  ASSERT_TRUE(objects.is_array()) << objects.dump();
  ASSERT_GE(objects.size(), 4u) << objects.dump(2);
  // The largest first.
  ASSERT_EQ(objects[0]["object_id"], big_id) << objects.dump(2);
  EXPECT_GE(objects[0]["object_size"].get<int64_t>(), 3 << 20);
  EXPECT_EQ(objects[0]["reference_type"], "LOCAL_REFERENCE");
  EXPECT_EQ(objects[0]["task_status"], "FINISHED");
  EXPECT_EQ(objects[0]["type"], "DRIVER");
  EXPECT_EQ(objects[0]["pinned_at"].get<std::string>().size(), 56u);
  bool saw_small = false, saw_pending = false;
  for (const auto& o : objects) {
    saw_small = saw_small || o["object_id"] == Hex(small.ID());
    saw_pending = saw_pending || (o["object_id"] == Hex(held.ID()) && o["task_status"] == "PENDING");
  }
  EXPECT_TRUE(saw_small) << objects.dump(2);
  EXPECT_TRUE(saw_pending) << objects.dump(2);

  auto got = Manta({"get", "object", big_id});
  EXPECT_EQ(got.exit_code, 0) << got.output;
  EXPECT_THAT(got.output, HasSubstr("local_refs: 1"));
  auto summarized = Manta({"summary", "objects", "--format", "json"});
  auto summary = Json(summarized);
  ASSERT_TRUE(summary["by_name"]["LOCAL_REFERENCE"]["bytes"].is_number()) << summarized.output;
  EXPECT_GE(summary["by_name"]["LOCAL_REFERENCE"]["bytes"].get<int64_t>(), 3 << 20) << summary.dump(2);
  EXPECT_EQ(summary["by_name"]["USED_BY_PENDING_TASK"]["state_counts"]["FINISHED"], 1) << summary.dump(2);
  auto memory = Manta({"memory", "--units", "MB"});
  EXPECT_EQ(memory.exit_code, 0) << memory.output;
  EXPECT_THAT(memory.output, HasSubstr("--- object stores ---"));
  EXPECT_THAT(memory.output, HasSubstr(big_id));
  EXPECT_THAT(memory.output, HasSubstr("USED_BY_PENDING_TASK"));
  auto by_owner = Manta({"memory", "--group-by", "owner", "--stats-only"});
  EXPECT_EQ(by_owner.exit_code, 0) << by_owner.output;
  EXPECT_THAT(by_owner.output, HasSubstr("LOCAL_REFERENCE"));

  // Workers: this driver, the worker running Hold, and one that went away.
  auto driver = Json(Manta({"list", "workers", "--format", "json", "--filter", "worker_type=driver", "--filter",
                            "pid=" + std::to_string(getpid())}));
  ASSERT_EQ(driver.size(), 1u) << driver.dump(2);
  EXPECT_EQ(driver[0]["is_alive"], true);
  EXPECT_EQ(driver[0]["state"], "RUNNING");
  auto leased = Json(Manta({"list", "workers", "--format", "json", "--filter", "state=LEASED"}));
  EXPECT_GE(leased.size(), 1u) << leased.dump(2);
  auto counter = ray::Actor(Counter::Create).Remote();
  const int actor_pid = *counter.Task(&Counter::Say).Remote(std::string("about to go")).Get();
  counter.Kill();
  nlohmann::json dead;
  EXPECT_TRUE(manta::testing::WaitFor(
      [&] {
        dead = Json(Manta({"list", "workers", "--format", "json", "--filter", "pid=" + std::to_string(actor_pid),
                           "--filter", "is_alive=false"}));
        return dead.is_array() && dead.size() == 1;
      },
      20000))
      << dead.dump(2);
  if (dead.size() == 1) {
    EXPECT_FALSE(dead[0]["exit_detail"].get<std::string>().empty());
  }
  auto table = Manta({"list", "workers"});
  EXPECT_THAT(table.output, HasSubstr("WORKER_TYPE"));
  std::ofstream(release).put('x');
  EXPECT_EQ(*held.Get(), 2);
}

TEST_F(StateApiTest, BadQueriesGetClearErrors) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const Case cases[] = {
      {{"list", "tasks", "--filter", "colour=red"}, "no field 'colour'"},
      {{"list", "tasks", "--filter", "state~RUNNING"}, "not key=value or key!=value"},
      {{"list", "actors", "--filter", "size=3"}, "no field 'size'"},
      {{"list", "tasks", "--limit", "100000000"}, "out of range"},
      {{"list", "tasks", "--format", "xml"}, "unknown --format 'xml'"},
      {{"get", "task", "abc"}, "expected 48 hex digits"},
      {{"get", "actor", std::string(32, 'g')}, "expected 32 hex digits"},
      {{"summary", "tasks", "--filter", "nope=1"}, "no field 'nope'"},
      {{"list", "objects", "--filter", "colour=red"}, "objects have no field 'colour'"},
      {{"list", "workers", "--filter", "colour=red"}, "workers have no field 'colour'"},
      {{"summary", "objects", "--filter", "colour=red"}, "objects have no field 'colour'"},
      {{"get", "object", "abc"}, "expected 56 hex digits"},
      {{"memory", "--group-by", "colour"}, "unknown --group-by 'colour'"},
      {{"memory", "--units", "parsecs"}, "unknown --units 'parsecs'"},
  };
  for (const Case& c : cases) {
    auto r = Manta(c.args);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.says));
    EXPECT_THAT(r.output, ::testing::Not(HasSubstr("terminate"))) << r.output;
  }
  auto unknown = Manta({"get", "task", std::string(48, 'a')});
  EXPECT_EQ(unknown.exit_code, 1) << unknown.output;
  EXPECT_THAT(unknown.output, HasSubstr("knows no task_id"));
}

TEST_F(StateApiTest, TenRunningTasksAreFoundAmong200000FinishedOnes) {
  manta::testing::TempDir dir;
  const std::string release = dir.path() + "/release";
  std::vector<ray::ObjectRef<int>> blocked;
  for (int i = 0; i < 10; ++i) blocked.push_back(ray::Task(Block).Remote(release));
  constexpr int kFinished = 200000;
  for (int done = 0; done < kFinished;) {
    std::vector<ray::ObjectRef<int>> batch;
    for (int i = 0; i < 10000; ++i) batch.push_back(ray::Task(Nop).Remote());
    ray::Get(batch);
    done += static_cast<int>(batch.size());
  }
  // Every running task is there (the GCS keeps 100,000 attempts: finished ones went first).
  nlohmann::json running = TasksOnce({"state=RUNNING"}, 11);
  ASSERT_EQ(running.size(), 11u) << running.dump(2);
  int blocks = 0;
  for (const auto& t : running) {
    if (t["type"] == "DRIVER_TASK") continue;
    EXPECT_EQ(t["name"], "Block");
    ++blocks;
  }
  EXPECT_EQ(blocks, 10);
  auto r = Manta({"list", "tasks", "--filter", "state=RUNNING", "--filter", "type=NORMAL_TASK", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Json(r).size(), 10u);
  EXPECT_THAT(r.output, HasSubstr("dropped by the cluster's caps"));
  auto summary = Json(Manta({"summary", "tasks", "--format", "json", "--filter", "name=Nop"}));
  EXPECT_GT(summary["total"].get<int64_t>(), 0);
  EXPECT_LE(summary["total"].get<int64_t>(), 100000);
  std::ofstream(release).put('x');
  for (auto& b : blocked) EXPECT_EQ(*b.Get(), 1);
}

TEST_F(StateApiTest, TheOutputOfAnActorATaskOrAPidIsFoundAndRead) {
  auto said = ray::Task(Say).Remote(std::string("a line from a task"));
  const int pid = *said.Get();
  const std::string task_id = manta::ObjectID::FromBinary(said.ID()).Task().Hex();
  auto counter = ray::Actor(Counter::Create).Remote();
  counter.Task(&Counter::Say).Remote(std::string("a line from an actor")).Get();
  const std::string actor_id = Hex(counter.ID());

  auto listed = Manta({"logs"});
  EXPECT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_THAT(listed.output, HasSubstr("raylet"));
  EXPECT_THAT(listed.output, HasSubstr("worker-"));
  EXPECT_THAT(listed.output, HasSubstr("pid=" + std::to_string(pid)));
  // The task's events reach the GCS within a fifth of a second.
  manta::testing::CommandResult by_task;
  EXPECT_TRUE(manta::testing::WaitFor(
      [&] {
        by_task = Manta({"logs", "--task-id", task_id});
        return by_task.exit_code == 0;
      },
      20000))
      << by_task.output;
  EXPECT_THAT(by_task.output, HasSubstr("a line from a task"));
  // The actor printed on stderr: its worker's .err file, not its .out.
  auto by_actor = Manta({"logs", "--actor-id", actor_id, "--tail", "5", "--err"});
  EXPECT_EQ(by_actor.exit_code, 0) << by_actor.output;
  EXPECT_THAT(by_actor.output, HasSubstr("a line from an actor"));
  auto actor_stdout = Manta({"logs", "--actor-id", actor_id});
  EXPECT_EQ(actor_stdout.exit_code, 0) << actor_stdout.output;
  EXPECT_THAT(actor_stdout.output, ::testing::Not(HasSubstr("a line from an actor")));
  auto by_pid = Manta({"logs", "--pid", std::to_string(pid)});
  EXPECT_EQ(by_pid.exit_code, 0) << by_pid.output;
  EXPECT_THAT(by_pid.output, HasSubstr("a line from a task"));
  auto daemon = Manta({"logs", "gcs.out", "--tail", "3"});
  EXPECT_EQ(daemon.exit_code, 0) << daemon.output;

  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const Case bad[] = {
      {{"logs", "../../etc/passwd"}, "not the name of a log file"},
      {{"logs", "no-such.log"}, "no log file of 'no-such.log'"},
      {{"logs", "gcs.out", "--tail", "0"}, "--tail must be"},
      {{"logs", "--actor-id", "xyz"}, "is not an id"},
      {{"logs", "--task-id", std::string(48, 'a')}, "knows no task"},
      {{"logs", "--node-id", "abcdef"}, "has no node abcdef"},
      {{"logs", "gcs.out", "--err"}, "--err picks a worker's stderr"},
  };
  for (const Case& c : bad) {
    auto r = Manta(c.args);
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.says));
  }
  counter.Kill();
}

// What a worker prints on stdout is on its driver's stdout, and its stderr on the
// driver's stderr, as in Ray.
TEST_F(StateApiTest, WhatWorkersPrintReachesTheirDriversTerminalOnTheSameStream) {
  manta::testing::TempDir dir;
  manta::ProcessOptions child;
  child.argv = {manta::SelfExecutablePath(), "--child-driver", "--gcs=" + harness_->gcs_address(),
                "--marker=printed by a worker of the child", "--release=" + dir.path() + "/release"};
  child.env["MANTA_CLUSTER_TOKEN"] = std::getenv("MANTA_CLUSTER_TOKEN");
  child.output_file = dir.path() + "/child.out";
  child.error_file = dir.path() + "/child.err";
  auto pid = manta::StartProcess(child);
  ASSERT_TRUE(pid.ok()) << pid.status();
  auto read = [&](const std::string& file) {
    std::ifstream in(file);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_TRUE(manta::testing::WaitFor(
      [&] { return read(child.error_file).find("on stderr: printed by a worker") != std::string::npos; }, 30000))
      << read(child.error_file);
  const std::string out = read(child.output_file), err = read(child.error_file);
  EXPECT_THAT(out, ::testing::ContainsRegex("\\(pid=[0-9]+, ip=[0-9.]+\\) printed by a worker of the child\n")) << out;
  EXPECT_THAT(out, ::testing::Not(HasSubstr("on stderr"))) << out;
  EXPECT_THAT(err, ::testing::ContainsRegex("\\(pid=[0-9]+, ip=[0-9.]+\\) on stderr: printed by a worker of the child"))
      << err;
  EXPECT_THAT(err, ::testing::Not(::testing::ContainsRegex("\\) printed by a worker of the child"))) << err;
  std::ofstream(dir.path() + "/release").put('x');
  EXPECT_TRUE(manta::WaitForExit(*pid, 60000));
}

// What a task printed (printf, no flush) just before its driver exits is on the
// driver's terminal: workers' stdout is line-buffered, and the driver waits for each
// raylet's last rounds as it shuts down, however many its output takes (4 KB here, a
// round takes 1 KiB), and a last line without its newline.
TEST_F(StateApiTest, WhatATaskPrintsJustBeforeItsDriverExitsIsShown) {
  manta::testing::TempDir dir;
  manta::ProcessOptions child;
  child.argv = {manta::SelfExecutablePath(), "--quick-child-driver", "--gcs=" + harness_->gcs_address(),
                "--marker=the last words of a task"};
  child.env["MANTA_CLUSTER_TOKEN"] = std::getenv("MANTA_CLUSTER_TOKEN");
  child.output_file = dir.path() + "/child.out";
  auto pid = manta::StartProcess(child);
  ASSERT_TRUE(pid.ok()) << pid.status();
  ASSERT_TRUE(manta::WaitForExit(*pid, 60000));
  std::ifstream in(child.output_file);
  const std::string output(std::istreambuf_iterator<char>(in), {});
  for (int i = 0; i < 40; ++i) {
    EXPECT_THAT(output, ::testing::ContainsRegex("\\(pid=[0-9]+, ip=[0-9.]+\\) the last words of a task " +
                                                 std::to_string(i) + " \\.{80}\n"))
        << output;
  }
  EXPECT_THAT(output, ::testing::ContainsRegex("\\(pid=[0-9]+, ip=[0-9.]+\\) the last words of a task end\n")) << output;
}

// A driver leaving waits for a mark only from raylets where its job's workers
// printed something: none comes from a raylet with nothing of the job's to pass on.
TEST_F(StateApiTest, AFlushWaitsForAMarkOnlyWhereTheJobsWorkersPrinted) {
  const manta::JobID job = ray::internal::GetCoreWorkerForTesting()->job_id();
  ray::Task(Say).Remote(std::string("a line before the flush")).Get();
  std::vector<manta::rpc::NodeInfo> nodes = harness_->AliveNodes();
  ASSERT_FALSE(nodes.empty());
  auto logs = manta::rpc::LogService::NewStub(manta::rpc::MakeChannel(manta::RayletAddress(nodes[0]), 64 << 20));
  auto flush = [&](const manta::JobID& of) {
    manta::rpc::FlushWorkerLogsRequest request;
    request.set_job_id(of.Binary());
    request.set_flush_id("flush of " + of.Hex());
    manta::rpc::FlushWorkerLogsReply reply;
    grpc::ClientContext context;
    manta::rpc::AttachClusterToken(&context);
    EXPECT_TRUE(logs->FlushWorkerLogs(&context, request, &reply).ok());
    return reply.marks();
  };
  EXPECT_TRUE(flush(job)) << "its workers printed: the mark comes after their lines";
  EXPECT_FALSE(flush(manta::JobID::FromInt(0x7ffd))) << "a job with no workers here";
}

TEST_F(StateApiTest, TheLogsOfADeadNodeAreAClearError) {
  harness_->StartNode({"--num-cpus=1", "--resources={\"doomed\": 1}"});
  auto said = ray::Task(Say).SetResource("doomed", 1).Remote(std::string("soon gone"));
  said.Get();
  const std::string task_id = manta::ObjectID::FromBinary(said.ID()).Task().Hex();
  ASSERT_TRUE(manta::testing::WaitFor([&] { return Manta({"logs", "--task-id", task_id}).exit_code == 0; }, 20000));
  pid_t raylet = 0;
  for (const manta::rpc::NodeInfo& node : harness_->AliveNodes()) {
    if (node.resources_total().count("doomed") > 0) raylet = node.raylet_pid();
  }
  ASSERT_GT(raylet, 0);
  ASSERT_EQ(kill(raylet, SIGKILL), 0);
  manta::testing::CommandResult r;
  EXPECT_TRUE(manta::testing::WaitFor(
      [&] {
        r = Manta({"logs", "--task-id", task_id});
        return r.output.find("is dead") != std::string::npos;
      },
      30000))
      << r.output;
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("cannot serve its logs"));
}

TEST_F(StateApiTest, QueriesKeepWorkingWhenTheGcsRestartsBetweenThem) {
  ASSERT_EQ(Manta({"list", "tasks", "--limit", "1"}).exit_code, 0);
  auto restarted = harness_->RestartGcs(kSystemConfig);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  // The new GCS keeps no task events of before; new ones are reported to it.
  ray::Task(Say).Remote(std::string("after the restart")).Get();
  nlohmann::json rows = TasksOnce({"func_or_class_name=Say", "state=FINISHED"}, 1);
  EXPECT_EQ(rows.size(), 1u) << rows.dump(2);
  auto nodes = Json(Manta({"list", "nodes", "--format", "json", "--filter", "state=ALIVE"}));
  EXPECT_GE(nodes.size(), 1u) << nodes.dump();
  auto logs = Manta({"logs"});
  EXPECT_EQ(logs.exit_code, 0) << logs.output;
}


// The child drivers these tests start: --child-driver and --quick-child-driver.
const bool kChildMode = manta::testing::AddChildMode([](int argc, char** argv) -> std::optional<int> {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--child-driver") {
      return RunChildDriver(FlagValue(argc, argv, "--gcs"), FlagValue(argc, argv, "--marker"),
                            FlagValue(argc, argv, "--release"));
    }
    if (std::string(argv[i]) == "--quick-child-driver") {
      return RunQuickChildDriver(FlagValue(argc, argv, "--gcs"), FlagValue(argc, argv, "--marker"));
    }
  }
  return std::nullopt;
});

}  // namespace
}  // namespace state_api_test
