// CoreWorker, worker side: receiving pushed tasks and running them
// (ARCHITECTURE.md §5 step 6). Split from core_worker.cc to keep files small.
#include <algorithm>
#include <glog/logging.h>

#include <chrono>

#include "src/core_worker/common.h"
#include "src/core_worker/core_worker.h"
#include "src/object_store/store_client.h"

namespace manta::core {

bool CoreWorker::RunTaskExecutionLoop(TaskExecutor executor) {
  CHECK(!options_.is_driver) << "RunTaskExecutionLoop is for workers";
  const int64_t spin_us = options_.config.task_channel_spin_us;
  bool spin = false;
  while (true) {
    {
      absl::MutexLock lock(&exec_mu_);
      if (exit_requested_) break;
    }
    // An async actor's calls whose awaits are ready go on (and answer) first.
    if (async_loop_ != nullptr && async_loop_->RunQueued()) replies_->Flush();
    std::optional<TaskChannelServer::Push> push = channel_server_->Next(spin ? spin_us : 0);
    if (!push) continue;  // woken: look at exit_requested_ (and the async calls) again
    SetCurrentPush(push->request.get());
    RunPush(*push, executor);
    SetCurrentPush(nullptr);
    memory_releaser_.NoteWorkDone();
    // A lone task is what a synchronous caller sends: its next one comes within a
    // round trip, so wait for it awake. After a batch the owner is busy submitting,
    // and spinning here would take the CPU it needs.
    spin = push->request->tasks_size() == 1;
  }
  bool stopped = true;
  if (actor_pool_) {
    stopped = actor_pool_->Stop(options_.config.actor_exit_timeout_ms);
    if (!stopped) {
      LOG(WARNING) << "worker " << options_.worker_id.Hex() << " leaves with " << actor_pool_->NumBusy()
                   << " calls of its actor still running after " << options_.config.actor_exit_timeout_ms << " ms";
    }
  }
  if (async_loop_) async_loop_->Stop();  // calls still awaiting are left unanswered
  replies_->Flush();
  channel_server_->FlushAll(/*timeout_ms=*/1000);
  VLOG(1) << "worker " << options_.worker_id.Hex() << " leaves its execution loop";
  return stopped;
}

namespace {

// The result of a task refused without running: its return holds `error`.
rpc::TaskResult RefusedResult(const rpc::TaskSpec& spec, rpc::ErrorType type, const std::string& message) {
  rpc::TaskResult result;
  result.set_task_id(spec.task_id());
  result.set_attempt_number(spec.attempt_number());
  auto task_id = TaskID::FromBinaryChecked(spec.task_id());
  for (int i = 1; i <= std::clamp(spec.num_returns(), 1, kMaxNumReturns); ++i) {
    rpc::ReturnObject* ret = result.add_returns();
    if (task_id.ok()) ret->set_object_id(ObjectID::FromIndex(*task_id, i).Binary());
    ret->mutable_error()->set_type(type);
    ret->mutable_error()->set_message(message);
  }
  return result;
}

// Why a spec from a peer cannot run here (its ids are malformed); empty if it can.
std::string MalformedSpec(const rpc::TaskSpec& spec) {
  if (!TaskID::FromBinaryChecked(spec.task_id()).ok()) {
    return "malformed task: its task id has " + std::to_string(spec.task_id().size()) + " bytes, not " +
           std::to_string(TaskID::kSize);
  }
  if (spec.num_returns() < 0 || spec.num_returns() > kMaxNumReturns) {
    return "malformed task: " + std::to_string(spec.num_returns()) + " returns";
  }
  if (spec.type() == rpc::ACTOR_CREATION_TASK && !ActorID::FromBinaryChecked(spec.actor_creation().actor_id()).ok()) {
    return "malformed actor creation: bad actor id";
  }
  if (spec.type() == rpc::ACTOR_TASK && !ActorID::FromBinaryChecked(spec.actor_task().actor_id()).ok()) {
    return "malformed actor call: bad actor id";
  }
  return "";
}

// What a cancelled task's returns say.
std::string CancelledMessage(const rpc::TaskSpec& spec) {
  return "task " + BinaryHex(spec.task_id()) + " (" + spec.function_name() + ") was cancelled";
}

// The output of a cancelled task, whatever it returned (`exit_actor`: it called
// ray::ExitActor()).
TaskOutput CancelledOutput(const rpc::TaskSpec& spec, bool exit_actor) {
  TaskOutput output;
  output.exit_actor = exit_actor;
  output.failed = true;
  output.error.set_type(rpc::TASK_CANCELLED);
  output.error.set_message(CancelledMessage(spec));
  return output;
}

}  // namespace

rpc::TaskResult CoreWorker::CancelledResult(const rpc::TaskSpec& spec) {
  return RefusedResult(spec, rpc::TASK_CANCELLED, CancelledMessage(spec));
}

rpc::TaskResult CoreWorker::StolenResult(const rpc::TaskSpec& spec) {
  rpc::TaskResult result;
  result.set_task_id(spec.task_id());
  result.set_attempt_number(spec.attempt_number());
  result.set_stolen(true);
  return result;
}

void CoreWorker::RunPush(const TaskChannelServer::Push& push, const TaskExecutor& executor) {
  const rpc::PushTaskRequest& request = *push.request;
  const bool for_me = request.intended_worker_id() == options_.worker_id.Binary();
  if (!for_me) {
    // (Without naming this worker: a reply never tells the peer an id it did not send.)
    replies_->Add(push.connection, request.push_id(),
                  [](rpc::PushTaskReply& reply) { reply.set_error("the push was meant for another worker"); });
  }
  const int n = for_me ? request.tasks_size() : 0;
  // A threaded actor's calls run on its pool; each answers when it finishes.
  auto remaining = std::make_shared<int>(n);
  bool on_pool = false;
  for (int i = 0; i < n; ++i) {
    const rpc::TaskSpec& spec = request.tasks(i);
    std::string refused = MalformedSpec(spec);
    if (!refused.empty()) LOG(WARNING) << "refusing a task from task channel " << push.connection << ": " << refused;
    if (refused.empty() && spec.type() == rpc::ACTOR_TASK) AcceptActorCall(spec, &refused);
    if (!refused.empty()) {
      replies_->Add(push.connection, request.push_id(), [&](rpc::PushTaskReply& reply) {
        *reply.add_results() = RefusedResult(spec, rpc::TASK_CANCELLED, refused);
        if (--*remaining == 0) reply.set_done(true);
      });
      continue;
    }
    if (spec.type() == rpc::ACTOR_TASK && (actor_pool_ || async_loop_)) {
      on_pool = true;
      (this->*(async_loop_ ? &CoreWorker::RunOnAsyncLoop : &CoreWorker::RunOnActorPool))(spec, push, executor,
                                                                                        remaining);
      continue;
    }
    rpc::TaskResult result = RunHere(spec, i, push, executor);
    const bool exiting = exit_actor_requested_.load();
    bool last = false;
    replies_->Add(push.connection, request.push_id(), [&](rpc::PushTaskReply& reply) {
      *reply.add_results() = std::move(result);
      last = --*remaining == 0 || exiting;
      reply.set_done(last);
    });
    if (exiting) break;  // the calls after it do not run: their callers get no result
    // More tasks follow: hand finished results over soon rather than at the end.
    if (!last) replies_->FlushSoon();
  }
  if (n == 0) {  // refused or empty: still answered
    replies_->Add(push.connection, request.push_id(), [](rpc::PushTaskReply& reply) { reply.set_done(true); });
  }
  if (exit_actor_requested_.load() && !on_pool) {
    replies_->Flush();
    ExitCurrentActor(n > 0 ? request.tasks(0).function_name() : "");
    return;
  }
  // Reply now unless more work has arrived: replies to pushes that came together
  // travel together (the loop's timer sends them within a millisecond anyway).
  if (!channel_server_->InputPending()) {
    replies_->Flush();
  } else {
    replies_->FlushSoon();
  }
}

rpc::TaskResult CoreWorker::RunHere(const rpc::TaskSpec& spec, int index, const TaskChannelServer::Push& push,
                                    const TaskExecutor& executor) {
  TaskContext context{TaskID::FromBinary(spec.task_id()), 0, 0, this};
  context.spec = &spec;
  context.connection = push.connection;
  context.push_id = push.request->push_id();
  ScopedTaskContext in_task(&context);
  if (spec.type() == rpc::ACTOR_CREATION_TASK) BeginActorCreation(spec);
  // Registered before looking for an early cancel: a cancel finds it one way or the other.
  SetRunningTask(&context, index);
  if (cancels_.TakeEarly(context.task_id)) context.cancelled.store(true, std::memory_order_relaxed);
  // Taken back by its owner (it runs elsewhere): answered as such, without running.
  const bool stolen = cancels_.TakeStolen(context.task_id, spec.attempt_number());
  const bool cancelled = context.cancelled.load(std::memory_order_relaxed);
  rpc::TaskResult result = stolen      ? StolenResult(spec)
                           : cancelled ? CancelledResult(spec)
                                       : ExecuteTimed(spec, executor, push.request);
  SetRunningTask(nullptr, index);
  if (spec.type() == rpc::ACTOR_CREATION_TASK && !result.returns().empty() && !result.returns(0).has_error()) {
    OnActorCreated(spec);
  }
  return result;
}

rpc::TaskResult CoreWorker::ExecuteTimed(const rpc::TaskSpec& spec, const TaskExecutor& executor,
                                         const std::shared_ptr<const rpc::PushTaskRequest>& holder) {
  const int64_t start_unix_us = UnixMicros();
  if (task_events_ != nullptr) task_events_->BeginRunning(spec, start_unix_us);
  auto started = std::chrono::steady_clock::now();
  rpc::TaskResult result = ExecuteTask(spec, executor, holder);
  result.set_run_us(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started).count());
  result.set_start_unix_us(start_unix_us);
  if (task_events_ != nullptr) task_events_->EndRunning(spec);
  return result;
}

