#include "src/common/config.h"

#include <cstdlib>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "nlohmann/json.hpp"
#include "src/common/json.h"

namespace manta {
namespace {

// The absl parsers write their output even when they fail, so each parses into a
// local and assigns only on success: a rejected value leaves the old one in place.
absl::Status ParseValue(const std::string& name, const std::string& text, int64_t* out) {
  int64_t value;
  if (!absl::SimpleAtoi(text, &value)) {
    return absl::InvalidArgumentError("config " + name + ": '" + text + "' is not an integer");
  }
  *out = value;
  return absl::OkStatus();
}
[[maybe_unused]] absl::Status ParseValue(const std::string& name, const std::string& text, double* out) {
  double value;
  if (!absl::SimpleAtod(text, &value)) {
    return absl::InvalidArgumentError("config " + name + ": '" + text + "' is not a number");
  }
  *out = value;
  return absl::OkStatus();
}
[[maybe_unused]] absl::Status ParseValue(const std::string& name, const std::string& text, bool* out) {
  bool value;
  if (!absl::SimpleAtob(text, &value)) {
    return absl::InvalidArgumentError("config " + name + ": '" + text + "' is not a boolean");
  }
  *out = value;
  return absl::OkStatus();
}
absl::Status ParseValue(const std::string&, const std::string& text, std::string* out) {
  *out = text;
  return absl::OkStatus();
}

template <typename T>
std::string Render(const T& v) {
  if constexpr (std::is_same_v<T, std::string>) {
    return v;
  } else if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else {
    return std::to_string(v);
  }
}

}  // namespace

absl::StatusOr<Config> Config::FromEnvironment() {
  Config config;
#define MANTA_CONFIG(type, name, default_value, doc)                        \
  if (const char* env = std::getenv("MANTA_" #name); env != nullptr) {       \
    absl::Status s = ParseValue("MANTA_" #name, env, &config.name);          \
    if (!s.ok()) return s;                                                  \
  }
#include "src/common/config_def.h"
#undef MANTA_CONFIG
  return config;
}

absl::StatusOr<Config> Config::Load(const std::string& system_config) {
  absl::StatusOr<Config> config = FromEnvironment();
  if (!config.ok() || system_config.empty()) return config;
  if (absl::Status s = config->ApplyJson(system_config); !s.ok()) return s;
  return config;
}

absl::Status Config::Set(const std::string& key, const std::string& value) {
#define MANTA_CONFIG(type, name, default_value, doc) \
  if (key == #name) return ParseValue(#name, value, &name);
#include "src/common/config_def.h"
#undef MANTA_CONFIG
  return absl::InvalidArgumentError("unknown config name '" + key + "'");
}

absl::Status Config::ApplyJson(const std::string& json) {
  nlohmann::json parsed = ParseJson(json);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return absl::InvalidArgumentError("system config is not a JSON object: " + json);
  }
  // All or nothing: apply to a copy, so an error leaves this config untouched.
  Config updated = *this;
  for (auto& [key, value] : parsed.items()) {
    std::string text = value.is_string() ? value.get<std::string>() : DumpJson(value);
    absl::Status s = updated.Set(key, text);
    if (!s.ok()) return s;
  }
  *this = std::move(updated);
  return absl::OkStatus();
}

std::string Config::ToJson() const {
  nlohmann::json out = nlohmann::json::object();
#define MANTA_CONFIG(type, name, default_value, doc) out[#name] = name;
#include "src/common/config_def.h"
#undef MANTA_CONFIG
  return DumpJson(out);
}

std::map<std::string, std::string> Config::NonDefaultEnv() const {
  std::map<std::string, std::string> env;
  const Config defaults;
#define MANTA_CONFIG(type, name, default_value, doc) \
  if (name != defaults.name) env["MANTA_" #name] = Render(name);
#include "src/common/config_def.h"
#undef MANTA_CONFIG
  return env;
}

}  // namespace manta
