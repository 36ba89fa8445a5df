// How ray::Init builds the process's runtime, and the process-wide runtime slot.
//
// ray::Init (src/api/ray.cc) resolves the RayConfig (flags, RAY_ADDRESS), picks a
// factory and installs the runtime it returns; ray::Shutdown uninstalls and destroys
// it. Internal to src/api: user code never includes this header.
#pragma once

#include <memory>

#include "ray/api/ray_config.h"
#include "ray/api/ray_runtime.h"

namespace ray {
namespace internal {

// The config Init hands to a factory: flags in argv (--ray_address=..., see
// ray::Init in ray/api.h) override `config`; then the environment variable
// RAY_ADDRESS fills an address still empty.
ray::RayConfig ResolveRayConfig(const ray::RayConfig& config, int argc, char** argv);

// Everything in this process (src/api/local_mode_runtime.cc). `config` is resolved.
std::unique_ptr<RayRuntime> CreateLocalModeRuntime(const ray::RayConfig& config);

// A core worker connected to a cluster (src/api/native_runtime.cc). `config` is
// resolved: `address` already holds the flag / config / RAY_ADDRESS value, empty
// meaning "start a private cluster". Throws RayException on failure. In a worker
// process (environment MANTA_WORKER_MODE=1) it serves tasks and never returns, so
// it must InstallRayRuntime(...) itself before running the first task.
std::unique_ptr<RayRuntime> CreateNativeRuntime(const ray::RayConfig& config, int argc, char** argv);

// Makes `runtime` the one GetRayRuntime() returns and starts a new epoch
// (GetRayRuntimeEpoch). Throws RayException("... already initialized") when a
// runtime is installed. Thread-safe.
void InstallRayRuntime(std::unique_ptr<RayRuntime> runtime);

// Starts a new epoch, clears the slot, and hands the runtime (null if none) to the
// caller, who destroys it. Thread-safe.
std::unique_ptr<RayRuntime> UninstallRayRuntime();

}  // namespace internal
}  // namespace ray
