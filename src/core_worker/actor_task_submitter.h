// ActorTaskSubmitter: sends a caller's calls straight to the actors' workers
// (ARCHITECTURE.md §6).
//
// Each actor has a queue of this caller's calls keyed by sequence number (assigned
// in submission order by Enqueue). A call waits in its place until its arguments are
// resolved (Resolved); the resolved calls at the front go to the actor's worker over
// its task channel, many per push, so they arrive and run in sequence order. The
// actor's state comes from the GCS (OnActorState, newest version wins): calls wait
// while it is being created or restarted and go to the new worker once it is ALIVE;
// when it is DEAD every waiting and later call fails with its death cause
// (ACTOR_DIED). With max_concurrency 1 a new push goes only when the previous one
// answered (the calls queued meanwhile travel together); with n > 1 up to n calls are
// kept in flight so the actor's pool (or its async loop) has them all: a call made
// while none is in flight goes at once, those made while some are go together at the
// loop's next turn or with the next reply.
//
// A failed push means the worker died (or the connection broke): its unanswered
// calls are retried while their max_retries allow (they wait for the restarted
// actor), otherwise they fail with ACTOR_DIED naming the actor and, once the GCS has
// said, why it died. The calls not yet sent wait for the GCS to report the actor's
// fate; if it still reports the same worker alive after reconnect_check_ms the
// connection is opened again.
//
// Threading: thread-safe. Enqueue/Resolved run on submitting threads and push from
// there when the actor can take calls (no thread hop before the socket); push
// replies are handled on the thread that read them; `recheck` runs on the loop. One
// absl::Mutex guards the state; the task manager is called after it is released.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "protos/common.pb.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"
#include "src/task_channel/task_channel.h"
#include "src/core_worker/task_manager.h"

namespace manta::core {

struct ActorSubmitterOptions {
  // This caller (every call carries its worker id).
  rpc::Address self;
  int64_t max_tasks_per_push = 1000;
  int64_t max_push_bytes = 256 << 20;
  // After a failed push, how long to wait for the GCS before asking it again.
  int64_t reconnect_check_ms = 1000;
};

class ActorTaskSubmitter {
 public:
  // `recheck(actor_id)` asks the GCS for the actor's state again (its answer comes
  // back through OnActorState); it is posted to the loop.
  ActorTaskSubmitter(EventLoop& loop, ActorSubmitterOptions options, TaskChannelPool& channels,
                     TaskManager& task_manager, std::function<void(const ActorID&)> recheck);
  ~ActorTaskSubmitter();

  // Assigns the call (type ACTOR_TASK) its sequence number and keeps its place in
  // its actor's queue until Resolved or Drop. Any thread.
  void Enqueue(rpc::TaskSpec* spec);
  // The call's arguments are resolved: it is sent in its turn (at once when the
  // actor can take it). Also for a call resubmitted for a retry. Any thread.
  // `packed`, when given, is the call's packed spec, the same as `spec` (packed here
  // otherwise): the call is sent as those bytes, and its task events go to its row.
  void Resolved(const rpc::TaskSpec& spec, PackedTaskPtr packed = nullptr, int64_t now_us = 0);
  // The call will not be sent (it failed before, e.g. an argument failed).
  void Drop(const ActorID& actor_id, uint64_t sequence_number);
  // ray::Cancel of call `sequence_number`: kDequeued when it was waiting here (in
  // its place or for its arguments) and is not any more (the caller fails it);
  // kSent when it may be at the actor's worker now, `*worker` (the caller tells it);
  // kNotFound otherwise (the actor is not alive: the call waits to be retried or
  // failed). Any thread.
  enum class CancelResult { kNotFound, kDequeued, kSent };
  CancelResult Cancel(const ActorID& actor_id, uint64_t sequence_number, rpc::Address* worker);
  // The actor's state as the GCS reports it; older versions are ignored. Any thread.
  void OnActorState(const rpc::ActorTableData& actor);
  // Fails every call not yet sent (shutdown); later calls fail at once.
  void Shutdown();

  // The state last reported for the actor; nullopt before any report.
  std::optional<rpc::ActorTableData::ActorState> StateOf(const ActorID& actor_id) const;
  // Calls queued (not sent) for the actor.
  size_t NumQueued(const ActorID& actor_id) const;

 private:
  struct Actor;
  struct Push;
  // A call in its actor's queue: once resolved, its packed spec, which is what is
  // sent (a push copies its bytes: no spec is serialized under the lock).
  struct QueuedCall {
    PackedTaskPtr packed;
  };
  using Deferred = std::vector<std::function<void()>>;

  Actor& GetActor(const ActorID& actor_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Has the loop Pump the actor's queue at its next turn (once until then).
  void PostFlush(const ActorID& actor_id, Actor& actor) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends the resolved calls at the front of the queue while the actor takes them;
  // `now_us`, when not 0, stamps their task events (as NormalTaskSubmitter::Submit).
  void Pump(const ActorID& actor_id, Actor& actor, Deferred* later, int64_t now_us = 0)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnPushProgress(const std::shared_ptr<Push>& push, const absl::Status& status, const rpc::PushTaskReply& reply);
  // Fails (or retries) the calls lost with a worker, with what is known of why.
  void FailLost(const ActorID& actor_id, Actor& actor, Deferred* later) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailQueued(Actor& actor, const rpc::ErrorInfo& error, Deferred* later) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ScheduleRecheck(const ActorID& actor_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Run(Deferred& later);

  EventLoop& loop_;
  const ActorSubmitterOptions options_;
  TaskChannelPool& channels_;
  TaskManager& task_manager_;
  std::function<void(const ActorID&)> recheck_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<ActorID, std::unique_ptr<Actor>> actors_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace manta::core
