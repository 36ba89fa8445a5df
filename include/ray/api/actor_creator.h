// ray::ActorCreator<F>: what ray::Actor(factory) returns; `.Remote(args...)` creates
// the actor and returns its ray::ActorHandle<T> at once.
//
//   class Counter { public: static Counter* Create(int start); int Add(int x); ... };
//   RAY_REMOTE(Counter::Create, &Counter::Add);
//   ray::ActorHandle<Counter> counter =
//       ray::Actor(Counter::Create).SetName("counter").SetMaxRestarts(1).Remote(0);
//
// `factory` is a free or static function returning T* (choose among overloads with
// RAY_FUNC), registered with RAY_REMOTE; it runs in the actor's worker, once per
// start of the actor. Arguments follow the rules of ray::Task.
//
// Options (each returns the creator, so they chain):
//   SetName(name)                 a name unique in the job's namespace: the actor can be
//                                 found with ray::GetActor<T>(name); named actors are
//                                 not killed when their handles go out of scope
//   SetName(name, ray_namespace)  the same in another namespace
//   SetResources / SetResource    what the actor holds while it lives (default: one CPU
//                                 to place it, none held)
//   SetMaxRestarts(n)             restarts after its process or node died; -1 = always
//   SetMaxConcurrency(n)          calls run at once on n threads (no order among them);
//                                 for an async actor (a class with ray::Coroutine
//                                 methods) up to n calls at once on its one thread,
//                                 started in each caller's order (default 1000)
//   SetRuntimeEnv(env)            the runtime environment of the actor's process, merged
//                                 over the job's (ray/api/runtime_env.h), kept across
//                                 restarts; an env that cannot be applied makes the
//                                 actor DEAD and its calls throw RayRuntimeEnvException
//   SetPlacementGroup(group, i)   live in bundle i of the placement group (-1: any of its
//                                 bundles), holding the bundle's reserved resources
//                                 (ray/api/placement_group.h); Remote throws RayException
//                                 for an empty group or i < -1 or i >= its bundles. When
//                                 the group is removed (or never existed) the actor is
//                                 DEAD: its calls throw RayActorException
//
// Creation is asynchronous: calls made before the actor is up wait for it. A factory
// that throws makes the actor DEAD: every call fails with RayActorException carrying
// the factory's error. Remote throws RayException before ray::Init() or when the name
// is taken in the namespace, and RayFunctionNotFound for an unregistered factory.
#pragma once

#include <string>
#include <tuple>
#include <typeindex>
#include <typeinfo>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ray/api/actor_handle.h"
#include "ray/api/function_manager.h"
#include "ray/api/function_traits.h"
#include "ray/api/placement_group.h"
#include "ray/api/ray_runtime.h"
#include "ray/api/task_caller.h"
#include "ray/api/task_options.h"

namespace ray {
namespace internal {

template <typename F>
class ActorCreator {
  static_assert(IsActorFactory<F>(),
                "ray::Actor(f): f must be a free or static function returning a pointer to the actor's class "
                "(e.g. static Counter* Counter::Create(int)), registered with RAY_REMOTE");

 public:
  using Traits = FunctionTraits<F>;
  using ActorType = std::remove_pointer_t<typename Traits::ReturnType>;

  // Throws RayFunctionNotFound (a RayException) when `factory` was not registered
  // with RAY_REMOTE, as Ray does when the creator is made.
  explicit ActorCreator(F factory) : factory_(factory), name_(FunctionManager::Instance().GetFunctionName(factory)) {
    if (name_.empty() || FunctionManager::Instance().GetActorFactory(name_) == nullptr) {
      throw RayFunctionNotFound(FunctionManager::NotRegisteredMessage(KeyOfFunction(factory)));
    }
  }

  ActorCreator& SetName(std::string name) {
    options_.name = std::move(name);
    return *this;
  }
  ActorCreator& SetName(std::string name, std::string ray_namespace) {
    options_.name = std::move(name);
    options_.ray_namespace = std::move(ray_namespace);
    return *this;
  }
  ActorCreator& SetResources(std::unordered_map<std::string, double> resources) {
    options_.resources = std::move(resources);
    return *this;
  }
  ActorCreator& SetResource(const std::string& name, double value) {
    options_.resources[name] = value;
    return *this;
  }
  ActorCreator& SetMaxRestarts(int max_restarts) {
    options_.max_restarts = max_restarts;
    return *this;
  }
  ActorCreator& SetMaxConcurrency(int max_concurrency) {
    options_.max_concurrency = max_concurrency;
    max_concurrency_set_ = true;
    return *this;
  }
  ActorCreator& SetRuntimeEnv(const ray::RuntimeEnv& runtime_env) {
    options_.serialized_runtime_env = runtime_env.Serialize();
    return *this;
  }
  ActorCreator& SetPlacementGroup(const PlacementGroup& group, int bundle_index) {
    placement_.Set(group, bundle_index);
    return *this;
  }

  template <typename... Args>
  ActorHandle<ActorType> Remote(Args&&... args) {
    static_assert(sizeof...(Args) == Traits::kArity,
                  "ray::Actor(f).Remote(args...): wrong number of arguments: pass exactly one argument per "
                  "parameter of the factory f");
    return SubmitIfArgumentsFit<ActorHandle<ActorType>, typename Traits::Params, Traits::kArity>(
        [this](auto indexes, auto&&... a) { return Create(indexes, std::forward<decltype(a)>(a)...); },
        std::forward<Args>(args)...);
  }

 private:
  template <size_t... I, typename... Args>
  ActorHandle<ActorType> Create(std::index_sequence<I...>, Args&&... args) {
    RayRuntime* runtime = RequireRuntime("ray::Actor(...).Remote()");
    CheckTaskOptions(options_.resources);
    placement_.Apply(&options_.placement, "ray::Actor(...).SetPlacementGroup(group, bundle_index).Remote()");
    std::vector<TaskArgument> task_args = MakeTaskArguments<typename Traits::Params>(
        name_, std::index_sequence<I...>{}, std::forward<Args>(args)...);
    ActorCreationOptions options = options_;
    options.class_name = TypeName<ActorType>();
    if (!max_concurrency_set_ && FunctionManager::Instance().IsAsyncActorClass(std::type_index(typeid(ActorType)))) {
      options.max_concurrency = kAsyncActorDefaultMaxConcurrency;
    }
    CreatedActor created = runtime->CreateActor(name_, std::move(task_args), options);
    return ActorHandle<ActorType>(std::move(created.actor_id),
                                  ObjectRef<void>(std::move(created.handle_object_id), AdoptReference{}));
  }

  F factory_;
  std::string name_;  // as registered
  ActorCreationOptions options_;
  bool max_concurrency_set_ = false;
  PlacementRequest placement_;
};

}  // namespace internal

using internal::ActorCreator;

}  // namespace ray
