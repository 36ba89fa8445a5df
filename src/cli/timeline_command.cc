// `manta timeline [--job ID] -o trace.json`: the cluster's task attempts as Chrome
// trace-event JSON (Perfetto, chrome://tracing). Each node is a process (integer pid,
// named by an "M" record), each worker or driver on it a thread (its OS pid as tid,
// named too); each execution is an "X" slice named by its function, and an arrow (an
// "s"/"f" flow pair) goes from where it was submitted to where it ran.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <tuple>

#include "nlohmann/json.hpp"
#include "protos/gcs.grpc.pb.h"
#include "src/cli/cluster_call.h"
#include "src/cli/commands.h"
#include "src/common/id.h"
#include "src/common/rpc/auth.h"
#include "src/common/rpc/grpc_client.h"
#include "src/common/rpc/tls_relay.h"

namespace manta::cli {

namespace {

constexpr int kStates = 6;
constexpr int64_t kMaxTimelineReplyBytes = 1 << 30;

absl::StatusOr<rpc::GetTaskTimelineReply> FetchTimeline(const std::string& address, const std::string& job_id) {
  auto stub = rpc::StateGcsService::NewStub(rpc::MakeChannel(address, kMaxTimelineReplyBytes));
  rpc::GetTaskTimelineRequest request;
  request.set_job_id(job_id);
  rpc::GetTaskTimelineReply reply;
  grpc::Status s = CallWithToken(*stub, &rpc::StateGcsService::Stub::GetTaskTimeline, request, &reply, 60);
  if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) return absl::InvalidArgumentError(s.error_message());
  if (!s.ok()) {
    return absl::UnavailableError("cannot reach the GCS at " + address + ": " + s.error_message() +
                                  (s.error_code() == grpc::StatusCode::UNAVAILABLE ? rpc::TlsHint() : ""));
  }
  return reply;
}

// The tracks of a trace: a process per node, a thread per worker.
class Tracks {
 public:
  explicit Tracks(const rpc::TaskEventBatch& b) : batch_(b) {
    // The processes that ran a driver's own task are drivers.
    for (int i = 0; i < b.attempts_size(); ++i) {
      if (b.kind(i) >= 0 && b.kinds(b.kind(i)).type() == rpc::DRIVER_TASK && b.executor(i) >= 0) {
        drivers_.insert(b.executor(i));
      }
    }
  }
  // (pid, tid) of executor `e`, naming its node and worker in `meta` the first time.
  std::pair<int, int> Of(int e, nlohmann::json* meta) {
    const bool driver = drivers_.count(e) > 0;
    const rpc::TaskExecutor& x = batch_.executors(e);
    auto [node, added] = nodes_.try_emplace(x.node_id(), static_cast<int>(nodes_.size()) + 1);
    if (added) {
      meta->push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", node->second}, {"tid", 0},
                       {"args", {{"name", "node " + BinaryHex(x.node_id()).substr(0, 12)}}}});
    }
    const int tid = x.pid() > 0 ? x.pid() : 1000000 + e;
    if (threads_.insert({node->second, tid}).second) {
      meta->push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", node->second}, {"tid", tid},
                       {"args", {{"name", std::string(driver ? "driver " : "worker ") + std::to_string(x.pid())}}}});
    }
    return {node->second, tid};
  }

 private:
  const rpc::TaskEventBatch& batch_;
  std::map<std::string, int> nodes_;
  std::set<std::pair<int, int>> threads_;
  std::set<int> drivers_;
};

