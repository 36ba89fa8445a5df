#include "src/gcs/gcs_state_fanout.h"

#include <algorithm>

#include "protos/core_worker.grpc.pb.h"
#include "protos/node_manager.grpc.pb.h"
#include "src/common/json.h"
#include "src/common/node_address.h"
#include "src/common/state_filter.h"
#include "src/common/status_util.h"
#include "src/common/util.h"

namespace manta::gcs {

namespace {

// At most this many "did not answer" lines per reply; the rest are counted.
constexpr size_t kMaxFanoutWarnings = 5;

// One round of calls: the results, and `finish` once the last one is in.
template <typename Result>
struct Round {
  Result result;
  size_t pending = 0;
  size_t failed = 0;
  std::function<void(Result)> finish;

  void Warn(std::string warning) {
    if (++failed <= kMaxFanoutWarnings) result.warnings.push_back(std::move(warning));
  }
  void Arrive(size_t total) {
    if (--pending > 0) return;
    if (failed > kMaxFanoutWarnings) {
      result.warnings.push_back(std::to_string(failed - kMaxFanoutWarnings) + " more of " + std::to_string(total) +
                                " did not answer");
    }
    finish(std::move(result));
  }
};

void SetWarnings(const std::vector<std::string>& warnings, google::protobuf::RepeatedPtrField<std::string>* out) {
  for (const std::string& w : warnings) *out->Add() = w;
}

// An owner's summary as object_state.cc writes it: {TYPE: {"count": n, "bytes": b,
// "task_status": {STATUS: n}}} with integers (anything else is skipped whole).
bool WellFormedObjectSummary(const nlohmann::ordered_json& part) {
  for (const auto& [type, entry] : part.items()) {
    if (!entry.is_object()) return false;
    auto count = entry.find("count");
    auto bytes = entry.find("bytes");
    auto statuses = entry.find("task_status");
    if (count == entry.end() || !count->is_number_integer() || bytes == entry.end() ||
        !bytes->is_number_integer() || statuses == entry.end() || !statuses->is_object()) {
      return false;
    }
    for (const auto& [status, n] : statuses->items()) {
      if (!n.is_number_integer()) return false;
    }
  }
  return true;
}

}  // namespace

nlohmann::ordered_json WorkerRow(const rpc::WorkerStateInfo& w, const std::string& node_id_hex,
                                 const std::string& node_ip, bool detail) {
  nlohmann::ordered_json j;
  j["worker_id"] = BinaryHex(w.worker_id());
  j["is_alive"] = w.alive();
  j["worker_type"] = w.is_driver() ? "DRIVER" : "WORKER";
  j["state"] = w.state();
  j["node_id"] = node_id_hex;
  j["ip"] = node_ip;
  j["pid"] = w.pid();
  j["job_id"] = BinaryHex(w.job_id());
  j["start_time_ms"] = w.start_time_ms();
  j["end_time_ms"] = w.end_time_ms();
  j["exit_detail"] = w.exit_detail();
  if (detail) {
    j["port"] = w.address().port();
    j["log_file"] = w.log_file();
    j["err_file"] = w.err_file();
  }
  return j;
}

void GcsStateFanout::CollectWorkers(std::function<void(NodeWorkers)> done) {
  const std::vector<rpc::NodeInfo> nodes = nodes_.AliveNodes();
  if (nodes.empty()) return done(NodeWorkers());
  auto round = std::make_shared<Round<NodeWorkers>>();
  round->pending = nodes.size();
  round->finish = std::move(done);
  const size_t total = nodes.size();
  for (const rpc::NodeInfo& node : nodes) {
    rpc::GrpcClient<rpc::NodeStateService> client(loop_, RayletAddress(node), options_);
    std::string who = "node " + BinaryHex(node.node_id()) + " (" + node.node_manager_address() + ")";
    client.Call(&rpc::NodeStateService::Stub::async::ListWorkers, "NodeState.ListWorkers", rpc::ListWorkersRequest(),
                rpc::GrpcClient<rpc::NodeStateService>::Callback<rpc::ListWorkersReply>(
                    [round, who, total](const absl::Status& s, rpc::ListWorkersReply&& reply) {
                      if (s.ok()) {
                        round->result.replies.push_back(std::move(reply));
                      } else {
                        round->Warn(who + " did not answer: " + std::string(s.message()));
                      }
                      round->Arrive(total);
                    }),
                rpc::CallOptions{0, true});
  }
}

void GcsStateFanout::CollectObjects(rpc::ListObjectsRequest request, std::function<void(OwnerObjects)> done) {
  CollectWorkers([this, request = std::move(request), done = std::move(done)](NodeWorkers workers) mutable {
    std::vector<rpc::Address> owners;
    for (const rpc::ListWorkersReply& node : workers.replies) {
      for (const rpc::WorkerStateInfo& w : node.workers()) {
        // A worker that has not registered has no service yet (and owns nothing).
        if (w.alive() && w.address().port() > 0 && w.state() != "STARTING") owners.push_back(w.address());
      }
    }
    auto round = std::make_shared<Round<OwnerObjects>>();
    round->result.warnings = std::move(workers.warnings);
    if (owners.empty()) return done(std::move(round->result));
    round->pending = owners.size();
    round->finish = std::move(done);
    const size_t total = owners.size();
    for (const rpc::Address& owner : owners) {
      rpc::GrpcClient<rpc::CoreWorkerService> client(loop_, owner.ip_address() + ":" + std::to_string(owner.port()),
                                                     options_);
      std::string who = "worker " + BinaryHex(owner.worker_id()) + " (" + owner.ip_address() + ")";
      client.Call(&rpc::CoreWorkerService::Stub::async::ListObjects, "CoreWorker.ListObjects", request,
                  rpc::GrpcClient<rpc::CoreWorkerService>::Callback<rpc::ListObjectsReply>(
                      [round, who, total](const absl::Status& s, rpc::ListObjectsReply&& reply) {
                        if (s.ok()) {
                          round->result.replies.push_back(std::move(reply));
                        } else {
                          // (Also a worker that exited since its raylet listed it.)
                          round->Warn(who + " did not answer: " + std::string(s.message()));
                        }
                        round->Arrive(total);
                      }),
                  rpc::CallOptions{0, false});
    }
  });
}

void GcsStateFanout::ListWorkers(std::vector<rpc::StateFilter> filters, int64_t limit, bool detail,
                                 rpc::ListStateReply* reply, Done done) {
  absl::Status valid = CheckStateFilters("workers", WorkerStateFilterKeys(), filters);
  if (!valid.ok()) return done(valid);
  CollectWorkers([filters = std::move(filters), limit, detail, reply, done = std::move(done)](NodeWorkers nodes) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    int64_t matched = 0;
    for (const rpc::ListWorkersReply& node : nodes.replies) {
      const std::string node_hex = BinaryHex(node.node_id());
      for (const rpc::WorkerStateInfo& w : node.workers()) {
        nlohmann::ordered_json row = WorkerRow(w, node_hex, node.node_ip(), detail);
        if (!RowPassesStateFilters(row, filters)) continue;
        ++matched;
        if (static_cast<int64_t>(rows.size()) < limit) rows.push_back(std::move(row));
      }
    }
    reply->set_num_matched(matched);
    reply->set_num_returned(static_cast<int64_t>(rows.size()));
    reply->set_rows_json(DumpJson(rows));
    SetWarnings(nodes.warnings, reply->mutable_warnings());
    done(absl::OkStatus());
  });
}