absl::Status CoreWorker::ResolveArgs(const rpc::TaskSpec& spec,
                                     const std::shared_ptr<const rpc::PushTaskRequest>& holder,
                                     std::vector<ObjectValue>* args, rpc::ErrorInfo* error) {
  args->resize(spec.args_size());
  std::vector<ObjectID> fetch_ids;
  std::vector<size_t> fetch_pos;
  for (int i = 0; i < spec.args_size(); ++i) {
    const rpc::TaskArg& arg = spec.args(i);
    if (arg.is_ref() && arg.data().empty() && !arg.ref().object_id().empty()) {
      auto id = ObjectID::FromBinaryChecked(arg.ref().object_id());
      if (!id.ok()) return absl::InvalidArgumentError("argument " + std::to_string(i) + ": malformed object id");
      fetch_ids.push_back(*id);
      fetch_pos.push_back(i);
      continue;
    }
    ObjectValue& v = (*args)[i];
    v.data = arg.data().data();
    v.size = arg.data().size();
    v.holder = holder;
  }
  if (fetch_ids.empty()) return absl::OkStatus();
  auto values = Get(fetch_ids, -1);
  if (!values.ok()) return values.status();
  for (size_t k = 0; k < fetch_ids.size(); ++k) {
    ObjectValue& v = (*values)[k];
    if (v.error) {
      *error = ToErrorInfo(*v.error);
      return absl::OkStatus();
    }
    (*args)[fetch_pos[k]] = std::move(v);
  }
  return absl::OkStatus();
}

