#include "ray/api/runtime_env.h"

#include "src/common/json.h"

namespace ray {
namespace internal {

void ThrowRuntimeEnvFieldError(const char* action, const std::string& name, const std::string& detail) {
  throw RayRuntimeEnvException(std::string("RuntimeEnv: ") + action + " the runtime_env field '" + name +
                               "': " + detail);
}

void ThrowRuntimeEnvFieldMissing(const std::string& name) {
  throw RayRuntimeEnvException("RuntimeEnv: the runtime_env field '" + name + "' is not set");
}

void CheckRuntimeEnvValue(const std::string& name, const json& value) {
  try {
    // Writing the text is what Serialize will do; a value it would choke on (a
    // string that is not UTF-8) is refused now, when the field can still be named.
    (void)manta::DumpJson(value);
  } catch (const json::exception& e) {
    ThrowRuntimeEnvFieldError("cannot set", name, e.what());
  }
}

}  // namespace internal

void RuntimeEnv::SetJson(const std::string& name, json value) {
  if (name.empty()) throw internal::RayRuntimeEnvException("RuntimeEnv: a runtime_env field name must not be empty");
  internal::CheckRuntimeEnvValue(name, value);
  fields_[name] = std::move(value);
}

void RuntimeEnv::SetJsonStr(const std::string& name, const std::string& json_str) {
  json parsed = manta::ParseJson(json_str);
  if (parsed.is_discarded()) {
    internal::ThrowRuntimeEnvFieldError("cannot set", name, "malformed JSON: " + json_str);
  }
  SetJson(name, std::move(parsed));
}

std::string RuntimeEnv::GetJsonStr(const std::string& name) const {
  auto it = fields_.find(name);
  if (it == fields_.end()) internal::ThrowRuntimeEnvFieldMissing(name);
  return manta::DumpJson(*it);
}

bool RuntimeEnv::Contains(const std::string& name) const { return fields_.contains(name); }

bool RuntimeEnv::Remove(const std::string& name) { return fields_.erase(name) > 0; }

bool RuntimeEnv::Empty() const { return fields_.empty(); }

std::string RuntimeEnv::Serialize() const { return manta::DumpJson(fields_); }

std::string RuntimeEnv::SerializeToRuntimeEnvInfo() const {
  return manta::DumpJson(json{{"serializedRuntimeEnv", Serialize()}});
}

RuntimeEnv RuntimeEnv::Deserialize(const std::string& serialized_runtime_env) {
  json parsed = manta::ParseJson(serialized_runtime_env);
  if (parsed.is_discarded()) {
    throw internal::RayRuntimeEnvException("RuntimeEnv::Deserialize: malformed JSON: " + serialized_runtime_env);
  }
  if (!parsed.is_object()) {
    throw internal::RayRuntimeEnvException(std::string("RuntimeEnv::Deserialize: expected a JSON object, got ") +
                                           parsed.type_name() + ": " + serialized_runtime_env);
  }
  RuntimeEnv env;
  env.fields_ = std::move(parsed);
  return env;
}

}  // namespace ray