// The trace of `b`'s attempts: metadata first, then the events by time.
nlohmann::json Trace(const rpc::TaskEventBatch& b) {
  Tracks tracks(b);
  nlohmann::json meta = nlohmann::json::array();
  std::vector<nlohmann::json> events;
  std::map<int, const rpc::ErrorInfo*> errors;
  for (const rpc::TaskEventError& e : b.errors()) errors[e.row()] = &e.error();
  int64_t next_flow = 1;
  for (int i = 0; i < b.attempts_size(); ++i) {
    const int64_t start = b.exec_start_unix_us(i);
    if (start <= 0 || b.executor(i) < 0) continue;  // never ran (or not yet)
    const rpc::TaskKind* kind = b.kind(i) >= 0 ? &b.kinds(b.kind(i)) : nullptr;
    int64_t end = b.exec_end_unix_us(i);
    if (end <= 0) end = b.state_unix_us(i * kStates + (rpc::FINISHED - 1));
    if (end <= 0) end = b.state_unix_us(i * kStates + (rpc::FAILED - 1));
    const auto [pid, tid] = tracks.Of(b.executor(i), &meta);
    const std::string task_id = BinaryHex(b.task_ids().substr(static_cast<size_t>(i) * TaskID::kSize, TaskID::kSize));
    nlohmann::json args = {{"task_id", task_id}, {"attempt", b.attempts(i)}};
    if (kind != nullptr) args["type"] = rpc::TaskType_Name(kind->type());
    if (auto e = errors.find(i); e != errors.end()) args["error"] = e->second->message();
    events.push_back({{"name", kind != nullptr ? kind->function_name() : "?"}, {"cat", "task"}, {"ph", "X"},
                      {"ts", start}, {"dur", std::max<int64_t>(end - start, 1)}, {"pid", pid}, {"tid", tid},
                      {"args", std::move(args)}});
    const int64_t submitted = b.state_unix_us(i * kStates);
    if (submitted <= 0 || i >= b.owner_size() || b.owner(i) < 0) continue;
    const auto [owner_pid, owner_tid] = tracks.Of(b.owner(i), &meta);
    const int64_t id = next_flow++;
    events.push_back({{"name", "submit"}, {"cat", "flow"}, {"ph", "s"}, {"id", id}, {"ts", std::min(submitted, start)},
                      {"pid", owner_pid}, {"tid", owner_tid}});
    events.push_back({{"name", "submit"}, {"cat", "flow"}, {"ph", "f"}, {"bp", "e"}, {"id", id}, {"ts", start},
                      {"pid", pid}, {"tid", tid}});
  }
  std::stable_sort(events.begin(), events.end(), [](const nlohmann::json& x, const nlohmann::json& y) {
    return x["ts"].get<int64_t>() < y["ts"].get<int64_t>();
  });
  nlohmann::json trace = std::move(meta);
  for (nlohmann::json& e : events) trace.push_back(std::move(e));
  return trace;
}

}  // namespace

int RunTimeline(const ClusterFlags& flags, const std::string& job_hex, const std::string& output) {
  auto fail = [](const absl::Status& s) {
    std::cerr << "manta timeline: " << s.message() << std::endl;
    return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  };
  std::string job_id;
  if (!job_hex.empty()) {
    auto job = JobID::FromHex(job_hex);
    if (!job.ok()) return fail(absl::InvalidArgumentError("'" + job_hex + "' is not a job id: expected 8 hex digits"));
    job_id = job->Binary();
  }
  auto address = JoinCluster(flags);
  if (!address.ok()) return fail(address.status());
  auto reply = FetchTimeline(*address, job_id);
  if (!reply.ok()) return fail(reply.status());
  const std::string text = Trace(reply->attempts()).dump();
  std::ofstream out(output, std::ios::trunc);
  if (!out || !(out << text) || !out.flush()) {
    return fail(absl::UnavailableError("cannot write " + output));
  }
  std::cout << "wrote " << reply->attempts().attempts_size() << " task attempts to " << output
            << " (open it in https://ui.perfetto.dev or chrome://tracing)" << std::endl;
  if (reply->num_dropped() > 0) {
    std::cerr << "(" << reply->num_dropped() << " task attempts were dropped by the cluster's caps and are missing)"
              << std::endl;
  }
  return 0;
}

}  // namespace manta::cli
