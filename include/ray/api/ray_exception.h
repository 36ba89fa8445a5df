// The exceptions of the public API, Ray-compatible (same names, same namespace).
//
// Every API call that can fail throws a `ray::internal::RayException` or one of its
// subclasses; `what()` carries a message meant for humans that names the object, task
// or function involved. The subclasses tell *why* a future failed:
//
//   RayTaskException           the remote function threw (the message names the
//                              C++ exception type and its what())
//   RayActorException          the actor died or could not be created
//   RayWorkerException         the worker (or its node) running the task died more
//                              often than the task's retries allow
//   UnreconstructableException every copy of the object is lost and it cannot be rebuilt
//   RayFunctionNotFound        the function was not registered with RAY_REMOTE
//   RayRuntimeEnvException     the task's runtime environment could not be set up
//   RayTimeoutException        a Get/Wait deadline passed first
//   RayTaskCancelledException  the task was cancelled (ray::Cancel) before it
//                              finished, or its submitter shut down first
//   OwnerDiedException         (Manta addition) the process that owns the object died,
//                              so its value can no longer be obtained; an
//                              UnreconstructableException, as Ray throws there
//
// All are header-only, copyable, and safe to catch on any thread. A failed future
// stays failed: every Get of it throws the same kind of exception again.
#pragma once

#include <exception>
#include <string>
#include <utility>

namespace ray {
namespace internal {

class RayException : public std::exception {
 public:
  explicit RayException(std::string msg) : msg_(std::move(msg)) {}
  const char* what() const noexcept override { return msg_.c_str(); }

 private:
  std::string msg_;
};

class RayActorException : public RayException {
 public:
  using RayException::RayException;
};

class RayTaskException : public RayException {
 public:
  using RayException::RayException;
};

class RayWorkerException : public RayException {
 public:
  using RayException::RayException;
};

class UnreconstructableException : public RayException {
 public:
  using RayException::RayException;
};

class RayFunctionNotFound : public RayException {
 public:
  using RayException::RayException;
};

class RayRuntimeEnvException : public RayException {
 public:
  using RayException::RayException;
};

class RayTimeoutException : public RayException {
 public:
  using RayException::RayException;
};

// The task was cancelled (ray::Cancel): it never ran, or it stopped (see
// ray::IsCancelled), or its worker was killed (force). Ray's TaskCancelledError.
class RayTaskCancelledException : public RayException {
 public:
  using RayException::RayException;
};

// Manta addition: the owner of the object (the process that created it by Put or by
// submitting the task returning it) died, so the value cannot be fetched any more.
// Derives from the exception Ray throws there, so `catch (UnreconstructableException&)`
// matches it too.
class OwnerDiedException : public UnreconstructableException {
 public:
  using UnreconstructableException::UnreconstructableException;
};

// Thrown by ray::ExitActor() to end the actor after the current call; the runtime
// catches it. Not an error a caller sees (callers get RayActorException).
class RayIntentionalSystemExitException : public RayException {
 public:
  using RayException::RayException;
};

}  // namespace internal
}  // namespace ray
