#include "src/common/task_timeline.h"

#include <algorithm>
#include <map>
#include <set>

#include "src/common/id.h"

namespace manta {

namespace {

constexpr int kTimelineStates = 6;

// The tracks of a trace: a process per node, a thread per worker.
class TimelineTracks {
 public:
  explicit TimelineTracks(const rpc::TaskEventBatch& b) : batch_(b) {
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

}  // namespace

nlohmann::json TaskTimelineTrace(const rpc::TaskEventBatch& b) {
  TimelineTracks tracks(b);
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
    if (end <= 0) end = b.state_unix_us(i * kTimelineStates + (rpc::FINISHED - 1));
    if (end <= 0) end = b.state_unix_us(i * kTimelineStates + (rpc::FAILED - 1));
    const auto [pid, tid] = tracks.Of(b.executor(i), &meta);
    const std::string task_id = BinaryHex(b.task_ids().substr(static_cast<size_t>(i) * TaskID::kSize, TaskID::kSize));
    nlohmann::json args = {{"task_id", task_id}, {"attempt", b.attempts(i)}};
    if (kind != nullptr) args["type"] = rpc::TaskType_Name(kind->type());
    if (auto e = errors.find(i); e != errors.end()) args["error"] = e->second->message();
    events.push_back({{"name", kind != nullptr ? kind->function_name() : "?"}, {"cat", "task"}, {"ph", "X"},
                      {"ts", start}, {"dur", std::max<int64_t>(end - start, 1)}, {"pid", pid}, {"tid", tid},
                      {"args", std::move(args)}});
    const int64_t submitted = b.state_unix_us(i * kTimelineStates);
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


}  // namespace manta
