// CoreWorker through its public API, with fakes for every peer: the GCS
// (FakeGcsClient), the node's raylet (FakeRayletClient), leased workers
// (FakeTaskChannel), other core workers (FakeCoreWorkerClient) and the node's
// object store (FakeObjectStoreClient). No socket, process or Redis.
//
// The core worker's loop runs on a thread of the fixture, as in a real process;
// the test thread plays the user thread (SubmitTask, Get, Put) and the peers (it
// answers the fakes). The raylet and task channel fakes are not thread-safe, so
// the core worker reaches them through adapters that hand every call to the loop,
// and the test reads and answers them on the loop too (OnLoop). Every wait has a
// deadline; none is a fixed sleep.
#include "src/core_worker/core_worker.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "gtest/gtest.h"
#include "src/common/util.h"
#include "src/core_worker/common.h"
#include "src/core_worker/fake_core_worker_client.h"
#include "src/gcs/fake_gcs_client.h"
#include "src/object_store/fake_store_client.h"
#include "src/raylet/fake_raylet_client.h"
#include "src/task_channel/fake_task_channel.h"
#include "tests/test_util/test_util.h"

namespace manta::core {
namespace {

using raylet::FakeRayletClient;
using testing::WaitFor;

// The deadline of every wait: generous, so that a loaded machine does not fail a
// test, while a broken one still ends.
constexpr int64_t kWaitMs = 10000;
constexpr char kRayletAddress[] = "127.0.0.1:2000";

// Runs `fn` on the loop, waits for it and returns its result.
template <typename F>
auto OnLoop(EventLoop& loop, F fn) -> decltype(fn()) {
  using Result = decltype(fn());
  auto task = std::make_shared<std::packaged_task<Result()>>(std::move(fn));
  std::future<Result> result = task->get_future();
  loop.Post("CoreWorkerTest.OnLoop", [task] { (*task)(); });
  // `fn` refers to the test's stack: the test must not go on while it may still run.
  CHECK(result.wait_for(std::chrono::milliseconds(kWaitMs)) == std::future_status::ready) << "the loop is stuck";
  return result.get();
}

// A raylet whose calls all reach a FakeRayletClient on the loop. The core worker
// calls its raylet from user threads (a submission asks for a lease at once) and
// from the loop; the fake is not thread-safe, so only the loop touches it.
class LoopRaylet final : public raylet::RayletClientInterface {
 public:
  LoopRaylet(EventLoop& loop, std::shared_ptr<FakeRayletClient> fake) : loop_(loop), fake_(std::move(fake)) {}
  FakeRayletClient& fake() { return *fake_; }

  const std::string& address() const override { return fake_->address(); }
  void RegisterWorker(const rpc::RegisterWorkerRequest& q, Callback<rpc::RegisterWorkerReply> cb) override {
    Forward(&FakeRayletClient::RegisterWorker, q, std::move(cb));
  }
  void RequestWorkerLease(const rpc::RequestWorkerLeaseRequest& q, Callback<rpc::RequestWorkerLeaseReply> cb) override {
    Forward(&FakeRayletClient::RequestWorkerLease, q, std::move(cb));
  }
  void ReturnWorker(const rpc::ReturnWorkerRequest& q, Callback<rpc::ReturnWorkerReply> cb) override {
    Forward(&FakeRayletClient::ReturnWorker, q, std::move(cb));
  }
  void CancelWorkerLease(const rpc::CancelWorkerLeaseRequest& q, Callback<rpc::CancelWorkerLeaseReply> cb) override {
    Forward(&FakeRayletClient::CancelWorkerLease, q, std::move(cb));
  }
  void NotifyWorkerBlocked(const rpc::NotifyWorkerBlockedRequest& q,
                           Callback<rpc::NotifyWorkerBlockedReply> cb) override {
    Forward(&FakeRayletClient::NotifyWorkerBlocked, q, std::move(cb));
  }
  void HealthCheck(Callback<rpc::HealthCheckReply> cb) override {
    loop_.Post("LoopRaylet.HealthCheck", [fake = fake_, cb = std::move(cb)]() mutable { fake->HealthCheck(cb); });
  }
  void PinObjectIDs(const rpc::PinObjectIDsRequest& q, Callback<rpc::PinObjectIDsReply> cb) override {
    Forward(&FakeRayletClient::PinObjectIDs, q, std::move(cb));
  }
  void FreeObjects(const rpc::FreeObjectsRequest& q, Callback<rpc::FreeObjectsReply> cb) override {
    Forward(&FakeRayletClient::FreeObjects, q, std::move(cb));
  }
  void FetchObjects(const rpc::FetchObjectsRequest& q, int64_t deadline_ms,
                    Callback<rpc::FetchObjectsReply> cb) override {
    loop_.Post("LoopRaylet.FetchObjects", [fake = fake_, q, deadline_ms, cb = std::move(cb)]() mutable {
      fake->FetchObjects(q, deadline_ms, cb);
    });
  }
  void PrepareBundleResources(const rpc::PrepareBundleResourcesRequest& q,
                              Callback<rpc::PrepareBundleResourcesReply> cb) override {
    Forward(&FakeRayletClient::PrepareBundleResources, q, std::move(cb));
  }
  void CommitBundleResources(const rpc::CommitBundleResourcesRequest& q,
                             Callback<rpc::CommitBundleResourcesReply> cb) override {
    Forward(&FakeRayletClient::CommitBundleResources, q, std::move(cb));
  }
  void CancelResourceReserve(const rpc::CancelResourceReserveRequest& q,
                             Callback<rpc::CancelResourceReserveReply> cb) override {
    Forward(&FakeRayletClient::CancelResourceReserve, q, std::move(cb));
  }
  void ReleaseUnusedBundles(const rpc::ReleaseUnusedBundlesRequest& q,
                            Callback<rpc::ReleaseUnusedBundlesReply> cb) override {
    Forward(&FakeRayletClient::ReleaseUnusedBundles, q, std::move(cb));
  }
  void CancelAll() override { loop_.Post("LoopRaylet.CancelAll", [fake = fake_] { fake->CancelAll(); }); }
  // Only the core worker's process counts calls in flight (to drain them); the
  // test drains this raylet itself (CancelAll, then a turn of the loop).
  int64_t InFlight() const override { return 0; }

