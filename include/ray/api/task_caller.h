// ray::internal::TaskCaller<F>: what ray::Task(f) returns; `.Remote(args...)` submits.
//
//   ray::ObjectRef<int> sum = ray::Task(Plus).SetName("plus").Remote(1, ray::Put(2));
//
// Options (each returns the caller, so they chain):
//   SetName(name)                 a name for the task in logs and tools
//   SetResources({{"CPU", 2}})    the resources one run of the task needs (default 1 CPU)
//   SetResource("GPU", 1)         one entry of the above
//   SetMaxRetries(n)              (Manta addition) how often the task is re-run when its
//                                 worker or node dies; -1 = the default (3), 0 = never.
//                                 Exceptions thrown by the function are not retried.
//   SetRuntimeEnv(env)            the runtime environment the task runs in, merged over
//                                 the job's (ray/api/runtime_env.h); a task whose env
//                                 cannot be applied fails with RayRuntimeEnvException
//   SetPlacementGroup(group, i)   run in bundle i of the placement group (-1: any of its
//                                 bundles), using the bundle's reserved resources
//                                 (ray/api/placement_group.h); Remote throws RayException
//                                 for an empty group or i < -1 or i >= its bundles. When
//                                 the group is removed (or never existed) the task fails:
//                                 Get throws RayException naming the group
//
// Arguments of Remote, one per parameter of f, checked at compile time:
//   - a value implicitly convertible to the parameter's type: serialized and sent;
//   - an ObjectRef<U> for a parameter of plain type P: passed by reference: the task
//     waits for the object and f receives its value (U must be P, or an arithmetic
//     type msgpack decodes as P). If that object failed, the task fails the same way;
//   - an ObjectRef<U> for a parameter declared ObjectRef<U>: the ref itself is
//     passed, f receives a working ref (and may Get it, or pass it on).
// A wrong number of arguments or a mismatching type is a compile error
// ("ray::Task(f).Remote(args...): ...").
//
// Remote returns at once with a pending ObjectRef<R> (R = f's return type;
// ObjectRef<void> for void). It throws RayException before ray::Init() (or after
// Shutdown), RayFunctionNotFound when f was not registered with RAY_REMOTE, and
// RayException for a nil ObjectRef argument. A TaskCaller may be used from any
// thread, one thread at a time; Remote may be called on it several times.
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
#include "ray/api/placement_group.h"
#include "ray/api/ray_exception.h"
#include "ray/api/ray_runtime.h"
#include "ray/api/returns.h"
#include "ray/api/runtime_env.h"
#include "ray/api/serializer.h"
#include "ray/api/task_options.h"

namespace ray {
namespace internal {

// Instantiated once per argument so a compile error names the position (1-based)
// and both types: look for "CheckArgument<position, parameter, argument>" in the
// compiler's "required from" notes.
template <size_t Position, typename Param, typename Arg>
struct CheckArgument {
  static constexpr bool kOk = ArgumentMatches<Param, Arg>();
  static_assert(kOk,
                "Remote(args...): an argument does not match the parameter type of the function, "
                "factory or method (see CheckArgument<position, parameter type, argument type> in the notes): "
                "pass a value convertible to the parameter type, an ObjectRef of the parameter "
                "type, or, for a parameter declared ObjectRef<T>, an ObjectRef<T>");
};

template <typename Params, typename... Args, size_t... I>
constexpr bool CheckArguments(std::index_sequence<I...>) {
  return (CheckArgument<I + 1, std::tuple_element_t<I, Params>, Args>::kOk && ...);
}

// What Remote(args...) of a task, actor factory or actor method does once its
// caller's static_assert has checked the number of arguments: when they also match
// the parameters `Params`, `submit(std::index_sequence_for<Args...>, args...)`;
// otherwise (a compile error has been reported) an empty `Result`.
template <typename Result, typename Params, size_t kArity, typename Submit, typename... Args>
Result SubmitIfArgumentsFit(Submit&& submit, Args&&... args) {
  if constexpr (sizeof...(Args) == kArity) {
    if constexpr (CheckArguments<Params, Args...>(std::index_sequence_for<Args...>{})) {
      return submit(std::index_sequence_for<Args...>{}, std::forward<Args>(args)...);
    }
  }
  return Result();
}

// [[noreturn]] helpers keeping string building out of the templates.
[[noreturn]] void ThrowNilArgument(const std::string& function_name, size_t position);
// Throws RayException unless SetNumReturns(n >= 1) was called for a function
// returning ray::Returns<T>.
void CheckNumReturns(const std::string& function_name, bool set, int num_returns);

template <typename Param, typename Arg>
TaskArgument MakeTaskArgument(Arg&& arg, const std::string& function_name, size_t position) {
  using P = std::remove_cvref_t<Param>;
  using A = std::remove_cvref_t<Arg>;
  TaskArgument out;
  if constexpr (IsObjectRef<A>::value && !IsObjectRef<P>::value) {
    if (arg.IsNil()) ThrowNilArgument(function_name, position);
    out.by_ref = true;
    out.object_id = arg.ID();
  } else if constexpr (std::is_same_v<A, P>) {
    out.value = SerializeCopy<P>(arg);
  } else {
    const P converted = std::forward<Arg>(arg);
    out.value = SerializeCopy<P>(converted);
  }
  return out;
}

// The TaskArguments of a call whose parameters are `Params` (a std::tuple of the
// declared types): one per argument, in order.
template <typename Params, size_t... I, typename... Args>
std::vector<TaskArgument> MakeTaskArguments(const std::string& function_name, std::index_sequence<I...>,
                                            Args&&... args) {
  std::vector<TaskArgument> task_args;
  task_args.reserve(sizeof...(Args));
  (task_args.push_back(
       MakeTaskArgument<std::tuple_element_t<I, Params>>(std::forward<Args>(args), function_name, I + 1)),
   ...);
  return task_args;
}

template <typename F>
class TaskCaller {
  static_assert(FunctionTraits<F>::kIsFunctionPointer,
                "ray::Task(f): f must be a free function or a static member function registered "
                "with RAY_REMOTE (lambdas, functors and member functions cannot run as tasks)");

