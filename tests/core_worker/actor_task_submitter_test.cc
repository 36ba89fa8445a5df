// ActorTaskSubmitter + TaskManager with fake task channels and actor states fed by
// the test as the GCS would publish them: order, waiting for creation and restarts,
// batching, concurrency, death, lost calls, retries and reconnects. One EventLoop
// driven by the test.
#include "src/core_worker/actor_task_submitter.h"

#include <chrono>
#include <map>
#include <thread>

#include "gtest/gtest.h"
#include "src/core_worker/common.h"
#include "src/task_channel/fake_task_channel.h"
#include "tests/core_worker/noop_borrower_client.h"

namespace manta::core {
namespace {

using Actor = rpc::ActorTableData;

class ActorSubmitterTest : public ::testing::Test {
 protected:
  ActorSubmitterTest()
      : channels_([this](const std::string& key) {
          std::string address = TaskChannelAddress(key);
          auto w = std::make_shared<FakeTaskChannel>(address, loop_);
          channel_by_address_[address] = w.get();
          ++connections_[address];
          return w;
        }),
        self_{NodeID::FromRandom(), "127.0.0.1", 1000, WorkerID::FromRandom()},
        refs_(self_, &borrowers_),
        tasks_(store_, refs_, [this](const PackedTaskPtr& task) { submitter_->Resolved(task->Unpack()); }) {
    ActorSubmitterOptions options;
    options.self = ToRpc(self_);
    options.max_tasks_per_push = 100;
    options.reconnect_check_ms = 1;
    submitter_ = std::make_unique<ActorTaskSubmitter>(loop_, options, channels_, tasks_,
                                                      [this](const ActorID& id) { rechecks_.push_back(id); });
  }

  // Submits a call as the core worker does; `resolve` false keeps it unresolved.
  ObjectID Call(int max_retries = 0, bool resolve = true, rpc::TaskSpec* out = nullptr) {
    TaskID task_id = TaskID::ForActorTask(actor_, TaskID::ForDriver(JobID::FromInt(1)), counter_++);
    rpc::TaskSpec spec;
    spec.set_type(rpc::ACTOR_TASK);
    spec.set_task_id(task_id.Binary());
    spec.set_function_name("Counter::Add");
    spec.set_num_returns(1);
    spec.set_max_retries(max_retries);
    *spec.mutable_caller_address() = ToRpc(self_);
    spec.mutable_actor_task()->set_actor_id(actor_.Binary());
    spec.mutable_actor_task()->set_caller_worker_id(self_.worker_id.Binary());
    submitter_->Enqueue(&spec);
    ObjectID id = ObjectID::FromIndex(task_id, 1);
    refs_.AddOwnedObject(id, self_, {});
    refs_.AddLocalReference(id);
    tasks_.AddPendingTask(PackedTask::Pack(spec), {});
    if (resolve) submitter_->Resolved(spec);
    if (out) *out = spec;
    loop_.RunUntilIdle();
    return id;
  }

  void Report(Actor::ActorState state, int port = 0, int max_concurrency = 1, const std::string& why = "",
              rpc::ErrorType death_type = rpc::ACTOR_DIED) {
    Actor data;
    data.set_actor_id(actor_.Binary());
    data.set_state(state);
    data.set_version(++version_);
    data.set_class_name("Counter");
    data.set_max_concurrency(max_concurrency);
    if (state == Actor::ALIVE) {
      data.mutable_address()->set_ip_address("127.0.0.1");
      data.mutable_address()->set_task_port(port);
      data.mutable_address()->set_worker_id(worker_ids_[port].Binary());
    }
    if (state == Actor::DEAD) {
      data.mutable_death_cause()->set_type(death_type);
      data.mutable_death_cause()->set_message(why);
    }
    last_report_ = data;
    submitter_->OnActorState(data);
    loop_.RunUntilIdle();
  }

