#include "src/common/task_timeline.h"

#include <algorithm>
#include <map>
#include <set>

#include "protos/gcs.grpc.pb.h"
#include "protos/node_manager.grpc.pb.h"
#include "src/common/id.h"
#include "src/common/rpc/call_with_token.h"
#include "src/common/task_event_row.h"
#include "src/common/node_address.h"

namespace manta {

namespace {

// The kind of `row` in `b` (null: none, or an index out of range).
const rpc::TaskKind* KindOf(const rpc::TaskEventBatch& b, const TaskEventRow& row) {
  return row.kind >= 0 && row.kind < b.kinds_size() ? &b.kinds(row.kind) : nullptr;
}

// The tracks of a trace: a process per node, a thread per worker.
class TimelineTracks {
 public:
  explicit TimelineTracks(const rpc::TaskEventBatch& b) : batch_(b) {
    // The processes that ran a driver's own task are drivers.
    for (int64_t i = 0; i < NumRows(b); ++i) {
      const TaskEventRow row = RowAt(b, i);
      const rpc::TaskKind* kind = KindOf(b, row);
      if (kind != nullptr && kind->type() == rpc::DRIVER_TASK && row.executor >= 0) drivers_.insert(row.executor);
    }
  }
  // The pid of node `node_id` (binary), naming it in `meta` the first time.
  int NodePid(const std::string& node_id, nlohmann::json* meta) {
    auto [node, added] = nodes_.try_emplace(node_id, static_cast<int>(nodes_.size()) + 1);
    if (added) {
      meta->push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", node->second}, {"tid", 0},
                       {"args", {{"name", "node " + BinaryHex(node_id).substr(0, 12)}}}});
    }
    return node->second;
  }
  // Names thread `tid` of `pid` in `meta` the first time.
  void NameThread(int pid, int tid, const std::string& name, nlohmann::json* meta) {
    if (threads_.insert({pid, tid}).second) {
      meta->push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
    }
  }
  // (pid, tid) of executor `e`, naming its node and worker in `meta` the first time.
  std::pair<int, int> Of(int e, nlohmann::json* meta) {
    const bool driver = drivers_.count(e) > 0;
    const rpc::TaskExecutor& x = batch_.executors(e);
    const int pid = NodePid(x.node_id(), meta);
    const int tid = x.pid() > 0 ? x.pid() : 1000000 + e;
    NameThread(pid, tid, std::string(driver ? "driver " : "worker ") + std::to_string(x.pid()), meta);
    return {pid, tid};
  }

 private:
  const rpc::TaskEventBatch& batch_;
  std::map<std::string, int> nodes_;
  std::set<std::pair<int, int>> threads_;
  std::set<int> drivers_;
};

// Raylet tracks: thread ids far above any OS pid; one lane per overlapping event.
constexpr int kTransferTrackTid = 2000000000;
constexpr int kSpillTrackTid = 2000001000;
constexpr int kMaxLanes = 999;

void AddNodeEvents(const rpc::GetNodeEventsReply& node, TimelineTracks* tracks, nlohmann::json* meta,
                   std::vector<nlohmann::json>* events) {
  const int pid = tracks->NodePid(node.node_id(), meta);
  std::vector<const rpc::NodeEvent*> sorted;
  for (const rpc::NodeEvent& e : node.events()) {
    if (e.start_unix_us() > 0 && e.end_unix_us() >= e.start_unix_us()) sorted.push_back(&e);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const rpc::NodeEvent* a, const rpc::NodeEvent* b) { return a->start_unix_us() < b->start_unix_us(); });
  std::vector<int64_t> transfer_lanes, spill_lanes;  // each lane's last end
  for (const rpc::NodeEvent* e : sorted) {
    const bool transfer = e->kind() == "pull";
    std::vector<int64_t>& lanes = transfer ? transfer_lanes : spill_lanes;
    size_t lane = 0;
    while (lane < lanes.size() && lanes[lane] > e->start_unix_us()) ++lane;
    if (lane == lanes.size()) {
      if (lanes.size() >= kMaxLanes) lane = lanes.size() - 1;
      else lanes.push_back(0);
    }
    lanes[lane] = std::max(lanes[lane], e->end_unix_us());
    const int tid = (transfer ? kTransferTrackTid : kSpillTrackTid) + static_cast<int>(lane);
    tracks->NameThread(pid, tid, std::string(transfer ? "object transfers" : "spilling") +
                                     (lane > 0 ? " " + std::to_string(lane + 1) : ""), meta);
    const std::string object = BinaryHex(e->object_id());
    nlohmann::json args = {{"object_id", object}, {"bytes", e->bytes()}, {"ok", e->ok()}};
    if (e->num_objects() > 1) args["num_objects"] = e->num_objects();
    if (!e->peer().empty()) args["from"] = e->peer();
    const std::string name = e->kind() == "spill" && e->num_objects() > 1
                                 ? "spill " + std::to_string(e->num_objects()) + " objects"
                                 : e->kind() + " " + object.substr(0, 8);
    events->push_back({{"name", name}, {"cat", e->kind()}, {"ph", "X"}, {"ts", e->start_unix_us()},
                       {"dur", std::max<int64_t>(e->end_unix_us() - e->start_unix_us(), 1)}, {"pid", pid},
                       {"tid", tid}, {"args", std::move(args)}});
  }
}

}  // namespace

