// LocalModeRuntime: futures beyond Ray's API: ray::Cancel, ray::IsCancelled, and the
// readiness callbacks co_await uses (local_mode_runtime.h).
#include <functional>
#include <memory>
#include <string>

#include "ray/api/ray_exception.h"
#include "ray/api/serializer.h"
#include "src/api/local_mode_runtime.h"

namespace ray {
namespace internal {

thread_local LocalModeRuntime::Task* LocalModeRuntime::tls_task_ = nullptr;
thread_local const LocalModeRuntime* LocalModeRuntime::tls_task_runtime_ = nullptr;

namespace {
// NewObjectId: 16 random bytes, then the kind (4 bytes, big-endian; 2 = Put).
bool IsPutId(const std::string& id) { return id.size() == 28 && id[19] == 2; }
}  // namespace

void LocalModeRuntime::Cancel(const std::string& object_id, bool force, bool recursive) {
  absl::MutexLock lock(&mu_);
  if (IsPutId(object_id)) {
    throw RayException("ray::Cancel: object " + HexId(object_id) +
                       " was stored by ray::Put (or is an actor handle), not returned by a task");
  }
  auto it = tasks_by_return_.find(object_id);
  std::shared_ptr<Task> task = it != tasks_by_return_.end() ? it->second.lock() : nullptr;
  if (task == nullptr) {
    if (FindLocked(object_id) == nullptr) throw RayException("ray::Cancel: object " + HexId(object_id) + " is unknown");
    return;  // finished: nothing to do
  }
  if (force && task->kind == Task::Kind::kActorCall) {
    throw RayException("ray::Cancel: " + task->function_name + " is a call of " + task->actor->Describe() +
                       ": force is for normal tasks only; cancel it without force, or kill the actor");
  }
  CancelLocked(task, force, recursive);
}

void LocalModeRuntime::NotifyWhenReady(const std::string& object_id, std::function<void()> ready) {
  {
    absl::MutexLock lock(&mu_);
    Object* object = FindLocked(object_id);
    if (object != nullptr && object->state == Object::State::kPending && !shutting_down_) {
      ready_callbacks_[object_id].push_back(std::move(ready));
      return;
    }
  }
  ready();  // ready, failed, or unknown (Get says why)
}

bool LocalModeRuntime::IsCancelled() {
  return tls_task_runtime_ == this && tls_task_ != nullptr && tls_task_->cancelled.load(std::memory_order_relaxed);
}

void LocalModeRuntime::CancelLocked(const std::shared_ptr<Task>& task, bool force, bool recursive) {
  if (task->ended) return;
  task->cancelled.store(true, std::memory_order_relaxed);
  UnpauseStreamLocked(*task);
  if (!task->started || force) {
    // It never runs (Execute skips it), or runs on unheard: its returns fail now.
    FailReturnsLocked(*task, ErrorKind::kCancelled,
                      "task " + task->function_name + " was cancelled" + (task->started ? " (force)" : ""));
    UntrackLocked(*task);
  }
  if (!recursive) return;
  for (const std::weak_ptr<Task>& weak : task->children) {
    if (std::shared_ptr<Task> child = weak.lock()) CancelLocked(child, force, true);
  }
}

void LocalModeRuntime::TrackLocked(const std::shared_ptr<Task>& task) {
  for (const std::string& id : task->return_ids) tasks_by_return_[id] = task;
  if (tls_task_ != nullptr && tls_task_runtime_ == this) {
    auto& children = tls_task_->children;
    // Drop the finished ones now and then: a long task may submit many.
    if (children.size() >= 64 && (children.size() & (children.size() - 1)) == 0) {
      std::erase_if(children, [](const std::weak_ptr<Task>& child) { return child.expired(); });
    }
    children.push_back(task);
  }
}

void LocalModeRuntime::UntrackLocked(Task& task) {
  for (const std::string& id : task.return_ids) tasks_by_return_.erase(id);
}

}  // namespace internal
}  // namespace ray
