// The `manta` subcommands. Each returns the process exit code and prints one clear
// line on error.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "protos/gcs.pb.h"
#include "src/common/rpc/auth.h"

namespace manta::cli {

struct StartOptions {
  bool head = false;
  std::string address;  // GCS host:port to join (non-head)
  int port = 6379;      // GCS port of a head
  int metrics_export_port = 0;      // the raylet's Prometheus endpoint (0: any free port)
  int gcs_metrics_export_port = 0;  // the head GCS's
  int dashboard_port = 8265;        // the head's dashboard (0: none; taken: any free port)
  std::string dashboard_host = "127.0.0.1";
  std::string redis_address;
  std::string redis_password;
  double num_cpus = -1;
  double num_gpus = -1;
  std::string resources;
  int64_t object_store_memory = -1;
  int64_t memory = -1;
  // Where every daemon listens (default loopback; 0.0.0.0 = every interface) and the
  // address other machines reach this node at (default: the bind address, or this
  // machine's first non-loopback IPv4 address when binding every interface).
  std::string bind_address;
  std::string node_ip_address;
  std::string node_name;
  // A node the autoscaler launched (its provider's command passes both): the node
  // type of the autoscaler's config and the provider's id of the machine.
  std::string node_type;
  std::string instance_id;
  // Head: the autoscaler's config file (JSON); empty = no autoscaler.
  std::string autoscaler_config;
  std::string system_config;
  bool block = false;
  // Joining: the cluster token's file (else $MANTA_CLUSTER_TOKEN_FILE,
  // $MANTA_CLUSTER_TOKEN, or the session on this machine that started the head).
  // Head: the token to use (else a new one is made).
  std::string token_file;
  // TLS for every daemon started (and for this command's own calls).
  rpc::TlsFiles tls;
};

int RunStart(const StartOptions& options);
// With `after_pid` > 0, first waits until that process exits (or until nothing
// recorded is left running, when it returns 0 without stopping anything).
int RunStop(bool force, int after_pid = 0);
// How the inspecting commands find and join a cluster.
struct ClusterFlags {
  std::string address;     // --address
  std::string token_file;  // --token-file
};
int RunStatus(const ClusterFlags& flags, bool json);
// `manta list actors`: one line (or JSON object) per actor.
int RunListActors(const ClusterFlags& flags, bool json);
// `manta list placement-groups`: one line (or JSON object) per placement group.
int RunListPlacementGroups(const ClusterFlags& flags, bool json);
// `manta list RESOURCE` through the state API (state_command.cc): resource is one of
// nodes, jobs, workers, actors, tasks, objects, placement-groups; filters are "key=value" or
// "key!=value"; format is table, json or yaml.
struct StateQuery {
  std::string resource;
  std::vector<std::string> filters;
  int64_t limit = 0;  // 0: the GCS's default (100)
  bool detail = false;
  std::string format = "table";
};
int RunListState(const ClusterFlags& flags, const StateQuery& query);
// `manta get RESOURCE ID`: every field of one row (a task: each attempt), yaml or json.
int RunGetState(const ClusterFlags& flags, const std::string& resource, const std::string& id,
                const std::string& format);
// `manta summary RESOURCE`: counts by state per function or class (tasks, actors).
int RunSummary(const ClusterFlags& flags, const std::string& resource, const std::vector<std::string>& filters,
               const std::string& format);
// `manta logs`: list a node's log files, or print one (by name, or the output of an
// actor's or a task's worker, or of a worker pid), its last lines or following it.
struct LogsQuery {
  std::string file;
  std::string node_id;
  std::string node_ip;
  std::string actor_id;
  std::string task_id;
  int pid = 0;
  int64_t tail = 1000;  // lines; -1: the whole file
  bool follow = false;
  bool err = false;  // a worker's stderr file instead of its stdout
};
int RunLogs(const ClusterFlags& flags, const LogsQuery& query);
// `manta timeline`: the task attempts of one job (`job_hex`) or all, as Chrome
// trace-event JSON in `output` (timeline_command.cc).
int RunTimeline(const ClusterFlags& flags, const std::string& job_hex, const std::string& output);
// `manta health-check`: 0 when the GCS (with `node`: this machine's raylet)
// answers within `timeout_ms`, else 1 (health_check_command.cc).
int RunHealthCheck(const ClusterFlags& flags, bool node, int64_t timeout_ms);
// `manta drain-node` (drain_node_command.cc): DrainNode of the GCS for the node whose
// id is `node_hex` (56 hex digits, as `manta status` prints it). 0 when the GCS marked
// it draining; 2 for a malformed id; 1 when the GCS has no alive node with that id or
// cannot be reached.
int RunDrainNode(const ClusterFlags& flags, const std::string& node_hex);

// `manta job` (job_command.cc): the head dashboard's Jobs API. Submit prints the
// submission id (and with `wait` follows the job's output to its end, exiting 0 only
// when it succeeded); `command` is status, logs (`follow`: until the job ends), stop
// or list.
struct JobSubmission {
  std::string entrypoint;
  std::string submission_id;
  std::string runtime_env_json;
  std::string metadata_json;
  std::string working_dir;  // a local directory, uploaded to the head
  bool wait = false;
};
int RunJobSubmit(const ClusterFlags& flags, const JobSubmission& submission);
int RunJobCommand(const ClusterFlags& flags, const std::string& command, const std::string& id, bool follow);

// Shared by the commands that ask the GCS (status_command.cc): the GCS address is the
// --address flag, else RAY_ADDRESS, else the head started on this machine; its token
// is found as FindClusterToken (src/common/security.h) says, and installed with the
// TLS settings of the environment. Returns the address.
absl::StatusOr<std::string> JoinCluster(const ClusterFlags& flags);
absl::StatusOr<rpc::GetAllActorInfoReply> FetchActors(const std::string& address);
absl::StatusOr<rpc::GetAllNodeInfoReply> FetchNodes(const std::string& address);
// Rows of the state API (state_command.cc) for `resource` passing "key=value" /
// "key!=value" filters, with every field, as a JSON array (at most 10,000 rows).
absl::StatusOr<std::string> QueryStateRows(const std::string& address, const std::string& resource,
                                           const std::vector<std::string>& filters);
// The state API's summary of `resource` as JSON; the GCS's warnings into `warnings`
// (may be null).
absl::StatusOr<std::string> QueryStateSummary(const std::string& address, const std::string& resource,
                                              std::vector<std::string>* warnings);
// `manta memory` (memory_command.cc): the objects of the cluster grouped by node or
// owner, with sizes and reference types, and each node's object store totals.
struct MemoryQuery {
  std::string group_by = "node";  // node, owner
  std::string sort_by = "size";   // size, pid, reference-type
  std::string units = "B";        // B, KB, MB, GB
  int64_t num_entries = 50;       // objects shown per group
  bool stats_only = false;
  std::string format = "table";   // table, json
};
int RunMemory(const ClusterFlags& flags, const MemoryQuery& query);
const char* ActorStateName(rpc::ActorTableData::ActorState state);
absl::StatusOr<rpc::GetAllPlacementGroupReply> FetchPlacementGroups(const std::string& address);
std::string PlacementGroupStateName(rpc::PlacementGroupTableData::PlacementGroupState state);
// Lowercase hex of binary bytes (ids).
std::string Hex(const std::string& binary);

// The URL of a Prometheus endpoint at host:port, as this process would scrape it:
// https when it has TLS and the host is not loopback (plain HTTP is loopback only).
std::string MetricsUrl(const std::string& host, int port);

}  // namespace manta::cli