 private:
  template <typename Request, typename Reply>
  void Forward(void (FakeRayletClient::*method)(const Request&, Callback<Reply>),
               const std::type_identity_t<Request>& request, std::type_identity_t<Callback<Reply>> cb) {
    loop_.Post("LoopRaylet.Call", [fake = fake_, method, request, cb = std::move(cb)]() mutable {
      ((*fake).*method)(request, std::move(cb));
    });
  }

  EventLoop& loop_;
  std::shared_ptr<FakeRayletClient> fake_;
};

// A task channel whose pushes reach a FakeTaskChannel on the loop (a submitting
// user thread pushes itself; the fake is not thread-safe). It counts its pushes in
// flight itself, since Get and Wait ask from user threads.
class LoopChannel final : public TaskChannelInterface {
 public:
  LoopChannel(EventLoop& loop, std::shared_ptr<FakeTaskChannel> fake) : loop_(loop), fake_(std::move(fake)) {}
  FakeTaskChannel& fake() { return *fake_; }

  const std::string& address() const override { return fake_->address(); }
  void PushSerialized(std::string request, PushCallback cb) override {
    in_flight_->fetch_add(1);
    loop_.Post("LoopChannel.Push", [fake = fake_, in_flight = in_flight_, request = std::move(request),
                                    cb = std::move(cb)]() mutable {
      fake->PushSerialized(std::move(request), [in_flight, cb](const absl::Status& s, rpc::PushTaskReply&& reply) {
        if (!s.ok() || reply.done()) in_flight->fetch_sub(1);
        cb(s, std::move(reply));
      });
    });
  }
  // Replies come through the loop, when the test answers the fake.
  bool Poll() override { return false; }
  int64_t InFlight() const override { return in_flight_->load(); }
  void Close(const absl::Status& why) override {
    closed_ = true;
    loop_.Post("LoopChannel.Close", [fake = fake_, why] { fake->Close(why); });
  }
  void CancelAll() override {
    closed_ = true;
    loop_.Post("LoopChannel.CancelAll", [fake = fake_] {
      fake->closed = true;
      fake->CancelAll();
    });
  }
  bool IsClosed() const override { return closed_; }

 private:
  EventLoop& loop_;
  std::shared_ptr<FakeTaskChannel> fake_;
  std::shared_ptr<std::atomic<int64_t>> in_flight_ = std::make_shared<std::atomic<int64_t>>(0);
  std::atomic<bool> closed_{false};
};

// The bytes of a value Get returned.
std::string Bytes(const ObjectValue& value) { return std::string(value.data, value.size); }

// The address of another core worker, at 127.0.0.1:`port`.
rpc::Address PeerAddress(int port) {
  rpc::Address address;
  address.set_node_id(NodeID::FromRandom().Binary());
  address.set_ip_address("127.0.0.1");
  address.set_port(port);
  address.set_worker_id(WorkerID::FromRandom().Binary());
  return address;
}

class CoreWorkerTest : public ::testing::Test {
 protected:
  explicit CoreWorkerTest(bool is_driver = true, bool log_to_driver = true)
      : is_driver_(is_driver),
        log_to_driver_(log_to_driver),
        raylet_pool_([this](const std::string& address) {
          return std::make_shared<LoopRaylet>(loop_, std::make_shared<FakeRayletClient>(address));
        }),
        worker_pool_([this](const std::string& address) {
          return std::make_shared<FakeCoreWorkerClient>(address, loop_);
        }),
        channel_pool_([this](const std::string& key) {
          return std::make_shared<LoopChannel>(loop_, std::make_shared<FakeTaskChannel>(TaskChannelAddress(key), loop_));
        }),
        self_{NodeID::FromRandom(), "127.0.0.1", 1000, WorkerID::FromRandom()} {}

