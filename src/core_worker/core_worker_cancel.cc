// CoreWorker: cancelling tasks (ray::Cancel, ARCHITECTURE.md §5, cancellation).
//
// The owner's side is the TaskCanceller (task_canceller.h); a borrower asks the
// owner (RemoteCancelTask). The worker a task was pushed to skips it if it has not
// started, answering it as cancelled, and sets the flag of one it runs
// (ray::IsCancelled), whose result then becomes the cancelled error whatever it
// returns; with force a normal task's worker leaves at once, and the owner fails the
// task when its push breaks. A recursive cancel makes the worker cancel the tasks the
// cancelled one submitted, which it owns, the same way.
#include <glog/logging.h>

#include <cstdlib>

#include "src/common/loop_call.h"
#include "src/core_worker/common.h"
#include "src/core_worker/core_worker.h"

namespace manta::core {

absl::Status CoreWorker::CancelTask(const ObjectID& id, bool force, bool recursive) {
  if (id.IsPut()) {
    return absl::InvalidArgumentError("object " + id.Hex() +
                                      " was stored by ray::Put, not returned by a task: there is no task to cancel");
  }
  if (reference_counter_->IsOwnedByUs(id)) return canceller_->Cancel(id.Task(), force, recursive);
  auto owner = reference_counter_->GetOwner(id);
  if (!owner.ok()) return absl::NotFoundError("object " + id.Hex() + " is not known to this process");
  rpc::RemoteCancelTaskRequest request;
  request.set_object_id(id.Binary());
  request.set_force(force);
  request.set_recursive(recursive);
  const Address owner_address = *owner;
  return RunOnLoopAndWait(
      loop_,
      [this, request, owner_address](std::function<void(absl::Status)> done) {
        workers_.Get(HostPort(owner_address), owner_address.node_id.Binary())
            ->RemoteCancelTask(request, [done](const absl::Status& s, rpc::RemoteCancelTaskReply&& reply) {
              if (s.ok() && !reply.error().empty()) return done(absl::InvalidArgumentError(reply.error()));
              done(s.ok() ? s : absl::Status(s.code(), "asking the owner to cancel: " + std::string(s.message())));
            });
      },
      options_.config.grpc_client_deadline_ms);
}

bool CoreWorker::IsCancelled() const {
  const TaskContext* context = ScopedTaskContext::Current(this);
  return context != nullptr && context->cancelled.load(std::memory_order_relaxed);
}

bool CoreWorker::StealLocally(const TaskID& task_id, int attempt) {
  absl::MutexLock lock(&exec_mu_);
  // Under exec_mu_, as for cancels: a task starting registers before it looks.
  if (running_context_ != nullptr && running_context_->task_id == task_id) return false;
  cancels_.Steal(task_id, attempt);
  return true;
}

CoreWorker::CancelHere CoreWorker::CancelLocally(const TaskID& task_id) {
  absl::MutexLock lock(&exec_mu_);
  if (running_context_ != nullptr && running_context_->task_id == task_id) {
    running_context_->cancelled.store(true, std::memory_order_relaxed);
    return CancelHere::kRunning;
  }
  // Under exec_mu_ still: the execution thread registers a task before it looks for
  // an early cancel, so this one is seen either way.
  if (cancels_.Cancel(task_id)) return CancelHere::kRunning;  // on the actor's pool
  if (current_push_ != nullptr && !actor_pool_ && !async_loop_) {
    const std::string binary = task_id.Binary();
    for (int i = current_index_ + 1; i < current_push_->tasks_size(); ++i) {
      if (current_push_->tasks(i).task_id() == binary) return CancelHere::kNotStarted;
    }
  }
  return CancelHere::kNotSeen;
}

void CoreWorker::HandleCancelTask(const rpc::CancelTaskRequest& request, rpc::CancelTaskReply* reply,
                                  SendReplyFn send_reply) {
  if (request.intended_worker_id() != options_.worker_id.Binary()) {
    return send_reply(absl::InvalidArgumentError("the cancel was meant for another worker"));
  }
  auto task_id = TaskID::FromBinaryChecked(request.task_id());
  if (!task_id.ok()) return send_reply(absl::InvalidArgumentError("malformed task id"));
  if (request.steal()) {
    reply->set_running(!StealLocally(*task_id, request.attempt_number()));
    reply->set_not_started(!reply->running());
    return send_reply(absl::OkStatus());
  }
  const CancelHere here = CancelLocally(*task_id);
  if (here == CancelHere::kRunning) producers_.Wake(*task_id);  // a paused generator sees it
  reply->set_running(here == CancelHere::kRunning);
  reply->set_not_started(here == CancelHere::kNotStarted);
  // Force ends the worker, for a normal task only (an actor's calls are never forced).
  const bool leave = request.force() && here == CancelHere::kRunning && CurrentActorId().IsNil();
  std::function<void()> after = [send_reply] { send_reply(absl::OkStatus()); };
  if (leave) {
    after = [this, task_id = *task_id] {
      LOG(WARNING) << "worker " << options_.worker_id.Hex() << " leaves: its task " << task_id.Hex()
                   << " was cancelled with force";
      google::FlushLogFiles(google::GLOG_INFO);
      // The owner learns it when its push breaks, and fails the task as cancelled.
      std::_Exit(1);
    };
  }
  if (request.recursive() && here != CancelHere::kNotStarted) {
    return canceller_->CancelChildren(*task_id, request.force(), after);
  }
  after();
}

void CoreWorker::HandleRemoteCancelTask(const rpc::RemoteCancelTaskRequest& request,
                                        rpc::RemoteCancelTaskReply* reply, SendReplyFn send_reply) {
  auto id = ObjectID::FromBinaryChecked(request.object_id());
  if (!id.ok()) return send_reply(absl::InvalidArgumentError("malformed object id"));
  if (id->IsPut() || !reference_counter_->IsOwnedByUs(*id)) {
    reply->set_error("object " + id->Hex() + " is not a task return owned by worker " + options_.worker_id.Hex());
    return send_reply(absl::OkStatus());
  }
  absl::Status s = canceller_->Cancel(id->Task(), request.force(), request.recursive());
  if (!s.ok()) reply->set_error(std::string(s.message()));
  send_reply(absl::OkStatus());
}

}  // namespace manta::core
