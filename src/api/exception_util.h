// Turning exceptions thrown by user code into Ray errors, for both runtimes.
//
// A task's function may throw anything. The executing runtime catches it
// (catch (...)), describes it with TaskExceptionMessage, and stores the error as the
// task's result; every Get of that result throws RayTaskException with the message.
// An error crosses processes as (ErrorKind, message); ThrowError rebuilds the
// matching exception on the caller's side. Thread-safe (no state).
#pragma once

#include <string>

namespace ray {
namespace internal {

// Only inside a catch block: the demangled type of the exception being handled,
// e.g. "std::logic_error", "int" for `throw 42`; "unknown" outside a handler.
std::string CurrentExceptionTypeName();

// Only inside a catch block: what() of the exception being handled, or "" when it
// is not a std::exception.
std::string CurrentExceptionWhat();

// "<function_name> raised <type>: <what>" (without ": <what>" when it is empty).
std::string FormatTaskException(const std::string& function_name, const std::string& type,
                                const std::string& what);

// Only inside a catch block: FormatTaskException for the exception being handled.
std::string TaskExceptionMessage(const std::string& function_name);

// Why an object failed; selects the exception Get throws (ray/api/ray_exception.h).
enum class ErrorKind {
  kTask,               // RayTaskException
  kActor,              // RayActorException
  kWorker,             // RayWorkerException
  kUnreconstructable,  // UnreconstructableException
  kFunctionNotFound,   // RayFunctionNotFound
  kRuntimeEnv,         // RayRuntimeEnvException
  kTimeout,            // RayTimeoutException
  kOwnerDied,          // OwnerDiedException
  kCancelled,          // RayTaskCancelledException
  kOther,              // RayException
};

// Throws the exception of `kind` carrying `message`.
[[noreturn]] void ThrowError(ErrorKind kind, const std::string& message);

}  // namespace internal
}  // namespace ray
