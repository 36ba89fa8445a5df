// The worker side of the native runtime: running one pushed task (a remote function,
// an actor factory or an actor method) through the function registry
// (ray/api/function_manager.h): the core worker's TaskExecutor.
#pragma once

#include <vector>

#include "protos/common.pb.h"
#include "src/core_worker/core_worker_types.h"

namespace ray {
namespace internal {

// Finds the function, calls it and turns whatever it throws into the task's error.
// An actor's creation keeps the instance for the calls (one actor per process); an
// async actor's coroutine method is started by the core worker (TaskOutput::start).
// A value the API serialized, as the core worker stores it.
struct SerializedValue;
manta::core::ReturnValue ToReturnValue(SerializedValue value);

manta::core::TaskOutput ExecuteTask(const manta::rpc::TaskSpec& spec,
                                    const std::vector<manta::core::ObjectValue>& args);

}  // namespace internal
}  // namespace ray
