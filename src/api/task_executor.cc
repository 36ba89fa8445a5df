#include "src/api/task_executor.h"

#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "ray/api/coroutine.h"
#include "ray/api/function_manager.h"
#include "ray/api/ray_exception.h"
#include "src/api/exception_util.h"
#include "src/common/process.h"
#include "src/common/id.h"

namespace ray {
namespace internal {
namespace {

using manta::ObjectID;

// The actor this worker runs (one per process), created by its creation task.
std::mutex g_actor_mu;
std::shared_ptr<void> g_actor_instance;  // guarded by g_actor_mu

std::shared_ptr<void> CurrentActorInstance() {
  std::lock_guard<std::mutex> lock(g_actor_mu);
  return g_actor_instance;
}

// The task's values: one, or each part of a ray::Returns<T>.
void SetReturnValues(SerializedValue result, manta::core::TaskOutput* out) {
  out->multiple = result.multiple;
  if (!result.multiple) {
    out->values.push_back(ToReturnValue(std::move(result)));
    return;
  }
  out->values.reserve(result.parts.size());
  for (SerializedValue& part : result.parts) out->values.push_back(ToReturnValue(std::move(part)));
}

// A task's resolved arguments as the API's function registry takes them.
std::vector<ObjectData> ToObjectData(const manta::rpc::TaskSpec& spec,
                                     const std::vector<manta::core::ObjectValue>& args) {
  std::vector<ObjectData> data(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    data[i].data = args[i].data;
    data[i].size = args[i].size;
    data[i].holder = args[i].holder;
    const auto& arg = spec.args(static_cast<int>(i));
    if (arg.is_ref()) data[i].object_id = arg.ref().object_id();
  }
  return data;
}

// Inside catch (...): the task's output is the exception in flight (or the actor's
// exit, for ray::ExitActor).
void FailWithCurrentException(const std::string& name, manta::core::TaskOutput* out) {
  try {
    throw;
  } catch (const RayIntentionalSystemExitException&) {
    out->exit_actor = true;
  } catch (...) {
    out->failed = true;
    out->error.set_type(manta::rpc::TASK_EXECUTION_EXCEPTION);
    out->error.set_message(TaskExceptionMessage(name));
    out->error.set_exception_type(CurrentExceptionTypeName());
  }
}

// Whether this worker's actor is async (set by its creation task).
std::atomic<bool> g_actor_async{false};

// An async actor's coroutine call: its arguments are decoded now; the core worker
// starts the coroutine on the actor's loop (TaskOutput::start).
void StartCoroutineCall(const std::string& name, const ActorCoroutineMethod& coroutine,
                        std::shared_ptr<void> instance, const std::vector<ObjectData>& args,
                        manta::core::TaskOutput* out) {
  auto call = std::make_shared<Coroutine<SerializedValue>>(coroutine(instance.get(), args));
  out->start = [name, call, instance = std::move(instance)](manta::core::TaskOutput::Post post,
                                                            std::function<void(manta::core::TaskOutput)> done) {
    auto executor = std::make_shared<const ray::Executor>(std::move(post));
    ScopedExecutor scope(executor);
    // (A std::function, not the lambda's own type: the coroutine frame holds it.)
    std::function<void(Outcome<SerializedValue>)> end = [name, instance,
                                                         done = std::move(done)](Outcome<SerializedValue> outcome) {
      manta::core::TaskOutput out;
      try {
        SetReturnValues(outcome.Take(), &out);
      } catch (...) {
        FailWithCurrentException(name, &out);
      }
      done(std::move(out));
    };
    StartDetached(std::move(*call), std::move(end));
  };
}

}  // namespace

manta::core::ReturnValue ToReturnValue(SerializedValue value) {
  manta::core::ReturnValue out;
  out.size = value.size;
  out.write = std::move(value.write);
  for (const std::string& id : value.contained_ids) {
    if (auto parsed = ObjectID::FromBinaryChecked(id); parsed.ok()) out.contained_ids.push_back(*parsed);
  }
  return out;
}

manta::core::TaskOutput ExecuteTask(const manta::rpc::TaskSpec& spec,
                                    const std::vector<manta::core::ObjectValue>& args) {
  manta::core::TaskOutput out;
  const std::string& name = spec.function_name();
  const RemoteFunction* function = nullptr;
  const ActorFactory* factory = nullptr;
  const ActorMethod* method = nullptr;
  std::shared_ptr<void> instance;
  switch (spec.type()) {
    case manta::rpc::ACTOR_CREATION_TASK:
      factory = FunctionManager::Instance().GetActorFactory(name);
      break;
    case manta::rpc::ACTOR_TASK:
      method = FunctionManager::Instance().GetActorMethod(name);
      instance = CurrentActorInstance();
      break;
    default:
      function = FunctionManager::Instance().GetFunction(name);
  }
  if (function == nullptr && factory == nullptr && method == nullptr) {
    out.failed = true;
    out.error.set_type(manta::rpc::FUNCTION_NOT_FOUND);
    const char* kind = spec.type() == manta::rpc::ACTOR_CREATION_TASK ? "actor factory"
                       : spec.type() == manta::rpc::ACTOR_TASK        ? "actor method"
                                                                      : "function";
    out.error.set_message(std::string(kind) + " '" + name + "' is not registered in worker " +
                          manta::SelfExecutablePath() + " (pid " + std::to_string(getpid()) +
                          "); register it with RAY_REMOTE");
    return out;
  }
  std::vector<ObjectData> data = ToObjectData(spec, args);
  try {
    SerializedValue result;
    if (factory != nullptr) {
      std::shared_ptr<void> created = (*factory)(data);
      {
        std::lock_guard<std::mutex> lock(g_actor_mu);
        g_actor_instance = std::move(created);
      }
      out.async_actor = FunctionManager::Instance().IsAsyncActorFactory(name);
      g_actor_async.store(out.async_actor);
      result = SerializeNil();
    } else if (method != nullptr) {
      if (instance == nullptr) throw RayException("this worker runs no actor instance (its creation failed)");
      // (A plain actor's call costs no second lookup.)
      const ActorCoroutineMethod* coroutine =
          g_actor_async.load() ? FunctionManager::Instance().GetActorCoroutineMethod(name) : nullptr;
      if (coroutine != nullptr) {
        StartCoroutineCall(name, *coroutine, std::move(instance), data, &out);
        return out;
      }
      result = (*method)(instance.get(), data);
    } else {
      result = (*function)(data);
    }
    SetReturnValues(std::move(result), &out);
  } catch (...) {
    FailWithCurrentException(name, &out);
  }
  return out;
}

}  // namespace internal
}  // namespace ray
