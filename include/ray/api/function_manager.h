// The registry of remote functions: RAY_REMOTE, RAY_FUNC and FunctionManager.
//
//   int Plus(int a, int b) { return a + b; }
//   int Overloaded(int a);
//   int Overloaded(int a, int b);
//   RAY_REMOTE(Plus, RAY_FUNC(Overloaded, int), RAY_FUNC(Overloaded, int, int));
//
// Actors register the same way: a factory (a free or static function returning a
// pointer to the actor) and the member functions callers may call:
//
//   class Counter { public: static Counter* Create(int start); int Add(int x); };
//   RAY_REMOTE(Counter::Create, &Counter::Add);
//
// A member function is registered as its spelling without the '&' ("Counter::Add").
//
// RAY_REMOTE (at namespace scope in a .cc file) registers each function at static
// initialization under a name taken from its spelling: "Plus", and for RAY_FUNC
// "Overloaded(int)" and "Overloaded(int,int)" (whitespace removed). A task travels
// by that name, so the caller and the worker must register the function under the
// same spelling (the usual case: the same binary or library).
//
// Registering one function twice (under one or several names, in one or several
// files) is fine. Registering two different functions under one name (two static
// functions of the same name in different files, or overloads without RAY_FUNC) is
// reported on stderr and aborts the program at startup.
//
// Free functions, static member functions (as tasks or actor factories) and member
// functions (actor methods) can be registered; their parameters and return values
// must be msgpack-serializable (or ObjectRef<T>, or ActorHandle<T>).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeindex>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ray/api/coroutine.h"
#include "ray/api/function_traits.h"
#include "ray/api/object_ref.h"
#include "ray/api/ray_exception.h"
#include "ray/api/ray_runtime.h"
#include "ray/api/returns.h"
#include "ray/api/serializer.h"

namespace ray {
namespace internal {

// An actor factory: decodes the arguments and returns the new instance (which the
// actor's worker keeps until it exits). Throws what the factory throws.
using ActorFactory = std::function<std::shared_ptr<void>(const std::vector<ObjectData>& args)>;
// An actor method: runs the member function on `instance` (as RemoteFunction does).
using ActorMethod = std::function<SerializedValue(void* instance, const std::vector<ObjectData>& args)>;
// An actor method that is a coroutine (ray::Coroutine<T>), started rather than run:
// decodes the arguments at once (throwing as ActorMethod would), and returns the
// coroutine that calls the method, awaits it and serializes its value (async actors).
using ActorCoroutineMethod =
    std::function<Coroutine<SerializedValue>(void* instance, const std::vector<ObjectData>& args)>;
// What ray::Actor gives an async actor that did not SetMaxConcurrency: as Ray does.
constexpr int kAsyncActorDefaultMaxConcurrency = 1000;

// Thread-safe: registration usually happens during static initialization, but
// libraries loaded later may register while other threads look functions up.
class FunctionManager {
 public:
  static FunctionManager& Instance();

  // Registers `invoker` under `name` for the function at `key`. A no-op when that
  // name is already registered for the same function; aborts the process with a
  // message when it is registered for another one.
  void RegisterFunction(const std::string& name, FunctionKey key, RemoteFunction invoker);

  // The invoker registered as `name`, or null. The pointer stays valid for the life
  // of the process.
  const RemoteFunction* GetFunction(const std::string& name) const;

  // The name a function pointer was (first) registered under; empty if none.
  std::string GetFunctionName(FunctionKey key) const;
  template <typename F>
  std::string GetFunctionName(F function) const {
    return GetFunctionName(KeyOfFunction(function));
  }

  // Actor factories and methods: registered and looked up like functions. The
  // pointers stay valid for the life of the process.
  // `actor_class`: the class the factory creates, or the method is a member of.
  void RegisterActorFactory(const std::string& name, FunctionKey key, ActorFactory factory,
                            std::type_index actor_class);
  const ActorFactory* GetActorFactory(const std::string& name) const;
  // `coroutine`: set for a method that is a coroutine (or a generator, which runs as
  // one on an async actor but does not make its class async: `makes_async` false).
  void RegisterActorMethod(const std::string& name, const std::string& key, ActorMethod method,
                           std::type_index actor_class, ActorCoroutineMethod coroutine = nullptr,
                           bool makes_async = true);
  const ActorMethod* GetActorMethod(const std::string& name) const;
  // The coroutine form of a method registered as a coroutine; null for another.
  const ActorCoroutineMethod* GetActorCoroutineMethod(const std::string& name) const;
  // Async actors: those whose class has a coroutine among its registered methods.
  // Their calls run concurrently on one thread (ray/api/coroutine.h).
  bool IsAsyncActorClass(std::type_index actor_class) const;
  // Whether the factory registered as `factory_name` creates an async actor.
  bool IsAsyncActorFactory(const std::string& factory_name) const;
  // The name a member function pointer (KeyOfMemberFunction) was registered under.
  std::string GetActorMethodName(const std::string& key) const;

