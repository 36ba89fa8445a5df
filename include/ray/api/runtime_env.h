// ray::RuntimeEnv: the environment a job's, a task's or an actor's worker processes
// run in. Ray-compatible.
//
//   ray::RuntimeEnv env;
//   env.Set("env_vars", std::map<std::string, std::string>{{"MODE", "fast"}});
//   env.Set("working_dir", std::string("/data/project"));
//   ray::Task(f).SetRuntimeEnv(env).Remote();      // or RayConfig::runtime_env for the job
//
// A RuntimeEnv is a JSON object (field name -> any JSON value, nlohmann::json,
// aliased ray::json and ::json as in Ray). It stores whatever it is given; what the fields mean is
// decided when a worker is started for it. Manta's workers apply two fields:
//   env_vars     object of string -> string: set in the worker's environment
//   working_dir  string: a local directory on the worker's node that the worker
//                starts in (a relative path is taken relative to the current
//                directory of the process that submits the task or creates the actor)
// Any other field cannot be applied to a C++ worker: a task or actor whose env has
// one fails with RayRuntimeEnvException naming the field (see README, "Runtime
// environments"). So do a working_dir that is not a directory and env_vars that are not
// all strings.
//
// Merging (Ray's inheritance rules): a task's or actor's env is applied over its
// parent's (the job's env for a driver's tasks, the submitting task's or actor's env
// otherwise): the child's fields replace the parent's, except env_vars, which are
// merged name by name with the child's values winning. Workers are never shared
// between different (merged) envs.
//
// Errors: every method throws ray::internal::RayRuntimeEnvException (a RayException)
// with a message naming the field: Get of a missing field or of a value that does not
// convert to T, Set of a value that is not valid JSON text (e.g. a string that is not
// UTF-8), SetJsonStr of malformed JSON, GetJsonStr of a missing field, Deserialize of
// anything but a JSON object. Not thread-safe: one thread at a time per RuntimeEnv
// (copies are independent).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "ray/api/ray_exception.h"

// As in Ray's header, `json` is also declared at global scope: Ray programs write
// `void to_json(json& j, const Person& p)` for their own types, unqualified.
using json = nlohmann::json;

namespace ray {

using json = nlohmann::json;

namespace internal {
// Non-template helpers of RuntimeEnv (src/api/runtime_env.cc): each throws
// RayRuntimeEnvException "<action> the runtime_env field '<name>': <detail>".
[[noreturn]] void ThrowRuntimeEnvFieldError(const char* action, const std::string& name, const std::string& detail);
[[noreturn]] void ThrowRuntimeEnvFieldMissing(const std::string& name);
// Throws (naming `name`) unless `value` can be written as JSON text.
void CheckRuntimeEnvValue(const std::string& name, const json& value);
}  // namespace internal

class RuntimeEnv {
 public:
  // Sets field `name` to `value`, converted to JSON the nlohmann way (arithmetic
  // types, strings, std containers, maps with string keys, or types with to_json).
  // Replaces an earlier value. Throws for an empty name or a value that cannot be
  // written as JSON.
  template <typename T>
  void Set(const std::string& name, const T& value) {
    json converted;
    try {
      converted = value;
    } catch (const json::exception& e) {
      internal::ThrowRuntimeEnvFieldError("cannot set", name, e.what());
    }
    SetJson(name, std::move(converted));
  }

  // Field `name` converted to T (e.g. std::map<std::string, std::string> for
  // env_vars, std::string for working_dir). Throws when the field is missing or its
  // value does not convert to T.
  template <typename T>
  T Get(const std::string& name) const {
    auto it = fields_.find(name);
    if (it == fields_.end()) internal::ThrowRuntimeEnvFieldMissing(name);
    try {
      return it->template get<T>();
    } catch (const json::exception& e) {
      internal::ThrowRuntimeEnvFieldError("cannot get", name, e.what());
    }
  }

  // Sets field `name` to the JSON text `json_str` (e.g. R"({"A": "1"})"). Throws for
  // malformed JSON, naming the field.
  void SetJsonStr(const std::string& name, const std::string& json_str);
  // Field `name` as compact JSON text. Throws when it is missing.
  std::string GetJsonStr(const std::string& name) const;

  bool Contains(const std::string& name) const;
  // Removes field `name`; false when there was none.
  bool Remove(const std::string& name);
  // True when no field is set.
  bool Empty() const;

  // The whole env as compact JSON text (an object; "{}" when empty), which
  // Deserialize reads back into an equal env.
  std::string Serialize() const;
  // Ray's RuntimeEnvInfo form, as JSON text: {"serializedRuntimeEnv": Serialize()}.
  std::string SerializeToRuntimeEnvInfo() const;
  // Parses Serialize()'s output (any JSON object). Throws for malformed JSON or a
  // JSON value other than an object.
  static RuntimeEnv Deserialize(const std::string& serialized_runtime_env);

 private:
  void SetJson(const std::string& name, json value);

  json fields_ = json::object();
};

}  // namespace ray
