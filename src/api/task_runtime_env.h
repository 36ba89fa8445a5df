// The runtime env a task or actor runs in, as both runtimes (native and local mode)
// work it out from ray::RuntimeEnv values (ray/api/runtime_env.h) before handing it
// to the cluster (TaskSpec.runtime_env, src/common/runtime_env.h). Thread-safe (no
// state; reads the current directory).
#pragma once

#include <string>

#include "ray/api/ray_config.h"

namespace ray {
namespace internal {

// The job's runtime env (RayConfig::runtime_env) in canonical form, its relative
// working_dir made absolute against the current directory; "" when unset or empty.
// Throws RayRuntimeEnvException when it has a field a C++ worker cannot apply or a
// field of the wrong type (the working_dir itself is looked at where workers start).
std::string JobRuntimeEnv(const ray::RayConfig& config);

// The env of a task or actor: `own` (RuntimeEnv::Serialize(), "" = none set), its
// relative working_dir made absolute against the current directory, applied over
// `parent` by Ray's merge rules. Returns `parent` when `own` is empty. Throws
// RayRuntimeEnvException naming `what` (e.g. "ray::Task(F)") when `own` is malformed.
std::string TaskRuntimeEnv(const std::string& parent, const std::string& own, const std::string& what);

}  // namespace internal
}  // namespace ray