  FakeTaskChannel& Channel(int port) { return *channel_by_address_.at("127.0.0.1:" + std::to_string(port)); }
  std::vector<uint64_t> Sequences(const rpc::PushTaskRequest& push) {
    std::vector<uint64_t> out;
    for (const auto& t : push.tasks()) out.push_back(t.actor_task().sequence_number());
    return out;
  }
  StoredObjectPtr Value(const ObjectID& id) { return store_.GetIfExists(id); }

  EventLoop loop_;
  std::map<std::string, FakeTaskChannel*> channel_by_address_;
  std::map<std::string, int> connections_;
  TaskChannelPool channels_;
  Address self_;
  NoopBorrowerClient borrowers_;
  ReferenceCounter refs_;
  MemoryStore store_;
  TaskManager tasks_;
  std::unique_ptr<ActorTaskSubmitter> submitter_;
  ActorID actor_ = ActorID::Of(JobID::FromInt(1), TaskID::ForDriver(JobID::FromInt(1)), 0);
  std::map<int, WorkerID> worker_ids_{{3000, WorkerID::FromRandom()}, {3001, WorkerID::FromRandom()}};
  std::vector<ActorID> rechecks_;
  Actor last_report_;
  int64_t version_ = 0;
  uint64_t counter_ = 0;
};

TEST_F(ActorSubmitterTest, CallsWaitForCreationThenGoInOrder) {
  std::vector<ObjectID> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(Call());
  EXPECT_TRUE(channel_by_address_.empty());  // nowhere to send yet
  Report(Actor::PENDING_CREATION);
  EXPECT_TRUE(channel_by_address_.empty());
  Report(Actor::ALIVE, 3000);
  ASSERT_EQ(Channel(3000).pushes.size(), 1u);
  EXPECT_EQ(Sequences(Channel(3000).pushes[0].request), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(Channel(3000).pushes[0].request.intended_worker_id(), worker_ids_[3000].Binary());
  Channel(3000).ReplyOk();
  loop_.RunUntilIdle();
  for (const ObjectID& id : ids) {
    ASSERT_NE(Value(id), nullptr);
    EXPECT_EQ(Value(id)->data, "ok");
  }
  EXPECT_EQ(tasks_.NumPending(), 0u);
  EXPECT_EQ(tasks_.NumLineage(), 0u);  // actor calls are never run again for lineage
}

TEST_F(ActorSubmitterTest, ALoneCallGoesAtOnceAndCallsMadeMeanwhileTravelTogether) {
  Report(Actor::ALIVE, 3000);
  Call();
  ASSERT_EQ(Channel(3000).pushes.size(), 1u);
  for (int i = 0; i < 5; ++i) Call();
  EXPECT_EQ(Channel(3000).pushes.size(), 1u);  // one at a time for max_concurrency 1
  Channel(3000).ReplyOk();
  loop_.RunUntilIdle();
  ASSERT_EQ(Channel(3000).pushes.size(), 1u);
  EXPECT_EQ(Sequences(Channel(3000).pushes[0].request), (std::vector<uint64_t>{2, 3, 4, 5, 6}));
}

TEST_F(ActorSubmitterTest, AnUnresolvedCallHoldsBackTheCallsAfterIt) {
  Report(Actor::ALIVE, 3000);
  rpc::TaskSpec first;
  Call(0, /*resolve=*/false, &first);
  Call();
  Call();
  EXPECT_TRUE(Channel(3000).pushes.empty() || Channel(3000).pushes.size() == 0);
  submitter_->Resolved(first);
  loop_.RunUntilIdle();
  ASSERT_EQ(Channel(3000).pushes.size(), 1u);
  EXPECT_EQ(Sequences(Channel(3000).pushes[0].request), (std::vector<uint64_t>{1, 2, 3}));
  // A call dropped before it was sent does not block the rest.
  Channel(3000).ReplyOk();
  loop_.RunUntilIdle();
  rpc::TaskSpec dropped;
  Call(0, false, &dropped);
  Call();
  submitter_->Drop(actor_, dropped.actor_task().sequence_number());
  loop_.RunUntilIdle();
  ASSERT_EQ(Channel(3000).pushes.size(), 1u);
  EXPECT_EQ(Sequences(Channel(3000).pushes[0].request), (std::vector<uint64_t>{5}));
}

TEST_F(ActorSubmitterTest, AConcurrentActorGetsUpToItsConcurrencyInFlight) {
  Report(Actor::ALIVE, 3000, /*max_concurrency=*/3);
  for (int i = 0; i < 5; ++i) Call();
  // Three separate pushes go at once; the last two wait for room.
  ASSERT_EQ(Channel(3000).pushes.size(), 3u);
  Channel(3000).ReplyOk();
  loop_.RunUntilIdle();
  EXPECT_EQ(Channel(3000).pushes.size(), 3u);
  EXPECT_EQ(Sequences(Channel(3000).pushes.back().request), (std::vector<uint64_t>{4, 5}));
}

TEST_F(ActorSubmitterTest, ADeadActorFailsQueuedAndLaterCallsWithItsCause) {
  ObjectID queued = Call();
  Report(Actor::DEAD, 0, 1, "actor x (Counter) is dead: killed by ray::ActorHandle::Kill()");
  ObjectID later = Call();
  for (const ObjectID& id : {queued, later}) {
    ASSERT_NE(Value(id), nullptr);
    EXPECT_EQ(Value(id)->error_type, rpc::ACTOR_DIED);
    EXPECT_NE(Value(id)->error.message().find("Kill()"), std::string::npos) << Value(id)->error;
  }
  EXPECT_EQ(tasks_.NumPending(), 0u);
  // An older report arriving late changes nothing.
  Actor stale = last_report_;
  stale.set_state(Actor::ALIVE);
  stale.set_version(1);
  submitter_->OnActorState(stale);
  EXPECT_EQ(submitter_->StateOf(actor_), Actor::DEAD);
}

TEST_F(ActorSubmitterTest, AnActorWhoseRuntimeEnvFailedFailsItsCallsAsARuntimeEnvError) {
  ObjectID queued = Call();
  Report(Actor::DEAD, 0, 1, "actor x is dead: its runtime_env cannot be applied: /missing", rpc::RUNTIME_ENV_SETUP_FAILED);
  ObjectID later = Call();
  for (const ObjectID& id : {queued, later}) {
    ASSERT_NE(Value(id), nullptr);
    EXPECT_EQ(Value(id)->error_type, rpc::RUNTIME_ENV_SETUP_FAILED);
    EXPECT_NE(Value(id)->error.message().find("/missing"), std::string::npos) << Value(id)->error;
  }
}

TEST_F(ActorSubmitterTest, CallsInFlightAtADeathFailAndLaterOnesGoToTheRestartedActor) {
  Report(Actor::ALIVE, 3000);
  ObjectID running = Call();
  ObjectID waiting = Call();
  Channel(3000).Fail();  // the worker died
  loop_.RunUntilIdle();
  EXPECT_EQ(Value(running), nullptr);  // failed once the GCS says why
  EXPECT_EQ(Value(waiting), nullptr);
  Report(Actor::RESTARTING);
  ASSERT_NE(Value(running), nullptr);
  EXPECT_EQ(Value(running)->error_type, rpc::ACTOR_DIED);
  EXPECT_NE(Value(running)->error.message().find("restarted"), std::string::npos) << Value(running)->error;
  EXPECT_EQ(Value(waiting), nullptr);  // still queued
  Report(Actor::ALIVE, 3001);
  ASSERT_EQ(Channel(3001).pushes.size(), 1u);
  EXPECT_EQ(Sequences(Channel(3001).pushes[0].request), (std::vector<uint64_t>{2}));
  Channel(3001).ReplyOk();
  loop_.RunUntilIdle();
  ASSERT_NE(Value(waiting), nullptr);
  EXPECT_EQ(Value(waiting)->data, "ok");
}

TEST_F(ActorSubmitterTest, ACallWithRetriesIsSentAgainToTheRestartedActor) {
  Report(Actor::ALIVE, 3000);
  ObjectID id = Call(/*max_retries=*/1);
  Channel(3000).Fail();
  loop_.RunUntilIdle();
  Report(Actor::RESTARTING);
  EXPECT_EQ(Value(id), nullptr);
  Report(Actor::ALIVE, 3001);
  ASSERT_EQ(Channel(3001).pushes.size(), 1u);
  EXPECT_EQ(Channel(3001).pushes[0].request.tasks(0).attempt_number(), 1);
  Channel(3001).ReplyOk();
  loop_.RunUntilIdle();
  ASSERT_NE(Value(id), nullptr);
  EXPECT_EQ(Value(id)->data, "ok");
}

TEST_F(ActorSubmitterTest, CallsInFlightWhenTheActorIsKilledCarryTheDeathCause) {
  Report(Actor::ALIVE, 3000);
  ObjectID id = Call();
  Report(Actor::DEAD, 0, 1, "actor y is dead: the actor called ray::ExitActor()");
  Channel(3000).Fail();
  loop_.RunUntilIdle();
  ASSERT_NE(Value(id), nullptr);
  EXPECT_EQ(Value(id)->error_type, rpc::ACTOR_DIED);
  EXPECT_NE(Value(id)->error.message().find("ExitActor"), std::string::npos) << Value(id)->error;
}

TEST_F(ActorSubmitterTest, ABrokenConnectionToALiveActorIsReopenedAfterAskingTheGcs) {
  Report(Actor::ALIVE, 3000);
  ObjectID lost = Call();
  ObjectID waiting = Call();
  Channel(3000).Fail();
  loop_.RunUntilIdle();
  for (int i = 0; i < 200 && rechecks_.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    loop_.RunUntilIdle();
  }
  ASSERT_EQ(rechecks_.size(), 1u);
  // The GCS still reports the same worker alive: reconnect and go on.
  Actor same = last_report_;
  submitter_->OnActorState(same);
  loop_.RunUntilIdle();
  EXPECT_EQ(connections_["127.0.0.1:3000"], 2);
  ASSERT_NE(Value(lost), nullptr);
  EXPECT_NE(Value(lost)->error.message().find("connection"), std::string::npos) << Value(lost)->error;
  ASSERT_EQ(Channel(3000).pushes.size(), 1u);
  Channel(3000).ReplyOk();
  loop_.RunUntilIdle();
  ASSERT_NE(Value(waiting), nullptr);
  EXPECT_EQ(Value(waiting)->data, "ok");
}

TEST_F(ActorSubmitterTest, AWorkerRefusedForItsProtectionFailsTheCallsWithoutWaitingForTheGcs) {
  Report(Actor::ALIVE, 3000);
  ObjectID refused = Call(/*max_retries=*/3);
  Channel(3000).Fail(absl::FailedPreconditionError("the worker protects its task channel with 'mac', weaker"));
  loop_.RunUntilIdle();
  ASSERT_NE(Value(refused), nullptr);
  EXPECT_EQ(Value(refused)->error_type, rpc::TASK_CHANNEL_REFUSED);
  EXPECT_NE(Value(refused)->error.message().find("weaker"), std::string::npos) << Value(refused)->error;
  EXPECT_TRUE(rechecks_.empty());  // the actor is fine: nothing to ask the GCS
  // A later call tries a new channel (and fails the same way here).
  ObjectID later = Call();
  EXPECT_EQ(connections_["127.0.0.1:3000"], 2);
  Channel(3000).Fail(absl::FailedPreconditionError("weaker"));
  loop_.RunUntilIdle();
  ASSERT_NE(Value(later), nullptr);
  EXPECT_EQ(Value(later)->error_type, rpc::TASK_CHANNEL_REFUSED);
}

TEST_F(ActorSubmitterTest, ShutdownFailsWaitingCalls) {
  ObjectID id = Call();
  submitter_->Shutdown();
  loop_.RunUntilIdle();
  ASSERT_NE(Value(id), nullptr);
  EXPECT_EQ(Value(id)->error_type, rpc::TASK_CANCELLED);
  ObjectID late = Call();
  ASSERT_NE(Value(late), nullptr);
  EXPECT_EQ(Value(late)->error_type, rpc::TASK_CANCELLED);
}

}  // namespace
}  // namespace manta::core