 public:
  using Traits = FunctionTraits<F>;
  using ReturnType = typename Traits::ReturnType;

  // Throws RayFunctionNotFound (a RayException) when `function` was not registered
  // with RAY_REMOTE, as Ray does when the caller is made.
  explicit TaskCaller(F function) : function_(function), name_(FunctionManager::Instance().GetFunctionName(function)) {
    if (name_.empty()) throw RayFunctionNotFound(FunctionManager::NotRegisteredMessage(KeyOfFunction(function)));
  }

  TaskCaller& SetName(std::string name) {
    options_.name = std::move(name);
    return *this;
  }
  TaskCaller& SetResources(std::unordered_map<std::string, double> resources) {
    options_.resources = std::move(resources);
    return *this;
  }
  TaskCaller& SetResource(const std::string& name, double value) {
    options_.resources[name] = value;
    return *this;
  }
  TaskCaller& SetMaxRetries(int max_retries) {
    options_.max_retries = max_retries;
    return *this;
  }
  TaskCaller& SetRuntimeEnv(const ray::RuntimeEnv& runtime_env) {
    options_.serialized_runtime_env = runtime_env.Serialize();
    return *this;
  }
  TaskCaller& SetPlacementGroup(const PlacementGroup& group, int bundle_index) {
    placement_.Set(group, bundle_index);
    return *this;
  }
  // For a function returning ray::Returns<T> (ray/api/returns.h): how many values it
  // returns; Remote then returns that many refs. Required for such functions.
  TaskCaller& SetNumReturns(int num_returns)
    requires IsReturns<ReturnType>::value
  {
    options_.num_returns = num_returns;
    num_returns_set_ = true;
    return *this;
  }

  // For a function returning ray::Generator<T> (ray/api/generator.h): the task pauses
  // while `n` of its items are unconsumed (Ray's _generator_backpressure_num_objects);
  // n <= 0 (the default): it never waits for the consumer.
  TaskCaller& SetGeneratorBackpressureNumObjects(int64_t n)
    requires IsGenerator<ReturnType>::value
  {
    options_.backpressure_num_objects = n;
    return *this;
  }

  // Submits the task; see the top of this file. Returns ObjectRef<R>, for a
  // function returning ray::Returns<T> a std::vector<ObjectRef<T>>, and for one
  // returning ray::Generator<T> a ray::ObjectRefGenerator<T>.
  template <typename... Args>
  typename RemoteResult<ReturnType>::Type Remote(Args&&... args) {
    static_assert(sizeof...(Args) == Traits::kArity,
                  "ray::Task(f).Remote(args...): wrong number of arguments: pass exactly one "
                  "argument per parameter of f");
    return SubmitIfArgumentsFit<typename RemoteResult<ReturnType>::Type, typename Traits::Params, Traits::kArity>(
        [this](auto indexes, auto&&... a) { return Submit(indexes, std::forward<decltype(a)>(a)...); },
        std::forward<Args>(args)...);
  }

 private:
  template <size_t... I, typename... Args>
  typename RemoteResult<ReturnType>::Type Submit(std::index_sequence<I...>, Args&&... args) {
    RayRuntime* runtime = RequireRuntime("ray::Task(...).Remote()");
    CheckTaskOptions(options_.resources);
    if constexpr (IsReturns<ReturnType>::value) CheckNumReturns(name_, num_returns_set_, options_.num_returns);
    placement_.Apply(&options_.placement, "ray::Task(...).SetPlacementGroup(group, bundle_index).Remote()");
    std::vector<TaskArgument> task_args = MakeTaskArguments<typename Traits::Params>(
        name_, std::index_sequence<I...>{}, std::forward<Args>(args)...);
    options_.streaming = IsGenerator<ReturnType>::value;
    std::vector<std::string> ids = runtime->SubmitTask(name_, std::move(task_args), options_);
    if constexpr (IsGenerator<ReturnType>::value) {
      return typename RemoteResult<ReturnType>::Type(std::move(ids.at(0)), AdoptReference{});
    } else if constexpr (IsReturns<ReturnType>::value) {
      std::vector<ObjectRef<typename IsReturns<ReturnType>::ValueType>> refs;
      refs.reserve(ids.size());
      for (std::string& id : ids) refs.emplace_back(std::move(id), AdoptReference{});
      return refs;
    } else {
      return ObjectRef<ReturnType>(std::move(ids.at(0)), AdoptReference{});
    }
  }

  F function_;
  std::string name_;  // as registered
  TaskOptions options_;
  bool num_returns_set_ = false;
  PlacementRequest placement_;
};

}  // namespace internal
}  // namespace ray
