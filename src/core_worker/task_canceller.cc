#include "src/core_worker/task_canceller.h"

#include <glog/logging.h>

#include <memory>
#include <utility>
#include <vector>

#include "src/core_worker/common.h"

namespace manta::core {

absl::Status TaskCanceller::Cancel(const TaskID& task_id, bool force, bool recursive, std::function<void()> told) {
  absl::StatusOr<PackedTaskPtr> marked = task_manager_.MarkCancelled(task_id, force);
  if (!marked.ok()) return marked.status();
  const PackedTaskPtr spec = *marked;
  rpc::Address worker;
  bool sent = false;
  if (spec && spec->type() == rpc::ACTOR_TASK) {
    const rpc::TaskSpec unpacked = spec->Unpack();
    const ActorID actor_id = ActorID::FromBinary(unpacked.actor_task().actor_id());
    sent = actor_submitter_.Cancel(actor_id, unpacked.actor_task().sequence_number(), &worker) ==
           ActorTaskSubmitter::CancelResult::kSent;
  } else if (spec) {
    sent = submitter_.Cancel(task_id, spec->attempt_number(), force, &worker) ==
           NormalTaskSubmitter::CancelResult::kInFlight;
  }
  if (spec && !sent) {
    // Queued or waiting for its arguments (the wait finds it gone), or lost with
    // its worker (its retry finds it gone): it never runs.
    task_manager_.FailTask(task_id, TaskManager::CancelledError(*spec));
  }
  if (!sent) {  // finished already (no spec): nothing to do, as in Ray
    if (told) loop_.Post("TaskCanceller.Done", std::move(told));
    return absl::OkStatus();
  }
  VLOG(1) << "cancelling task " << task_id.Hex() << " at worker " << WorkerID::FromBinary(worker.worker_id()).Hex()
          << (force ? " (forced)" : "");
  loop_.Post("TaskCanceller.Send", [this, worker, spec, force, recursive, told = std::move(told)]() mutable {
    SendCancel(worker, spec, force, recursive, std::move(told));
  });
  return absl::OkStatus();
}

void TaskCanceller::SendCancel(const rpc::Address& worker, const PackedTaskPtr& spec, bool force, bool recursive,
                              std::function<void()> told) {
  rpc::CancelTaskRequest request;
  request.set_intended_worker_id(worker.worker_id());
  request.set_task_id(spec->task_id().Binary());
  request.set_force(force);
  request.set_recursive(recursive);
  workers_.Get(HostPort(worker), worker.node_id())
      ->CancelTask(request, [this, spec, told = std::move(told)](const absl::Status& s, rpc::CancelTaskReply&& reply) {
        // Not started there (and it never will): fail it now rather than when the
        // worker gets to it. Otherwise its result (or its push's failure) ends it.
        if (s.ok() && reply.not_started()) task_manager_.FailTask(spec->task_id(), TaskManager::CancelledError(*spec));
        if (!s.ok()) VLOG(1) << "cancelling task " << spec->task_id().Hex() << " at its worker: " << s;
        if (told) told();
      });
}

void TaskCanceller::CancelChildren(const TaskID& parent, bool force, std::function<void()> done) {
  std::vector<TaskID> children = task_manager_.PendingChildren(parent);
  if (children.empty()) return done();
  VLOG(1) << "cancelling " << children.size() << " task(s) submitted by task " << parent.Hex();
  // `done` once, when the last child's worker answered or the wait is over.
  auto once = std::make_shared<std::function<void()>>(std::move(done));
  auto left = std::make_shared<size_t>(children.size());
  auto finish = [once] {
    if (!*once) return;
    auto f = std::move(*once);
    *once = nullptr;
    f();
  };
  loop_.PostAfter("TaskCanceller.ChildrenTimeout", kChildrenWaitMs, finish);
  for (const TaskID& child : children) {
    auto told = [left, finish] {
      if (--*left == 0) finish();
    };
    absl::Status s = Cancel(child, force, /*recursive=*/true, told);
    if (!s.ok()) {
      VLOG(1) << "cancelling task " << child.Hex() << ": " << s;
      told();
    }
  }
}

}  // namespace manta::core
