// `manta list RESOURCE`, `manta get RESOURCE ID` and `manta summary RESOURCE`: the
// state API of the GCS (src/gcs/gcs_state_manager.h) as tables, JSON or YAML.
#include <chrono>
#include <initializer_list>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "nlohmann/json.hpp"
#include "protos/gcs.grpc.pb.h"
#include "src/cli/cluster_call.h"
#include "src/cli/commands.h"
#include "src/common/json.h"
#include "src/common/rpc/auth.h"
#include "src/common/rpc/grpc_client.h"
#include "src/common/rpc/tls_relay.h"
#include "src/common/state_filter.h"
#include "src/gcs/gcs_state_manager.h"

namespace manta::cli {

namespace {

constexpr int64_t kMaxStateReplyBytes = 512 << 20;

template <typename Request, typename Reply>
absl::StatusOr<Reply> CallState(const std::string& address, const Request& request,
                                grpc::Status (rpc::StateGcsService::Stub::*method)(grpc::ClientContext*,
                                                                                   const Request&, Reply*)) {
  auto stub = rpc::StateGcsService::NewStub(rpc::MakeChannel(address, kMaxStateReplyBytes));
  Reply reply;
  grpc::Status s = CallWithToken(*stub, method, request, &reply, 30);
  if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) return absl::InvalidArgumentError(s.error_message());
  if (!s.ok()) {
    return absl::UnavailableError("cannot reach the GCS at " + address + ": " + s.error_message() +
                                  (s.error_code() == grpc::StatusCode::UNAVAILABLE ? rpc::TlsHint() : ""));
  }
  return reply;
}

// The columns a table shows per resource (--detail shows every field, as YAML).
const std::vector<std::string>& TableColumns(const std::string& resource) {
  static const std::vector<std::string> nodes = {"node_id", "node_ip", "node_name", "state", "is_head_node",
                                                 "raylet_pid"};
  static const std::vector<std::string> jobs = {"job_id", "status", "entrypoint", "driver_ip_address", "driver_pid"};
  static const std::vector<std::string> actors = {"actor_id", "class_name", "name", "state", "node_id", "pid",
                                                  "num_restarts"};
  static const std::vector<std::string> groups = {"placement_group_id", "name", "strategy", "state",
                                                  "creator_job_id"};
  static const std::vector<std::string> tasks = {"task_id",  "attempt_number", "name",       "state",
                                                 "type",     "node_id",        "worker_pid", "error_type"};
  static const std::vector<std::string> workers = {"worker_id", "worker_type", "state", "is_alive",
                                                   "ip",        "pid",         "job_id"};
  static const std::vector<std::string> objects = {"object_id", "object_size", "reference_type", "task_status",
                                                   "type",      "ip",          "pid",            "num_borrowers"};
  static const std::vector<std::string> none;
  if (resource == "nodes") return nodes;
  if (resource == "jobs") return jobs;
  if (resource == "actors") return actors;
  if (resource == "placement-groups") return groups;
  if (resource == "tasks") return tasks;
  if (resource == "workers") return workers;
  if (resource == "objects") return objects;
  return none;
}

std::string Cell(const nlohmann::ordered_json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_null()) return "";
  return DumpJson(value);
}

void PrintTable(const std::string& resource, const nlohmann::ordered_json& rows) {
  const std::vector<std::string>& columns = TableColumns(resource);
  std::vector<size_t> width;
  for (const std::string& c : columns) width.push_back(c.size());
  std::vector<std::vector<std::string>> cells;
  for (const nlohmann::ordered_json& row : rows) {
    std::vector<std::string>& line = cells.emplace_back();
    for (size_t i = 0; i < columns.size(); ++i) {
      line.push_back(row.contains(columns[i]) ? Cell(row[columns[i]]) : "");
      width[i] = std::max(width[i], line.back().size());
    }
  }
  auto print_line = [&](const std::vector<std::string>& line) {
    for (size_t i = 0; i < line.size(); ++i) {
      if (i + 1 == line.size()) {
        std::cout << line[i];  // no padding after the last column
      } else {
        std::cout << std::left << std::setw(static_cast<int>(width[i])) << line[i] << "  ";
      }
    }
    std::cout << "\n";
  };
  std::vector<std::string> header;
  for (const std::string& c : columns) header.push_back(absl::AsciiStrToUpper(c));
  print_line(header);
  for (const auto& line : cells) print_line(line);
}

