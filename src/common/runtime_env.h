// Runtime environments inside Manta (ARCHITECTURE.md §11): the serialized form a task
// spec and a lease request carry, Ray's merge rules, and what a worker started for an
// env gets.
//
// A serialized runtime env is the compact JSON text of an object (field -> value),
// as ray::RuntimeEnv::Serialize writes it, with one canonical form: "" for no env
// (and for "{}"), otherwise nlohmann's dump (keys sorted), so that equal envs are
// equal strings — the worker pool and the submitters compare envs as strings.
//
// Of the fields, a C++ worker applies `env_vars` (object of string -> string, set in
// its environment) and `working_dir` (an absolute path of a directory it starts in).
// Any other field makes ParseWorkerRuntimeEnv fail: it cannot be applied, and
// silently ignoring it would run user code in an environment it did not ask for.
//
// Errors: runtime env problems are InvalidArgument or FailedPrecondition statuses
// marked with MarkRuntimeEnvError, so that a raylet's lease reply and then the owner
// can tell them from other failures (they are final: retrying cannot help).
// Thread-safe (no state).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace manta {

// A raylet refuses lease requests whose runtime env is longer than this.
inline constexpr size_t kMaxRuntimeEnvBytes = 64 * 1024;

// The canonical form of `serialized` ("" stays ""). InvalidArgument (marked) when it
// is not a JSON object.
absl::StatusOr<std::string> CanonicalRuntimeEnv(std::string_view serialized);

// `child` applied over `parent` (both serialized, "" = none), by Ray's inheritance
// rules: every field the child sets replaces the parent's, except `env_vars`, whose
// entries are merged name by name (the child's value wins; env_vars that are not
// objects on either side are replaced, not merged). Canonical result.
// InvalidArgument (marked) when either is not a JSON object.
absl::StatusOr<std::string> MergeRuntimeEnvs(std::string_view parent, std::string_view child);

// `serialized` with a relative working_dir made absolute against `base_dir`
// (unchanged otherwise). InvalidArgument (marked) when it is not a JSON object or
// working_dir is not a string.
absl::StatusOr<std::string> ResolveWorkingDir(std::string_view serialized, const std::string& base_dir);

// What a worker started for a runtime env gets.
struct WorkerRuntimeEnv {
  std::map<std::string, std::string> env_vars;
  std::string working_dir;  // empty: the raylet's choice
};

// Reads the fields a C++ worker applies. InvalidArgument (marked), naming the
// field, for: malformed JSON; a field other than env_vars and working_dir; env_vars
// not an object, a value in it that is not a string, a name that is empty or has '=';
// working_dir not a string, empty, or not an absolute path.
absl::StatusOr<WorkerRuntimeEnv> ParseWorkerRuntimeEnv(std::string_view serialized);

// OK when `dir` is a directory this process may enter; FailedPrecondition (marked)
// naming it otherwise. Reads the file system (one stat and one access check).
absl::Status CheckWorkingDir(const std::string& dir);

// `status` (not OK) marked as a runtime env error; and whether a status is one.
absl::Status MarkRuntimeEnvError(absl::Status status);
bool IsRuntimeEnvError(const absl::Status& status);

}  // namespace manta
