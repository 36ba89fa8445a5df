// LocalModeRuntime: running a task — on the pool (Execute), or on an async actor's
// loop (RunOnActorLoop), where a coroutine call is started and ends when its
// coroutine does, with the loop running the actor's other calls meanwhile
// (local_mode_runtime.h).
#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ray/api/coroutine.h"
#include "ray/api/function_manager.h"
#include "ray/api/ray_exception.h"
#include "ray/api/serializer.h"
#include "src/api/local_mode_runtime.h"

namespace ray {
namespace internal {

thread_local const std::string* LocalModeRuntime::tls_actor_id_ = nullptr;
thread_local bool LocalModeRuntime::tls_actor_restarted_ = false;

namespace {

// The bytes of each of a task's returns; throws RayException when the function
// returned another number of values than the caller asked for.
void MaterializeReturns(const std::string& function_name, size_t wanted, const SerializedValue& result,
                        std::vector<std::shared_ptr<const std::string>>* bytes) {
  if (!result.multiple) {
    if (wanted != 1) {
      throw RayException(function_name + " returns one value, but the caller asked for " +
                         std::to_string(wanted));
    }
    bytes->push_back(LocalModeRuntime::Materialize(result));
    return;
  }
  if (result.parts.size() != wanted) {
    throw RayException(function_name + " returned " + std::to_string(result.parts.size()) +
                       " values in its ray::Returns, but the caller asked for " + std::to_string(wanted) +
                       " (SetNumReturns)");
  }
  for (const SerializedValue& part : result.parts) bytes->push_back(LocalModeRuntime::Materialize(part));
}

// The by-value arguments' bytes into `args` (their by-ref ones are resolved already).
void MaterializeArguments(const std::vector<TaskArgument>& in, std::vector<ObjectData>* args) {
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].by_ref) continue;
    std::shared_ptr<const std::string> value = LocalModeRuntime::Materialize(in[i].value);
    (*args)[i] = ObjectData{value->data(), value->size(), value, ""};
  }
}

}  // namespace

LocalModeRuntime::TaskScope::TaskScope(const LocalModeRuntime* runtime, Task* task)
    : previous_task_(std::exchange(tls_task_, task)),
      previous_runtime_(std::exchange(tls_task_runtime_, runtime)),
      previous_actor_(tls_actor_id_),
      previous_restarted_(tls_actor_restarted_) {
  if (task->actor) {
    tls_actor_id_ = &task->actor->id;
    tls_actor_restarted_ =
        task->kind == Task::Kind::kActorCreation ? task->actor->restarts > 0 : task->actor->restarted;
  }
}

LocalModeRuntime::TaskScope::~TaskScope() {
  tls_task_ = previous_task_;
  tls_task_runtime_ = previous_runtime_;
  tls_actor_id_ = previous_actor_;
  tls_actor_restarted_ = previous_restarted_;
}

std::string LocalModeRuntime::CurrentActorId() { return tls_actor_id_ != nullptr ? *tls_actor_id_ : std::string(); }

bool LocalModeRuntime::WasCurrentActorRestarted() { return tls_actor_id_ != nullptr && tls_actor_restarted_; }

std::optional<LocalModeRuntime::TaskError> LocalModeRuntime::ResolveArgumentsLocked(const Task& task,
                                                                                     std::vector<ObjectData>* args) {
  for (size_t i = 0; i < task.args.size(); ++i) {
    const TaskArgument& arg = task.args[i];
    if (!arg.by_ref) continue;
    Object* object = FindLocked(arg.object_id);  // held by the task: present and complete
    if (object == nullptr || object->state == Object::State::kPending) {
      return TaskError{ErrorKind::kOther, task.function_name + ": argument #" + std::to_string(i + 1) +
                                              " (object " + HexId(arg.object_id) + ") vanished before the task ran"};
    }
    if (object->state == Object::State::kFailed) {
      return TaskError{object->error_kind, object->error_message};  // fails the way its argument did
    }
    (*args)[i] = ObjectData{object->bytes->data(), object->bytes->size(), object->bytes, arg.object_id};
  }
  return std::nullopt;
}