// A YAML scalar: plain when that reads back as the same string, else JSON-quoted.
std::string YamlScalar(const nlohmann::ordered_json& value) {
  if (!value.is_string()) return value.is_null() ? "null" : DumpJson(value);
  const std::string& s = value.get_ref<const std::string&>();
  bool plain = !s.empty() && s.find_first_of(":#{}[],&*!|>'\"%@`\n") == std::string::npos && s.front() != ' ' &&
               s.back() != ' ' && s != "true" && s != "false" && s != "null" && s != "~" && s.front() != '-';
  if (plain) {
    // Numbers would read back as numbers.
    char* end = nullptr;
    std::strtod(s.c_str(), &end);
    plain = end == nullptr || *end != '\0';
  }
  return plain ? s : DumpJson(value);
}

void PrintYaml(const nlohmann::ordered_json& value, int indent, std::ostream& out) {
  const std::string pad(static_cast<size_t>(indent), ' ');
  if (value.is_array()) {
    if (value.empty()) out << pad << "[]\n";
    for (const nlohmann::ordered_json& item : value) {
      if (item.is_object() && !item.empty()) {
        bool first = true;
        for (const auto& [k, v] : item.items()) {
          out << (first ? pad + "- " : pad + "  ") << k << ":";
          first = false;
          if ((v.is_object() || v.is_array()) && !v.empty()) {
            out << "\n";
            PrintYaml(v, indent + 4, out);
          } else {
            out << " " << (v.is_object() ? "{}" : v.is_array() ? "[]" : YamlScalar(v)) << "\n";
          }
        }
      } else if (item.is_array() && !item.empty()) {
        out << pad << "-\n";
        PrintYaml(item, indent + 2, out);
      } else {
        out << pad << "- " << (item.is_object() ? "{}" : item.is_array() ? "[]" : YamlScalar(item)) << "\n";
      }
    }
    return;
  }
  if (value.is_object()) {
    for (const auto& [k, v] : value.items()) {
      out << pad << k << ":";
      if ((v.is_object() || v.is_array()) && !v.empty()) {
        out << "\n";
        PrintYaml(v, indent + 2, out);
      } else {
        out << " " << (v.is_object() ? "{}" : v.is_array() ? "[]" : YamlScalar(v)) << "\n";
      }
    }
    return;
  }
  out << pad << YamlScalar(value) << "\n";
}

// What the GCS could not ask (a node or owner that did not answer), on stderr.
void PrintWarnings(const google::protobuf::RepeatedPtrField<std::string>& warnings) {
  for (const std::string& w : warnings) std::cerr << "(incomplete: " << w << ")" << std::endl;
}

// OK when `format` is one of `accepted`; else an error naming it and them.
absl::Status CheckFormat(const std::string& format, std::initializer_list<const char*> accepted) {
  std::string names;
  for (const char* name : accepted) {
    if (format == name) return absl::OkStatus();
    names += (names.empty() ? "" : ", ") + std::string(name);
  }
  return absl::InvalidArgumentError("unknown --format '" + format + "' (one of " + names + ")");
}

int Fail(const std::string& command, const absl::Status& status) {
  std::cerr << "manta " << command << ": " << status.message() << std::endl;
  return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

// The id field of a resource and the length of its ids in hex.
struct IdForm {
  std::string field;
  size_t hex_chars;
};

absl::StatusOr<IdForm> IdFormOf(const std::string& resource) {
  if (resource == "tasks") return IdForm{"task_id", 48};
  if (resource == "actors") return IdForm{"actor_id", 32};
  if (resource == "nodes") return IdForm{"node_id", 56};
  if (resource == "jobs") return IdForm{"job_id", 8};
  if (resource == "placement-groups") return IdForm{"placement_group_id", 36};
  if (resource == "workers") return IdForm{"worker_id", 2 * WorkerID::kSize};
  if (resource == "objects") return IdForm{"object_id", 2 * ObjectID::kSize};
  return absl::InvalidArgumentError("cannot get a '" + resource +
                                    "'; get one of task, actor, node, job, worker, object, placement-group");
}

}  // namespace

