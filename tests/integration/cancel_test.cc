// ray::Cancel and ray::IsCancelled through the public API: on a real cluster
// (CancelTest) and in local mode (LocalModeCancelTest). Tasks signal through files
// in a fresh directory: started-<id> when they begin, ran-<id> when they run at all,
// saw-cancel-<id> when they noticed ray::IsCancelled(), done-<id> when they finished
// normally; they wait for `go` (at most a minute). This binary is its own worker.
#include <ray/api.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cluster_harness.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/common/id.h"
#include "src/common/security.h"
#include "test_util/test_util.h"

namespace cancel_test {
namespace {

namespace fs = std::filesystem;

void Touch(const std::string& path) { std::ofstream(path) << getpid() << "\n"; }

using manta::testing::WaitForFile;

std::string Path(const std::string& dir, const char* what, int id) {
  return dir + "/" + what + "-" + std::to_string(id);
}

// ---- Remote functions -------------------------------------------------------

// Waits for `go`, then returns `id`.
int CancelBlock(std::string dir, int id) {
  Touch(Path(dir, "started", id));
  WaitForFile(dir + "/go", 60000);
  Touch(Path(dir, "done", id));
  return id;
}
int Mark(std::string dir, int id) {
  Touch(Path(dir, "ran", id));
  return id;
}
// As Mark, with a dependency (passed by reference, so the task waits for it).
int MarkAfter(std::string dir, int id, int /*dependency*/) { return Mark(dir, id); }
// Runs until cancelled (at most a minute); returns 42 either way.
int UntilCancelled(std::string dir, int id) {
  Touch(Path(dir, "started", id));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (ray::IsCancelled()) {
      Touch(Path(dir, "saw-cancel", id));
      return 42;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return 42;
}
// Appends its pid to pid-<id> (one line per attempt), then ignores cancels for a minute.
int Stubborn(std::string dir, int id) {
  std::ofstream(Path(dir, "pid", id), std::ios::app) << getpid() << "\n";
  std::this_thread::sleep_for(std::chrono::seconds(60));
  return id;
}
// Submits a child that runs until cancelled, and waits for it.
int ParentOfUntilCancelled(std::string dir, int child_id) {
  return *ray::Task(UntilCancelled).Remote(dir, child_id).Get();
}
// Submits a child that waits for `go`, and waits for it.
int ParentOfBlock(std::string dir, int child_id) { return *ray::Task(CancelBlock).Remote(dir, child_id).Get(); }
// Cancels the task behind a ref it borrows (inside a vector: not resolved).
bool CancelBorrowed(std::vector<ray::ObjectRef<int>> refs) {
  ray::Cancel(refs[0]);
  return true;
}
// Submits a task that runs until cancelled, and hands back its ref (the caller borrows it).
std::vector<ray::ObjectRef<int>> SubmitUntilCancelled(std::string dir, int id) {
  return {ray::Task(UntilCancelled).Remote(dir, id)};
}

// README "Cancelling tasks": one shard answers at once, the others take ten seconds
// unless cancelled.
int SearchPage(const std::string& shard, int /*page*/) {
  if (shard != "fast") std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return 1;
}
int Search(std::string shard) {
  int found = 0;
  for (int page = 0; page < 1000 && !ray::IsCancelled(); ++page) found += SearchPage(shard, page);
  return found;
}
RAY_REMOTE(Search);

class Gate {
 public:
  static Gate* Create() { return new Gate(); }
  int Block(std::string dir, int id) { return cancel_test::CancelBlock(dir, id); }
  int UntilCancelled(std::string dir, int id) { return cancel_test::UntilCancelled(dir, id); }
  int Quick(int x) { return x; }
};

RAY_REMOTE(CancelBlock, Mark, MarkAfter, UntilCancelled, Stubborn, ParentOfUntilCancelled, ParentOfBlock,
           CancelBorrowed, SubmitUntilCancelled);
RAY_REMOTE(Gate::Create, &Gate::Block, &Gate::UntilCancelled, &Gate::Quick);

using Cancelled = ray::internal::RayTaskCancelledException;

bool ProcessAlive(int pid) { return kill(pid, 0) == 0; }

std::vector<int> ReadPids(const std::string& path) {
  std::ifstream in(path);
  std::vector<int> pids;
  for (int pid; in >> pid;) pids.push_back(pid);
  return pids;
}

// Every test gets a fresh directory of signals, and lets its blocked tasks go at the end.
class CancelTestBase : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = manta::TempRoot() + "/cancel-test-" + std::to_string(getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  // Tasks still waiting (a forced cancel in local mode leaves its thread running)
  // see `go`; the directories go once the runtime is shut down.
  void TearDown() override {
    Go();
    Dirs().push_back(dir_);
  }
  static std::vector<std::string>& Dirs() {
    static std::vector<std::string> dirs;
    return dirs;
  }
  static void RemoveDirs() {
    for (const std::string& dir : Dirs()) fs::remove_all(dir);
    Dirs().clear();
  }
  void Go() { Touch(dir_ + "/go"); }
  bool Exists(const char* what, int id) const { return fs::exists(Path(dir_, what, id)); }
  bool Started(int id) const { return WaitForFile(Path(dir_, "started", id), 30000); }

  // Both CPUs busy with CancelBlock(1) and CancelBlock(2): what is submitted next waits in a queue.
  std::vector<ray::ObjectRef<int>> Occupy() {
    std::vector<ray::ObjectRef<int>> blockers = {ray::Task(CancelBlock).Remote(dir_, 1),
                                                 ray::Task(CancelBlock).Remote(dir_, 2)};
    EXPECT_TRUE(Started(1) && Started(2));
    return blockers;
  }

  // The checks both runtimes pass.
  void QueuedTaskNeverRuns() {
    std::vector<ray::ObjectRef<int>> blockers = Occupy();
    ray::ObjectRef<int> queued = ray::Task(Mark).Remote(dir_, 3);
    ray::Cancel(queued);
    // At once: the blockers hold both CPUs for a minute.
    EXPECT_THROW(queued.Get(20000), Cancelled);
    EXPECT_THROW(queued.Get(), Cancelled);  // every Get
    Go();
    for (auto& b : blockers) b.Get();
    // Tasks queued after it run (after it, had it not been taken out).
    std::vector<ray::ObjectRef<int>> after;
    for (int i = 10; i < 14; ++i) after.push_back(ray::Task(Mark).Remote(dir_, i));
    for (auto& a : after) a.Get();
    EXPECT_FALSE(Exists("ran", 3));
  }
  void RunningTaskSeesIsCancelled() {
    ray::ObjectRef<int> running = ray::Task(UntilCancelled).Remote(dir_, 1);
    ASSERT_TRUE(Started(1));
    ray::Cancel(running);
    // It returned 42, but its result is the cancelled error.
    EXPECT_THROW(running.Get(30000), Cancelled);
    EXPECT_TRUE(Exists("saw-cancel", 1));
  }
  void RecursiveCancelReachesChildren() {
    ray::ObjectRef<int> parent = ray::Task(ParentOfUntilCancelled).Remote(dir_, 1);
    ASSERT_TRUE(Started(1));  // the child runs
    ray::Cancel(parent);
    EXPECT_THROW(parent.Get(30000), Cancelled);
    EXPECT_TRUE(WaitForFile(Path(dir_, "saw-cancel", 1), 30000));
  }
  void NonRecursiveCancelSparesChildren() {
    ray::ObjectRef<int> parent = ray::Task(ParentOfBlock).Remote(dir_, 1);
    ASSERT_TRUE(Started(1));
    ray::Cancel(parent, /*force=*/false, /*recursive=*/false);
    Go();
    EXPECT_THROW(parent.Get(30000), Cancelled);
    EXPECT_TRUE(Exists("done", 1));  // the child finished normally
  }
  void QueuedActorCallNeverRuns() {
    ray::ActorHandle<Gate> gate = ray::Actor(Gate::Create).Remote();
    ray::ObjectRef<int> first = gate.Task(&Gate::Block).Remote(dir_, 1);
    ASSERT_TRUE(Started(1));
    ray::ObjectRef<int> second = gate.Task(&Gate::Quick).Remote(7);
    ray::Cancel(second);
    EXPECT_THROW(second.Get(20000), Cancelled);
    Go();
    EXPECT_EQ(*first.Get(), 1);
    EXPECT_EQ(*gate.Task(&Gate::Quick).Remote(8).Get(), 8);
  }
  void RunningActorCallSeesIsCancelled() {
    ray::ActorHandle<Gate> gate = ray::Actor(Gate::Create).Remote();
    ray::ObjectRef<int> call = gate.Task(&Gate::UntilCancelled).Remote(dir_, 1);
    ASSERT_TRUE(Started(1));
    EXPECT_THROW(ray::Cancel(call, /*force=*/true), ray::internal::RayException);  // force: normal tasks only
    ray::Cancel(call);
    EXPECT_THROW(call.Get(30000), Cancelled);
    EXPECT_TRUE(Exists("saw-cancel", 1));
    EXPECT_EQ(*gate.Task(&Gate::Quick).Remote(9).Get(), 9);  // the actor lives on
  }
  void BadInputIsRefused() {
    EXPECT_THROW(ray::Cancel(ray::Put(1)), ray::internal::RayException);
    EXPECT_THROW(ray::Cancel(ray::ObjectRef<int>()), ray::internal::RayException);
    ray::ObjectRef<int> finished = ray::Task(Mark).Remote(dir_, 1);
    EXPECT_EQ(*finished.Get(), 1);
    ray::Cancel(finished);  // nothing to do
    EXPECT_EQ(*finished.Get(), 1);
  }

  std::string dir_;
};

// ---- On a cluster ----------------------------------------------------------

const char kSystemConfig[] = R"({"task_events_report_ms": 200})";

class CancelTest : public CancelTestBase {
 protected:
  static void SetUpTestSuite() {
    harness_ = new manta::testing::ClusterHarness();
    harness_->StartHead({"--num-cpus=2", "--object-store-memory", "134217728", "--system-config", kSystemConfig});
    ray::RayConfig config;
    config.address = harness_->gcs_address();
    ray::Init(config);
  }
  static void TearDownTestSuite() {
    ray::Shutdown();
    delete harness_;
    harness_ = nullptr;
    RemoveDirs();
  }
  // The task's attempts as `manta list tasks --detail` shows them, once one is in `state`.
  static nlohmann::json TaskRowsOnce(const ray::ObjectRef<int>& ref, const std::string& state) {
    const std::string task_id = manta::ObjectID::FromBinary(ref.ID()).Task().Hex();
    nlohmann::json rows;
    manta::testing::WaitFor(
        [&] {
          auto r = harness_->Manta({"list", "tasks", "--detail", "--format", "json", "--filter", "task_id=" + task_id,
                                    "--address", harness_->gcs_address()},
                                   {}, 60000);
          std::istringstream in(r.output);
          try {
            in >> rows;
          } catch (const nlohmann::json::exception&) {
            return false;
          }
          return rows.is_array() && !rows.empty() && rows.back()["state"] == state;
        },
        30000);
    return rows;
  }
  static manta::testing::ClusterHarness* harness_;
};
manta::testing::ClusterHarness* CancelTest::harness_ = nullptr;

TEST_F(CancelTest, AQueuedTaskNeverRunsAndFailsAtOnceAndIsListedCancelled) {
  std::vector<ray::ObjectRef<int>> blockers = Occupy();
  ray::ObjectRef<int> queued = ray::Task(Mark).Remote(dir_, 3);
  ray::Cancel(queued);
  EXPECT_THROW(queued.Get(20000), Cancelled);
  nlohmann::json rows = TaskRowsOnce(queued, "CANCELLED");
  ASSERT_EQ(rows.size(), 1u) << rows.dump(2);
  EXPECT_EQ(rows[0]["state"], "CANCELLED");
  EXPECT_EQ(rows[0]["error_type"], "TASK_CANCELLED");
  for (const auto& event : rows[0]["events"]) EXPECT_NE(event["state"], "RUNNING") << rows.dump(2);
  Go();
  for (auto& b : blockers) b.Get();
}

TEST_F(CancelTest, AQueuedTaskNeverRuns) { QueuedTaskNeverRuns(); }

TEST_F(CancelTest, ATaskWaitingForItsArgumentsNeverRuns) {
  ray::ObjectRef<int> dependency = ray::Task(CancelBlock).Remote(dir_, 1);
  ray::ObjectRef<int> waiting = ray::Task(MarkAfter).Remote(dir_, 2, dependency);
  ray::Cancel(waiting);
  EXPECT_THROW(waiting.Get(20000), Cancelled);
  Go();
  EXPECT_EQ(*dependency.Get(), 1);
  EXPECT_EQ(*ray::Task(MarkAfter).Remote(dir_, 3, dependency).Get(), 3);
  EXPECT_FALSE(Exists("ran", 2));
}

TEST_F(CancelTest, ARunningTaskSeesIsCancelledAndItsResultIsTheCancelledError) { RunningTaskSeesIsCancelled(); }

TEST_F(CancelTest, AForcedCancelKillsTheWorkerAndTheTaskIsNotRetried) {
  ray::ObjectRef<int> stubborn = ray::Task(Stubborn).SetMaxRetries(3).Remote(dir_, 1);
  const std::string pids = Path(dir_, "pid", 1);
  ASSERT_TRUE(manta::testing::WaitFor([&] { return !ReadPids(pids).empty(); }, 30000));
  const int pid = ReadPids(pids)[0];
  ray::Cancel(stubborn, /*force=*/true);
  EXPECT_THROW(stubborn.Get(30000), Cancelled);
  EXPECT_TRUE(manta::testing::WaitFor([&] { return !ProcessAlive(pid); }, 30000)) << "worker " << pid;
  // The cluster goes on, and the task never ran again.
  EXPECT_EQ(*ray::Task(Mark).Remote(dir_, 2).Get(), 2);
  EXPECT_EQ(ReadPids(pids).size(), 1u);
}

TEST_F(CancelTest, ARecursiveCancelReachesTheTasksItSubmitted) { RecursiveCancelReachesChildren(); }

TEST_F(CancelTest, ANonRecursiveCancelLeavesTheTasksItSubmittedRunning) { NonRecursiveCancelSparesChildren(); }

TEST_F(CancelTest, ABorrowerCancelsThroughTheOwner) {
  // The driver owns the task; a task holding its ref cancels it.
  ray::ObjectRef<int> owned = ray::Task(UntilCancelled).Remote(dir_, 1);
  ASSERT_TRUE(Started(1));
  EXPECT_TRUE(*ray::Task(CancelBorrowed).Remote(std::vector<ray::ObjectRef<int>>{owned}).Get());
  EXPECT_THROW(owned.Get(30000), Cancelled);
  EXPECT_TRUE(Exists("saw-cancel", 1));
  // A worker owns the task; the driver borrows its ref and cancels it.
  std::vector<ray::ObjectRef<int>> borrowed = *ray::Task(SubmitUntilCancelled).Remote(dir_, 2).Get();
  ASSERT_TRUE(Started(2));
  ray::Cancel(borrowed[0]);
  EXPECT_THROW(borrowed[0].Get(30000), Cancelled);
  EXPECT_TRUE(Exists("saw-cancel", 2));
}

TEST_F(CancelTest, AQueuedActorCallNeverRuns) { QueuedActorCallNeverRuns(); }

TEST_F(CancelTest, AnActorCallPushedBehindARunningOneFailsAtOnce) {
  // Both calls go to the actor's worker in one push, before it is up.
  ray::ActorHandle<Gate> gate = ray::Actor(Gate::Create).Remote();
  ray::ObjectRef<int> first = gate.Task(&Gate::Block).Remote(dir_, 1);
  ray::ObjectRef<int> second = gate.Task(&Gate::Quick).Remote(7);
  ASSERT_TRUE(Started(1));
  ray::Cancel(second);
  EXPECT_THROW(second.Get(20000), Cancelled);
  Go();
  EXPECT_EQ(*first.Get(), 1);
  EXPECT_EQ(*gate.Task(&Gate::Quick).Remote(8).Get(), 8);
}

TEST_F(CancelTest, ARunningActorCallSeesIsCancelled) { RunningActorCallSeesIsCancelled(); }

TEST_F(CancelTest, BadInputIsRefusedAndAFinishedTaskKeepsItsResult) { BadInputIsRefused(); }

TEST_F(CancelTest, TheReadmeExampleStopsTheStragglers) {
  const std::vector<std::string> shards = {"fast", "slow-1", "slow-2"};
  // As written in README.md:
  std::vector<ray::ObjectRef<int>> searches;
  for (const std::string& shard : shards) searches.push_back(ray::Task(Search).Remote(shard));
  ray::WaitResult<int> first = ray::Wait(searches, 1, -1);
  for (ray::ObjectRef<int>& straggler : first.unready) ray::Cancel(straggler);
  int found = *first.ready.front().Get();
  // Then:
  EXPECT_EQ(found, 1000);
  ASSERT_EQ(first.unready.size(), 2u);
  for (auto& straggler : first.unready) EXPECT_THROW(straggler.Get(), Cancelled);
}

// ---- In local mode -----------------------------------------------------------

class LocalModeCancelTest : public CancelTestBase {
 protected:
  static void SetUpTestSuite() {
    ray::RayConfig config;
    config.local_mode = true;
    config.num_cpus = 2;
    ray::Init(config);
  }
  static void TearDownTestSuite() {
    ray::Shutdown();
    RemoveDirs();
  }
};

TEST_F(LocalModeCancelTest, AQueuedTaskNeverRuns) { QueuedTaskNeverRuns(); }
TEST_F(LocalModeCancelTest, ARunningTaskSeesIsCancelled) { RunningTaskSeesIsCancelled(); }
TEST_F(LocalModeCancelTest, ARecursiveCancelReachesTheTasksItSubmitted) { RecursiveCancelReachesChildren(); }
TEST_F(LocalModeCancelTest, ANonRecursiveCancelLeavesTheTasksItSubmittedRunning) {
  NonRecursiveCancelSparesChildren();
}
TEST_F(LocalModeCancelTest, AQueuedActorCallNeverRuns) { QueuedActorCallNeverRuns(); }
TEST_F(LocalModeCancelTest, ARunningActorCallSeesIsCancelled) { RunningActorCallSeesIsCancelled(); }
TEST_F(LocalModeCancelTest, BadInputIsRefused) { BadInputIsRefused(); }

TEST_F(LocalModeCancelTest, AForcedCancelFailsARunningTaskAtOnce) {
  ray::ObjectRef<int> running = ray::Task(CancelBlock).Remote(dir_, 1);
  ASSERT_TRUE(Started(1));
  ray::Cancel(running, /*force=*/true);
  EXPECT_THROW(running.Get(20000), Cancelled);  // while it still waits for `go`
  Go();
}

}  // namespace
}  // namespace cancel_test