bool LocalModeRuntime::BeginLocked(Task& task) {
  if (task.cancelled) {  // cancelled before it started: its returns failed then
    RemoveReferencesLocked(std::move(task.held_ids));
    if (task.actor) FinishActorTaskLocked(task, std::nullopt, false, nullptr);
    return false;
  }
  task.started = true;
  return true;
}

std::optional<LocalModeRuntime::TaskError> LocalModeRuntime::Prepare(const Task& task, std::vector<ObjectData>* args,
                                                                      std::shared_ptr<void>* instance) {
  absl::MutexLock lock(&mu_);
  if (task.kind == Task::Kind::kActorCall) *instance = task.actor->instance;
  std::optional<TaskError> error = ResolveArgumentsLocked(task, args);
  if (!error && !task.placement.group_id.empty()) error = PlacementErrorLocked(task.function_name, task.placement);
  return error;
}

LocalModeRuntime::TaskError LocalModeRuntime::ErrorOfCurrentException(const std::string& function_name,
                                                                      const std::string* actor, bool* exit_actor) {
  try {
    throw;
  } catch (const RayIntentionalSystemExitException&) {
    *exit_actor = true;
    return {ErrorKind::kActor, actor != nullptr
                                   ? *actor + " exited: its method " + function_name + " called ray::ExitActor()"
                                   : std::string("ray::ExitActor() outside an actor")};
  } catch (...) {
    return {ErrorKind::kTask, TaskExceptionMessage(function_name)};
  }
}

std::optional<LocalModeRuntime::TaskError> LocalModeRuntime::Run(const Task& task, std::vector<ObjectData>& args,
                                                                 SerializedValue* result,
                                                                 std::vector<std::shared_ptr<const std::string>>* bytes,
                                                                 std::shared_ptr<void>* instance, bool* exit_actor) {
  const FunctionManager& registry = FunctionManager::Instance();
  const RemoteFunction* function = nullptr;
  const ActorFactory* factory = nullptr;
  const ActorMethod* method = nullptr;
  switch (task.kind) {
    case Task::Kind::kFunction:
      function = registry.GetFunction(task.function_name);
      break;
    case Task::Kind::kActorCreation:
      factory = registry.GetActorFactory(task.function_name);
      break;
    case Task::Kind::kActorCall:
      method = registry.GetActorMethod(task.function_name);
      break;
  }
  if (function == nullptr && factory == nullptr && method == nullptr) {
    return TaskError{ErrorKind::kFunctionNotFound,
                     "local mode: nothing is registered as \"" + task.function_name + "\" (use RAY_REMOTE)"};
  }
  try {
    MaterializeArguments(task.args, &args);
    if (factory != nullptr) {
      *instance = (*factory)(args);
      *result = SerializeNil();
    } else if (method != nullptr) {
      if (*instance == nullptr) throw RayException(task.actor->Describe() + " has no instance");
      *result = (*method)(instance->get(), args);
    } else {
      *result = (*function)(args);
    }
    MaterializeReturns(task.function_name, std::max<size_t>(1, task.return_ids.size()), *result, bytes);
  } catch (...) {
    std::string describe = task.actor ? task.actor->Describe() : std::string();
    return ErrorOfCurrentException(task.function_name, task.actor ? &describe : nullptr, exit_actor);
  }
  return std::nullopt;
}


void LocalModeRuntime::Execute(Task& task) {
  {
    absl::MutexLock lock(&mu_);
    if (!BeginLocked(task)) return;
  }
  std::vector<ObjectData> args(task.args.size());
  std::shared_ptr<void> instance;
  std::optional<TaskError> error = Prepare(task, &args, &instance);
  // Outlives Finish's lock: the ObjectRefs inside the result must stay alive until
  // the result object holds references on them, and their destructors take mu_.
  SerializedValue result;
  std::vector<std::shared_ptr<const std::string>> bytes;
  bool exit_actor = false;
  if (!error) {
    TaskScope scope(this, &task);
    error = Run(task, args, &result, &bytes, &instance, &exit_actor);
  }
  Finish(task, error, bytes, result, exit_actor, std::move(instance));
}

