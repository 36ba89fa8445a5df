// TaskCanceller: the owner's side of ray::Cancel (ARCHITECTURE.md §5, cancellation).
//
// A task this process submitted is marked cancelled in the task manager (never
// retried from then on) and looked for: still queued (for a worker, for its actor,
// or for its arguments) it is taken out and fails at once with TASK_CANCELLED;
// pushed to a worker, that worker is told (CancelTask), and the task ends with the
// worker's answer, its result, or its push's failure (force). A worker cancelling a
// task recursively cancels the tasks it submitted the same way (CancelChildren).
//
// Threading: thread-safe; the CancelTask calls go out from the loop, and their
// answers are handled there.
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"
#include "src/core_worker/actor_task_submitter.h"
#include "src/core_worker/normal_task_submitter.h"
#include "src/core_worker/rpc_clients.h"
#include "src/core_worker/task_manager.h"

namespace manta::core {

class TaskCanceller {
 public:
  TaskCanceller(EventLoop& loop, TaskManager& task_manager, NormalTaskSubmitter& submitter,
                ActorTaskSubmitter& actor_submitter, CoreWorkerClientPool& workers)
      : loop_(loop), task_manager_(task_manager), submitter_(submitter), actor_submitter_(actor_submitter),
        workers_(workers) {}

  // Cancels a task this process submitted. OK (nothing done) when it is not pending;
  // INVALID_ARGUMENT for an actor creation, or force on an actor call. `told`, if
  // set, runs on the loop once the task's worker answered, or at once when no worker
  // had to be told.
  absl::Status Cancel(const TaskID& task_id, bool force, bool recursive, std::function<void()> told = nullptr);
  // Cancels the pending tasks `parent` submitted; `done` runs on the loop once every
  // one of their workers answered, kChildrenWaitMs passed, or at once when no worker
  // had to be told.
  void CancelChildren(const TaskID& parent, bool force, std::function<void()> done);
  static constexpr int64_t kChildrenWaitMs = 2000;

 private:
  // Tells `worker` the task is cancelled; fails the task once the worker says it
  // never started it; then runs `told` (if set). Loop thread.
  void SendCancel(const rpc::Address& worker, const PackedTaskPtr& spec, bool force, bool recursive,
                  std::function<void()> told);

  EventLoop& loop_;
  TaskManager& task_manager_;
  NormalTaskSubmitter& submitter_;
  ActorTaskSubmitter& actor_submitter_;
  CoreWorkerClientPool& workers_;
};

}  // namespace manta::core
