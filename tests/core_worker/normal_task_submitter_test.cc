// NormalTaskSubmitter + TaskManager with fake raylets and workers: lease requests,
// reuse, spillback, batching and pipelining, idle return, retries after worker
// death, runtime envs and placement groups in the scheduling key, and errors stored
// as values. One EventLoop driven by the test.
#include "src/core_worker/normal_task_submitter.h"

#include <chrono>
#include <deque>
#include <map>
#include <thread>

#include "gtest/gtest.h"
#include "src/core_worker/common.h"
#include "src/task_channel/fake_task_channel.h"
#include "src/raylet/fake_raylet_client.h"
#include "src/common/task_resources.h"
#include "src/common/util.h"
#include "tests/core_worker/noop_borrower_client.h"

namespace manta::core {
namespace {

// Runs the loop until `done` (timers due "now" need a loop turn), at most ~1 s.
template <typename F>
bool DriveUntil(EventLoop& loop, F done) {
  for (int i = 0; i < 1000; ++i) {
    loop.RunUntilIdle();
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

using FakeRaylet = raylet::FakeRayletClient;
using FakeWorker = FakeTaskChannel;

class SubmitterTest : public ::testing::Test {
 protected:
  SubmitterTest()
      : raylets_([this](const std::string& address) {
          auto r = std::make_shared<FakeRaylet>(address);
          raylet_by_address_[address] = r.get();
          return r;
        }),
        workers_([this](const std::string& key) {
          std::string address = TaskChannelAddress(key);
          auto w = std::make_shared<FakeWorker>(address, loop_);
          worker_by_address_[address] = w.get();
          return w;
        }),
        self_{NodeID::FromRandom(), "127.0.0.1", 1000, WorkerID::FromRandom()},
        refs_(self_, &borrowers_),
        tasks_(store_, refs_, [this](const PackedTaskPtr& task) { submitter_->Submit(task->Unpack(), task); }) {
    MakeSubmitter(/*lease_idle_ms=*/0);
    raylets_.Get("127.0.0.1:2000");  // creates the local raylet fake
  }

  // lease_idle_ms = 0 returns a lease at the first sweep after it goes idle (a real
  // 1 ms timer). A test that hands an idle lease to a later task keeps leases for a
  // minute instead, so that a slow step cannot let the sweep return it first.
  void MakeSubmitter(int64_t lease_idle_ms, int64_t steal_after_ms = 0) {
    SubmitterOptions options;
    options.steal_after_ms = steal_after_ms;
    options.job_id = JobID::FromInt(1);
    options.self = ToRpc(self_);
    options.local_raylet_address = "127.0.0.1:2000";
    options.max_tasks_in_flight_per_worker = 4;
    options.max_tasks_per_push = 3;
    options.lease_idle_ms = lease_idle_ms;
    options.max_pending_lease_requests_per_key = 2;
    options.max_push_bytes = 2000;
    submitter_ = std::make_unique<NormalTaskSubmitter>(loop_, options, raylets_, workers_, tasks_);
  }
  void KeepIdleLeases() { MakeSubmitter(60'000); }

  // Submits a task through the task manager as the core worker does.
  ObjectID Submit(int max_retries = 3, std::map<std::string, double> resources = {}, size_t arg_bytes = 0,
                  const std::string& function = "f", const std::string& runtime_env = "",
                  const Placement& placement = {}) {
    TaskID task_id = TaskID::ForNormalTask(JobID::FromInt(1), root_, counter_++);
    rpc::TaskSpec spec;
    spec.set_task_id(task_id.Binary());
    spec.set_function_name(function);
    spec.set_num_returns(1);
    spec.set_max_retries(max_retries);
    *spec.mutable_caller_address() = ToRpc(self_);
    for (const auto& [k, v] : resources) SetRequiredResource(&spec, k, v);
    if (arg_bytes > 0) spec.add_args()->set_data(std::string(arg_bytes, 'a'));
    if (!runtime_env.empty()) spec.set_runtime_env(runtime_env);
    SetPlacement(&spec, placement);
    ObjectID id = ObjectID::FromIndex(task_id, 1);
    refs_.AddOwnedObject(id, self_, {});
    refs_.AddLocalReference(id);
    PackedTaskPtr packed = PackedTask::Pack(spec);
    tasks_.AddPendingTask(packed, {});
    submitter_->Submit(spec, packed);
    loop_.RunUntilIdle();
    return id;
  }

  FakeRaylet& LocalRaylet() { return *raylet_by_address_.at("127.0.0.1:2000"); }
  FakeWorker& Worker(int port) { return *worker_by_address_.at("127.0.0.1:" + std::to_string(port)); }
  size_t TotalPushes() {
    size_t n = 0;
    for (auto& [a, w] : worker_by_address_) n += w->pushes.size();
    return n;
  }

  EventLoop loop_;
  std::map<std::string, FakeRaylet*> raylet_by_address_;
  std::map<std::string, FakeWorker*> worker_by_address_;
  RayletClientPool raylets_;
  TaskChannelPool workers_;
  Address self_;
  NoopBorrowerClient borrowers_;
  ReferenceCounter refs_;
  MemoryStore store_;
  TaskManager tasks_;
  std::unique_ptr<NormalTaskSubmitter> submitter_;
  TaskID root_ = TaskID::ForDriver(JobID::FromInt(1));
  uint64_t counter_ = 0;
};

TEST(TaskResourcesTest, ASpecListsEachResourceOnceAndReadsAsAMap) {
  rpc::TaskSpec spec;
  EXPECT_TRUE(ResourceMapOf(spec).empty());
  SetRequiredResource(&spec, "CPU", 2);
  SetRequiredResource(&spec, "GPU", 0.5);
  SetRequiredResource(&spec, "CPU", 4);  // replaces, not a second entry
  ASSERT_EQ(spec.required_resources_size(), 2);
  auto resources = ResourceMapOf(spec);
  EXPECT_EQ(resources.size(), 2u);
  EXPECT_EQ(resources.at("CPU"), 4);
  EXPECT_EQ(resources.at("GPU"), 0.5);
}

TEST_F(SubmitterTest, RequestsALeaseAndPushesTheTask) {
  ObjectID id = Submit();
  ASSERT_EQ(LocalRaylet().leases.size(), 1u);
  EXPECT_EQ(LocalRaylet().leases.front().request.required_resources().at("CPU"), 1);
  LocalRaylet().Grant(3000);
  loop_.RunUntilIdle();
  ASSERT_EQ(Worker(3000).pushes.size(), 1u);
  Worker(3000).ReplyOk();
  loop_.RunUntilIdle();
  auto value = store_.GetIfExists(id);
  ASSERT_NE(value, nullptr);
  EXPECT_EQ(value->data, "ok");
  EXPECT_EQ(tasks_.NumPending(), 0u);
}

TEST_F(SubmitterTest, ReusesTheLeaseAndReturnsItWhenIdle) {
  Submit();
  LocalRaylet().Grant(3000);
  loop_.RunUntilIdle();
  Worker(3000).ReplyOk();
  // A second task before the idle timer fires goes to the same worker, no new lease.
  Submit();
  EXPECT_EQ(Worker(3000).pushes.size(), 1u);
  Worker(3000).ReplyOk();
  loop_.RunUntilIdle();
  // lease_idle_ms = 0: returned once idle.
  EXPECT_TRUE(DriveUntil(loop_, [&] { return LocalRaylet().returns.size() == 1; }));
  EXPECT_EQ(submitter_->NumLeases(), 0u);
  EXPECT_FALSE(LocalRaylet().returns[0].disconnect_worker());
}

TEST_F(SubmitterTest, AnIdleLeaseServesAnotherFunctionOfItsShape) {
  KeepIdleLeases();
  Submit(3, {}, 0, "f");
  LocalRaylet().Grant(3000);
  loop_.RunUntilIdle();
  Worker(3000).ReplyOk();
  // The lease of f is idle: a task of g (same shape) goes to it at once, without
  // waiting for it to be returned and a lease for g to be granted.
  ObjectID g = Submit(3, {}, 0, "g");
  ASSERT_EQ(Worker(3000).pushes.size(), 1u);
  EXPECT_EQ(Worker(3000).pushes.front().request.tasks(0).function_name(), "g");
  EXPECT_EQ(LocalRaylet().leases.size(), 0u) << "asked for a lease with one idle";
  Worker(3000).ReplyOk();
  loop_.RunUntilIdle();
  EXPECT_NE(store_.GetIfExists(g), nullptr);
  // Another shape does not take it.
  Submit(3, {{"CPU", 2}}, 0, "h");
  EXPECT_EQ(Worker(3000).pushes.size(), 0u);
  EXPECT_EQ(LocalRaylet().leases.size(), 1u);
}

TEST_F(SubmitterTest, LeasesAreNeverSharedAcrossRuntimeEnvs) {
  KeepIdleLeases();
  const std::string env_a = R"({"env_vars":{"E":"a"}})";
  const std::string env_b = R"({"env_vars":{"E":"b"}})";
  Submit(3, {}, 0, "f", env_a);
  ASSERT_EQ(LocalRaylet().leases.size(), 1u);
  EXPECT_EQ(LocalRaylet().leases.front().request.runtime_env(), env_a);
  LocalRaylet().Grant(3000);
  loop_.RunUntilIdle();
  Worker(3000).ReplyOk();
  loop_.RunUntilIdle();
  // The env_a lease is idle; a task of the same function and shape in env_b (or in
  // no env) asks for a lease of its own instead of taking it.
  Submit(3, {}, 0, "f", env_b);
  Submit(3, {}, 0, "f");
  EXPECT_EQ(Worker(3000).pushes.size(), 0u);
  ASSERT_EQ(LocalRaylet().leases.size(), 2u);
  EXPECT_EQ(LocalRaylet().leases[0].request.runtime_env(), env_b);
  EXPECT_EQ(LocalRaylet().leases[1].request.runtime_env(), "");
  // Another task of env_a (another function, too) does take the idle env_a lease.
  Submit(3, {}, 0, "g", env_a);
  ASSERT_EQ(Worker(3000).pushes.size(), 1u);
  EXPECT_EQ(Worker(3000).pushes.front().request.tasks(0).runtime_env(), env_a);
}

TEST_F(SubmitterTest, ARuntimeEnvThatCannotBeAppliedFailsItsTasksAtOnce) {
  const std::string env = R"({"working_dir":"/missing"})";
  ObjectID a = Submit(3, {}, 0, "f", env);
  ObjectID b = Submit(3, {}, 0, "f", env);
  ObjectID plain = Submit();
  ASSERT_EQ(LocalRaylet().leases.size(), 3u);
  LocalRaylet().Reject("runtime_env working_dir /missing cannot be used: No such file or directory", true);
  loop_.RunUntilIdle();
  for (const ObjectID& id : {a, b}) {
    auto value = store_.GetIfExists(id);
    ASSERT_NE(value, nullptr);
    EXPECT_EQ(value->error_type, rpc::RUNTIME_ENV_SETUP_FAILED);
    EXPECT_NE(value->error.message().find("/missing"), std::string::npos) << value->error.message();
  }
  // Not retried: no new lease request for the env; the other key is untouched.
  EXPECT_EQ(LocalRaylet().leases.size(), 2u);
  EXPECT_EQ(store_.GetIfExists(plain), nullptr);
}

TEST_F(SubmitterTest, LeasesAreNeverSharedAcrossPlacementGroupBundles) {
  KeepIdleLeases();
  const PlacementGroupID group = PlacementGroupID::FromRandom();
  const PlacementGroupID other = PlacementGroupID::FromRandom();
  Submit(3, {}, 0, "f", "", {group, 0});
  ASSERT_EQ(LocalRaylet().leases.size(), 1u);
  const rpc::RequestWorkerLeaseRequest& first = LocalRaylet().leases.front().request;
  EXPECT_EQ(first.placement().placement_group_id(), group.Binary());
  EXPECT_EQ(first.placement().bundle_index(), 0);
  EXPECT_EQ(first.required_resources().at("CPU"), 1) << "the raylet turns resources into the bundle's";
  LocalRaylet().Grant(3000);
  loop_.RunUntilIdle();
  Worker(3000).ReplyOk();
  loop_.RunUntilIdle();
  // The lease of bundle 0 is idle. The same function and shape in another bundle, in
  // any bundle (-1), in another group or in none asks for a lease of its own.
  Submit(3, {}, 0, "f", "", {group, 1});
  Submit(3, {}, 0, "f", "", {group, -1});
  Submit(3, {}, 0, "f", "", {other, 0});
  Submit(3, {}, 0, "f");
  EXPECT_EQ(Worker(3000).pushes.size(), 0u);
  ASSERT_EQ(LocalRaylet().leases.size(), 4u);
  const auto placement_of = [&](size_t i) { return LocalRaylet().leases[i].request.placement(); };
  EXPECT_EQ(placement_of(0).placement_group_id(), group.Binary());
  EXPECT_EQ(placement_of(0).bundle_index(), 1);
  EXPECT_EQ(placement_of(1).placement_group_id(), group.Binary());
  EXPECT_EQ(placement_of(1).bundle_index(), -1);
  EXPECT_EQ(placement_of(2).placement_group_id(), other.Binary());
  EXPECT_FALSE(LocalRaylet().leases[3].request.has_placement());
  // Another function in bundle 0 of the group does take the idle lease.
  Submit(3, {}, 0, "g", "", {group, 0});
  ASSERT_EQ(Worker(3000).pushes.size(), 1u);
  EXPECT_EQ(Worker(3000).pushes.front().request.tasks(0).function_name(), "g");
  EXPECT_EQ(LocalRaylet().leases.size(), 4u);
}

TEST_F(SubmitterTest, ARemovedPlacementGroupFailsItsQueuedTasksAtOnce) {
  const PlacementGroupID group = PlacementGroupID::FromRandom();
  ObjectID a = Submit(3, {}, 0, "f", "", {group, 0});
  ObjectID b = Submit(3, {}, 0, "f", "", {group, 0});
  ObjectID plain = Submit();
  ASSERT_EQ(LocalRaylet().leases.size(), 3u);  // two for the group's key, then the plain one
  auto rejected = std::move(LocalRaylet().leases.front());
  LocalRaylet().leases.pop_front();
  rpc::RequestWorkerLeaseReply reply;
  reply.set_rejected(true);
  reply.set_placement_group_removed(true);
  reply.set_failure_message("placement group " + group.Hex() + " is removed");
  rejected.callback(absl::OkStatus(), std::move(reply));
  loop_.RunUntilIdle();
  for (const ObjectID& id : {a, b}) {
    auto value = store_.GetIfExists(id);
    ASSERT_NE(value, nullptr);
    EXPECT_EQ(value->error_type, rpc::PLACEMENT_GROUP_REMOVED);
    EXPECT_NE(value->error.message().find(group.Hex()), std::string::npos) << value->error.message();
  }
  // Not retried: no new lease request for the group, even after the retry delay;
  // the plain task is untouched.
  DriveUntil(loop_, [start = MonotonicMs()] { return MonotonicMs() - start > 250; });
  EXPECT_EQ(LocalRaylet().leases.size(), 2u);
  EXPECT_EQ(store_.GetIfExists(plain), nullptr);
  EXPECT_EQ(tasks_.NumPending(), 1u);
}

TEST_F(SubmitterTest, ALeaseThatGoesIdlePassesToAFunctionWaitingForOne) {
  Submit(3, {}, 0, "f");
  LocalRaylet().Grant(3000);
  loop_.RunUntilIdle();
  // g waits for a lease while f's worker is busy; the raylet has no other worker.
  ObjectID g = Submit(3, {}, 0, "g");
  ASSERT_EQ(LocalRaylet().leases.size(), 1u);
  ASSERT_EQ(Worker(3000).pushes.size(), 1u);
  // f's task finishes and nothing else of f is queued: the worker runs g's task.
  Worker(3000).ReplyOk();
  ASSERT_EQ(Worker(3000).pushes.size(), 1u);
  EXPECT_EQ(Worker(3000).pushes.front().request.tasks(0).function_name(), "g");
  Worker(3000).ReplyOk();
  loop_.RunUntilIdle();
  EXPECT_NE(store_.GetIfExists(g), nullptr);
  // The lease g asked for meanwhile is used or returned like any other.
  LocalRaylet().Grant(3001);
  EXPECT_TRUE(DriveUntil(loop_, [&] { return submitter_->NumLeases() == 0; }));
  EXPECT_EQ(LocalRaylet().returns.size(), 2u);
}

TEST_F(SubmitterTest, BatchesAndPipelinesUpToTheLimits) {
  for (int i = 0; i < 10; ++i) Submit();
  // At most 2 lease requests in flight per key.
  EXPECT_EQ(LocalRaylet().leases.size(), 2u);
  LocalRaylet().Grant(3000);
  loop_.RunUntilIdle();
  // Task durations are unknown yet: one task per worker.
  ASSERT_EQ(Worker(3000).pushes.size(), 1u);
  EXPECT_EQ(Worker(3000).pushes[0].request.tasks_size(), 1);
  Worker(3000).ReplyOk();
  loop_.RunUntilIdle();
  // Tasks proved short: up to 4 in flight per worker, 3 per push. With 3 in flight
  // the lease is more than half full, so no 1-task push follows.
  ASSERT_EQ(Worker(3000).pushes.size(), 1u);
  EXPECT_EQ(Worker(3000).pushes[0].request.tasks_size(), 3);
  // An interim reply for 1 of the 3 leaves 2 in flight: half the pipeline has
  // drained, and the lease is refilled with one push of 2.
  Worker(3000).ReplySome(1);
  loop_.RunUntilIdle();
  ASSERT_EQ(Worker(3000).pushes.size(), 2u);
  EXPECT_EQ(Worker(3000).pushes[1].request.tasks_size(), 2);
  while (TotalPushes() > 0) {
    Worker(3000).ReplyOk();
    loop_.RunUntilIdle();
  }
  EXPECT_EQ(tasks_.NumPending(), 0u);
}

// ray::Cancel: a queued task is taken out; a pushed one is found with its worker;
// when a forced cancel ends the worker, the other tasks lost with it are retried
// without counting against their retries, and the cancelled one is not retried.
TEST_F(SubmitterTest, CancelTakesAQueuedTaskOutAndFindsAPushedOne) {
  ObjectID first = Submit();
  ObjectID second = Submit();  // durations unknown: one task per worker, the second waits
  LocalRaylet().Grant(3000);
  loop_.RunUntilIdle();
  ASSERT_EQ(Worker(3000).pushes.size(), 1u);
  rpc::Address worker;
  EXPECT_EQ(submitter_->Cancel(second.Task(), 0, false, &worker), NormalTaskSubmitter::CancelResult::kDequeued);
  EXPECT_EQ(submitter_->NumQueued(), 0u);
  EXPECT_EQ(submitter_->Cancel(first.Task(), 0, false, &worker), NormalTaskSubmitter::CancelResult::kInFlight);
  EXPECT_FALSE(worker.worker_id().empty());
  Worker(3000).ReplyOk();
  loop_.RunUntilIdle();
  EXPECT_EQ(submitter_->Cancel(first.Task(), 0, false, &worker), NormalTaskSubmitter::CancelResult::kNotFound);
  EXPECT_EQ(store_.GetIfExists(first)->data, "ok");
}

TEST_F(SubmitterTest, TasksLostWithAWorkerEndedByAForcedCancelRetryForFree) {
  Submit();  // durations unknown: it goes alone, the next two wait
  ObjectID cancelled = Submit(/*max_retries=*/3);
  ObjectID sibling = Submit(/*max_retries=*/0);
  LocalRaylet().Grant(3000);
  loop_.RunUntilIdle();
  Worker(3000).ReplyOk();  // durations known: the two go in one push
  loop_.RunUntilIdle();
  ASSERT_EQ(Worker(3000).pushes.size(), 1u);
  ASSERT_EQ(Worker(3000).pushes[0].request.tasks_size(), 2);
  ASSERT_TRUE(*tasks_.MarkCancelled(cancelled.Task(), /*force=*/true));
  rpc::Address worker;
  ASSERT_EQ(submitter_->Cancel(cancelled.Task(), 0, /*force=*/true, &worker),
            NormalTaskSubmitter::CancelResult::kInFlight);
  Worker(3000).Fail();  // the worker left
  loop_.RunUntilIdle();
  ASSERT_TRUE(DriveUntil(loop_, [&] { return store_.GetIfExists(cancelled) != nullptr; }));
  EXPECT_EQ(store_.GetIfExists(cancelled)->error_type, rpc::TASK_CANCELLED);
  // The sibling, out of retries, is tried again on a new worker.
  ASSERT_TRUE(DriveUntil(loop_, [&] { return !LocalRaylet().leases.empty(); }));
  LocalRaylet().Grant(3002);
  loop_.RunUntilIdle();
  ASSERT_EQ(Worker(3002).pushes.size(), 1u);
  EXPECT_EQ(Worker(3002).pushes[0].request.tasks(0).task_id(), sibling.Task().Binary());
  Worker(3002).ReplyOk();
  loop_.RunUntilIdle();
  EXPECT_EQ(store_.GetIfExists(sibling)->data, "ok");
}

// A worker silent for steal_after_ms with tasks queued behind its running one: they
// are taken back (those the worker agrees not to run) and run elsewhere as a new
// attempt, without a retry charged; the silent worker gets nothing more meanwhile.
TEST_F(SubmitterTest, TasksQueuedBehindALongOneAreStolen) {
  MakeSubmitter(/*lease_idle_ms=*/60'000, /*steal_after_ms=*/20);
  struct Asked {
    TaskID task;
    int attempt;
  };
  std::vector<Asked> asked;
  submitter_->SetStealer([&](const rpc::Address& worker, const TaskID& task, int attempt,
                             std::function<void(bool)> done) {
    EXPECT_FALSE(worker.worker_id().empty());
    asked.push_back({task, attempt});
    done(asked.size() == 1);  // the worker gives the first back; it started the other
  });
  Submit();  // durations unknown: it goes alone
  LocalRaylet().Grant(3000);
  loop_.RunUntilIdle();
  Worker(3000).ReplyOk();  // now known to be short
  loop_.RunUntilIdle();
  Submit();  // to the idle worker at once; the next three wait for its reply
  ObjectID running = Submit();
  ObjectID stolen = Submit(/*max_retries=*/0);
  ObjectID started = Submit();
  Worker(3000).ReplyOk();  // the three go in one push; the first turns out long
  loop_.RunUntilIdle();
  ASSERT_EQ(Worker(3000).pushes.size(), 1u);
  ASSERT_EQ(Worker(3000).pushes[0].request.tasks_size(), 3);
  EXPECT_EQ(Worker(3000).pushes[0].request.tasks(0).task_id(), running.Task().Binary());
  const size_t pushes = Worker(3000).pushes.size();
  ASSERT_TRUE(DriveUntil(loop_, [&] { return asked.size() == 2; }));
  EXPECT_EQ(asked[0].task, stolen.Task());
  EXPECT_EQ(asked[1].task, started.Task());
  // The stolen task (no retries left: a steal is not charged) runs on a new worker.
  ASSERT_TRUE(DriveUntil(loop_, [&] { return !LocalRaylet().leases.empty(); }));
  LocalRaylet().Grant(3002);
  loop_.RunUntilIdle();
  ASSERT_EQ(Worker(3002).pushes.size(), 1u);
  ASSERT_EQ(Worker(3002).pushes[0].request.tasks_size(), 1);
  EXPECT_EQ(Worker(3002).pushes[0].request.tasks(0).task_id(), stolen.Task().Binary());
  EXPECT_EQ(Worker(3002).pushes[0].request.tasks(0).attempt_number(), 1);
  Worker(3002).ReplyOk();
  loop_.RunUntilIdle();
  EXPECT_EQ(store_.GetIfExists(stolen)->data, "ok");
  EXPECT_EQ(Worker(3000).pushes.size(), pushes);  // nothing more went to the silent worker
  // The long one ends (the old attempt's result of the stolen one is ignored).
  while (!Worker(3000).pushes.empty()) {
    Worker(3000).ReplyOk();
    loop_.RunUntilIdle();
  }
  EXPECT_EQ(store_.GetIfExists(running)->data, "ok");
  EXPECT_EQ(store_.GetIfExists(started)->data, "ok");
  EXPECT_EQ(tasks_.NumPending(), 0u);
}

TEST_F(SubmitterTest, APipelineRefilledPerReplyDoesNotSplitIntoSmallPushes) {
  // A worker answers a long push in interim replies (every millisecond); refilling
  // the lease after each would cut the queue into ever smaller pushes.
  for (int i = 0; i < 40; ++i) Submit();
  LocalRaylet().Grant(3000);
  loop_.RunUntilIdle();
  Worker(3000).ReplyOk();  // the first task proves the tasks short
  loop_.RunUntilIdle();
  while (TotalPushes() > 0) {
    for (const auto& push : Worker(3000).pushes) {
      // Every push is as large as the queue and the pipeline allow.
      EXPECT_GE(push.request.tasks_size(), 2) << "push " << push.request.push_id();
    }
    Worker(3000).ReplySome(1);
    loop_.RunUntilIdle();
    Worker(3000).ReplyOk();
    loop_.RunUntilIdle();
  }
  EXPECT_EQ(tasks_.NumPending(), 0u);
}

TEST_F(SubmitterTest, TasksOfUnknownDurationSpreadOverWorkers) {
  Submit();
  Submit();
  LocalRaylet().Grant(3000);
  LocalRaylet().Grant(3001);
  loop_.RunUntilIdle();
  ASSERT_EQ(Worker(3000).pushes.size(), 1u);
  ASSERT_EQ(Worker(3001).pushes.size(), 1u);
  EXPECT_EQ(Worker(3000).pushes[0].request.tasks_size(), 1);
  EXPECT_EQ(Worker(3001).pushes[0].request.tasks_size(), 1);
  Worker(3000).ReplyOk();
  Worker(3001).ReplyOk();
  loop_.RunUntilIdle();
  EXPECT_EQ(tasks_.NumPending(), 0u);
}

TEST_F(SubmitterTest, FollowsSpillbackWithGrantOrReject) {
  Submit(3, {{"special", 1}});
  ASSERT_EQ(LocalRaylet().leases.size(), 1u);
  LocalRaylet().SpillTo("127.0.0.1", 2001);
  loop_.RunUntilIdle();
  FakeRaylet& remote = *raylet_by_address_.at("127.0.0.1:2001");
  ASSERT_EQ(remote.leases.size(), 1u);
  EXPECT_TRUE(remote.leases.front().request.grant_or_reject());
  remote.Grant(3001);
  loop_.RunUntilIdle();
  ASSERT_EQ(Worker(3001).pushes.size(), 1u);
  Worker(3001).ReplyOk();
  loop_.RunUntilIdle();
  // The lease is returned to the raylet that granted it.
  EXPECT_TRUE(DriveUntil(loop_, [&] { return remote.returns.size() == 1; }));
}

// Spilled back, it waited there; sent back once another node has room: asked
// again at the local raylet at once, not counted as a failure.
TEST_F(SubmitterTest, ALeaseSentBackToBePlacedAgainIsAskedForLocallyAtOnce) {
  Submit(1, {{"special", 1}});
  LocalRaylet().SpillTo("127.0.0.1", 2001);
  loop_.RunUntilIdle();
  FakeRaylet& remote = *raylet_by_address_.at("127.0.0.1:2001");
  ASSERT_EQ(remote.leases.size(), 1u);
  remote.PlaceAgain();
  loop_.RunUntilIdle();
  ASSERT_EQ(LocalRaylet().leases.size(), 1u);
  EXPECT_FALSE(LocalRaylet().leases.front().request.grant_or_reject());
  LocalRaylet().Grant(3001);
  loop_.RunUntilIdle();
  ASSERT_EQ(Worker(3001).pushes.size(), 1u);
}

TEST_F(SubmitterTest, WorkerDeathRetriesThenFailsWithWorkerDied) {
  ObjectID id = Submit(/*max_retries=*/1);
  LocalRaylet().Grant(3000);
  loop_.RunUntilIdle();
  Worker(3000).Fail();
  loop_.RunUntilIdle();
  // The dead worker's lease went back with disconnect; a new lease is requested.
  ASSERT_EQ(LocalRaylet().returns.size(), 1u);
  EXPECT_TRUE(LocalRaylet().returns[0].disconnect_worker());
  ASSERT_EQ(LocalRaylet().leases.size(), 1u);
  LocalRaylet().Grant(3002);
  loop_.RunUntilIdle();
  ASSERT_EQ(Worker(3002).pushes.size(), 1u);
  EXPECT_EQ(Worker(3002).pushes[0].request.tasks(0).attempt_number(), 1);
  Worker(3002).Fail();
  loop_.RunUntilIdle();
  auto value = store_.GetIfExists(id);
  ASSERT_NE(value, nullptr);
  EXPECT_FALSE(value->error.ok());
  EXPECT_EQ(value->error_type, rpc::WORKER_DIED);
  EXPECT_EQ(tasks_.NumPending(), 0u);
}

TEST_F(SubmitterTest, AWorkerRefusedForItsProtectionFailsTheTasksAtOnceAndStaysAlive) {
  ObjectID running = Submit(/*max_retries=*/3);
  LocalRaylet().Grant(3000);
  loop_.RunUntilIdle();
  ObjectID queued = Submit(/*max_retries=*/3);
  while (!Worker(3000).pushes.empty()) {  // the second task may ride the same lease
    Worker(3000).Fail(absl::FailedPreconditionError("the worker protects its task channel with 'mac', weaker"));
    loop_.RunUntilIdle();
  }
  // No retry, no new lease for the same refusal, and the worker is not reported dead.
  for (const ObjectID& id : {running, queued}) {
    auto value = store_.GetIfExists(id);
    ASSERT_NE(value, nullptr);
    EXPECT_EQ(value->error_type, rpc::TASK_CHANNEL_REFUSED);
    EXPECT_NE(value->error.message().find("weaker"), std::string::npos) << value->error;
  }
  ASSERT_EQ(LocalRaylet().returns.size(), 1u);
  EXPECT_FALSE(LocalRaylet().returns[0].disconnect_worker());
  EXPECT_EQ(tasks_.NumPending(), 0u);
}

TEST_F(SubmitterTest, ANewWorkerOnADeadWorkersPortGetsAFreshChannel) {
  Submit();
  LocalRaylet().Grant(3000);
  loop_.RunUntilIdle();
  FakeWorker* first = &Worker(3000);
  first->ReplyOk();
  loop_.RunUntilIdle();
  EXPECT_TRUE(DriveUntil(loop_, [&] { return LocalRaylet().returns.size() == 1; }));  // idle: returned
  first->closed = true;  // that worker exits later; its connection closes
  // A new worker that reuses the port is granted for the next task.
  ObjectID id = Submit();
  ASSERT_EQ(LocalRaylet().leases.size(), 1u);
  LocalRaylet().Grant(3000);
  loop_.RunUntilIdle();
  FakeWorker* second = &Worker(3000);
  EXPECT_NE(second, first);
  ASSERT_EQ(second->pushes.size(), 1u);
  second->ReplyOk();
  loop_.RunUntilIdle();
  ASSERT_NE(store_.GetIfExists(id), nullptr);
  EXPECT_EQ(store_.GetIfExists(id)->data, "ok");
  EXPECT_EQ(LocalRaylet().returns.size(), 1u);  // no lease came back as failed
}

TEST_F(SubmitterTest, PushesStayUnderTheByteLimitAndOversizedTasksFail) {
  KeepIdleLeases();
  // Learn that tasks are short, so that several go in one push.
  Submit();
  LocalRaylet().Grant(3000);
  loop_.RunUntilIdle();
  Worker(3000).ReplyOk();
  loop_.RunUntilIdle();
  Submit();  // keeps the worker busy: the next ones queue
  ObjectID huge = Submit(3, {}, /*arg_bytes=*/5000);  // over max_push_bytes = 2000
  std::vector<ObjectID> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(Submit(3, {}, /*arg_bytes=*/700));
  ASSERT_EQ(Worker(3000).pushes.size(), 1u);
  Worker(3000).ReplyOk();
  loop_.RunUntilIdle();
  auto value = store_.GetIfExists(huge);
  ASSERT_NE(value, nullptr);
  EXPECT_EQ(value->error_type, rpc::TASK_CANCELLED);
  EXPECT_NE(value->error.message().find("over the limit"), std::string::npos) << value->error;
  // The others go in pushes of at most 2000 bytes: two, then one.
  size_t pushed = 0;
  for (const auto& push : Worker(3000).pushes) {
    EXPECT_LE(push.request.ByteSizeLong(), 2100u);
    pushed += push.request.tasks_size();
  }
  EXPECT_GE(Worker(3000).pushes.size(), 2u);
  while (TotalPushes() > 0) {
    Worker(3000).ReplyOk();
    loop_.RunUntilIdle();
  }
  for (const ObjectID& id : ids) EXPECT_NE(store_.GetIfExists(id), nullptr);
  EXPECT_TRUE(LocalRaylet().returns.empty() || !LocalRaylet().returns[0].disconnect_worker());
  EXPECT_EQ(tasks_.NumPending(), 0u);
}

TEST_F(SubmitterTest, ShutdownFailsQueuedTasksAndLaterSubmissions) {
  ObjectID queued = Submit();  // no lease granted yet
  submitter_->Shutdown();
  loop_.RunUntilIdle();
  ObjectID late = Submit();
  for (const ObjectID& id : {queued, late}) {
    auto value = store_.GetIfExists(id);
    ASSERT_NE(value, nullptr);
    EXPECT_EQ(value->error_type, rpc::TASK_CANCELLED);
  }
  EXPECT_EQ(tasks_.NumPending(), 0u);
}

TEST_F(SubmitterTest, LateResultOfAnOlderAttemptIsIgnored) {
  ObjectID id = Submit();
  LocalRaylet().Grant(3000);
  loop_.RunUntilIdle();
  rpc::PushTaskReply stale;
  auto first = std::move(Worker(3000).pushes.front());
  Worker(3000).pushes.pop_front();
  rpc::TaskResult result;
  result.set_task_id(first.request.tasks(0).task_id());
  result.set_attempt_number(7);  // no such attempt
  tasks_.CompletePendingTask(result);
  EXPECT_EQ(store_.GetIfExists(id), nullptr);
  EXPECT_EQ(tasks_.NumPending(), 1u);
  first.callback(absl::UnavailableError("gone"), {});
  loop_.RunUntilIdle();
}

}  // namespace
}  // namespace manta::core