  // Every registered name, sorted (for diagnostics).
  std::vector<std::string> GetRegisteredNames() const;

  // The message of RayFunctionNotFound for an unregistered function pointer,
  // naming the function when the binary's symbols allow it.
  static std::string NotRegisteredMessage(FunctionKey key);

 private:
  FunctionManager() = default;

  struct Entry {
    FunctionKey key;
    RemoteFunction invoker;
  };
  mutable std::mutex mu_;
  // Values are heap nodes so GetFunction's pointers survive later registrations.
  std::unordered_map<std::string, std::unique_ptr<Entry>> by_name_;
  std::unordered_map<FunctionKey, std::string> name_by_key_;
  struct FactoryEntry {
    FunctionKey key;
    ActorFactory factory;
    std::type_index actor_class;
  };
  struct MethodEntry {
    std::string key;
    ActorMethod method;
    ActorCoroutineMethod coroutine;
  };
  std::unordered_set<std::type_index> async_classes_;
  std::unordered_map<std::string, std::unique_ptr<FactoryEntry>> factories_;
  std::unordered_map<std::string, std::unique_ptr<MethodEntry>> methods_;
  std::unordered_map<std::string, std::string> method_name_by_key_;
};

// The names in the text of RAY_REMOTE's arguments, one per function, with
// whitespace removed and RAY_FUNC(f, A, B) written as f(A,B). Internal.
std::vector<std::string> SplitRemoteFunctionNames(const char* text);
// Prints `message` about RAY_REMOTE(`text`) to stderr and aborts. Internal.
[[noreturn]] void AbortRemoteRegistration(const char* text, const std::string& message);

// "<function_name>: argument #<index + 1>". Internal.
std::string ArgumentContext(const std::string& function_name, size_t index);
// RayException for a task carrying `actual` arguments to a function taking `expected`.
[[noreturn]] void ThrowArgumentCount(const std::string& function_name, size_t expected, size_t actual);

// Decodes argument `index` (0-based) of a task running `function_name`.
template <typename T>
void DecodeArgument(const ObjectData& arg, const std::string& function_name, size_t index, T& out) {
  DecodeInto(arg.data, arg.size, arg.object_id, [&] { return ArgumentContext(function_name, index); }, out);
}
template <typename T>
T DecodeArgumentValue(const ObjectData& arg, const std::string& function_name, size_t index) {
  return DecodeValue<T>(arg.data, arg.size, arg.object_id, [&] { return ArgumentContext(function_name, index); });
}

// Serializes what `produce()` returns, an R (msgpack nil for void). A coroutine is
// run here, on this thread, until it finishes; its value is serialized. So is a
// generator, whose items go to its task's stream; its value is their number.
template <typename R, typename Produce>
SerializedValue SerializeResultOf(const Produce& produce) {
  using Result = std::remove_cvref_t<R>;
  if constexpr (IsGenerator<Result>::value) {
    return SerializeResultOf<int64_t>([&]() -> int64_t { return RunAsync(DriveGenerator(produce())); });
  } else if constexpr (IsCoroutine<Result>::value) {
    using Value = typename IsCoroutine<Result>::ValueType;
    return SerializeResultOf<Value>([&]() -> Value { return RunAsync(produce()); });
  } else if constexpr (std::is_void_v<R>) {
    produce();
    return SerializeNil();
  } else {
    auto result = std::make_shared<const Result>(produce());
    if constexpr (IsReturns<Result>::value) {
      return SerializeParts(std::move(result));
    } else {
      return SerializeShared<Result>(std::move(result));
    }
  }
}

// Decodes `args` as the parameters P... (on the heap: they may be large, std::array).
template <typename... P, size_t... I>
std::unique_ptr<std::tuple<std::decay_t<P>...>> DecodeArguments(const std::string& name,
                                                                const std::vector<ObjectData>& args,
                                                                std::index_sequence<I...>) {
  if (args.size() != sizeof...(P)) ThrowArgumentCount(name, sizeof...(P), args.size());
  using Values = std::tuple<std::decay_t<P>...>;
  std::unique_ptr<Values> values;
  if constexpr ((std::is_default_constructible_v<std::decay_t<P>> && ...)) {
    values = std::make_unique<Values>();
    (DecodeArgument(args[I], name, I, std::get<I>(*values)), ...);
  } else {
    // Braced initialization decodes the arguments left to right.
    values.reset(new Values{DecodeArgumentValue<std::decay_t<P>>(args[I], name, I)...});
  }
  return values;
}

// Decodes `args` as the parameters P... and calls `call(P&&...)`; serializes what it
// returns (SerializeResultOf).
template <typename R, typename... P, typename Call, size_t... I>
SerializedValue DecodeAndCall(const Call& call, const std::string& name, const std::vector<ObjectData>& args,
                              std::index_sequence<I...> seq) {
  auto values = DecodeArguments<P...>(name, args, seq);
  return SerializeResultOf<R>([&]() -> R { return call(std::forward<P>(std::get<I>(*values))...); });
}

// An async actor's call: awaits `method` on `instance` with the decoded `values`
// (which this coroutine owns, so the method may take them by reference), then
// serializes its value. (GCC warns that the coroutine's frame, a type of this header,
// holds a type of the caller's anonymous namespace when the actor class is in one;
// the frame never leaves the caller's translation unit.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsubobject-linkage"
template <typename R, typename... P, typename Class, typename Method, size_t... I>
Coroutine<SerializedValue> AwaitActorMethod(Class* instance, Method method,
                                            std::unique_ptr<std::tuple<std::decay_t<P>...>> values,
                                            std::index_sequence<I...>) {
  if constexpr (IsGenerator<std::remove_cvref_t<R>>::value) {
    co_return SerializeShared<int64_t>(std::make_shared<const int64_t>(
        co_await DriveGenerator((instance->*method)(std::forward<P>(std::get<I>(*values))...))));
  } else if constexpr (std::is_void_v<typename IsCoroutine<std::remove_cvref_t<R>>::ValueType>) {
    co_await (instance->*method)(std::forward<P>(std::get<I>(*values))...);
    co_return SerializeNil();
  } else {
    using Value = typename IsCoroutine<std::remove_cvref_t<R>>::ValueType;
    auto result = std::make_shared<const Value>(co_await (instance->*method)(std::forward<P>(std::get<I>(*values))...));
    co_return SerializeShared<Value>(std::move(result));
  }
}
#pragma GCC diagnostic pop

template <typename R, typename... P, size_t... I>
SerializedValue InvokeRemoteFunction(R (*function)(P...), const std::string& name,
                                     const std::vector<ObjectData>& args, std::index_sequence<I...> seq) {
  return DecodeAndCall<R, P...>([function](auto&&... a) -> R { return function(std::forward<decltype(a)>(a)...); },
                                name, args, seq);
}

// The RemoteFunction of `function`: see RemoteFunction in ray/api/ray_runtime.h.
template <typename R, typename... P>
RemoteFunction MakeRemoteFunction(R (*function)(P...), const std::string& name) {
  return [function, name](const std::vector<ObjectData>& args) {
    return InvokeRemoteFunction(function, name, args, std::index_sequence_for<P...>{});
  };
}

template <typename R, typename... P>
void RegisterFunctionPointer(const std::string& name, R (*function)(P...)) {
  static_assert(!std::is_pointer_v<std::remove_cvref_t<R>>,
                "RAY_REMOTE: a remote function cannot return a raw pointer (its value could not "
                "be serialized); an actor factory returns a pointer to a class");
  FunctionManager::Instance().RegisterFunction(name, KeyOfFunction(function), MakeRemoteFunction(function, name));
}

// An actor factory `T* f(P...)`: the instance is owned (and deleted) by the actor's worker.
template <typename T, typename... P>
void RegisterActorFactoryPointer(const std::string& name, T* (*factory)(P...)) {
  ActorFactory invoker = [factory, name](const std::vector<ObjectData>& args) -> std::shared_ptr<void> {
    std::shared_ptr<void> instance;
    DecodeAndCall<int, P...>(
        [&](auto&&... a) {
          T* created = factory(std::forward<decltype(a)>(a)...);
          if (created == nullptr) throw RayException("the actor factory " + name + " returned a null pointer");
          instance = std::shared_ptr<T>(created);
          return 0;
        },
        name, args, std::index_sequence_for<P...>{});
    return instance;
  };
  FunctionManager::Instance().RegisterActorFactory(name, KeyOfFunction(factory), std::move(invoker),
                                                   std::type_index(typeid(T)));
}

template <typename F>
void RegisterActorMethodPointer(const std::string& name, F method) {
  using Traits = MemberFunctionTraits<F>;
  using Class = typename Traits::Class;
  using R = typename Traits::RawReturn;
  static_assert(!IsReturns<std::remove_cvref_t<R>>::value,
                "RAY_REMOTE: an actor method cannot return ray::Returns<T> (several returns are for "
                "tasks); return a std::vector<T> as one object instead");
  auto call = [method, name](void* instance, const std::vector<ObjectData>& args) {
    return [&]<typename... P>(std::tuple<P...>*) {
      return DecodeAndCall<R, P...>(
          [&](auto&&... a) -> R { return (static_cast<Class*>(instance)->*method)(std::forward<decltype(a)>(a)...); },
          name, args, std::index_sequence_for<P...>{});
    }(static_cast<typename Traits::Params*>(nullptr));
  };
  ActorCoroutineMethod coroutine;
  constexpr bool kGenerator = IsGenerator<std::remove_cvref_t<R>>::value;
  if constexpr (IsCoroutine<std::remove_cvref_t<R>>::value || kGenerator) {
    coroutine = [method, name](void* instance, const std::vector<ObjectData>& args) {
      return [&]<typename... P>(std::tuple<P...>*) {
        auto values = DecodeArguments<P...>(name, args, std::index_sequence_for<P...>{});
        return AwaitActorMethod<R, P...>(static_cast<Class*>(instance), method, std::move(values),
                                         std::index_sequence_for<P...>{});
      }(static_cast<typename Traits::Params*>(nullptr));
    };
  }
  FunctionManager::Instance().RegisterActorMethod(name, KeyOfMemberFunction(method), std::move(call),
                                                  std::type_index(typeid(Class)), std::move(coroutine), !kGenerator);
}

template <typename F>
void RegisterOneFunction(const std::string& name, F function) {
  static_assert(FunctionTraits<F>::kIsFunctionPointer || MemberFunctionTraits<F>::kIsMemberFunction,
                "RAY_REMOTE: only free functions, static member functions (tasks and actor factories) "
                "and member functions (actor methods) can be registered; lambdas cannot");
  if constexpr (MemberFunctionTraits<F>::kIsMemberFunction) {
    // Spelled "&Counter::Add"; registered as "Counter::Add".
    RegisterActorMethodPointer(name.rfind('&', 0) == 0 ? name.substr(1) : name, function);
  } else if constexpr (IsActorFactory<F>()) {
    RegisterActorFactoryPointer(name, static_cast<typename FunctionTraits<F>::PlainPointer>(function));
  } else if constexpr (FunctionTraits<F>::kIsFunctionPointer) {
    // noexcept functions are registered (and looked up) by the same address.
    RegisterFunctionPointer(name, static_cast<typename FunctionTraits<F>::PlainPointer>(function));
  }
}

// What RAY_REMOTE expands to. Returns true (the value of a static variable).
template <typename... F>
bool RegisterRemoteFunctions(const char* text, F... functions) {
  std::vector<std::string> names = SplitRemoteFunctionNames(text);
  if (names.size() != sizeof...(F)) {
    AbortRemoteRegistration(text, "could not split the arguments into one name per function");
  }
  size_t index = 0;
  (RegisterOneFunction(names[index++], functions), ...);
  return true;
}

// RAY_FUNC(f, A, B): the overload of f taking (A, B), as a function pointer.
template <typename... P>
struct Overload {
  template <typename R>
  static constexpr auto Of(R (*function)(P...)) {
    return function;
  }
};

}  // namespace internal
}  // namespace ray

#define MANTA_API_CONCAT_INNER(a, b) a##b
#define MANTA_API_CONCAT(a, b) MANTA_API_CONCAT_INNER(a, b)

// Registers remote functions; see the top of this file.
#define RAY_REMOTE(...)                                                     \
  [[maybe_unused]] static const bool MANTA_API_CONCAT(manta_ray_remote_, __COUNTER__) = \
      ::ray::internal::RegisterRemoteFunctions(#__VA_ARGS__, __VA_ARGS__);

// Selects the overload of `f` taking the listed parameter types.
#define RAY_FUNC(f, ...) ::ray::internal::Overload<__VA_ARGS__>::Of(f)