void GcsStateFanout::ListObjects(std::vector<rpc::StateFilter> filters, int64_t limit, bool detail,
                                 rpc::ListStateReply* reply, Done done) {
  absl::Status valid = CheckStateFilters("objects", ObjectStateFilterKeys(), filters);
  if (!valid.ok()) return done(valid);
  rpc::ListObjectsRequest request;
  for (rpc::StateFilter& f : filters) *request.add_filters() = std::move(f);
  request.set_limit(limit);
  request.set_detail(detail);
  CollectObjects(std::move(request), [limit, reply, done = std::move(done)](OwnerObjects owners) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    int64_t matched = 0;
    for (const rpc::ListObjectsReply& owner : owners.replies) {
      matched += owner.num_matched();
      nlohmann::ordered_json part = ParseOrderedJson(owner.rows_json());
      if (!part.is_array()) continue;
      for (nlohmann::ordered_json& row : part) {
        if (row.is_object()) rows.push_back(std::move(row));
      }
    }
    // Each owner sent its largest; the largest of all are kept.
    auto size_of = [](const nlohmann::ordered_json& row) {
      auto size = row.find("object_size");
      return size != row.end() && size->is_number_integer() ? size->get<int64_t>() : int64_t{-1};
    };
    std::stable_sort(rows.begin(), rows.end(),
                     [&](const auto& a, const auto& b) { return size_of(a) > size_of(b); });
    if (static_cast<int64_t>(rows.size()) > limit) rows.erase(rows.begin() + limit, rows.end());
    reply->set_num_matched(matched);
    reply->set_num_returned(static_cast<int64_t>(rows.size()));
    reply->set_rows_json(DumpJson(rows));
    SetWarnings(owners.warnings, reply->mutable_warnings());
    done(absl::OkStatus());
  });
}

void GcsStateFanout::SummarizeObjects(std::vector<rpc::StateFilter> filters, rpc::SummarizeStateReply* reply,
                                      Done done) {
  absl::Status valid = CheckStateFilters("objects", ObjectStateFilterKeys(), filters);
  if (!valid.ok()) return done(valid);
  rpc::ListObjectsRequest request;
  for (rpc::StateFilter& f : filters) *request.add_filters() = std::move(f);
  request.set_limit(1);
  CollectObjects(std::move(request), [reply, done = std::move(done)](OwnerObjects owners) {
    nlohmann::ordered_json by_name = nlohmann::ordered_json::object();
    int64_t total = 0;
    int64_t total_bytes = 0;
    for (const rpc::ListObjectsReply& owner : owners.replies) {
      nlohmann::ordered_json part = ParseOrderedJson(owner.summary_json());
      if (!part.is_object() || !WellFormedObjectSummary(part)) continue;
      for (const auto& [type, entry] : part.items()) {
        nlohmann::ordered_json& out = by_name[type];
        if (!out.is_object()) {
          out = {{"type", "OBJECT"}, {"state_counts", nlohmann::ordered_json::object()}, {"bytes", 0}};
        }
        const int64_t count = entry.value("count", int64_t{0});
        const int64_t bytes = entry.value("bytes", int64_t{0});
        total += count;
        total_bytes += bytes;
        out["bytes"] = out["bytes"].get<int64_t>() + bytes;
        const nlohmann::ordered_json statuses = entry.value("task_status", nlohmann::ordered_json::object());
        for (const auto& [status, n] : statuses.items()) {
          out["state_counts"][status] = out["state_counts"].value(status, int64_t{0}) + n.get<int64_t>();
        }
      }
    }
    nlohmann::ordered_json summary = {{"total", total}, {"total_bytes", total_bytes}, {"by_name", std::move(by_name)}};
    reply->set_summary_json(DumpJson(summary));
    SetWarnings(owners.warnings, reply->mutable_warnings());
    done(absl::OkStatus());
  });
}

}  // namespace manta::gcs
