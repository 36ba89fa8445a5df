// `manta logs`: the log files of a cluster's nodes, read from each node's raylet
// (LogService): list them, or print one — by name, or the output of the worker that
// ran an actor or a task, or of a worker pid (its stdout file, or with --err its
// stderr file) — its last lines, or follow it.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <iomanip>
#include <iostream>
#include <thread>

#include "nlohmann/json.hpp"
#include "protos/node_manager.grpc.pb.h"
#include "src/cli/cluster_call.h"
#include "src/cli/commands.h"
#include "src/common/id.h"
#include "src/common/json.h"
#include "src/common/node_address.h"
#include "src/common/rpc/auth.h"
#include "src/common/rpc/grpc_client.h"
#include "src/common/rpc/tls_relay.h"

namespace manta::cli {

namespace {

constexpr int64_t kMaxLogReplyBytes = 16 << 20;
constexpr int64_t kChunkBytes = 1 << 20;

std::string DescribeNode(const rpc::NodeInfo& node) {
  return BinaryHex(node.node_id()).substr(0, 12) + " (" + node.node_manager_address() + ")";
}

absl::Status NodeUnavailable(const rpc::NodeInfo& node, const grpc::Status& s) {
  return absl::UnavailableError("cannot reach the raylet of node " + DescribeNode(node) + " at " + RayletAddress(node) +
                                ": " + s.error_message() +
                                (s.error_code() == grpc::StatusCode::UNAVAILABLE ? rpc::TlsHint() : ""));
}

template <typename Request, typename Reply>
absl::StatusOr<Reply> CallLogs(const rpc::NodeInfo& node, const Request& request,
                               grpc::Status (rpc::LogService::Stub::*method)(grpc::ClientContext*, const Request&,
                                                                            Reply*)) {
  auto stub = rpc::LogService::NewStub(rpc::MakeChannel(RayletAddress(node), kMaxLogReplyBytes));
  Reply reply;
  grpc::Status s = CallWithToken(*stub, method, request, &reply, 10);
  if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) return absl::InvalidArgumentError(s.error_message());
  if (s.error_code() == grpc::StatusCode::NOT_FOUND) return absl::NotFoundError(s.error_message());
  if (!s.ok()) return NodeUnavailable(node, s);
  return reply;
}

// A log file and the node it is on.
struct Located {
  rpc::NodeInfo node;
  rpc::LogFileInfo file;
};

absl::Status DeadNode(const rpc::NodeInfo& node) {
  return absl::UnavailableError("node " + DescribeNode(node) + " is dead (" + node.death_reason() +
                                "): its raylet cannot serve its logs; they may still be on that machine under " +
                                node.session_dir() + "/logs");
}

// The nodes the query names (all alive ones when it names none).
absl::StatusOr<std::vector<rpc::NodeInfo>> SelectNodes(const rpc::GetAllNodeInfoReply& all, const LogsQuery& q) {
  std::vector<rpc::NodeInfo> nodes;
  for (const rpc::NodeInfo& n : all.node_info_list()) {
    const bool named = (!q.node_id.empty() && BinaryHex(n.node_id()).rfind(q.node_id, 0) == 0) ||
                       (!q.node_ip.empty() && n.node_manager_address() == q.node_ip);
    if (q.node_id.empty() && q.node_ip.empty()) {
      if (n.state() == rpc::NodeInfo::ALIVE) nodes.push_back(n);
    } else if (named) {
      if (n.state() != rpc::NodeInfo::ALIVE) return DeadNode(n);
      nodes.push_back(n);
    }
  }
  if (nodes.empty()) {
    return absl::NotFoundError(q.node_id.empty() && q.node_ip.empty()
                                   ? "the cluster has no alive node"
                                   : "the cluster has no node " + (q.node_id.empty() ? q.node_ip : q.node_id));
  }
  return nodes;
}

// The node with id `node_hex` (dead ones are an error naming it).
absl::StatusOr<rpc::NodeInfo> NodeById(const rpc::GetAllNodeInfoReply& all, const std::string& node_hex) {
  for (const rpc::NodeInfo& n : all.node_info_list()) {
    if (BinaryHex(n.node_id()) != node_hex) continue;
    if (n.state() != rpc::NodeInfo::ALIVE) return DeadNode(n);
    return n;
  }
  return absl::NotFoundError("the cluster has no node " + node_hex);
}

// The worker (node and worker id, hex) that ran an actor or a task, from the state API.
absl::StatusOr<std::pair<std::string, std::string>> WorkerOf(const std::string& address, const LogsQuery& q) {
  const bool actor = !q.actor_id.empty();
  const std::string id = actor ? q.actor_id : q.task_id;
  auto rows_json = QueryStateRows(address, actor ? "actors" : "tasks", {(actor ? "actor_id=" : "task_id=") + id});
  if (!rows_json.ok()) return rows_json.status();
  nlohmann::json rows = ParseJson(*rows_json);
  if (rows.is_discarded() || rows.empty()) {
    return absl::NotFoundError(std::string("the cluster knows no ") + (actor ? "actor " : "task ") + id);
  }
  // A task's last attempt is the one that ran last.
  const nlohmann::json& row = rows.back();
  std::string node = row.value("node_id", ""), worker = row.value("worker_id", "");
  if (node.empty() || worker.empty()) {
    return absl::NotFoundError(std::string(actor ? "actor " : "task ") + id + " has not run on a worker yet");
  }
  return std::make_pair(node, worker);
}

// The file the query names, and its node.
absl::StatusOr<Located> Locate(const std::string& address, const rpc::GetAllNodeInfoReply& all, const LogsQuery& q) {
  std::vector<rpc::NodeInfo> nodes;
  std::string worker_hex;
  if (!q.actor_id.empty() || !q.task_id.empty()) {
    auto worker = WorkerOf(address, q);
    if (!worker.ok()) return worker.status();
    auto node = NodeById(all, worker->first);
    if (!node.ok()) return node.status();
    nodes.push_back(*node);
    worker_hex = worker->second;
  } else {
    auto selected = SelectNodes(all, q);
    if (!selected.ok()) return selected.status();
    nodes = std::move(*selected);
  }
  std::vector<Located> found;
  for (const rpc::NodeInfo& node : nodes) {
    auto listed = CallLogs(node, rpc::ListLogsRequest(), &rpc::LogService::Stub::ListLogs);
    if (!listed.ok()) return listed.status();
    for (const rpc::LogFileInfo& f : listed->files()) {
      const bool match = !worker_hex.empty() ? BinaryHex(f.worker_id()) == worker_hex && f.is_err() == q.err
                         : q.pid > 0         ? f.pid() == q.pid && !f.worker_id().empty() && f.is_err() == q.err
                                             : f.name() == q.file;
      if (match) found.push_back({node, f});
    }
  }
  const std::string what = (q.file.empty() ? std::string(q.err ? "stderr of " : "stdout of ") : "") +
                           (!q.actor_id.empty() ? "the worker of actor " + q.actor_id
                           : !q.task_id.empty() ? "the worker of task " + q.task_id
                           : q.pid > 0          ? "a worker with pid " + std::to_string(q.pid)
                                                : "'" + q.file + "'");
  if (found.empty()) return absl::NotFoundError("no log file of " + what + " on the nodes asked");
  if (found.size() > 1) {
    std::string where;
    for (const Located& l : found) where += " " + DescribeNode(l.node);
    return absl::InvalidArgumentError("more than one node has a log of " + what + " (" + where +
                                      " ): name one with --node-id or --node-ip");
  }
  return found[0];
}

int PrintList(const rpc::GetAllNodeInfoReply& all, const LogsQuery& q) {
  auto nodes = SelectNodes(all, q);
  if (!nodes.ok()) {
    std::cerr << "manta logs: " << nodes.status().message() << std::endl;
    return 1;
  }
  for (const rpc::NodeInfo& node : *nodes) {
    auto listed = CallLogs(node, rpc::ListLogsRequest(), &rpc::LogService::Stub::ListLogs);
    if (!listed.ok()) {
      std::cerr << "manta logs: " << listed.status().message() << std::endl;
      return 1;
    }
    std::cout << "node " << BinaryHex(node.node_id()) << " (" << node.node_manager_address() << "):\n";
    for (const rpc::LogFileInfo& f : listed->files()) {
      std::cout << "  " << std::left << std::setw(96) << f.name() << std::right << std::setw(12) << f.size_bytes();
      if (!f.worker_id().empty()) std::cout << "  pid=" << f.pid() << (f.alive() ? "" : " (exited)");
      std::cout << "\n";
    }
  }
  std::cout << std::flush;
  return 0;
}

volatile std::sig_atomic_t g_stop = 0;

}  // namespace