rpc::TaskResult CoreWorker::ExecuteTask(const rpc::TaskSpec& spec, const TaskExecutor& executor,
                                        const std::shared_ptr<const rpc::PushTaskRequest>& holder) {
  const HeldRefs held = HoldReceivedRefs(spec);
  TaskOutput output = RunExecutor(spec, executor, holder);
  if (output.start) {  // a coroutine call outside an async actor's loop: cannot happen
    output = TaskOutput();
    output.failed = true;
    output.error.set_type(rpc::TASK_EXECUTION_EXCEPTION);
    output.error.set_message(spec.function_name() + " is a coroutine, and this actor's worker has no loop to run it");
  }
  return FinishTask(spec, std::move(output), held);
}

CoreWorker::HeldRefs CoreWorker::HoldReceivedRefs(const rpc::TaskSpec& spec) {
  // Every ref the task receives (by reference, or nested inside a value) is held for
  // the duration of the task; whatever is still held afterwards is reported to the
  // owner as borrowed.
  HeldRefs held;
  for (const rpc::TaskArg& arg : spec.args()) {
    if (arg.is_ref() && !arg.ref().object_id().empty()) {
      auto id = ObjectID::FromBinaryChecked(arg.ref().object_id());
      if (id.ok()) held.emplace_back(*id, FromRpc(arg.ref().owner_address()));
    }
    for (const rpc::ObjectReference& ref : arg.nested_refs()) {
      auto id = ObjectID::FromBinaryChecked(ref.object_id());
      if (id.ok()) held.emplace_back(*id, FromRpc(ref.owner_address()));
    }
  }
  for (const auto& [id, owner] : held) {
    reference_counter_->AddBorrowedObject(id, owner);
    reference_counter_->AddLocalReference(id);
  }
  return held;
}

TaskOutput CoreWorker::RunExecutor(const rpc::TaskSpec& spec, const TaskExecutor& executor,
                                   const std::shared_ptr<const rpc::PushTaskRequest>& holder) {
  std::vector<ObjectValue> args;  // released on return, before the refs go
  rpc::ErrorInfo arg_error;
  absl::Status resolved = ResolveArgs(spec, holder, &args, &arg_error);
  TaskOutput output;
  if (!resolved.ok()) {
    output.failed = true;
    output.error.set_type(rpc::OBJECT_LOST);
    output.error.set_message("resolving the arguments of " + spec.function_name() +
                             " failed: " + std::string(resolved.message()));
  } else if (arg_error.type() != rpc::ERROR_TYPE_UNSPECIFIED) {
    output.failed = true;
    output.error = arg_error;
  } else if (!IsCancelled()) {
    output = executor(spec, args);
  }
  if (output.async_actor) created_async_actor_ = true;
  return output;
}

