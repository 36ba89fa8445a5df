// The state API's filters (ARCHITECTURE.md §18): `key=value` / `key!=value` on a row's
// field. Shared by the GCS (nodes, jobs, tasks, ...) and the core workers, which
// filter the objects they own before the GCS merges them.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "protos/common.pb.h"

namespace manta {

// "key=value" / "key!=value" specs (as `--filter` takes them) as filters;
// InvalidArgument naming a spec of neither form.
absl::StatusOr<std::vector<rpc::StateFilter>> ParseStateFilters(const std::vector<std::string>& specs);
// OK when every filter names one of `keys` and a known predicate; else an error that
// names the valid ones ("<resource> have no field ...").
absl::Status CheckStateFilters(const std::string& resource, const std::vector<std::string>& keys,
                               const std::vector<rpc::StateFilter>& filters);
// Whether a field's text `value` passes `filter`. Enum-like fields (state, type,
// status, ...) compare without regard to case.
bool PassesStateFilter(const std::string& value, const rpc::StateFilter& filter);
// The text of a JSON value as a filter compares it ("ALIVE", "3", "true").
std::string FilterText(const nlohmann::ordered_json& value);
// The fields of the rows that live outside the GCS: workers (their raylets answer)
// and objects (their owners answer).
const std::vector<std::string>& WorkerStateFilterKeys();
const std::vector<std::string>& ObjectStateFilterKeys();
// Whether `row` passes every filter (a missing field is "").
bool RowPassesStateFilters(const nlohmann::ordered_json& row, const std::vector<rpc::StateFilter>& filters);

}  // namespace manta