int RunLogs(const ClusterFlags& flags, const LogsQuery& q) {
  auto fail = [](const absl::Status& s) {
    std::cerr << "manta logs: " << s.message() << std::endl;
    return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  };
  if (q.tail < -1 || q.tail == 0) return fail(absl::InvalidArgumentError("--tail must be a positive number of lines, or -1 for all"));
  for (const std::string* id : {&q.actor_id, &q.task_id, &q.node_id}) {
    if (id->find_first_not_of("0123456789abcdef") != std::string::npos) {
      return fail(absl::InvalidArgumentError("'" + *id + "' is not an id (lowercase hex digits)"));
    }
  }
  if (!q.file.empty() && (q.file.find('/') != std::string::npos || q.file == "." || q.file == "..")) {
    return fail(absl::InvalidArgumentError("'" + q.file + "' is not the name of a log file (manta logs lists them)"));
  }
  if (!q.actor_id.empty() && q.actor_id.size() != ActorID::kSize * 2) {
    return fail(absl::InvalidArgumentError("'" + q.actor_id + "' is not an actor_id: expected 32 hex digits"));
  }
  if (!q.task_id.empty() && q.task_id.size() != TaskID::kSize * 2) {
    return fail(absl::InvalidArgumentError("'" + q.task_id + "' is not a task_id: expected 48 hex digits"));
  }
  if (q.err && q.actor_id.empty() && q.task_id.empty() && q.pid <= 0) {
    return fail(absl::InvalidArgumentError("--err picks a worker's stderr: give --actor-id, --task-id or --pid too"));
  }
  auto address = JoinCluster(flags);
  if (!address.ok()) return fail(address.status());
  auto all = FetchNodes(*address);
  if (!all.ok()) return fail(all.status());
  if (q.file.empty() && q.actor_id.empty() && q.task_id.empty() && q.pid <= 0) return PrintList(*all, q);
  auto located = Locate(*address, *all, q);
  if (!located.ok()) return fail(located.status());
  rpc::ReadLogRequest read;
  read.set_name(located->file.name());
  read.set_max_bytes(kChunkBytes);
  if (q.tail > 0) {
    read.set_offset(-1);
    read.set_tail_lines(q.tail);
  }
  std::signal(SIGINT, [](int) { g_stop = 1; });
  std::signal(SIGTERM, [](int) { g_stop = 1; });
  while (!g_stop) {
    auto reply = CallLogs(located->node, read, &rpc::LogService::Stub::ReadLog);
    if (!reply.ok()) return fail(reply.status());
    std::cout << reply->data() << std::flush;
    const bool at_end = reply->next_offset() >= reply->size_bytes();
    read.set_offset(reply->next_offset());
    read.set_tail_lines(0);
    if (at_end && !q.follow) break;
    if (at_end) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return 0;
}

}  // namespace manta::cli
