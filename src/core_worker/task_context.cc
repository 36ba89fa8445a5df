#include "src/core_worker/task_context.h"

namespace manta::core {
namespace {
thread_local TaskContext* tls_context = nullptr;
}  // namespace

ScopedTaskContext::ScopedTaskContext(TaskContext* context) : previous_(tls_context) { tls_context = context; }

ScopedTaskContext::~ScopedTaskContext() { tls_context = previous_; }

TaskContext* ScopedTaskContext::Current(const void* owner) {
  return tls_context != nullptr && tls_context->owner == owner ? tls_context : nullptr;
}

}  // namespace manta::core
