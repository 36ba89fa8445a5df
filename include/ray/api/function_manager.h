// The registry of remote functions: RAY_REMOTE, RAY_FUNC and FunctionManager.
//
//   int Plus(int a, int b) { return a + b; }
//   int Overloaded(int a);
//   int Overloaded(int a, int b);
//   RAY_REMOTE(Plus, RAY_FUNC(Overloaded, int), RAY_FUNC(Overloaded, int, int));
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
// Only free functions and static member functions can be registered; their
// parameters and return value must be msgpack-serializable (or ObjectRef<T>).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ray/api/function_traits.h"
#include "ray/api/object_ref.h"
#include "ray/api/ray_exception.h"
#include "ray/api/ray_runtime.h"
#include "ray/api/serializer.h"

namespace ray {
namespace internal {

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
template <typename R, typename... P, size_t... I>
SerializedValue InvokeRemoteFunction(R (*function)(P...), const std::string& name,
                                     const std::vector<ObjectData>& args, std::index_sequence<I...>) {
  if (args.size() != sizeof...(P)) ThrowArgumentCount(name, sizeof...(P), args.size());
  // The decoded arguments live on the heap: they may be large (std::array).
  using Values = std::tuple<std::decay_t<P>...>;
  std::unique_ptr<Values> values;
  if constexpr ((std::is_default_constructible_v<std::decay_t<P>> && ...)) {
    values = std::make_unique<Values>();
    (DecodeArgument(args[I], name, I, std::get<I>(*values)), ...);
  } else {
    // Braced initialization decodes the arguments left to right.
    values.reset(new Values{DecodeArgumentValue<std::decay_t<P>>(args[I], name, I)...});
  }
  if constexpr (std::is_void_v<R>) {
    function(std::forward<P>(std::get<I>(*values))...);
    return SerializeNil();
  } else {
    using Result = std::remove_cvref_t<R>;
    auto result = std::make_shared<const Result>(function(std::forward<P>(std::get<I>(*values))...));
    return SerializeShared<Result>(std::move(result));
  }
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
                "be serialized; actor factory functions are not supported yet)");
  FunctionManager::Instance().RegisterFunction(name, KeyOfFunction(function), MakeRemoteFunction(function, name));
}

template <typename F>
void RegisterOneFunction(const std::string& name, F function) {
  static_assert(FunctionTraits<F>::kIsFunctionPointer,
                "RAY_REMOTE: only free functions and static member functions can be registered "
                "(member functions / actors are not supported yet; lambdas cannot be registered)");
  if constexpr (FunctionTraits<F>::kIsFunctionPointer) {
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
