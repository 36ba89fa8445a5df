#include "src/api/exception_util.h"

#include <cxxabi.h>

#include <exception>
#include <typeinfo>

#include "ray/api/ray_exception.h"
#include "ray/api/serializer.h"

namespace ray {
namespace internal {

std::string CurrentExceptionTypeName() {
  const std::type_info* type = abi::__cxa_current_exception_type();
  return type == nullptr ? "unknown" : DemangledTypeName(*type);
}

std::string CurrentExceptionWhat() {
  std::exception_ptr current = std::current_exception();
  if (!current) return "";
  try {
    std::rethrow_exception(current);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "";
  }
}

std::string FormatTaskException(const std::string& function_name, const std::string& type,
                                const std::string& what) {
  std::string message = function_name + " raised " + type;
  if (!what.empty()) message += ": " + what;
  return message;
}

std::string TaskExceptionMessage(const std::string& function_name) {
  return FormatTaskException(function_name, CurrentExceptionTypeName(), CurrentExceptionWhat());
}

void ThrowError(ErrorKind kind, const std::string& message) {
  switch (kind) {
    case ErrorKind::kTask:
      throw RayTaskException(message);
    case ErrorKind::kActor:
      throw RayActorException(message);
    case ErrorKind::kWorker:
      throw RayWorkerException(message);
    case ErrorKind::kUnreconstructable:
      throw UnreconstructableException(message);
    case ErrorKind::kFunctionNotFound:
      throw RayFunctionNotFound(message);
    case ErrorKind::kRuntimeEnv:
      throw RayRuntimeEnvException(message);
    case ErrorKind::kTimeout:
      throw RayTimeoutException(message);
    case ErrorKind::kOwnerDied:
      throw OwnerDiedException(message);
    case ErrorKind::kCancelled:
      throw RayTaskCancelledException(message);
    case ErrorKind::kOther:
      break;
  }
  throw RayException(message);
}

}  // namespace internal
}  // namespace ray