absl::StatusOr<std::string> QueryStateRows(const std::string& address, const std::string& resource,
                                           const std::vector<std::string>& filter_specs) {
  auto filters = ParseStateFilters(filter_specs);
  if (!filters.ok()) return filters.status();
  rpc::ListStateRequest request;
  request.set_resource(resource);
  for (rpc::StateFilter& f : *filters) *request.add_filters() = std::move(f);
  request.set_limit(gcs::GcsStateManager::kMaxLimit);
  request.set_detail(true);
  auto reply = CallState(address, request, &rpc::StateGcsService::Stub::ListState);
  if (!reply.ok()) return reply.status();
  return reply->rows_json();
}

absl::StatusOr<std::string> QueryStateSummary(const std::string& address, const std::string& resource,
                                              std::vector<std::string>* warnings) {
  rpc::SummarizeStateRequest request;
  request.set_resource(resource);
  auto reply = CallState(address, request, &rpc::StateGcsService::Stub::SummarizeState);
  if (!reply.ok()) return reply.status();
  if (warnings != nullptr) warnings->assign(reply->warnings().begin(), reply->warnings().end());
  return reply->summary_json();
}

int RunListState(const ClusterFlags& flags, const StateQuery& query) {
  const std::string command = "list " + query.resource;
  if (auto s = CheckFormat(query.format, {"table", "json", "yaml"}); !s.ok()) return Fail(command, s);
  auto filters = ParseStateFilters(query.filters);
  if (!filters.ok()) return Fail(command, filters.status());
  auto address = JoinCluster(flags);
  if (!address.ok()) return Fail(command, address.status());
  rpc::ListStateRequest request;
  request.set_resource(query.resource);
  for (rpc::StateFilter& f : *filters) *request.add_filters() = std::move(f);
  request.set_limit(query.limit);
  request.set_detail(query.detail);
  auto reply = CallState(*address, request, &rpc::StateGcsService::Stub::ListState);
  if (!reply.ok()) return Fail(command, reply.status());
  nlohmann::ordered_json rows = ParseOrderedJson(reply->rows_json());
  if (rows.is_discarded()) return Fail(command, absl::InternalError("the GCS answered with malformed rows"));
  if (query.format == "json") {
    std::cout << DumpJson(rows, 2) << std::endl;
  } else if (query.format == "yaml" || query.detail) {
    PrintYaml(rows, 0, std::cout);
    std::cout << std::flush;
  } else {
    PrintTable(query.resource, rows);
    std::cout << std::flush;
  }
  // The counts go to stderr, so the output stays machine-readable.
  if (reply->num_matched() > reply->num_returned()) {
    std::cerr << "(" << reply->num_returned() << " of " << reply->num_matched()
              << " matching rows shown; raise --limit to see more)" << std::endl;
  }
  if (reply->num_dropped() > 0) {
    std::cerr << "(" << reply->num_dropped()
              << " task attempts were dropped by the cluster's caps (task_events_max_num, "
                 "task_events_max_bytes, task_events_max_buffer_rows) and are not listed)"
              << std::endl;
  }
  PrintWarnings(reply->warnings());
  return 0;
}