std::vector<rpc::GetNodeEventsReply> FetchNodeEvents(const std::string& gcs_address,
                                                     std::vector<std::string>* warnings) {
  std::vector<rpc::GetNodeEventsReply> out;
  auto gcs = rpc::NodeInfoGcsService::NewStub(rpc::MakeChannel(gcs_address, 64 << 20));
  rpc::GetAllNodeInfoReply nodes;
  grpc::Status s =
      rpc::CallWithToken(*gcs, &rpc::NodeInfoGcsService::Stub::GetAllNodeInfo, rpc::GetAllNodeInfoRequest(), &nodes, 10);
  if (!s.ok()) {
    warnings->push_back("cannot list the nodes: " + s.error_message());
    return out;
  }
  for (const rpc::NodeInfo& n : nodes.node_info_list()) {
    if (n.state() != rpc::NodeInfo::ALIVE) continue;
    const std::string address = RayletAddress(n);
    auto raylet = rpc::NodeStateService::NewStub(rpc::MakeChannel(address, 64 << 20));
    rpc::GetNodeEventsReply reply;
    s = rpc::CallWithToken(*raylet, &rpc::NodeStateService::Stub::GetNodeEvents, rpc::GetNodeEventsRequest(), &reply,
                           10);
    if (s.ok()) {
      out.push_back(std::move(reply));
    } else {
      warnings->push_back("node " + address + " did not give its object events: " + s.error_message());
    }
  }
  return out;
}

nlohmann::json TaskTimelineTrace(const rpc::TaskEventBatch& b, const std::vector<rpc::GetNodeEventsReply>& nodes) {
  TimelineTracks tracks(b);
  nlohmann::json meta = nlohmann::json::array();
  std::vector<nlohmann::json> events;
  for (const rpc::GetNodeEventsReply& node : nodes) AddNodeEvents(node, &tracks, &meta, &events);
  std::map<int64_t, const rpc::ErrorInfo*> errors;
  for (const rpc::TaskEventError& e : b.errors()) errors[e.row()] = &e.error();
  int64_t next_flow = 1;
  for (int64_t i = 0; i < NumRows(b); ++i) {
    const TaskEventRow row = RowAt(b, i);
    const int64_t start = row.exec_start_us;
    // Never ran (or not yet), or ran on a worker the batch does not name.
    if (start <= 0 || row.executor < 0 || row.executor >= b.executors_size()) continue;
    const rpc::TaskKind* kind = KindOf(b, row);
    int64_t end = row.exec_end_us;
    if (end <= 0) end = row.StateUs(rpc::FINISHED);
    if (end <= 0) end = row.StateUs(rpc::FAILED);
    const auto [pid, tid] = tracks.Of(row.executor, &meta);
    nlohmann::json args = {{"task_id", row.TaskId().Hex()}, {"attempt", row.attempt}};
    if (kind != nullptr) args["type"] = rpc::TaskType_Name(kind->type());
    if (auto e = errors.find(i); e != errors.end()) args["error"] = e->second->message();
    events.push_back({{"name", kind != nullptr ? kind->function_name() : "?"}, {"cat", "task"}, {"ph", "X"},
                      {"ts", start}, {"dur", std::max<int64_t>(end - start, 1)}, {"pid", pid}, {"tid", tid},
                      {"args", std::move(args)}});
    const int64_t submitted = row.StateUs(rpc::PENDING_ARGS_AVAIL);
    if (submitted <= 0 || row.owner < 0 || row.owner >= b.executors_size()) continue;
    const auto [owner_pid, owner_tid] = tracks.Of(row.owner, &meta);
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


}  // namespace manta
