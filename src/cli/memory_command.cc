// `manta memory`: what holds memory in a cluster (ARCHITECTURE.md §18). Each node's
// object store totals (from the state API's nodes), then the objects (their owners
// answer through the state API) grouped by the node holding the primary copy or by
// owner, largest first, with each group's totals and the cluster's by reference type.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include "nlohmann/json.hpp"
#include "src/cli/commands.h"
#include "src/common/json.h"

namespace manta::cli {

namespace {

using Json = nlohmann::ordered_json;

int MemoryFail(const absl::Status& status) {
  std::cerr << "manta memory: " << status.message() << std::endl;
  return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

int64_t Divisor(const std::string& units) {
  if (units == "KB") return int64_t{1} << 10;
  if (units == "MB") return int64_t{1} << 20;
  if (units == "GB") return int64_t{1} << 30;
  return 1;
}

std::string Amount(int64_t bytes, const std::string& units) {
  if (bytes < 0) return "?";
  const int64_t d = Divisor(units);
  std::ostringstream out;
  if (d == 1) {
    out << bytes << " B";
  } else {
    out << std::fixed << std::setprecision(2) << static_cast<double>(bytes) / static_cast<double>(d) << " " << units;
  }
  return out.str();
}

int64_t SizeOf(const Json& row) {
  const Json& size = row["object_size"];
  return size.is_number() ? size.get<int64_t>() : -1;
}

std::string Short(const std::string& hex) { return hex.substr(0, 12); }

// The group an object belongs to: the node holding its primary copy (objects not in
// a store live in their owner's memory, on the owner's node), or its owner.
std::string GroupOf(const Json& row, const std::string& group_by, const std::map<std::string, std::string>& ips) {
  if (group_by == "owner") {
    return "owner " + row.value("type", "") + " pid " + std::to_string(row.value("pid", 0)) + " on " +
           row.value("ip", "") + " (worker " + Short(row.value("owner_worker_id", "")) + ")";
  }
  const std::string pinned = row.value("pinned_at", "");
  const std::string node = pinned.empty() ? row.value("node_id", "") : pinned;
  auto ip = ips.find(node);
  return "node " + (ip == ips.end() ? std::string("?") : ip->second) + " (" + Short(node) + ")";
}

void PrintStores(const Json& nodes, const std::string& units) {
  std::cout << "--- object stores ---\n";
  std::cout << std::left << std::setw(14) << "NODE" << std::setw(17) << "IP" << std::setw(14) << "USED"
            << std::setw(14) << "CAPACITY" << std::setw(9) << "OBJECTS" << "SPILLED\n";
  for (const Json& n : nodes) {
    if (n.value("state", "") != "ALIVE") continue;
    std::cout << std::left << std::setw(14) << Short(n.value("node_id", "")) << std::setw(17)
              << n.value("node_ip", "") << std::setw(14) << Amount(n.value("object_store_used_bytes", int64_t{0}), units)
              << std::setw(14) << Amount(n.value("object_store_capacity_bytes", int64_t{0}), units) << std::setw(9)
              << n.value("object_store_num_objects", int64_t{0})
              << Amount(n.value("object_store_spilled_bytes", int64_t{0}), units) << "\n";
  }
}

void SortRows(std::vector<Json>* rows, const std::string& sort_by) {
  std::stable_sort(rows->begin(), rows->end(), [&](const Json& a, const Json& b) {
    if (sort_by == "pid") return a.value("pid", 0) < b.value("pid", 0);
    if (sort_by == "reference-type") return a.value("reference_type", "") < b.value("reference_type", "");
    return SizeOf(a) > SizeOf(b);
  });
}

void PrintGroups(const std::map<std::string, std::vector<Json>>& groups, const MemoryQuery& q) {
  for (const auto& [name, rows] : groups) {
    int64_t bytes = 0;
    for (const Json& r : rows) bytes += std::max<int64_t>(SizeOf(r), 0);
    std::cout << "\n--- " << name << ": " << rows.size() << " objects, " << Amount(bytes, q.units) << " ---\n";
    std::cout << std::left << std::setw(58) << "OBJECT_ID" << std::setw(14) << "SIZE" << std::setw(22)
              << "REFERENCE_TYPE" << std::setw(10) << "STATUS" << std::setw(8) << "PID" << "BORROWERS\n";
    for (size_t i = 0; i < rows.size() && static_cast<int64_t>(i) < q.num_entries; ++i) {
      const Json& r = rows[i];
      std::cout << std::left << std::setw(58) << r.value("object_id", "") << std::setw(14)
                << Amount(SizeOf(r), q.units) << std::setw(22) << r.value("reference_type", "") << std::setw(10)
                << r.value("task_status", "") << std::setw(8) << r.value("pid", 0)
                << r.value("num_borrowers", 0) << "\n";
    }
    if (static_cast<int64_t>(rows.size()) > q.num_entries) {
      std::cout << "(" << rows.size() - q.num_entries << " more; raise --num-entries to see them)\n";
    }
  }
}

void PrintTotals(const Json& summary, const std::string& units) {
  std::cout << "\n--- all objects: " << summary.value("total", int64_t{0}) << ", "
            << Amount(summary.value("total_bytes", int64_t{0}), units) << " ---\n";
  const Json by_type = summary.value("by_name", Json::object());
  for (const auto& [type, entry] : by_type.items()) {
    int64_t count = 0;
    const Json statuses = entry.value("state_counts", Json::object());
    for (const auto& [status, n] : statuses.items()) count += n.get<int64_t>();
    std::cout << std::left << std::setw(22) << type << std::setw(10) << count
              << Amount(entry.value("bytes", int64_t{0}), units) << "\n";
  }
}

absl::Status CheckQuery(const MemoryQuery& q) {
  if (q.group_by != "node" && q.group_by != "owner") {
    return absl::InvalidArgumentError("unknown --group-by '" + q.group_by + "' (node or owner)");
  }
  if (q.sort_by != "size" && q.sort_by != "pid" && q.sort_by != "reference-type") {
    return absl::InvalidArgumentError("unknown --sort-by '" + q.sort_by + "' (size, pid or reference-type)");
  }
  if (q.units != "B" && q.units != "KB" && q.units != "MB" && q.units != "GB") {
    return absl::InvalidArgumentError("unknown --units '" + q.units + "' (B, KB, MB or GB)");
  }
  if (q.format != "table" && q.format != "json") {
    return absl::InvalidArgumentError("unknown --format '" + q.format + "' (table or json)");
  }
  if (q.num_entries < 0) return absl::InvalidArgumentError("--num-entries must be 0 or more");
  return absl::OkStatus();
}

}  // namespace

int RunMemory(const ClusterFlags& flags, const MemoryQuery& query) {
  absl::Status valid = CheckQuery(query);
  if (!valid.ok()) return MemoryFail(valid);
  auto address = JoinCluster(flags);
  if (!address.ok()) return MemoryFail(address.status());
  auto nodes_json = QueryStateRows(*address, "nodes", {});
  if (!nodes_json.ok()) return MemoryFail(nodes_json.status());
  std::vector<std::string> warnings;
  auto summary_json = QueryStateSummary(*address, "objects", &warnings);
  if (!summary_json.ok()) return MemoryFail(summary_json.status());
  Json nodes = Json::parse(*nodes_json, nullptr, false);
  Json summary = Json::parse(*summary_json, nullptr, false);
  Json objects = Json::array();
  if (!query.stats_only) {
    auto objects_json = QueryStateRows(*address, "objects", {});
    if (!objects_json.ok()) return MemoryFail(objects_json.status());
    objects = Json::parse(*objects_json, nullptr, false);
  }
  if (nodes.is_discarded() || summary.is_discarded() || objects.is_discarded()) {
    return MemoryFail(absl::InternalError("the GCS answered with malformed JSON"));
  }
  std::map<std::string, std::string> ips;
  for (const Json& n : nodes) ips[n.value("node_id", "")] = n.value("node_ip", "");
  std::map<std::string, std::vector<Json>> groups;
  for (Json& row : objects) {
    std::string group = GroupOf(row, query.group_by, ips);
    groups[group].push_back(std::move(row));
  }
  for (auto& [name, rows] : groups) SortRows(&rows, query.sort_by);
  if (query.format == "json") {
    Json out = {{"nodes", nodes}, {"summary", summary}, {"groups", Json::object()}};
    for (auto& [name, rows] : groups) out["groups"][name] = rows;
    std::cout << DumpJson(out, 2) << std::endl;
  } else {
    PrintStores(nodes, query.units);
    if (!query.stats_only) PrintGroups(groups, query);
    PrintTotals(summary, query.units);
    std::cout << std::flush;
  }
  for (const std::string& w : warnings) std::cerr << "(incomplete: " << w << ")" << std::endl;
  if (summary.value("total", int64_t{0}) > static_cast<int64_t>(objects.size()) && !query.stats_only) {
    std::cerr << "(the " << objects.size() << " largest of " << summary.value("total", int64_t{0})
              << " objects are listed)" << std::endl;
  }
  return 0;
}

}  // namespace manta::cli
