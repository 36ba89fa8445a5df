#include "src/core_worker/actor_task_submitter.h"

#include <glog/logging.h>

#include <algorithm>

#include "src/core_worker/common.h"
#include "src/core_worker/push_batch.h"

namespace manta::core {

struct ActorTaskSubmitter::Actor {
  bool known = false;  // the GCS has reported a state
  rpc::ActorTableData::ActorState state = rpc::ActorTableData::DEPENDENCIES_UNREADY;
  int64_t version = -1;
  std::string describe;
  int32_t max_concurrency = 1;
  rpc::ErrorInfo death_cause;
  // The incarnation calls go to, while ALIVE.
  std::string worker_id;
  rpc::Address address;
  TaskExecutorInfo executor;  // its ids, parsed once (task events)
  std::shared_ptr<TaskChannelInterface> channel;
  // A push to this incarnation failed: nothing is sent until the GCS says more.
  bool broken = false;
  bool recheck_pending = false;
  uint64_t next_sequence = 1;
  // This caller's calls not sent yet, by sequence number; empty until resolved.
  std::map<uint64_t, QueuedCall> queue;
  int64_t in_flight = 0;  // calls sent to the current incarnation, unanswered
  bool flush_posted = false;  // a concurrent actor's calls wait for the loop's Flush
  struct Lost {
    TaskID task_id;
    int attempt;
    std::string connection_error;
  };
  // Calls whose worker went away while they ran; failed (or retried) once the GCS
  // has said what became of the actor.
  std::vector<Lost> lost;
};

struct ActorTaskSubmitter::Push {
  ActorID actor_id;
  std::string worker_id;  // the incarnation it went to
  std::shared_ptr<PushProgress> progress;
  TaskExecutorInfo executor;  // the same (task events)
};

ActorTaskSubmitter::ActorTaskSubmitter(EventLoop& loop, ActorSubmitterOptions options, TaskChannelPool& channels,
                                       TaskManager& task_manager, std::function<void(const ActorID&)> recheck)
    : loop_(loop), options_(std::move(options)), channels_(channels), task_manager_(task_manager),
      recheck_(std::move(recheck)) {}

ActorTaskSubmitter::~ActorTaskSubmitter() { *alive_ = false; }

void ActorTaskSubmitter::Run(Deferred& later) {
  for (auto& fn : later) fn();
  later.clear();
}

ActorTaskSubmitter::Actor& ActorTaskSubmitter::GetActor(const ActorID& actor_id) {
  std::unique_ptr<Actor>& slot = actors_[actor_id];
  if (!slot) {
    slot = std::make_unique<Actor>();
    slot->describe = "actor " + actor_id.Hex();
  }
  return *slot;
}

void ActorTaskSubmitter::Enqueue(rpc::TaskSpec* spec) {
  ActorID actor_id = ActorID::FromBinary(spec->actor_task().actor_id());
  absl::MutexLock lock(&mu_);
  Actor& actor = GetActor(actor_id);
  const uint64_t sequence = actor.next_sequence++;
  spec->mutable_actor_task()->set_sequence_number(sequence);
  actor.queue.emplace(sequence, QueuedCall());
}

void ActorTaskSubmitter::Resolved(const rpc::TaskSpec& spec, PackedTaskPtr packed, int64_t now_us) {
  if (!packed) packed = PackedTask::Pack(spec);
  ActorID actor_id = ActorID::FromBinary(spec.actor_task().actor_id());
  const uint64_t sequence = spec.actor_task().sequence_number();
  Deferred later;
  {
    absl::MutexLock lock(&mu_);
    Actor& actor = GetActor(actor_id);
    std::optional<rpc::ErrorInfo> error;
    if (shutting_down_) {
      error.emplace();
      error->set_type(rpc::TASK_CANCELLED);
      error->set_message("the calling process is shutting down");
    } else if (actor.known && actor.state == rpc::ActorTableData::DEAD) {
      error = actor.death_cause;
    }
    if (error) {
      actor.queue.erase(sequence);
      TaskID task_id = TaskID::FromBinary(spec.task_id());
      later.push_back([this, task_id, error = *error] { task_manager_.FailTask(task_id, error); });
      Pump(actor_id, actor, &later);
    } else {
      actor.queue[sequence] = QueuedCall{std::move(packed)};
      if (actor.max_concurrency > 1 && actor.in_flight > 0) {
        // Calls of a concurrent actor come in bursts: those made while others are in
        // flight go together from the loop's next turn (or with the next reply), one
        // frame for many rather than one each. Never held longer than that turn, so
        // a call another one awaits is not kept back.
        PostFlush(actor_id, actor);
      } else {
        Pump(actor_id, actor, &later, now_us);
      }
    }
  }
  Run(later);
}

void ActorTaskSubmitter::Drop(const ActorID& actor_id, uint64_t sequence_number) {
  Deferred later;
  {
    absl::MutexLock lock(&mu_);
    Actor& actor = GetActor(actor_id);
    actor.queue.erase(sequence_number);
    Pump(actor_id, actor, &later);
  }
  Run(later);
}

ActorTaskSubmitter::CancelResult ActorTaskSubmitter::Cancel(const ActorID& actor_id, uint64_t sequence_number,
                                                            rpc::Address* worker) {
  Deferred later;
  CancelResult result = CancelResult::kNotFound;
  {
    absl::MutexLock lock(&mu_);
    Actor& actor = GetActor(actor_id);
    if (actor.queue.erase(sequence_number) > 0) {
      result = CancelResult::kDequeued;
      Pump(actor_id, actor, &later);
    } else if (actor.known && actor.state == rpc::ActorTableData::ALIVE && !actor.broken && actor.channel) {
      *worker = actor.address;
      result = CancelResult::kSent;
    }
  }
  Run(later);
  return result;
}

void ActorTaskSubmitter::PostFlush(const ActorID& actor_id, Actor& actor) {
  if (actor.flush_posted) return;
  actor.flush_posted = true;
  std::weak_ptr<bool> alive = alive_;
  loop_.Post("ActorTaskSubmitter.Flush", [this, alive, actor_id] {
    if (alive.expired()) return;
    Deferred later;
    {
      absl::MutexLock lock(&mu_);
      Actor& actor = GetActor(actor_id);
      actor.flush_posted = false;
      Pump(actor_id, actor, &later);
    }
    Run(later);
  });
}

void ActorTaskSubmitter::Pump(const ActorID& actor_id, Actor& actor, Deferred* later, int64_t now_us) {
  if (!actor.known || actor.state != rpc::ActorTableData::ALIVE || actor.broken || !actor.channel) return;
  const int64_t limit = std::max<int32_t>(1, actor.max_concurrency);
  bool queued = false;
  while (actor.in_flight < limit && !actor.queue.empty() && actor.queue.begin()->second.packed) {
    PushBatch batch(actor.worker_id, options_.max_tasks_per_push, options_.max_push_bytes);
    TaskEventBuffer* events = task_manager_.task_events();
    SentStamps stamps(events, now_us);
    while (!actor.queue.empty() && actor.queue.begin()->second.packed) {
      const PackedTaskPtr& packed = actor.queue.begin()->second.packed;
      // An actor call's spec names its caller already.
      PushBatch::Added added = batch.TryAddPacked(*packed, /*caller_field=*/{});
      if (added == PushBatch::Added::kFull) break;
      if (added == PushBatch::Added::kAdded) stamps.Add(packed);
      if (added == PushBatch::Added::kTooBig) {
        later->push_back([this, packed, describe = actor.describe] {
          task_manager_.FailTask(packed->task_id(),
                                 TooBigForAPush(static_cast<int64_t>(packed->bytes().size()),
                                                "call " + packed->function_name() + " of " + describe,
                                                options_.max_push_bytes));
        });
      }
      actor.queue.erase(actor.queue.begin());
    }
    stamps.Finish(later);
    if (batch.empty()) continue;
    auto push = std::make_shared<Push>(Push{actor_id, actor.worker_id, batch.progress(), {}});
    if (events != nullptr) push->executor = actor.executor;
    actor.in_flight += batch.size();
    std::weak_ptr<bool> alive = alive_;
    // Queued in order here, written once the lock is let go (the Flush below).
    queued = true;
    actor.channel->QueuePush(batch.TakeRequest(), [this, alive, push](const absl::Status& status,
                                                                      rpc::PushTaskReply&& reply) {
      if (alive.expired()) return;
      if (status.ok()) {
        push->executor.pid = reply.worker_pid();
        if (reply.stream_items_size() > 0) task_manager_.HandleStreamItems(reply.stream_items());
        task_manager_.CompletePendingTasks(reply.results(), &push->executor);
      }
      OnPushProgress(push, status, reply);
    });
  }
  if (queued) later->push_back([channel = actor.channel] { channel->Flush(); });
}

void ActorTaskSubmitter::OnPushProgress(const std::shared_ptr<Push>& push, const absl::Status& status,
                                        const rpc::PushTaskReply& reply) {
  Deferred later;
  {
    absl::MutexLock lock(&mu_);
    Actor& actor = GetActor(push->actor_id);
    const bool current = push->worker_id == actor.worker_id && !actor.broken;
    if (status.ok()) {
      std::vector<PushProgress::Task> without_result;
      const int64_t n = push->progress->OnReply(reply, &without_result);
      if (current) actor.in_flight -= n + static_cast<int64_t>(without_result.size());
      // Every result comes before the last reply: a call still pending got none.
      for (const PushProgress::Task& task : without_result) {
        later.push_back([this, task, describe = actor.describe] {
          task_manager_.RetryOrFailTask(task.task_id, task.attempt, rpc::ACTOR_DIED,
                                        describe + " answered without the call's result");
        });
      }
    } else if (absl::IsFailedPrecondition(status)) {
      // This owner refuses the worker's protection: the calls fail, and so will the
      // next ones (each tries a new channel), whatever becomes of the actor.
      rpc::ErrorInfo error;
      error.set_type(rpc::TASK_CHANNEL_REFUSED);
      error.set_message("cannot call " + actor.describe + ": " + std::string(status.message()));
      for (const PushProgress::Task& task : push->progress->TakeUnanswered()) {
        later.push_back([this, task_id = task.task_id, error] { task_manager_.FailTask(task_id, error); });
      }
      FailQueued(actor, error, &later);
      if (current) {
        actor.in_flight = 0;
        if (actor.channel) actor.channel->Close(status);
        channels_.Disconnect(TaskChannelKey(actor.address));
        actor.channel = ChannelTo(channels_, actor.address);
      }
    } else {
      for (const PushProgress::Task& task : push->progress->TakeUnanswered()) {
        actor.lost.push_back({task.task_id, task.attempt, std::string(status.message())});
      }
      if (current) {
        LOG(WARNING) << "calls to " << actor.describe << " failed: " << status
                     << "; waiting for the GCS to report what became of it";
        actor.broken = true;
        actor.in_flight = 0;
        if (actor.channel) actor.channel->Close(status);
        channels_.Disconnect(TaskChannelKey(actor.address));
        actor.channel = nullptr;
        ScheduleRecheck(push->actor_id);
      }
      // Known already: the actor is dead or runs in another worker now.
      if (!current || actor.state == rpc::ActorTableData::DEAD) FailLost(push->actor_id, actor, &later);
    }
    Pump(push->actor_id, actor, &later);
  }
  Run(later);
}

void ActorTaskSubmitter::FailLost(const ActorID& actor_id, Actor& actor, Deferred* later) {
  for (const Actor::Lost& lost : actor.lost) {
    std::string message;
    if (actor.state == rpc::ActorTableData::DEAD) {
      message = actor.death_cause.message() + " (the call was running: " + lost.connection_error + ")";
    } else if (actor.state == rpc::ActorTableData::ALIVE && !actor.broken) {
      message = actor.describe + ": the connection to its worker broke while the call ran (" +
                lost.connection_error + ")";
    } else {
      message = actor.describe + " died while running the call and is being restarted (" + lost.connection_error +
                ")";
    }
    later->push_back([this, task_id = lost.task_id, attempt = lost.attempt, message] {
      task_manager_.RetryOrFailTask(task_id, attempt, rpc::ACTOR_DIED, message);
    });
  }
  actor.lost.clear();
}

void ActorTaskSubmitter::FailQueued(Actor& actor, const rpc::ErrorInfo& error, Deferred* later) {
  for (auto it = actor.queue.begin(); it != actor.queue.end();) {
    if (!it->second.packed) {  // failed when it is resolved
      ++it;
      continue;
    }
    TaskID task_id = it->second.packed->task_id();
    later->push_back([this, task_id, error] { task_manager_.FailTask(task_id, error); });
    it = actor.queue.erase(it);
  }
}

void ActorTaskSubmitter::ScheduleRecheck(const ActorID& actor_id) {
  Actor& actor = GetActor(actor_id);
  if (actor.recheck_pending) return;
  actor.recheck_pending = true;
  std::weak_ptr<bool> alive = alive_;
  loop_.PostAfter("ActorTaskSubmitter.Recheck", options_.reconnect_check_ms, [this, alive, actor_id] {
    if (alive.expired()) return;
    {
      absl::MutexLock lock(&mu_);
      Actor& actor = GetActor(actor_id);
      actor.recheck_pending = false;
      if (!actor.broken) return;  // the GCS has spoken meanwhile
    }
    recheck_(actor_id);
  });
}

void ActorTaskSubmitter::OnActorState(const rpc::ActorTableData& data) {
  auto actor_id = ActorID::FromBinaryChecked(data.actor_id());
  if (!actor_id.ok()) return;
  Deferred later;
  {
    absl::MutexLock lock(&mu_);
    Actor& actor = GetActor(*actor_id);
    const bool alive = data.state() == rpc::ActorTableData::ALIVE;
    if (actor.known && data.version() < actor.version) return;
    // The same report again only matters to reopen a broken connection.
    if (actor.known && data.version() == actor.version && !(actor.broken && alive)) return;
    actor.known = true;
    actor.version = data.version();
    actor.state = data.state();
    actor.max_concurrency = std::max(1, data.max_concurrency());
    actor.describe = "actor " + actor_id->Hex();
    if (!data.class_name().empty()) actor.describe += " (" + data.class_name() + ")";
    if (!data.name().empty()) actor.describe += " named '" + data.name() + "'";
    const bool new_incarnation = alive && data.address().worker_id() != actor.worker_id;
    if ((!alive || new_incarnation) && actor.channel) {
      // The worker the channel leads to is gone: calls still in flight there cannot
      // be answered (its connection may never break, as across a partition).
      actor.channel->Close(absl::UnavailableError(actor.describe + " left the worker it ran in (now " +
                                                  rpc::ActorTableData::ActorState_Name(data.state()) + ")"));
      channels_.Disconnect(TaskChannelKey(actor.address));
      actor.channel = nullptr;
    }
    if (alive && (new_incarnation || actor.broken || !actor.channel)) {
      actor.worker_id = data.address().worker_id();
      actor.address = data.address();
      actor.executor = ExecutorOf(actor.address);
      actor.channel = ChannelTo(channels_, actor.address);
      actor.broken = false;
      actor.in_flight = 0;
    } else if (!alive) {
      actor.worker_id.clear();  // pushes still in flight belong to no current incarnation
      actor.broken = false;
      actor.in_flight = 0;
    }
    if (data.state() == rpc::ActorTableData::DEAD) {
      actor.death_cause = data.death_cause();
      // Calls fail as the actor did: RayActorException, or RayRuntimeEnvException when
      // its runtime env could not be applied.
      if (actor.death_cause.type() != rpc::RUNTIME_ENV_SETUP_FAILED) actor.death_cause.set_type(rpc::ACTOR_DIED);
      if (actor.death_cause.message().empty()) actor.death_cause.set_message(actor.describe + " is dead");
      FailQueued(actor, actor.death_cause, &later);
    }
    FailLost(*actor_id, actor, &later);
    Pump(*actor_id, actor, &later);
  }
  Run(later);
}

void ActorTaskSubmitter::Shutdown() {
  Deferred later;
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    rpc::ErrorInfo error;
    error.set_type(rpc::TASK_CANCELLED);
    error.set_message("the calling process is shutting down");
    for (auto& [id, actor] : actors_) {
      FailQueued(*actor, error, &later);
      for (const Actor::Lost& lost : actor->lost) {
        later.push_back([this, task_id = lost.task_id, error] { task_manager_.FailTask(task_id, error); });
      }
      actor->lost.clear();
    }
  }
  Run(later);
}

std::optional<rpc::ActorTableData::ActorState> ActorTaskSubmitter::StateOf(const ActorID& actor_id) const {
  absl::MutexLock lock(&mu_);
  auto it = actors_.find(actor_id);
  if (it == actors_.end() || !it->second->known) return std::nullopt;
  return it->second->state;
}

size_t ActorTaskSubmitter::NumQueued(const ActorID& actor_id) const {
  absl::MutexLock lock(&mu_);
  auto it = actors_.find(actor_id);
  return it == actors_.end() ? 0 : it->second->queue.size();
}

}  // namespace manta::core