void LocalModeRuntime::Finish(Task& task, const std::optional<TaskError>& error,
                              const std::vector<std::shared_ptr<const std::string>>& bytes,
                              const SerializedValue& result, bool exit_actor, std::shared_ptr<void> instance) {
  absl::MutexLock lock(&mu_);
  if (task.ended) {
    // A forced cancel failed its returns already.
  } else if (task.cancelled) {
    FailReturnsLocked(task, ErrorKind::kCancelled, "task " + task.function_name + " was cancelled");
  } else if (error) {
    FailReturnsLocked(task, error->kind, error->message);
  } else {
    for (size_t i = 0; i < task.return_ids.size(); ++i) {
      const SerializedValue& value = result.multiple ? result.parts[i] : result;
      CompleteLocked(task.return_ids[i], bytes[i], AddKnownReferencesLocked(value.contained_ids), ErrorKind::kOther,
                     "");
    }
    task.ended = true;
  }
  UntrackLocked(task);
  RemoveReferencesLocked(std::move(task.held_ids));
  if (task.actor) FinishActorTaskLocked(task, error, exit_actor, std::move(instance));
}

void LocalModeRuntime::RunOnActorLoop(const std::shared_ptr<Task>& task) {
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return;  // as the pool's queue, dropped
  }
  const ActorCoroutineMethod* coroutine = FunctionManager::Instance().GetActorCoroutineMethod(task->function_name);
  // Any other method runs to its end here, holding up the actor's other calls.
  if (coroutine == nullptr) return Execute(*task);
  {
    absl::MutexLock lock(&mu_);
    if (!BeginLocked(*task)) return;
  }
  std::vector<ObjectData> args(task->args.size());
  std::shared_ptr<void> instance;
  if (std::optional<TaskError> error = Prepare(*task, &args, &instance)) {
    return Finish(*task, error, {}, SerializedValue(), false, std::move(instance));
  }
  StartCoroutineCall(task, *coroutine, std::move(args), std::move(instance));
}

void LocalModeRuntime::StartCoroutineCall(const std::shared_ptr<Task>& task, const ActorCoroutineMethod& method,
                                          std::vector<ObjectData> args, std::shared_ptr<void> instance) {
  // Every resumption runs on the actor's loop, as this task (IsCancelled, co_yield).
  ActorLoop* loop = task->actor->loop;
  auto executor = std::make_shared<const Executor>([this, task, loop](std::function<void()> fn) {
    loop->Post([this, task, fn = std::move(fn)] {
      TaskScope scope(this, task.get());
      fn();
    });
  });
  TaskScope scope(this, task.get());
  ScopedExecutor current(executor);
  const std::string describe = task->actor->Describe();
  std::optional<Coroutine<SerializedValue>> call;
  try {
    if (instance == nullptr) throw RayException(describe + " has no instance");
    MaterializeArguments(task->args, &args);
    call.emplace(method(instance.get(), args));  // decodes the arguments now
  } catch (...) {
    bool exit_actor = false;
    TaskError error = ErrorOfCurrentException(task->function_name, &describe, &exit_actor);
    return Finish(*task, error, {}, SerializedValue(), exit_actor, std::move(instance));
  }
  // (A std::function, not the lambda's own type: the coroutine frame holds it.)
  std::function<void(Outcome<SerializedValue>)> done = [this, task, describe,
                                                         instance](Outcome<SerializedValue> outcome) mutable {
    SerializedValue result;
    std::vector<std::shared_ptr<const std::string>> bytes;
    bool exit_actor = false;
    std::optional<TaskError> error;
    try {
      result = outcome.Take();
      MaterializeReturns(task->function_name, std::max<size_t>(1, task->return_ids.size()), result, &bytes);
    } catch (...) {
      error = ErrorOfCurrentException(task->function_name, &describe, &exit_actor);
    }
    Finish(*task, error, bytes, result, exit_actor, std::move(instance));
  };
  StartDetached(std::move(*call), std::move(done));
}

}  // namespace internal
}  // namespace ray
