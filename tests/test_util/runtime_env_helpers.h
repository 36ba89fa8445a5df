// Helpers of the runtime env tests (local mode and cluster): what a task sees of its
// env, an env of variables, and the message of the RayRuntimeEnvException expected.
#pragma once

#include <gtest/gtest.h>
#include <ray/api.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <string>

namespace manta::testing {

// The value of an environment variable, "<unset>" when there is none.
inline std::string GetEnv(std::string name) {
  const char* value = std::getenv(name.c_str());
  return value == nullptr ? "<unset>" : value;
}
inline std::string Cwd() { return std::filesystem::current_path().string(); }

inline ray::RuntimeEnv EnvVars(const std::map<std::string, std::string>& vars) {
  ray::RuntimeEnv env;
  env.Set("env_vars", vars);
  return env;
}

// The message of the RayRuntimeEnvException `fn` throws (fails the test otherwise).
template <typename F>
std::string RuntimeEnvError(F fn) {
  try {
    fn();
  } catch (const ray::internal::RayRuntimeEnvException& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected RayRuntimeEnvException, got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected RayRuntimeEnvException, nothing was thrown";
  return "";
}

}  // namespace manta::testing
