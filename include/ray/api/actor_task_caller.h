// ray::ActorTaskCaller<F>: what handle.Task(&Class::Method) returns; `.Remote(args...)`
// calls the method on the actor.
//
//   ray::ActorHandle<Counter> counter = ray::Actor(Counter::Create).Remote(0);
//   ray::ObjectRef<int> three = counter.Task(&Counter::Add).Remote(3);
//
// Options (each returns the caller, so they chain):
//   SetName(name)                 a name for the call in logs and tools
//   SetResources / SetResource    accepted for compatibility with Ray; an actor's calls
//                                 run on the resources the actor holds
//   SetMaxRetries(n)              (Manta addition) how often the call is sent again
//                                 when the actor's process dies while it runs and the
//                                 actor restarts; 0 (the default) = never: the call
//                                 fails with RayActorException
//
// Arguments follow the rules of ray::Task (ray/api/task_caller.h): values, ObjectRefs
// passed by reference, ObjectRefs passed as refs; a mismatch is a compile error.
//
// Calls from one caller run on the actor in the order Remote was called, one at a
// time unless the actor was created with SetMaxConcurrency(n). Remote returns at once
// with a pending ObjectRef<R>; calls made before the actor is up wait for it. A call
// of a dead actor (killed, exited, its factory threw, out of restarts) fails with
// RayActorException naming the actor and why it died. Remote throws RayException
// before ray::Init() and RayFunctionNotFound when the method was not registered with
// RAY_REMOTE. Thread-safe as TaskCaller.
#pragma once

#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ray/api/function_manager.h"
#include "ray/api/function_traits.h"
#include "ray/api/object_ref.h"
#include "ray/api/ray_exception.h"
#include "ray/api/ray_runtime.h"
#include "ray/api/task_caller.h"

namespace ray {
namespace internal {

// "the member function <type> is not registered ..." (src/api/function_manager.cc).
[[noreturn]] void ThrowMethodNotRegistered(const std::string& method_type);
[[noreturn]] void ThrowNilActorHandle(const char* caller);

template <typename F>
class ActorTaskCaller {
  static_assert(MemberFunctionTraits<F>::kIsMemberFunction,
                "handle.Task(f): f must be a member function of the actor's class, as &Class::Method");

 public:
  using Traits = MemberFunctionTraits<F>;
  using ReturnType = typename Traits::ReturnType;

  // Throws (a RayException) when `method` was not registered with RAY_REMOTE, as Ray
  // does when the caller is made.
  ActorTaskCaller(std::string actor_id, std::string handle_object_id, F method)
      : actor_id_(std::move(actor_id)), handle_object_id_(std::move(handle_object_id)), method_(method),
        name_(FunctionManager::Instance().GetActorMethodName(KeyOfMemberFunction(method))) {
    if (name_.empty()) ThrowMethodNotRegistered(TypeName<F>());
  }

  ActorTaskCaller& SetName(std::string name) {
    options_.name = std::move(name);
    return *this;
  }
  ActorTaskCaller& SetResources(std::unordered_map<std::string, double> resources) {
    options_.resources = std::move(resources);
    return *this;
  }
  ActorTaskCaller& SetResource(const std::string& name, double value) {
    options_.resources[name] = value;
    return *this;
  }
  ActorTaskCaller& SetMaxRetries(int max_retries) {
    options_.max_retries = max_retries;
    return *this;
  }

  // For a method returning ray::Generator<T>: as TaskCaller's.
  ActorTaskCaller& SetGeneratorBackpressureNumObjects(int64_t n)
    requires IsGenerator<ReturnType>::value
  {
    options_.backpressure_num_objects = n;
    return *this;
  }

  // ObjectRef<R>, or for a method returning ray::Generator<T> an ObjectRefGenerator<T>.
  using Result = std::conditional_t<IsGenerator<ReturnType>::value, typename RemoteResult<ReturnType>::Type,
                                    ObjectRef<ReturnType>>;

  template <typename... Args>
  Result Remote(Args&&... args) {
    static_assert(sizeof...(Args) == Traits::kArity,
                  "handle.Task(&Class::Method).Remote(args...): wrong number of arguments: pass exactly one "
                  "argument per parameter of the method");
    return SubmitIfArgumentsFit<Result, typename Traits::Params, Traits::kArity>(
        [this](auto indexes, auto&&... a) { return Submit(indexes, std::forward<decltype(a)>(a)...); },
        std::forward<Args>(args)...);
  }

 private:
  template <size_t... I, typename... Args>
  Result Submit(std::index_sequence<I...>, Args&&... args) {
    RayRuntime* runtime = RequireRuntime("ActorHandle::Task(...).Remote()");
    if (actor_id_.empty()) ThrowNilActorHandle("ActorHandle::Task(...).Remote()");
    std::vector<TaskArgument> task_args = MakeTaskArguments<typename Traits::Params>(
        name_, std::index_sequence<I...>{}, std::forward<Args>(args)...);
    options_.streaming = IsGenerator<ReturnType>::value;
    std::string id = runtime->SubmitActorTask(actor_id_, handle_object_id_, name_, std::move(task_args), options_);
    return Result(std::move(id), AdoptReference{});
  }

  std::string actor_id_;
  std::string handle_object_id_;
  F method_;
  std::string name_;  // as registered
  TaskOptions options_;
};

}  // namespace internal

using internal::ActorTaskCaller;

}  // namespace ray
