// Manta's configuration: one struct with a field per entry of config_def.h.
//
// Built once in each process's main() (Config::FromEnvironment) and passed down by
// value or const reference; no component reads a global. Thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace manta {

struct Config {
#define MANTA_CONFIG(type, name, default_value, doc) type name = default_value;
#include "src/common/config_def.h"
#undef MANTA_CONFIG

  // Defaults overridden by every MANTA_<name> variable in the environment.
  // Malformed values are an InvalidArgument error naming the variable.
  static absl::StatusOr<Config> FromEnvironment();

  // The configuration of a daemon: defaults, then MANTA_<name> variables, then the
  // `system_config` JSON (may be empty). Errors name the variable or key.
  static absl::StatusOr<Config> Load(const std::string& system_config);

  // Applies `name=value` overrides. Unknown names and malformed values are an error,
  // and leave the current value unchanged.
  absl::Status Set(const std::string& name, const std::string& value);
  // Applies a JSON object {"name": value, ...}; errors as for Set. All or nothing: on
  // error no entry of the object has been applied.
  absl::Status ApplyJson(const std::string& json);
  // The whole table as a JSON object (for handing the head's values to other nodes).
  std::string ToJson() const;
  // The values that differ from the defaults, as MANTA_<name>=value pairs, for child
  // processes.
  std::map<std::string, std::string> NonDefaultEnv() const;
};

}  // namespace manta