int RunGetState(const ClusterFlags& flags, const std::string& resource, const std::string& id,
                const std::string& format) {
  const std::string command = "get " + resource;
  if (auto s = CheckFormat(format, {"yaml", "json"}); !s.ok()) return Fail(command, s);
  auto form = IdFormOf(resource);
  if (!form.ok()) return Fail(command, form.status());
  const std::string hex = absl::AsciiStrToLower(id);
  if (hex.size() != form->hex_chars || hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return Fail(command, absl::InvalidArgumentError("'" + id + "' is not a " + form->field + ": expected " +
                                                    std::to_string(form->hex_chars) + " hex digits"));
  }
  auto address = JoinCluster(flags);
  if (!address.ok()) return Fail(command, address.status());
  rpc::ListStateRequest request;
  request.set_resource(resource);
  rpc::StateFilter* f = request.add_filters();
  f->set_key(form->field);
  f->set_predicate("=");
  f->set_value(hex);
  request.set_limit(gcs::GcsStateManager::kMaxLimit);
  request.set_detail(true);
  auto reply = CallState(*address, request, &rpc::StateGcsService::Stub::ListState);
  if (!reply.ok()) return Fail(command, reply.status());
  nlohmann::ordered_json rows = ParseOrderedJson(reply->rows_json());
  if (rows.is_discarded() || rows.empty()) {
    return Fail(command, absl::NotFoundError("the cluster knows no " + form->field + " " + hex +
                                             (resource == "tasks" && reply->num_dropped() > 0
                                                  ? " (some task attempts were dropped by the cluster's caps)"
                                                  : "")));
  }
  if (format == "json") {
    std::cout << DumpJson(rows.size() == 1 ? rows[0] : rows, 2) << std::endl;
  } else {
    PrintYaml(rows.size() == 1 ? rows[0] : rows, 0, std::cout);
    std::cout << std::flush;
  }
  return 0;
}

int RunSummary(const ClusterFlags& flags, const std::string& resource, const std::vector<std::string>& filter_specs,
               const std::string& format) {
  const std::string command = "summary " + resource;
  if (auto s = CheckFormat(format, {"table", "json", "yaml"}); !s.ok()) return Fail(command, s);
  auto filters = ParseStateFilters(filter_specs);
  if (!filters.ok()) return Fail(command, filters.status());
  auto address = JoinCluster(flags);
  if (!address.ok()) return Fail(command, address.status());
  rpc::SummarizeStateRequest request;
  request.set_resource(resource);
  for (rpc::StateFilter& f : *filters) *request.add_filters() = std::move(f);
  auto reply = CallState(*address, request, &rpc::StateGcsService::Stub::SummarizeState);
  if (!reply.ok()) return Fail(command, reply.status());
  nlohmann::ordered_json summary = ParseOrderedJson(reply->summary_json());
  if (summary.is_discarded()) return Fail(command, absl::InternalError("the GCS answered with a malformed summary"));
  if (format == "json") {
    std::cout << DumpJson(summary, 2) << std::endl;
    return 0;
  }
  if (format == "yaml") {
    PrintYaml(summary, 0, std::cout);
    std::cout << std::flush;
    return 0;
  }
  std::cout << summary["total"].get<int64_t>() << " " << resource;
  if (summary.contains("total_bytes")) std::cout << ", " << summary["total_bytes"].get<int64_t>() << " bytes";
  std::cout << "\n";
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const auto& [name, entry] : summary["by_name"].items()) {
    std::ostringstream states;
    for (const auto& [state, count] : entry["state_counts"].items()) {
      states << (states.tellp() > 0 ? ", " : "") << state << ": " << count.get<int64_t>();
    }
    if (entry.contains("bytes")) states << "; " << entry["bytes"].get<int64_t>() << " bytes";
    rows.push_back({{"name", name}, {"type", entry.value("type", "")}, {"state_counts", states.str()}});
  }
  std::vector<size_t> width = {4, 4};
  for (const nlohmann::ordered_json& r : rows) {
    width[0] = std::max(width[0], r["name"].get<std::string>().size());
    width[1] = std::max(width[1], r["type"].get<std::string>().size());
  }
  std::cout << std::left << std::setw(static_cast<int>(width[0])) << "NAME" << "  "
            << std::setw(static_cast<int>(width[1])) << "TYPE" << "  STATE_COUNTS\n";
  for (const nlohmann::ordered_json& r : rows) {
    std::cout << std::left << std::setw(static_cast<int>(width[0])) << r["name"].get<std::string>() << "  "
              << std::setw(static_cast<int>(width[1])) << r["type"].get<std::string>() << "  "
              << r["state_counts"].get<std::string>() << "\n";
  }
  if (reply->num_dropped() > 0) {
    std::cout << "(" << reply->num_dropped() << " task attempts dropped by the cluster's caps are not counted)\n";
  }
  std::cout << std::flush;
  PrintWarnings(reply->warnings());
  return 0;
}

}  // namespace manta::cli
