#include "src/common/runtime_env.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/cord.h"
#include "nlohmann/json.hpp"
#include "src/common/json.h"

namespace manta {
namespace {

using nlohmann::json;

constexpr char kRuntimeEnvErrorUrl[] = "manta.runtime_env_error";

absl::Status EnvError(const std::string& message) {
  return MarkRuntimeEnvError(absl::InvalidArgumentError(message));
}

// Parses a serialized env; "" is the empty object.
absl::StatusOr<json> ParseEnv(std::string_view serialized) {
  if (serialized.empty()) return json::object();
  json parsed = ParseJson(serialized);
  if (parsed.is_discarded()) return EnvError("runtime_env is not valid JSON: " + std::string(serialized));
  if (!parsed.is_object()) {
    return EnvError(std::string("runtime_env must be a JSON object, not ") + parsed.type_name() + ": " +
                    std::string(serialized));
  }
  return parsed;
}

std::string Canonical(const json& env) { return env.empty() ? std::string() : DumpJson(env); }

}  // namespace

absl::Status MarkRuntimeEnvError(absl::Status status) {
  status.SetPayload(kRuntimeEnvErrorUrl, absl::Cord("1"));
  return status;
}

bool IsRuntimeEnvError(const absl::Status& status) {
  return !status.ok() && status.GetPayload(kRuntimeEnvErrorUrl).has_value();
}

absl::StatusOr<std::string> CanonicalRuntimeEnv(std::string_view serialized) {
  absl::StatusOr<json> env = ParseEnv(serialized);
  if (!env.ok()) return env.status();
  return Canonical(*env);
}

absl::StatusOr<std::string> MergeRuntimeEnvs(std::string_view parent, std::string_view child) {
  absl::StatusOr<json> merged = ParseEnv(parent);
  if (!merged.ok()) return merged.status();
  absl::StatusOr<json> overlay = ParseEnv(child);
  if (!overlay.ok()) return overlay.status();
  for (auto& [name, value] : overlay->items()) {
    // env_vars that are not objects cannot be merged: the child's replace the parent's
    // (and the worker refuses them, naming the field).
    auto parent_vars = merged->find("env_vars");
    if (name == "env_vars" && value.is_object() && parent_vars != merged->end() && parent_vars->is_object()) {
      json& vars = (*merged)["env_vars"];
      for (auto& [var, var_value] : value.items()) vars[var] = var_value;
    } else {
      (*merged)[name] = value;
    }
  }
  return Canonical(*merged);
}

absl::StatusOr<std::string> ResolveWorkingDir(std::string_view serialized, const std::string& base_dir) {
  absl::StatusOr<json> env = ParseEnv(serialized);
  if (!env.ok()) return env.status();
  auto dir = env->find("working_dir");
  if (dir != env->end()) {
    if (!dir->is_string()) {
      return EnvError(std::string("runtime_env field 'working_dir' must be a string, not ") + dir->type_name());
    }
    std::filesystem::path path(dir->get<std::string>());
    if (!path.empty() && path.is_relative()) *dir = (std::filesystem::path(base_dir) / path).lexically_normal().string();
  }
  return Canonical(*env);
}

absl::StatusOr<WorkerRuntimeEnv> ParseWorkerRuntimeEnv(std::string_view serialized) {
  absl::StatusOr<json> env = ParseEnv(serialized);
  if (!env.ok()) return env.status();
  WorkerRuntimeEnv out;
  for (const auto& [name, value] : env->items()) {
    if (name == "env_vars") {
      if (!value.is_object()) {
        return EnvError(std::string("runtime_env field 'env_vars' must be an object of strings, not ") +
                        value.type_name());
      }
      for (const auto& [var, var_value] : value.items()) {
        if (var.empty() || var.find('=') != std::string::npos) {
          return EnvError("runtime_env field 'env_vars' has an invalid variable name '" + var +
                          "' (it must be non-empty and contain no '=')");
        }
        if (!var_value.is_string()) {
          // The value is not quoted: env_vars may hold secrets, and this message is logged.
          return EnvError("runtime_env field 'env_vars': the value of '" + var + "' must be a string, not " +
                          var_value.type_name());
        }
        out.env_vars[var] = var_value.get<std::string>();
      }
    } else if (name == "working_dir") {
      if (!value.is_string() || value.get<std::string>().empty()) {
        return EnvError("runtime_env field 'working_dir' must be a non-empty string (a directory), not " +
                        DumpJson(value));
      }
      out.working_dir = value.get<std::string>();
      if (out.working_dir.find("://") != std::string::npos) {
        return EnvError("runtime_env field 'working_dir' is a URI (" + out.working_dir +
                        "): Manta takes a local directory on the worker's node, not a package to download");
      }
      if (out.working_dir.front() != '/') {
        return EnvError("runtime_env field 'working_dir' must be an absolute path, not '" + out.working_dir + "'");
      }
    } else {
      return EnvError("runtime_env field '" + name +
                      "' cannot be applied to a C++ worker: Manta applies only 'env_vars' and 'working_dir'");
    }
  }
  return out;
}

absl::Status CheckWorkingDir(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    return MarkRuntimeEnvError(absl::FailedPreconditionError("runtime_env working_dir " + dir +
                                                             " cannot be used: " + std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) {
    return MarkRuntimeEnvError(
        absl::FailedPreconditionError("runtime_env working_dir " + dir + " is not a directory"));
  }
  if (access(dir.c_str(), X_OK) != 0) {
    return MarkRuntimeEnvError(absl::FailedPreconditionError("runtime_env working_dir " + dir +
                                                             " cannot be entered: " + std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace manta