  void SetUp() override {
    loop_thread_ = std::thread([this] { loop_.Run(); });
    CoreWorkerOptions options;
    options.is_driver = is_driver_;
    options.log_to_driver = log_to_driver_;
    options.job_id = JobID::FromInt(1);
    options.worker_id = self_.worker_id;
    options.node_ip_address = "127.0.0.1";
    options.raylet_address = kRayletAddress;
    options.gcs_address = "127.0.0.1:1";  // never dialled: the GCS is a fake
    // Idle leases go back after 5 ms, so that tests see them returned.
    options.config.worker_lease_idle_ms = 5;
    // Puts over 64 bytes go to the (fake) object store.
    options.config.max_direct_put_bytes = 64;
    core_ = std::make_unique<CoreWorker>(
        options, CoreWorkerParts{loop_, gcs_, raylet_pool_, worker_pool_, channel_pool_, nullptr, store_, self_});
  }

  void TearDown() override { ShutDown(); }

  // Shuts the core worker down as its process does, and stops the loop. Once only.
  void ShutDown() {
    if (shut_down_) return;
    shut_down_ = true;
    // Shutdown waits (on the loop) for the GCS to mark a driver's job finished: the
    // test answers it meanwhile.
    std::thread shutdown([this] { core_->Shutdown([this] { Drain(); }); });
    if (is_driver_) {
      // The last task events go first (kept for the tests to read).
      EXPECT_TRUE(WaitFor(
          [this] {
            while (gcs_.task_events.pending() > 0) {
              task_events_.push_back(gcs_.task_events.Next());
              gcs_.task_events.ReplyNext(loop_, absl::OkStatus());
            }
            return gcs_.mark_job_finished.pending() > 0;
          },
          kWaitMs));
      if (gcs_.mark_job_finished.pending() > 0) {
        EXPECT_EQ(gcs_.mark_job_finished.Next(), JobID::FromInt(1).Binary());
        gcs_.mark_job_finished.ReplyNext(loop_, absl::OkStatus());
      }
    }
    shutdown.join();
    loop_.Stop();
    loop_thread_.join();
  }

  // As a process's shutdown does: cancels every call in flight and lets the loop run
  // their callbacks (and what those post).
  void Drain() {
    worker_pool_.ForEach([](CoreWorkerClientInterface& c) { c.CancelAll(); });
    raylet_pool_.ForEach([](raylet::RayletClientInterface& c) { c.CancelAll(); });
    channel_pool_.ForEach([](TaskChannelInterface& c) { c.CancelAll(); });
    LoopBarrier();
  }

  FakeRayletClient& Raylet() { return std::static_pointer_cast<LoopRaylet>(raylet_pool_.Get(kRayletAddress))->fake(); }
  // The other core worker at `address` ("ip:port").
  std::shared_ptr<FakeCoreWorkerClient> Peer(const std::string& address) {
    return std::static_pointer_cast<FakeCoreWorkerClient>(worker_pool_.Get(address));
  }
  // The task channel to a leased worker.
  FakeTaskChannel& Channel(const rpc::Address& worker) {
    return std::static_pointer_cast<LoopChannel>(ChannelTo(channel_pool_, worker))->fake();
  }

  size_t PendingLeases() {
    return OnLoop(loop_, [this] { return Raylet().leases.size(); });
  }
  // Waits for a lease request and grants it with a worker whose task port is
  // `port`; returns the grant.
  rpc::RequestWorkerLeaseReply GrantLease(int port) {
    EXPECT_TRUE(WaitFor([this] { return PendingLeases() > 0; }, kWaitMs)) << "no lease request";
    return OnLoop(loop_, [this, port] { return Raylet().Grant(port); });
  }
  // Waits for one push on `channel`; returns its single task.
  rpc::TaskSpec AwaitPush(FakeTaskChannel& channel) {
    if (!WaitFor([&] { return OnLoop(loop_, [&] { return channel.pushes.size(); }) == 1; }, kWaitMs)) {
      ADD_FAILURE() << "no push reached the worker";
      return rpc::TaskSpec();
    }
    return OnLoop(loop_, [&] {
      const rpc::PushTaskRequest& request = channel.pushes.front().request;
      CHECK_EQ(request.tasks_size(), 1);
      return request.tasks(0);
    });
  }
  // Answers the oldest push on `channel` with `reply` (marked done).
  void Reply(FakeTaskChannel& channel, rpc::PushTaskReply reply) {
    reply.set_done(true);
    OnLoop(loop_, [&] { channel.Reply(std::move(reply)); });
  }
  // The reply of a worker that ran `spec`, whose return holds `data` inline.
  static rpc::PushTaskReply ResultOf(const rpc::TaskSpec& spec, const std::string& data) {
    rpc::PushTaskReply reply;
    FakeTaskChannel::AddResult(spec, &reply, data);
    return reply;
  }

  ObjectID PutBytes(const std::string& bytes) {
    auto id = core_->Put(
        bytes.size(), [&bytes](char* dst) { std::memcpy(dst, bytes.data(), bytes.size()); }, {});
    CHECK(id.ok()) << id.status();
    return *id;
  }
  ObjectID Submit(const std::string& function, int max_retries, std::vector<TaskArgInput> args = {}) {
    TaskOptions options;
    options.max_retries = max_retries;
    auto id = core_->SubmitTask(function, std::move(args), options);
    CHECK(id.ok()) << id.status();
    return id->at(0);
  }
  // Waits until every handler queued on the loop now has run, and what those post,
  // two posts deep (a cancelled push posts its task's resubmission, which fails).
  void LoopBarrier() {
    for (int turn = 0; turn < 3; ++turn) OnLoop(loop_, [] {});
  }