rpc::TaskResult CoreWorker::FinishTask(const rpc::TaskSpec& spec, TaskOutput output, const HeldRefs& held) {
  rpc::TaskResult result;
  result.set_task_id(spec.task_id());
  result.set_attempt_number(spec.attempt_number());
  if (IsCancelled()) output = CancelledOutput(spec, output.exit_actor);  // whatever it returned
  if (output.exit_actor) {
    exit_actor_requested_.store(true);
    output.failed = true;
    output.error.set_type(rpc::ACTOR_DIED);
    output.error.set_message("actor " + CurrentActorId().Hex() + " exited: its method " + spec.function_name() +
                             " called ray::ExitActor()");
  }
  StoreReturns(spec, std::move(output), &result);
  if (spec.streaming()) producers_.Finished(TaskID::FromBinary(spec.task_id()));
  for (const auto& [id, owner] : held) reference_counter_->RemoveLocalReference(id);
  for (const auto& [id, owner] : held) {
    if (!reference_counter_->HasReference(id) || reference_counter_->IsOwnedByUs(id)) continue;
    rpc::BorrowedRefReport* report = result.add_borrowed_refs();
    report->mutable_ref()->set_object_id(id.Binary());
    *report->mutable_ref()->mutable_owner_address() = ToRpc(owner);
    *report->mutable_borrower() = rpc_address_;
  }
  return result;
}

void CoreWorker::StoreReturns(const rpc::TaskSpec& spec, TaskOutput output, rpc::TaskResult* result) {
  const int num_returns = std::max(1, spec.num_returns());
  if (!output.failed && static_cast<int>(output.values.size()) != num_returns) {
    output.failed = true;
    output.error.set_type(rpc::TASK_EXECUTION_EXCEPTION);
    output.error.set_exception_type("ray::internal::RayException");
    output.error.set_message(
        output.multiple ? spec.function_name() + " returned " + std::to_string(output.values.size()) +
                              " values in its ray::Returns, but the caller asked for " +
                              std::to_string(num_returns) + " (SetNumReturns)"
                        : spec.function_name() + " returns one value, but the caller asked for " +
                              std::to_string(num_returns) + " (was it built with another declaration?)");
  }
  const TaskID task_id = TaskID::FromBinary(spec.task_id());
  for (int i = 0; i < num_returns; ++i) {
    const ObjectID return_id = ObjectID::FromIndex(task_id, i + 1);
    rpc::ReturnObject* out = result->add_returns();
    if (output.failed) {
      out->set_object_id(return_id.Binary());
      *out->mutable_error() = output.error;
    } else {
      StoreReturn(spec, return_id, std::move(output.values[i]), out);
    }
  }
}

void CoreWorker::StoreReturn(const rpc::TaskSpec& spec, const ObjectID& return_id, ReturnValue output,
                             rpc::ReturnObject* out) {
  out->set_object_id(return_id.Binary());
  if (!output.contained_ids.empty()) {
    for (const ObjectID& inner : output.contained_ids) {
      auto owner = reference_counter_->GetOwner(inner);
      if (!owner.ok()) continue;
      rpc::ObjectReference* ref = out->add_nested_refs();
      ref->set_object_id(inner.Binary());
      *ref->mutable_owner_address() = ToRpc(*owner);
    }
    // The caller owns the return value; it becomes a borrower of the refs inside
    // that this worker owns.
    reference_counter_->AddNestedObjectIds(return_id, output.contained_ids, FromRpc(spec.caller_address()));
  }
  out->set_size_bytes(static_cast<int64_t>(output.size));
  if (static_cast<int64_t>(output.size) <= options_.config.max_inline_result_bytes) {
    std::string* data = out->mutable_data();
    data->resize(output.size);
    if (output.size > 0) output.write(data->data());
    return;
  }
  freer_.FlushLocal();
  auto dst = store_.Create(return_id, static_cast<int64_t>(output.size), 0, /*pin_on_seal=*/true,
                           spec.caller_address().worker_id());
  if (dst.ok()) {
    output.write(reinterpret_cast<char*>(*dst));
    absl::Status sealed = store_.Seal(return_id);
    if (!sealed.ok()) dst = sealed;
  } else if (dst.status().code() == absl::StatusCode::kAlreadyExists) {
    dst = nullptr;  // a previous attempt stored it on this node already
  }
  if (!dst.ok()) {
    out->mutable_error()->set_type(rpc::OBJECT_LOST);
    out->mutable_error()->set_message("storing the " + std::to_string(output.size) + "-byte result of " +
                                      spec.function_name() + " failed: " + std::string(dst.status().message()));
    return;
  }
  out->set_in_plasma(true);
  out->set_node_id(node_id_.Binary());
  out->set_raylet_address(options_.raylet_address);
}

}  // namespace manta::core
