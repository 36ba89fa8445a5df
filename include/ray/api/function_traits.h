// Compile-time facts about remote functions and their arguments. Internal to the API.
//
// FunctionTraits<F> describes a function pointer type; ArgumentMatches<P, A> says
// whether an argument of type A may be passed to a parameter declared P by
// ray::Task(f).Remote(...) (see ray/api/task_caller.h for the rules).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <typeinfo>
#include <type_traits>

namespace ray {
template <typename T>
class ObjectRef;
template <typename T>
class Coroutine;

namespace internal {

// The type a remote function's result is stored as: a coroutine's value type.
template <typename R>
struct StoredResult {
  using Type = R;
};
template <typename T>
struct StoredResult<Coroutine<T>> {
  using Type = T;
};

template <typename F>
struct FunctionTraits {
  static constexpr bool kIsFunctionPointer = false;
  static constexpr size_t kArity = 0;
  using ReturnType = void;
  using Params = std::tuple<>;
  using PlainPointer = void (*)();
};

template <typename R, typename... P>
struct FunctionTraits<R (*)(P...)> {
  static constexpr bool kIsFunctionPointer = true;
  static constexpr size_t kArity = sizeof...(P);
  // The type of the ObjectRef Remote returns: the return type without cv/ref (a
  // coroutine's value type for a ray::Coroutine<T>).
  using ReturnType = typename StoredResult<std::remove_cvref_t<R>>::Type;
  // The declared parameter types, references and all (a type list, never built).
  using Params = std::tuple<P...>;
  // The same function pointer type without noexcept.
  using PlainPointer = R (*)(P...);
};

template <typename R, typename... P>
struct FunctionTraits<R (*)(P...) noexcept> : FunctionTraits<R (*)(P...)> {};

// An actor's method: a pointer to a (const, noexcept) member function of Class.
template <typename F>
struct MemberFunctionTraits {
  static constexpr bool kIsMemberFunction = false;
  static constexpr size_t kArity = 0;
  using Class = void;
  using ReturnType = void;
  using Params = std::tuple<>;
};

template <typename R, typename C, typename... P>
struct MemberFunctionTraits<R (C::*)(P...)> {
  static constexpr bool kIsMemberFunction = true;
  static constexpr size_t kArity = sizeof...(P);
  using Class = C;
  using ReturnType = typename StoredResult<std::remove_cvref_t<R>>::Type;
  using Params = std::tuple<P...>;
  using RawReturn = R;
};
template <typename R, typename C, typename... P>
struct MemberFunctionTraits<R (C::*)(P...) const> : MemberFunctionTraits<R (C::*)(P...)> {};
template <typename R, typename C, typename... P>
struct MemberFunctionTraits<R (C::*)(P...) noexcept> : MemberFunctionTraits<R (C::*)(P...)> {};
template <typename R, typename C, typename... P>
struct MemberFunctionTraits<R (C::*)(P...) const noexcept> : MemberFunctionTraits<R (C::*)(P...)> {};

// An actor factory: a free or static function returning a pointer to the actor.
template <typename F>
constexpr bool IsActorFactory() {
  if constexpr (FunctionTraits<F>::kIsFunctionPointer) {
    using R = typename FunctionTraits<F>::ReturnType;
    return std::is_pointer_v<R> && std::is_class_v<std::remove_pointer_t<R>>;
  } else {
    return false;
  }
}

// The key the function registry uses for a function pointer.
using FunctionKey = std::uintptr_t;
template <typename F>
FunctionKey KeyOfFunction(F function) {
  static_assert(FunctionTraits<F>::kIsFunctionPointer, "KeyOfFunction needs a function pointer");
  return reinterpret_cast<FunctionKey>(function);
}

// The key of a member function pointer: its type and its bytes (two classes' methods
// may share the bytes, never the type).
template <typename F>
std::string KeyOfMemberFunction(F function) {
  static_assert(MemberFunctionTraits<F>::kIsMemberFunction, "KeyOfMemberFunction needs a member function pointer");
  std::string key(typeid(F).name());
  key.push_back('\0');
  key.append(reinterpret_cast<const char*>(&function), sizeof(F));
  return key;
}

template <typename T>
struct IsObjectRef : std::false_type {};
template <typename T>
struct IsObjectRef<ObjectRef<T>> : std::true_type {
  using ValueType = T;
};

// Whether bytes packed from a U decode as a P (for a ref passed by reference).
template <typename U, typename P>
constexpr bool ValueDecodesAs() {
  if constexpr (std::is_same_v<U, P>) {
    return true;
  } else if constexpr (std::is_arithmetic_v<U> && std::is_arithmetic_v<P>) {
    // msgpack decodes any integer as any integer or float, a float only as a float.
    constexpr bool kBoolMismatch = std::is_same_v<U, bool> != std::is_same_v<P, bool>;
    constexpr bool kFloatToInteger = std::is_floating_point_v<U> && std::is_integral_v<P>;
    return !kBoolMismatch && !kFloatToInteger;
  } else {
    return false;
  }
}

// Whether an argument of type Arg (as forwarded to Remote) may be passed for a
// parameter declared Param.
template <typename Param, typename Arg>
constexpr bool ArgumentMatches() {
  using P = std::remove_cvref_t<Param>;
  using A = std::remove_cvref_t<Arg>;
  if constexpr (IsObjectRef<A>::value) {
    if constexpr (IsObjectRef<P>::value) {
      return std::is_same_v<A, P>;  // passed as a value: the callee gets the ref
    } else {
      return ValueDecodesAs<typename IsObjectRef<A>::ValueType, P>();  // by reference
    }
  } else if constexpr (IsObjectRef<P>::value) {
    return false;  // a plain value for a parameter that wants a ref
  } else {
    return std::is_convertible_v<Arg&&, P>;
  }
}

}  // namespace internal
}  // namespace ray
