#include "src/api/task_runtime_env.h"

#include <filesystem>
#include <system_error>

#include "ray/api/ray_exception.h"
#include "src/common/runtime_env.h"

namespace ray {
namespace internal {
namespace {

std::string CurrentDir() {
  std::error_code ec;
  std::filesystem::path cwd = std::filesystem::current_path(ec);
  return ec ? std::string("/") : cwd.string();
}

template <typename T>
T OrThrow(absl::StatusOr<T> value, const std::string& what) {
  if (!value.ok()) throw RayRuntimeEnvException(what + ": " + std::string(value.status().message()));
  return std::move(*value);
}

}  // namespace

std::string JobRuntimeEnv(const ray::RayConfig& config) {
  if (!config.runtime_env) return "";
  const std::string what = "RayConfig::runtime_env";
  std::string env = OrThrow(manta::ResolveWorkingDir(config.runtime_env->Serialize(), CurrentDir()), what);
  // Checked once here rather than failing every task of the job later.
  OrThrow(manta::ParseWorkerRuntimeEnv(env), what);
  return env;
}

std::string TaskRuntimeEnv(const std::string& parent, const std::string& own, const std::string& what) {
  if (own.empty()) return parent;
  std::string resolved = OrThrow(manta::ResolveWorkingDir(own, CurrentDir()), what);
  return OrThrow(manta::MergeRuntimeEnvs(parent, resolved), what);
}

}  // namespace internal
}  // namespace ray
