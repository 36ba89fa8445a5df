#include "src/common/state_filter.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "src/common/json.h"

namespace manta {

absl::StatusOr<std::vector<rpc::StateFilter>> ParseStateFilters(const std::vector<std::string>& specs) {
  std::vector<rpc::StateFilter> filters;
  for (const std::string& spec : specs) {
    size_t at = spec.find("!=");
    size_t skip = 2;
    if (at == std::string::npos) {
      at = spec.find('=');
      skip = 1;
    }
    if (at == std::string::npos || at == 0) {
      return absl::InvalidArgumentError("--filter '" + spec + "' is not key=value or key!=value");
    }
    rpc::StateFilter& f = filters.emplace_back();
    f.set_key(std::string(absl::StripAsciiWhitespace(spec.substr(0, at))));
    f.set_predicate(skip == 2 ? "!=" : "=");
    f.set_value(std::string(absl::StripAsciiWhitespace(spec.substr(at + skip))));
  }
  return filters;
}

absl::Status CheckStateFilters(const std::string& resource, const std::vector<std::string>& keys,
                               const std::vector<rpc::StateFilter>& filters) {
  for (const rpc::StateFilter& f : filters) {
    if (std::find(keys.begin(), keys.end(), f.key()) == keys.end()) {
      return absl::InvalidArgumentError(resource + " have no field '" + f.key() + "' to filter on; the fields are " +
                                        absl::StrJoin(keys, ", "));
    }
    if (f.predicate() != "=" && f.predicate() != "!=") {
      return absl::InvalidArgumentError("unknown filter predicate '" + f.predicate() + "' (use = or !=)");
    }
  }
  return absl::OkStatus();
}

bool PassesStateFilter(const std::string& value, const rpc::StateFilter& f) {
  const std::string& key = f.key();
  const bool enum_like = key == "state" || key == "type" || key == "error_type" || key == "strategy" ||
                         key == "status" || key == "reference_type" || key == "task_status" ||
                         key == "worker_type";
  // As Ray does, a boolean field takes True/true/1 and False/false/0.
  const bool boolean = value == "true" || value == "false";
  std::string want = f.value();
  if (boolean && (want == "True" || want == "1")) want = "true";
  if (boolean && (want == "False" || want == "0")) want = "false";
  const bool equal = enum_like ? absl::EqualsIgnoreCase(value, want) : value == want;
  return equal == (f.predicate() == "=");
}

std::string FilterText(const nlohmann::ordered_json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_null()) return "";
  return DumpJson(value);
}

const std::vector<std::string>& WorkerStateFilterKeys() {
  static const std::vector<std::string> keys = {"worker_id", "is_alive", "worker_type", "state", "node_id",
                                                "ip",        "pid",      "job_id",      "exit_detail"};
  return keys;
}

const std::vector<std::string>& ObjectStateFilterKeys() {
  static const std::vector<std::string> keys = {"object_id", "object_size", "reference_type", "task_status",
                                                "type",      "pid",         "ip",             "owner_worker_id",
                                                "node_id",   "job_id",      "pinned_at",      "spilled"};
  return keys;
}

bool RowPassesStateFilters(const nlohmann::ordered_json& row, const std::vector<rpc::StateFilter>& filters) {
  for (const rpc::StateFilter& f : filters) {
    auto it = row.find(f.key());
    if (!PassesStateFilter(it == row.end() ? "" : FilterText(*it), f)) return false;
  }
  return true;
}

}  // namespace manta
