// The state API on a real cluster, through the CLI as a user runs it: tasks that
// finish and fail, actors and their calls, `manta list/get/summary` with filters,
// limits and formats, the errors bad input gets, and the case Ray gets wrong:
// 200,000 finished tasks and 10 running, `--filter state=RUNNING` finds the 10.
// This binary is its own worker.
#include <ray/api.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "cluster_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/common/id.h"

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

class Counter {
 public:
  static Counter* Create() { return new Counter(); }
  int Add(int x) { return total_ += x; }

 private:
  int total_ = 0;
};

RAY_REMOTE(Plus, Fail, Block, Nop, Counter::Create, &Counter::Add);

// Task events reach the GCS within a fifth of a second.
const char kFastEvents[] = R"({"task_events_report_ms": 200})";

class StateApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    harness_ = new manta::testing::ClusterHarness();
    harness_->StartHead({"--num-cpus=12", "--system-config", kFastEvents});
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

  nlohmann::json plus = TasksOnce({"func_or_class_name=Plus"}, 20);
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
  nlohmann::json calls = TasksOnce({"type=actor_task"}, 1);
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

}  // namespace

int main(int argc, char** argv) {
  // Worker processes re-run main(): ray::Init() serves tasks and never returns.
  if (std::getenv("MANTA_WORKER_MODE") != nullptr) ray::Init();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