  const bool is_driver_;
  bool shut_down_ = false;
  const bool log_to_driver_;
  // Answers the subscriber's commands until it polls; whether any asked for the
  // job's workers' output.
  bool SubscribedToWorkerOutput() {
    bool subscribed = false;
    EXPECT_TRUE(WaitFor(
        [&] {
          while (gcs_.subscribe.pending() > 0) {
            const rpc::GcsSubscriberCommandBatchRequest batch = gcs_.subscribe.Next();
            for (const rpc::SubscribeCommand& c : batch.commands()) {
              subscribed |= c.channel_type() == rpc::WORKER_LOG_CHANNEL && c.key_id() == JobID::FromInt(1).Binary();
            }
            gcs_.subscribe.ReplyNext(loop_, absl::OkStatus());
          }
          return gcs_.poll.pending() > 0 && gcs_.subscribe.pending() == 0;
        },
        kWaitMs));
    return subscribed;
  }
  // The task event batches the core worker sent at shutdown.
  std::vector<rpc::TaskEventBatch> task_events_;
  // The states each attempt (hex task id, attempt) reached per those batches, and
  // their errors.
  std::map<std::pair<std::string, int>, std::set<rpc::TaskStatus>> StatesReported() const {
    std::map<std::pair<std::string, int>, std::set<rpc::TaskStatus>> states;
    for (const rpc::TaskEventBatch& b : task_events_) {
      for (int64_t i = 0; i < NumRows(b); ++i) {
        const TaskEventRow row = RowAt(b, i);
        auto key = std::make_pair(row.TaskId().Hex(), static_cast<int>(row.attempt));
        for (int s = 0; s < TaskEventRow::kNumStates; ++s) {
          if (row.state_us[s] > 0) states[key].insert(static_cast<rpc::TaskStatus>(s + 1));
        }
      }
    }
    return states;
  }
  EventLoop loop_;
  gcs::FakeGcsClient gcs_;
  object_store::FakeObjectStoreClient store_;
  RayletClientPool raylet_pool_;
  CoreWorkerClientPool worker_pool_;
  TaskChannelPool channel_pool_;
  const Address self_;
  std::thread loop_thread_;
  std::unique_ptr<CoreWorker> core_;
};

// A worker process's core worker (no task channel server: these tests run no tasks on it).
TEST_F(CoreWorkerTest, ADriverAsksForItsWorkersOutput) { EXPECT_TRUE(SubscribedToWorkerOutput()); }

class QuietDriverTest : public CoreWorkerTest {
 protected:
  QuietDriverTest() : CoreWorkerTest(/*is_driver=*/true, /*log_to_driver=*/false) {}
};

TEST_F(QuietDriverTest, ADriverWithLogToDriverOffDoesNotAskForItsWorkersOutput) {
  EXPECT_FALSE(SubscribedToWorkerOutput());
}

class WorkerCoreWorkerTest : public CoreWorkerTest {
 protected:
  WorkerCoreWorkerTest() : CoreWorkerTest(/*is_driver=*/false) {}
};

TEST_F(CoreWorkerTest, ATaskIsLeasedPushedAndItsInlineResultIsWhatGetReturns) {
  ObjectID id = Submit("f", 3);
  EXPECT_EQ(core_->NumPendingTasks(), 1u);
  ASSERT_TRUE(WaitFor([this] { return PendingLeases() == 1; }, kWaitMs));
  EXPECT_EQ(OnLoop(loop_, [this] { return Raylet().leases.front().request.required_resources().at("CPU"); }), 1);
  rpc::RequestWorkerLeaseReply grant = GrantLease(3000);
  FakeTaskChannel& worker = Channel(grant.worker_address());
  rpc::TaskSpec spec = AwaitPush(worker);
  EXPECT_EQ(spec.function_name(), "f");
  EXPECT_EQ(TaskID::FromBinary(spec.task_id()), id.Task());
  EXPECT_EQ(core_->Wait({id}, 1, 0), std::vector<bool>{false}) << "ready before the worker answered";

  Reply(worker, ResultOf(spec, "forty-two"));
  auto values = core_->Get({id}, kWaitMs);
  ASSERT_TRUE(values.ok()) << values.status();
  ASSERT_EQ(values->size(), 1u);
  EXPECT_EQ((*values)[0].error, nullptr);
  EXPECT_EQ(Bytes((*values)[0]), "forty-two");
  EXPECT_EQ(core_->NumPendingTasks(), 0u);
  EXPECT_EQ(core_->Wait({id}, 1, 0), std::vector<bool>{true});
  EXPECT_EQ(core_->NumLineage(), 0u) << "a task whose return came inline keeps no lineage";

  // Idle for worker_lease_idle_ms, the lease goes back to the raylet, worker intact.
  ASSERT_TRUE(WaitFor([this] { return OnLoop(loop_, [this] { return Raylet().returns.size(); }) == 1; }, kWaitMs));
  rpc::ReturnWorkerRequest returned = OnLoop(loop_, [this] { return Raylet().returns[0]; });
  EXPECT_EQ(returned.lease_id(), grant.lease_id());
  EXPECT_FALSE(returned.disconnect_worker());

  // The last reference gone, the value goes.
  core_->RemoveLocalReference(id);
  EXPECT_FALSE(core_->reference_counter().HasReference(id));
  EXPECT_FALSE(core_->memory_store().Contains(id));
  EXPECT_EQ(core_->reference_counter().NumObjects(), 0u);
}

TEST_F(CoreWorkerTest, ATaskWhoseWorkerDiesRunsAgainAndGetReturnsTheSecondAttemptsResult) {
  ObjectID id = Submit("f", /*max_retries=*/1);
  rpc::RequestWorkerLeaseReply first = GrantLease(3000);
  FakeTaskChannel& dead = Channel(first.worker_address());
  EXPECT_EQ(AwaitPush(dead).attempt_number(), 0);
  OnLoop(loop_, [&] { dead.Fail(absl::UnavailableError("Socket closed")); });

  // The dead worker's lease goes back (its worker disconnected); a new one is asked for.
  rpc::RequestWorkerLeaseReply second = GrantLease(3001);
  FakeTaskChannel& alive = Channel(second.worker_address());
  rpc::TaskSpec retry = AwaitPush(alive);
  EXPECT_EQ(TaskID::FromBinary(retry.task_id()), id.Task());
  EXPECT_EQ(retry.attempt_number(), 1);
  EXPECT_EQ(core_->NumPendingTasks(), 1u);
  Reply(alive, ResultOf(retry, "second"));

  auto values = core_->Get({id}, kWaitMs);
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ((*values)[0].error, nullptr);
  EXPECT_EQ(Bytes((*values)[0]), "second");
  EXPECT_EQ(core_->NumPendingTasks(), 0u);
  auto returns = OnLoop(loop_, [this] { return Raylet().returns; });
  ASSERT_GE(returns.size(), 1u);
  EXPECT_EQ(returns[0].lease_id(), first.lease_id());
  EXPECT_TRUE(returns[0].disconnect_worker());
  // The owner reported both attempts to the GCS: the first failed, the second finished.
  ShutDown();
  auto states = StatesReported();
  const std::set<rpc::TaskStatus> failed = {rpc::PENDING_ARGS_AVAIL, rpc::PENDING_NODE_ASSIGNMENT,
                                            rpc::SUBMITTED_TO_WORKER, rpc::FAILED};
  const std::set<rpc::TaskStatus> finished = {rpc::PENDING_ARGS_AVAIL, rpc::PENDING_NODE_ASSIGNMENT,
                                              rpc::SUBMITTED_TO_WORKER, rpc::FINISHED};
  EXPECT_EQ(states[std::make_pair(id.Task().Hex(), 0)], failed);
  EXPECT_EQ(states[std::make_pair(id.Task().Hex(), 1)], finished);
  bool error_reported = false;
  for (const rpc::TaskEventBatch& b : task_events_) {
    for (const rpc::TaskEventError& e : b.errors()) error_reported |= e.error().type() == rpc::WORKER_DIED;
  }
  EXPECT_TRUE(error_reported);
  // The driver's own task ran and finished.
  bool driver_finished = false;
  for (const auto& [key, reached] : states) driver_finished |= reached.count(rpc::FINISHED) > 0 && key.first != id.Task().Hex();
  EXPECT_TRUE(driver_finished);
}

TEST_F(CoreWorkerTest, ATaskWithoutRetriesWhoseWorkerDiesFailsWithWorkerDied) {
  ObjectID id = Submit("f", /*max_retries=*/0);
  rpc::RequestWorkerLeaseReply grant = GrantLease(3000);
  FakeTaskChannel& worker = Channel(grant.worker_address());
  AwaitPush(worker);
  OnLoop(loop_, [&] { worker.Fail(absl::UnavailableError("Socket closed")); });

  auto values = core_->Get({id}, kWaitMs);
  ASSERT_TRUE(values.ok()) << values.status() << ": a task error is the object's value, not Get's status";
  const ObjectValue& value = (*values)[0];
  ASSERT_NE(value.error, nullptr);
  EXPECT_EQ(value.error->error_type, rpc::WORKER_DIED);
  EXPECT_NE(value.error->error.message().find("after 1 attempts"), std::string::npos) << value.error->error;
  EXPECT_EQ(value.size, 0u);
  EXPECT_EQ(core_->NumPendingTasks(), 0u);
  LoopBarrier();
  EXPECT_EQ(PendingLeases(), 0u) << "asked for a lease to run a task out of retries";
}

TEST_F(CoreWorkerTest, ShutdownEndsAGetWaitingForATaskInFlight) {
  ObjectID id = Submit("f", 3);
  rpc::RequestWorkerLeaseReply grant = GrantLease(3000);
  AwaitPush(Channel(grant.worker_address()));
  auto get = std::async(std::launch::async, [&] { return core_->Get({id}, 60000); });
  EXPECT_EQ(get.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);

  // The push is cancelled by the drain; the task, resubmitted, finds the submitter
  // shut down and fails instead of running again.
  ShutDown();
  ASSERT_EQ(get.wait_for(std::chrono::milliseconds(kWaitMs)), std::future_status::ready) << "Get still waits";
  auto values = get.get();
  ASSERT_TRUE(values.ok()) << values.status();
  ASSERT_NE((*values)[0].error, nullptr);
  EXPECT_EQ((*values)[0].error->error_type, rpc::TASK_CANCELLED);
  EXPECT_EQ(core_->NumPendingTasks(), 0u);
  // Its lease went back when the submitter shut down, with the worker kept. (The
  // loop has stopped: the test reads the raylet fake directly.)
  ASSERT_EQ(Raylet().returns.size(), 1u);
  EXPECT_EQ(Raylet().returns[0].lease_id(), grant.lease_id());
  EXPECT_FALSE(Raylet().returns[0].disconnect_worker());
}

TEST_F(CoreWorkerTest, GetOfAPendingTaskTimesOutAndGetOfAnUnknownObjectIsNotFound) {
  ObjectID id = Submit("f", 3);
  const int64_t start = MonotonicMs();
  auto pending = core_->Get({id}, 20);
  EXPECT_TRUE(absl::IsDeadlineExceeded(pending.status())) << pending.status();
  EXPECT_GE(MonotonicMs() - start, 19);  // a millisecond of slack between two clocks
  ObjectID unknown = ObjectID::ForPut(TaskID::ForDriver(JobID::FromInt(7)), 1);
  EXPECT_TRUE(absl::IsNotFound(core_->Get({unknown}, kWaitMs).status()));
}

TEST_F(CoreWorkerTest, PutValuesAreReadBackFromTheMemoryStoreOrTheObjectStore) {
  ObjectID small = PutBytes("tiny");
  ObjectID large = PutBytes(std::string(1000, 'x'));
  EXPECT_TRUE(core_->reference_counter().IsOwnedByUs(small));
  EXPECT_EQ(store_.NumObjects(), 1u) << "only the value over max_direct_put_bytes goes to the store";
  {
    auto values = core_->Get({small, large}, kWaitMs);
    ASSERT_TRUE(values.ok()) << values.status();
    EXPECT_EQ(Bytes((*values)[0]), "tiny");
    EXPECT_EQ(Bytes((*values)[1]), std::string(1000, 'x'));
  }
  core_->RemoveLocalReference(small);
  core_->RemoveLocalReference(large);
  EXPECT_EQ(core_->reference_counter().NumObjects(), 0u);
  // The store copy is deleted from the loop.
  EXPECT_TRUE(WaitFor([this] { return store_.NumObjects() == 0; }, kWaitMs));
  EXPECT_EQ(store_.deletes(), 1);
}

class BorrowerTest : public CoreWorkerTest {
 protected:
  // Submits g(arg), drops the caller's ref to `arg`, and lets the worker finish,
  // reporting that it still borrows `arg`. Returns the worker (the borrower).
  rpc::Address RunTaskThatKeepsItsArgument(const ObjectID& arg) {
    TaskArgInput input;
    input.by_ref = true;
    input.ref = arg;
    ObjectID result = Submit("g", 3, {input});
    core_->RemoveLocalReference(arg);  // the task's own reference keeps it now
    EXPECT_EQ(core_->reference_counter().SubmittedTaskRefCount(arg), 1);
    rpc::RequestWorkerLeaseReply grant = GrantLease(3000);
    FakeTaskChannel& worker = Channel(grant.worker_address());
    rpc::TaskSpec spec = AwaitPush(worker);
    EXPECT_TRUE(spec.args(0).is_ref()) << "a value in the object store is passed by reference";
    EXPECT_EQ(spec.args(0).ref().object_id(), arg.Binary());
    rpc::PushTaskReply reply = ResultOf(spec, "done");
    rpc::BorrowedRefReport* borrowed = reply.mutable_results(0)->add_borrowed_refs();
    borrowed->mutable_ref()->set_object_id(arg.Binary());
    *borrowed->mutable_ref()->mutable_owner_address() = core_->address();
    *borrowed->mutable_borrower() = grant.worker_address();
    Reply(worker, std::move(reply));
    auto values = core_->Get({result}, kWaitMs);
    EXPECT_TRUE(values.ok() && Bytes((*values)[0]) == "done");
    core_->RemoveLocalReference(result);
    return grant.worker_address();
  }
  // Waits for the owner's WaitForRefRemoved to `borrower` about `id`.
  std::shared_ptr<FakeCoreWorkerClient> AwaitWaitForRefRemoved(const rpc::Address& borrower, const ObjectID& id) {
    auto peer = Peer(HostPort(borrower));
    EXPECT_TRUE(WaitFor([&] { return peer->wait_for_ref_removed.pending() == 1; }, kWaitMs));
    if (peer->wait_for_ref_removed.pending() == 0) return peer;
    rpc::WaitForRefRemovedRequest request = peer->wait_for_ref_removed.Next();
    EXPECT_EQ(request.ref().object_id(), id.Binary());
    EXPECT_EQ(request.ref().owner_address().worker_id(), core_->address().worker_id());
    EXPECT_EQ(request.intended_worker_id(), borrower.worker_id());
    LoopBarrier();  // the completion that sent it has finished
    return peer;
  }
  // `id` is still held, by borrowers only, and its value and store copy are kept.
  void ExpectKeptForBorrowers(const ObjectID& id) {
    ReferenceCounter& refs = core_->reference_counter();
    EXPECT_TRUE(refs.HasReference(id));
    EXPECT_EQ(refs.LocalRefCount(id), 0);
    EXPECT_EQ(refs.SubmittedTaskRefCount(id), 0);
    EXPECT_EQ(refs.NumBorrowers(id), 1u);
    EXPECT_TRUE(core_->memory_store().Contains(id));
    EXPECT_EQ(store_.NumObjects(), 1u);
    EXPECT_EQ(store_.deletes(), 0);
  }
  // `id` is freed: forgotten, its value dropped and its store copy deleted.
  void ExpectFreed(const ObjectID& id) {
    EXPECT_TRUE(WaitFor([&] { return !core_->reference_counter().HasReference(id) && store_.NumObjects() == 0; },
                        kWaitMs));
    EXPECT_FALSE(core_->memory_store().Contains(id));
    EXPECT_EQ(core_->reference_counter().NumObjects(), 0u);
  }
};

TEST_F(BorrowerTest, AnObjectABorrowerHoldsIsFreedOnlyOnceTheBorrowerLetsGo) {
  ObjectID arg = PutBytes(std::string(1000, 'a'));
  rpc::Address borrower = RunTaskThatKeepsItsArgument(arg);
  auto peer = AwaitWaitForRefRemoved(borrower, arg);
  ExpectKeptForBorrowers(arg);

  peer->wait_for_ref_removed.ReplyNext(absl::OkStatus());
  ExpectFreed(arg);
}

TEST_F(BorrowerTest, ASubBorrowerHandedOverByTheBorrowerKeepsTheObjectAlive) {
  ObjectID arg = PutBytes(std::string(1000, 'a'));
  rpc::Address borrower = RunTaskThatKeepsItsArgument(arg);
  auto peer = AwaitWaitForRefRemoved(borrower, arg);

  // The borrower let go, but passed the ref on to a third worker first.
  rpc::Address third = PeerAddress(5000);
  rpc::WaitForRefRemovedReply reply;
  rpc::BorrowedRefReport* sub = reply.add_sub_borrowers();
  sub->mutable_ref()->set_object_id(arg.Binary());
  *sub->mutable_borrower() = third;
  peer->wait_for_ref_removed.ReplyNext(absl::OkStatus(), reply);
  auto third_peer = AwaitWaitForRefRemoved(third, arg);
  ExpectKeptForBorrowers(arg);

  third_peer->wait_for_ref_removed.ReplyNext(absl::OkStatus());
  ExpectFreed(arg);
}

TEST_F(BorrowerTest, ABorrowerThatDiesNoLongerKeepsTheObject) {
  ObjectID arg = PutBytes(std::string(1000, 'a'));
  rpc::Address borrower = RunTaskThatKeepsItsArgument(arg);
  auto peer = AwaitWaitForRefRemoved(borrower, arg);
  ExpectKeptForBorrowers(arg);

  peer->wait_for_ref_removed.ReplyNext(absl::UnavailableError("borrower unreachable"));
  ExpectFreed(arg);
}

// The owner's side of GetObjectStatus: answered once the value exists.
TEST_F(CoreWorkerTest, AnOwnerAnswersGetObjectStatusOnceItsTaskFinishes) {
  ObjectID id = Submit("f", 3);
  struct Answer {
    rpc::GetObjectStatusReply reply;
    std::promise<absl::Status> sent;
  };
  auto answer = std::make_shared<Answer>();
  std::future<absl::Status> sent = answer->sent.get_future();
  rpc::GetObjectStatusRequest request;
  request.set_object_id(id.Binary());
  request.set_owner_worker_id(self_.worker_id.Binary());
  OnLoop(loop_, [&] {
    core_->HandleGetObjectStatus(request, &answer->reply, [answer](absl::Status s) { answer->sent.set_value(s); });
  });
  EXPECT_EQ(sent.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout) << "answered while pending";

  rpc::RequestWorkerLeaseReply grant = GrantLease(3000);
  FakeTaskChannel& worker = Channel(grant.worker_address());
  Reply(worker, ResultOf(AwaitPush(worker), "value"));
  ASSERT_EQ(sent.wait_for(std::chrono::milliseconds(kWaitMs)), std::future_status::ready);
  EXPECT_TRUE(sent.get().ok());
  EXPECT_EQ(answer->reply.status(), rpc::GetObjectStatusReply::CREATED);
  EXPECT_EQ(answer->reply.data(), "value");

  // An object this process does not own (any more) is out of scope.
  core_->RemoveLocalReference(id);
  rpc::GetObjectStatusReply freed;
  absl::Status status = OnLoop(loop_, [&] {
    absl::Status out = absl::UnknownError("not answered");
    core_->HandleGetObjectStatus(request, &freed, [&out](absl::Status s) { out = s; });
    return out;
  });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(freed.status(), rpc::GetObjectStatusReply::OUT_OF_SCOPE);
}

// A borrowed ref (deserialized here, owned by the core worker at `owner`).
ObjectID Borrow(CoreWorker& core, const rpc::Address& owner) {
  ObjectID id = ObjectID::ForPut(TaskID::ForDriver(JobID::FromInt(2)), 1);
  core.RegisterBorrowedRef(id, owner.SerializeAsString(), std::nullopt);
  core.AddLocalReference(id);
  return id;
}

TEST_F(WorkerCoreWorkerTest, GetOfABorrowedObjectAsksItsOwner) {
  rpc::Address owner = PeerAddress(4000);
  ObjectID id = Borrow(*core_, owner);
  EXPECT_FALSE(core_->reference_counter().IsOwnedByUs(id));
  auto get = std::async(std::launch::async, [&] { return core_->Get({id}, 30000); });
  auto peer = Peer(HostPort(owner));
  ASSERT_TRUE(WaitFor([&] { return peer->get_object_status.pending() == 1; }, kWaitMs));
  rpc::GetObjectStatusRequest request = peer->get_object_status.Next();
  EXPECT_EQ(request.object_id(), id.Binary());
  EXPECT_EQ(request.owner_worker_id(), owner.worker_id());

  rpc::GetObjectStatusReply reply;
  reply.set_status(rpc::GetObjectStatusReply::CREATED);
  reply.set_data("borrowed bytes");
  peer->get_object_status.ReplyNext(absl::OkStatus(), reply);
  ASSERT_EQ(get.wait_for(std::chrono::milliseconds(kWaitMs)), std::future_status::ready);
  auto values = get.get();
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ((*values)[0].error, nullptr);
  EXPECT_EQ(Bytes((*values)[0]), "borrowed bytes");
}

TEST_F(WorkerCoreWorkerTest, GetOfABorrowedObjectWhoseOwnerIsGoneFailsWithOwnerDied) {
  rpc::Address owner = PeerAddress(4000);
  ObjectID id = Borrow(*core_, owner);
  // A long timeout: the Get must end because the owner is gone, not because it timed out.
  auto get = std::async(std::launch::async, [&] { return core_->Get({id}, 60000); });
  auto peer = Peer(HostPort(owner));
  ASSERT_TRUE(WaitFor([&] { return peer->get_object_status.pending() == 1; }, kWaitMs));
  peer->get_object_status.ReplyNext(absl::UnavailableError("failed to connect to all addresses"));

  ASSERT_EQ(get.wait_for(std::chrono::milliseconds(kWaitMs)), std::future_status::ready) << "Get still waits";
  auto values = get.get();
  ASSERT_TRUE(values.ok()) << values.status() << ": the owner's death is the object's value";
  const ObjectValue& value = (*values)[0];
  ASSERT_NE(value.error, nullptr);
  EXPECT_EQ(value.error->error_type, rpc::OWNER_DIED);
  EXPECT_NE(value.error->error.message().find("died or is unreachable"), std::string::npos) << value.error->error;
  EXPECT_TRUE(absl::IsUnavailable(core_->reference_counter().GetOwnerStatus(id)));

  // A second Get reads the same error without asking the dead owner again.
  auto again = core_->Get({id}, kWaitMs);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_NE((*again)[0].error, nullptr);
  EXPECT_EQ((*again)[0].error->error_type, rpc::OWNER_DIED);
  EXPECT_EQ(peer->get_object_status.total(), 1);
}

// The borrower's side of WaitForRefRemoved: answered once the borrower lets go.
TEST_F(WorkerCoreWorkerTest, ABorrowerAnswersWaitForRefRemovedOnceItDropsItsRef) {
  rpc::Address owner = PeerAddress(4000);
  ObjectID id = Borrow(*core_, owner);
  struct Answer {
    rpc::WaitForRefRemovedReply reply;
    std::promise<absl::Status> sent;
  };
  auto answer = std::make_shared<Answer>();
  std::future<absl::Status> sent = answer->sent.get_future();
  rpc::WaitForRefRemovedRequest request;
  request.mutable_ref()->set_object_id(id.Binary());
  *request.mutable_ref()->mutable_owner_address() = owner;
  request.set_intended_worker_id(self_.worker_id.Binary());
  OnLoop(loop_, [&] {
    core_->HandleWaitForRefRemoved(request, &answer->reply,
                                   [answer](absl::Status s) { answer->sent.set_value(s); });
  });
  EXPECT_EQ(sent.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout) << "answered while held";

  core_->RemoveLocalReference(id);
  ASSERT_EQ(sent.wait_for(std::chrono::milliseconds(kWaitMs)), std::future_status::ready);
  EXPECT_TRUE(sent.get().ok());
  EXPECT_EQ(answer->reply.sub_borrowers_size(), 0);
  EXPECT_FALSE(core_->reference_counter().HasReference(id));
}

}  // namespace
}  // namespace manta::core
