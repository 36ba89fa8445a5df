// TaskContext: the task a thread is running, as the ids of what it creates need it.
//
// A task's children are numbered per task (TaskID::ForNormalTask(parent, n)) and so
// are its puts, so a task run again (retry, lineage reconstruction) recreates the
// same ids. The executor installs a context on the thread that runs a task (the
// execution thread, or a pool thread of a threaded actor) for the duration of the
// task; a thread without one (a driver's threads, threads a task started itself)
// counts under the process's root task instead.
//
// Threading: a context belongs to the thread that installed it, but for `cancelled`,
// which another thread sets (task_cancels.h); ScopedTaskContext nests (the previous
// context comes back when it ends).
#pragma once

#include <atomic>
#include <cstdint>

#include "src/common/id.h"

namespace manta::rpc {
class TaskSpec;
}

namespace manta::core {

struct TaskContext {
  TaskID task_id;
  uint64_t next_task_index = 0;
  uint64_t next_put_index = 0;
  // The core worker the task belongs to (a process may hold several in tests).
  const void* owner = nullptr;
  // Its owner cancelled it (ray::IsCancelled); set by the thread handling the cancel.
  std::atomic<bool> cancelled{false};
  // Worker side: the task's spec and the push it came in (a streaming task's items
  // go back as replies to it); null / 0 elsewhere.
  const rpc::TaskSpec* spec = nullptr;
  int64_t connection = 0;
  uint64_t push_id = 0;
};

class ScopedTaskContext {
 public:
  explicit ScopedTaskContext(TaskContext* context);
  ~ScopedTaskContext();
  ScopedTaskContext(const ScopedTaskContext&) = delete;
  ScopedTaskContext& operator=(const ScopedTaskContext&) = delete;

  // The calling thread's context if it belongs to `owner`, else null.
  static TaskContext* Current(const void* owner);

 private:
  TaskContext* previous_;
};

}  // namespace manta::core
