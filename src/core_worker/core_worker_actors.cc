// CoreWorker, actors (ARCHITECTURE.md §6): creating them through the GCS, following
// their state, calling them, killing and finding them; and, in the actor's own
// worker, running its calls in order or on a pool. Split from core_worker.cc to keep
// files small.
#include <glog/logging.h>
#include <unistd.h>

#include <chrono>
#include <limits>

#include "src/common/status_util.h"
#include "src/core_worker/common.h"
#include "src/core_worker/core_worker.h"
#include "src/gcs/gcs_client.h"
#include "src/gcs/gcs_subscriber.h"
#include "src/common/task_resources.h"

namespace manta::core {

// ---------------------------------------------------------------------------
// Caller side

absl::StatusOr<CreatedActor> CoreWorker::CreateActor(const std::string& factory_name, std::vector<TaskArgInput> args,
                                                     const ActorCreationOptions& options) {
  TaskID parent = CurrentTaskId();
  ActorID actor_id = ActorID::Of(options_.job_id, parent, NextTaskIndex());
  TaskID task_id = TaskID::ForActorCreationTask(actor_id);
  rpc::TaskSpec spec = NewTaskSpec(rpc::ACTOR_CREATION_TASK, task_id, parent, factory_name);
  spec.set_name(options.class_name);
  for (const auto& [resource, quantity] : options.resources) SetRequiredResource(&spec, resource, quantity);
  if (!options.runtime_env.empty()) spec.set_runtime_env(options.runtime_env);
  SetPlacement(&spec, options.placement);
  rpc::ActorCreationSpec* creation = spec.mutable_actor_creation();
  creation->set_actor_id(actor_id.Binary());
  creation->set_max_restarts(options.max_restarts);
  creation->set_max_concurrency(std::max(1, options.max_concurrency));
  creation->set_name(options.name);
  creation->set_ray_namespace(options.ray_namespace.empty() ? ray_namespace() : options.ray_namespace);
  creation->set_detached(options.detached);
  creation->set_class_name(options.class_name);
  std::vector<ObjectID> arg_ids;
  MANTA_RETURN_IF_ERROR(AddArgs(&spec, args, &arg_ids));

  // The object every handle of the actor holds a reference on: when none is left
  // anywhere, the actor is out of scope.
  const ObjectID handle = ObjectID::FromIndex(task_id, 1);
  reference_counter_->AddOwnedObject(handle, self_, {}, 0, /*pending=*/false);
  reference_counter_->AddLocalReference(handle);
  auto value = std::make_shared<StoredObject>();
  value->data = actor_id.Binary();
  memory_store_.Put(handle, std::move(value));
  reference_counter_->UpdateSubmittedTaskReferences(arg_ids);
  {
    absl::MutexLock lock(&actors_mu_);
    handle_objects_[handle] = actor_id;
    creation_args_[actor_id] = arg_ids;
  }
  actors_->Reserve(actor_id);

  rpc::RegisterActorRequest request;
  *request.mutable_creation_spec() = spec;
  auto register_actor = [this, request, spec, actor_id](std::function<void(absl::Status)> done) {
    gcs_.AsyncRegisterActor(request, [this, spec, actor_id, done](const absl::Status& s, rpc::RegisterActorReply&&) {
      if (s.ok()) {
        actors_->Subscribe(actor_id);
        ResolveAndSubmit(spec, PackedTask::Pack(spec), SubmitTime(task_events_));
      }
      done(s);
    });
  };
  // Registered before any handle exists: a process that gets a handle can always ask
  // the GCS about the actor, and a name already taken fails this call.
  absl::Status s = RunOnLoopAndWait(loop_, register_actor, options_.config.grpc_client_deadline_ms);
  if (!s.ok()) {
    {
      absl::MutexLock lock(&actors_mu_);
      handle_objects_.erase(handle);
      creation_args_.erase(actor_id);
    }
    actors_->Forget(actor_id);
    reference_counter_->UpdateFinishedTaskReferences(arg_ids, {});
    reference_counter_->RemoveLocalReference(handle);
    if (s.code() == absl::StatusCode::kAlreadyExists) return s;
    return absl::Status(s.code(), "registering actor " + actor_id.Hex() + " with the GCS: " + std::string(s.message()));
  }
  return CreatedActor{actor_id, handle};
}

void CoreWorker::SendCreateActor(const rpc::TaskSpec& spec) {
  rpc::CreateActorRequest request;
  *request.mutable_creation_spec() = spec;
  ActorID actor_id = ActorID::FromBinary(spec.actor_creation().actor_id());
  loop_.Post("CoreWorker.CreateActor", [this, request, actor_id] {
    gcs_.AsyncCreateActor(request, [this, actor_id](const absl::Status& s, rpc::CreateActorReply&&) {
      if (!s.ok()) OnActorState(DeadActorState(actor_id, "the GCS could not create it: " + std::string(s.message())));
    });
  });
}

void CoreWorker::FailActorCreation(const ActorID& actor_id, const std::string& why) {
  rpc::KillActorRequest request;
  request.set_actor_id(actor_id.Binary());
  request.set_no_restart(true);
  request.set_reason(why);
  loop_.Post("CoreWorker.FailActorCreation", [this, request, actor_id, why] {
    gcs_.AsyncKillActor(request, [this, actor_id, why](const absl::Status& s, rpc::KillActorReply&&) {
      if (!s.ok()) OnActorState(DeadActorState(actor_id, why));
    });
  });
}

void CoreWorker::OnActorState(const rpc::ActorTableData& actor) {
  actor_submitter_->OnActorState(actor);
  if (actor.state() != rpc::ActorTableData::DEAD) return;
  auto actor_id = ActorID::FromBinaryChecked(actor.actor_id());
  if (!actor_id.ok()) return;
  std::vector<ObjectID> args;
  {
    absl::MutexLock lock(&actors_mu_);
    auto it = creation_args_.find(*actor_id);
    if (it == creation_args_.end()) return;
    args = std::move(it->second);
    creation_args_.erase(it);
  }
  // No restart will need the factory's arguments any more.
  reference_counter_->UpdateFinishedTaskReferences(args, {});
}

absl::StatusOr<ObjectID> CoreWorker::SubmitActorTask(const ActorID& actor_id, const std::string& method_name,
                                                     std::vector<TaskArgInput> args, const std::string& name,
                                                     int max_retries, const std::optional<ObjectID>& handle_object,
                                                     const StreamOptions& stream) {
  actors_->Follow(actor_id);
  TaskID parent = CurrentTaskId();
  TaskID task_id = TaskID::ForActorTask(actor_id, parent, NextTaskIndex());
  rpc::TaskSpec spec = NewTaskSpec(rpc::ACTOR_TASK, task_id, parent, method_name);
  spec.set_max_retries(std::max(0, max_retries));
  spec.set_name(name);
  spec.mutable_actor_task()->set_actor_id(actor_id.Binary());
  spec.mutable_actor_task()->set_caller_worker_id(options_.worker_id.Binary());
  spec.set_streaming(stream.streaming);
  spec.set_backpressure_num_objects(stream.backpressure_num_objects);
  std::vector<ObjectID> arg_ids;
  MANTA_RETURN_IF_ERROR(AddArgs(&spec, args, &arg_ids));
  // The caller's handle stays counted while the call is pending: the actor is not
  // out of scope before its calls are done.
  if (handle_object && reference_counter_->HasReference(*handle_object)) arg_ids.push_back(*handle_object);
  actor_submitter_->Enqueue(&spec);  // its place in the actor's order, before it can run
  return SubmitOwnedTask(std::move(spec), std::move(arg_ids));
}

absl::Status CoreWorker::KillActor(const ActorID& actor_id, bool no_restart) {
  rpc::KillActorRequest request;
  request.set_actor_id(actor_id.Binary());
  request.set_no_restart(no_restart);
  request.set_reason(no_restart ? "killed by ray::ActorHandle::Kill()"
                                : "killed by ray::ActorHandle::Kill(/*no_restart=*/false)");
  return RunOnLoopAndWait(
      loop_, [this, request](std::function<void(absl::Status)> done) {
        gcs_.AsyncKillActor(request, [this, done](const absl::Status& s, rpc::KillActorReply&& reply) {
          // Calls made after Kill returns wait for the restart (or fail) at once.
          if (s.ok() && reply.has_actor()) OnActorState(reply.actor());
          done(s);
        });
      },
      options_.config.grpc_client_deadline_ms);
}

absl::StatusOr<std::optional<rpc::ActorTableData>> CoreWorker::GetNamedActor(const std::string& name,
                                                                             const std::string& ray_namespace) {
  const std::string ns = ray_namespace.empty() ? this->ray_namespace() : ray_namespace;
  auto reply = CallOnLoop<rpc::GetNamedActorInfoReply>(
      loop_, [this, name, ns](auto callback) { gcs_.AsyncGetNamedActorInfo(name, ns, std::move(callback)); },
      options_.config.grpc_client_deadline_ms);
  if (!reply.ok()) return reply.status();
  std::optional<rpc::ActorTableData> found;
  if (reply->found()) found = std::move(*reply->mutable_actor());
  if (found) {
    ActorID actor_id = ActorID::FromBinary(found->actor_id());
    actors_->Follow(actor_id);
    actor_submitter_->OnActorState(*found);
  }
  return found;
}

std::optional<rpc::ActorTableData::ActorState> CoreWorker::ActorState(const ActorID& actor_id) const {
  return actor_submitter_->StateOf(actor_id);
}

// ---------------------------------------------------------------------------
// The actor's worker

ActorID CoreWorker::CurrentActorId() const {
  absl::MutexLock lock(&actors_mu_);
  return actor_id_;
}

bool CoreWorker::WasCurrentActorRestarted() const {
  absl::MutexLock lock(&actors_mu_);
  return actor_restarted_;
}

void CoreWorker::BeginActorCreation(const rpc::TaskSpec& spec) {
  const rpc::ActorCreationSpec& creation = spec.actor_creation();
  // Before the factory runs: it may ask whether this is a restart.
  absl::MutexLock lock(&actors_mu_);
  actor_id_ = ActorID::FromBinary(creation.actor_id());
  actor_restarted_ = creation.num_restarts() > 0;
}

void CoreWorker::OnActorCreated(const rpc::TaskSpec& spec) {
  const rpc::ActorCreationSpec& creation = spec.actor_creation();
  call_order_.Reset();
  if (created_async_actor_) {
    // Its calls resume on the execution thread, woken from waiting for pushes.
    auto loop = std::make_unique<AsyncActorLoop>(creation.max_concurrency(), [this] { channel_server_->Wake(); });
    absl::MutexLock lock(&exec_mu_);
    async_loop_ = std::move(loop);
  } else if (creation.max_concurrency() > 1) {
    auto pool = std::make_unique<ActorThreadPool>(creation.max_concurrency());
    absl::MutexLock lock(&exec_mu_);
    actor_pool_ = std::move(pool);
  }
  VLOG(1) << "worker " << options_.worker_id.Hex() << " runs actor " << CurrentActorId().Hex()
          << (created_async_actor_ ? " (async: up to " + std::to_string(creation.max_concurrency()) + " calls at once)"
              : creation.max_concurrency() > 1 ? " on " + std::to_string(creation.max_concurrency()) + " threads"
                                               : "");
}

bool CoreWorker::AcceptActorCall(const rpc::TaskSpec& spec, std::string* why) {
  const rpc::ActorTaskSpec& call = spec.actor_task();
  ActorID actor = CurrentActorId();
  if (actor.IsNil() || call.actor_id() != actor.Binary()) {
    *why = "this worker does not run the actor this call is for";
    return false;
  }
  return call_order_.Accept(call.caller_worker_id(), call.sequence_number(), why);
}

void CoreWorker::RunOnActorPool(const rpc::TaskSpec& spec, const TaskChannelServer::Push& push,
                                const TaskExecutor& executor, const std::shared_ptr<int>& remaining) {
  const rpc::TaskSpec* spec_ptr = &spec;  // lives in push.request, which the closure holds
  actor_pool_->Post([this, spec_ptr, request = push.request, connection = push.connection, executor, remaining] {
    const rpc::TaskSpec& spec = *spec_ptr;
    TaskContext context{TaskID::FromBinary(spec.task_id()), 0, 0, this};
    context.spec = spec_ptr;
    context.connection = connection;
    context.push_id = request->push_id();
    ScopedTaskContext in_task(&context);
    cancels_.Begin(&context);
    if (cancels_.TakeEarly(context.task_id)) context.cancelled.store(true, std::memory_order_relaxed);
    rpc::TaskResult result = context.cancelled.load(std::memory_order_relaxed) ? CancelledResult(spec)
                                                                               : ExecuteTimed(spec, executor, request);
    cancels_.End(&context);
    replies_->Add(connection, request->push_id(), [&](rpc::PushTaskReply& reply) {
      *reply.add_results() = std::move(result);
      if (--*remaining == 0) reply.set_done(true);
    });
    replies_->Flush();
    if (exit_actor_requested_.load()) ExitCurrentActor(spec.function_name());
  });
}

void CoreWorker::RunOnAsyncLoop(const rpc::TaskSpec& spec, const TaskChannelServer::Push& push,
                                const TaskExecutor& executor, const std::shared_ptr<int>& remaining) {
  const rpc::TaskSpec* spec_ptr = &spec;  // lives in push.request, which the closures hold
  AsyncActorLoop* loop = async_loop_.get();
  // Started now, on this (the execution) thread, unless max_concurrency calls run.
  loop->Submit([this, loop, spec_ptr, request = push.request, connection = push.connection, executor,
                remaining](std::function<void()> finished) {
    auto context = std::make_shared<TaskContext>(TaskID::FromBinary(spec_ptr->task_id()), 0, 0, this);
    context->spec = spec_ptr;
    context->connection = connection;
    context->push_id = request->push_id();
    auto reply = [this, spec_ptr, request, connection, remaining, context, finished](rpc::TaskResult result) {
      cancels_.End(context.get());
      replies_->Add(connection, request->push_id(), [&](rpc::PushTaskReply& reply) {
        *reply.add_results() = std::move(result);
        if (--*remaining == 0) reply.set_done(true);
      });
      finished();  // (the execution loop sends the replies gathered)
      if (exit_actor_requested_.load()) ExitCurrentActor(spec_ptr->function_name());
    };
    ScopedTaskContext in_task(context.get());
    cancels_.Begin(context.get());
    if (cancels_.TakeEarly(context->task_id)) context->cancelled.store(true, std::memory_order_relaxed);
    if (context->cancelled.load(std::memory_order_relaxed)) return reply(CancelledResult(*spec_ptr));
    // The call's coroutine resumes on the loop as this call (its TaskContext).
    auto post = [loop, context](std::function<void()> fn) {
      loop->Post([context, fn = std::move(fn)] {
        ScopedTaskContext in_task(context.get());
        fn();
      });
    };
    StartAsyncCall(*spec_ptr, executor, request, std::move(post), std::move(reply));
  });
}

void CoreWorker::StartAsyncCall(const rpc::TaskSpec& spec, const TaskExecutor& executor,
                                const std::shared_ptr<const rpc::PushTaskRequest>& holder, TaskOutput::Post post,
                                std::function<void(rpc::TaskResult)> reply) {
  const int64_t start_unix_us = UnixMicros();
  if (task_events_ != nullptr) task_events_->BeginRunning(spec, start_unix_us);
  const auto started = std::chrono::steady_clock::now();
  auto held = std::make_shared<HeldRefs>(HoldReceivedRefs(spec));
  TaskOutput output = RunExecutor(spec, executor, holder);
  // `spec` lives in the push, which `reply` holds.
  auto finish = [this, &spec, held, started, start_unix_us, reply = std::move(reply)](TaskOutput done) {
    rpc::TaskResult result = FinishTask(spec, std::move(done), *held);
    result.set_run_us(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started).count());
    result.set_start_unix_us(start_unix_us);
    if (task_events_ != nullptr) task_events_->EndRunning(spec);
    reply(std::move(result));
  };
  if (!output.start) return finish(std::move(output));  // not a coroutine: done
  auto start = std::move(output.start);
  start(std::move(post), std::move(finish));
}

void CoreWorker::ExitCurrentActor(const std::string& method) {
  {
    absl::MutexLock lock(&exec_mu_);
    if (exit_requested_) return;
  }
  ActorID actor_id = CurrentActorId();
  LOG(INFO) << "actor " << actor_id.Hex() << " exits: its method " << method << " called ray::ExitActor()";
  rpc::KillActorRequest request;
  request.set_actor_id(actor_id.Binary());
  request.set_no_restart(true);
  request.set_reason("the actor called ray::ExitActor() in " + method);
  absl::Status s = RunOnLoopAndWait(
      loop_, [this, request](std::function<void(absl::Status)> done) {
        gcs_.AsyncKillActor(request, [done](const absl::Status& s, rpc::KillActorReply&&) { done(s); });
      },
      options_.config.grpc_client_deadline_ms);
  if (!s.ok()) LOG(WARNING) << "could not tell the GCS that actor " << actor_id.Hex() << " exits: " << s;
  {
    absl::MutexLock lock(&exec_mu_);
    exit_requested_ = true;
  }
  channel_server_->Wake();
}

}  // namespace manta::core
