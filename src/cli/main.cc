// manta: start, stop and inspect Manta clusters.
#include <CLI/CLI.hpp>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/cli/commands.h"

namespace {

// `manta start` and its flags, which fill *start.
CLI::App* AddStartCommand(CLI::App& app, manta::cli::StartOptions* start) {
  CLI::App* start_cmd = app.add_subcommand("start", "start a head node or a node that joins a cluster");
  start_cmd->add_flag("--head", start->head, "start a new cluster (Redis, GCS and a raylet)");
  start_cmd->add_option("--address", start->address, "GCS host:port of the cluster to join");
  start_cmd->add_option("--port", start->port, "GCS port of a head node (default 6379)")->check(CLI::Range(0, 65535));
  start_cmd->add_option("--metrics-export-port", start->metrics_export_port,
                        "port of this node's Prometheus endpoint, /metrics (default: any free port)")
      ->check(CLI::Range(0, 65535));
  start_cmd->add_option("--dashboard-port", start->dashboard_port,
                        "port of the head's web dashboard (default 8265, or any free port when taken; 0 = none)")
      ->check(CLI::Range(0, 65535));
  start_cmd->add_option("--dashboard-host", start->dashboard_host,
                        "address the dashboard listens on (default 127.0.0.1; it asks for the cluster token)");
  start_cmd->add_option("--gcs-metrics-export-port", start->gcs_metrics_export_port,
                        "port of the head GCS's Prometheus endpoint (default: any free port)")
      ->check(CLI::Range(0, 65535));
  start_cmd->add_option("--redis-address", start->redis_address, "use this Redis (host:port) instead of starting one");
  start_cmd->add_option("--redis-password", start->redis_password,
                        "password of the Redis given by --redis-address, or to set on the one started (default: "
                        "$MANTA_REDIS_PASSWORD, else a random one); prefer the variable: flags show in ps");
  start_cmd->add_option("--num-cpus", start->num_cpus, "CPUs this node offers")->check(CLI::NonNegativeNumber);
  start_cmd->add_option("--num-gpus", start->num_gpus, "GPUs this node offers")->check(CLI::NonNegativeNumber);
  start_cmd->add_option("--resources", start->resources, "custom resources as JSON, e.g. '{\"special\": 2}'");
  start_cmd->add_option("--object-store-memory", start->object_store_memory, "object store size in bytes")
      ->check(CLI::NonNegativeNumber);
  start_cmd->add_option("--memory", start->memory, "memory this node offers, in bytes")->check(CLI::NonNegativeNumber);
  start_cmd->add_option("--bind-address", start->bind_address,
                        "address every daemon listens on (default 127.0.0.1; 0.0.0.0 = every interface, which makes "
                        "the node reachable from other machines)");
  start_cmd->add_option("--node-ip-address", start->node_ip_address,
                        "address this node is reached at (default: the bind address, or this machine's first "
                        "non-loopback address when binding 0.0.0.0)");
  start_cmd->add_option("--node-name", start->node_name, "human-readable node name");
  start_cmd->add_option("--node-type", start->node_type,
                        "node type of the autoscaler's config this node is (set by a provider's launch command; "
                        "default $MANTA_NODE_TYPE)");
  start_cmd->add_option("--instance-id", start->instance_id,
                        "the provider's id of this machine (set by a provider's launch command; default "
                        "$MANTA_INSTANCE_ID)");
  start_cmd->add_option("--autoscaler", start->autoscaler_config,
                        "head: the autoscaler's config (JSON: node types, provider, idle timeout); see README")
      ->check(CLI::ExistingFile);
  start_cmd->add_option("--system-config", start->system_config, "JSON object of config overrides (head)");
  start_cmd->add_flag("--block", start->block, "stay in the foreground; Ctrl-C stops what was started");
  start_cmd->add_option("--token-file", start->token_file,
                        "file holding the cluster token; joining: default found in the head's session here; "
                        "head: use this token instead of making a new one");
  start_cmd->add_option("--tls-cert", start->tls.cert_file, "TLS certificate chain (PEM) for every daemon started");
  start_cmd->add_option("--tls-key", start->tls.key_file, "TLS private key (PEM)");
  start_cmd->add_option("--tls-ca", start->tls.ca_file, "CA certificate of the cluster's certificates (PEM)");
  return start_cmd;
}

// --address and --token-file, for the commands that ask a cluster.
void AddClusterFlags(CLI::App* cmd, manta::cli::ClusterFlags* flags) {
  cmd->add_option("--address", flags->address, "GCS host:port (default: RAY_ADDRESS, else the head started here)");
  cmd->add_option("--token-file", flags->token_file, "file holding the cluster token");
}

// The commands that look inside a cluster through its state API and raylets: list,
// get, summary, logs and timeline (their flags, and which one was given).
class InspectCommands {
 public:
  void Add(CLI::App& app) {
    AddList(app);
    AddGetAndSummary(app);
    AddLogsAndTimeline(app);
  }
  // The exit code of the command given, if it is one of these.
  std::optional<int> Run();

 private:
  void AddList(CLI::App& app);
  void AddGetAndSummary(CLI::App& app);
  void AddLogsAndTimeline(CLI::App& app);

  manta::cli::ClusterFlags flags_;
  bool list_json_ = false;
  manta::cli::StateQuery query_;
  std::vector<std::pair<CLI::App*, std::string>> list_cmds_, get_cmds_, summary_cmds_;
  std::string get_id_, get_format_ = "yaml";
  std::string summary_format_ = "table";
  std::vector<std::string> summary_filters_;
  manta::cli::LogsQuery logs_;
  CLI::App* logs_cmd_ = nullptr;
  std::string timeline_job_, timeline_out_ = "timeline.json";
  CLI::App* timeline_cmd_ = nullptr;
  manta::cli::MemoryQuery memory_;
  CLI::App* memory_cmd_ = nullptr;
};

void InspectCommands::AddList(CLI::App& app) {
  CLI::App* list_cmd = app.add_subcommand(
      "list", "list the nodes, jobs, workers, actors, tasks, objects or placement groups of a cluster");
  list_cmd->require_subcommand(1);
  for (const char* resource : {"nodes", "jobs", "workers", "actors", "tasks", "objects", "placement-groups"}) {
    CLI::App* cmd = list_cmd->add_subcommand(resource, std::string("list ") + resource);
    AddClusterFlags(cmd, &flags_);
    cmd->add_option("--filter", query_.filters, "key=value or key!=value; repeat to combine (applied before --limit)");
    cmd->add_option("--limit", query_.limit, "at most this many rows (default 100, at most 10000)");
    cmd->add_flag("--detail", query_.detail, "every field (as YAML unless --format json)");
    cmd->add_option("--format", query_.format, "table (default), json or yaml");
    cmd->add_flag("--json", list_json_, "the same as --format json");
    list_cmds_.emplace_back(cmd, resource);
  }
}

void InspectCommands::AddGetAndSummary(CLI::App& app) {
  CLI::App* get_cmd =
      app.add_subcommand("get", "every field of one task, actor, node, job, worker, object or placement group");
  get_cmd->require_subcommand(1);
  for (const auto& [kind, resource] : std::vector<std::pair<std::string, std::string>>{
           {"task", "tasks"}, {"actor", "actors"}, {"node", "nodes"}, {"job", "jobs"}, {"worker", "workers"},
           {"object", "objects"}, {"placement-group", "placement-groups"}}) {
    CLI::App* cmd = get_cmd->add_subcommand(kind, "every field of one " + kind + " (a task: each attempt)");
    AddClusterFlags(cmd, &flags_);
    cmd->add_option("id", get_id_, "its id (hex)")->required();
    cmd->add_option("--format", get_format_, "yaml (default) or json");
    get_cmds_.emplace_back(cmd, resource);
  }
  CLI::App* summary_cmd = app.add_subcommand(
      "summary", "counts of tasks or actors by state, per function or class; of objects by reference type");
  summary_cmd->require_subcommand(1);
  for (const char* resource : {"tasks", "actors", "objects"}) {
    CLI::App* cmd = summary_cmd->add_subcommand(resource, std::string("summarize ") + resource);
    AddClusterFlags(cmd, &flags_);
    cmd->add_option("--filter", summary_filters_, "key=value or key!=value; repeat to combine");
    cmd->add_option("--format", summary_format_, "table (default), json or yaml");
    summary_cmds_.emplace_back(cmd, resource);
  }
}

void InspectCommands::AddLogsAndTimeline(CLI::App& app) {
  logs_cmd_ = app.add_subcommand(
      "logs", "list the log files of the cluster's nodes, or print one: by name, or the output of an actor's, a "
              "task's or a pid's worker");
  AddClusterFlags(logs_cmd_, &flags_);
  logs_cmd_->add_option("file", logs_.file, "a file name `manta logs` listed");
  logs_cmd_->add_option("--node-id", logs_.node_id, "the node (its id, or the start of it)");
  logs_cmd_->add_option("--node-ip", logs_.node_ip, "the node (its address)");
  logs_cmd_->add_option("--actor-id", logs_.actor_id, "the output of the worker that runs this actor");
  logs_cmd_->add_option("--task-id", logs_.task_id, "the output of the worker that ran this task (its last attempt)");
  logs_cmd_->add_option("--pid", logs_.pid, "the output of the worker with this pid")->check(CLI::PositiveNumber);
  logs_cmd_->add_option("--tail", logs_.tail, "the last N lines (default 1000; -1: the whole file)");
  logs_cmd_->add_flag("--follow,-f", logs_.follow, "keep printing what is written (Ctrl-C stops)");
  logs_cmd_->add_flag("--err", logs_.err,
                      "with --actor-id, --task-id or --pid: the worker's stderr (default: its stdout)");
  timeline_cmd_ = app.add_subcommand(
      "timeline", "write the task attempts as Chrome trace-event JSON (open it in Perfetto or chrome://tracing)");
  AddClusterFlags(timeline_cmd_, &flags_);
  timeline_cmd_->add_option("--job", timeline_job_, "only this job's tasks (its id)");
  timeline_cmd_->add_option("-o,--output", timeline_out_, "the file to write (default timeline.json)");
  memory_cmd_ = app.add_subcommand(
      "memory", "the objects of the cluster by node or owner, with sizes and reference types, and each object "
                "store's totals: what holds memory");
  AddClusterFlags(memory_cmd_, &flags_);
  memory_cmd_->add_option("--group-by", memory_.group_by, "node (holding the primary copy; default) or owner");
  memory_cmd_->add_option("--sort-by", memory_.sort_by, "size (default), pid or reference-type");
  memory_cmd_->add_option("--units", memory_.units, "B (default), KB, MB or GB");
  memory_cmd_->add_option("--num-entries", memory_.num_entries, "objects shown per group (default 50)");
  memory_cmd_->add_flag("--stats-only", memory_.stats_only, "only the stores' and the reference types' totals");
  memory_cmd_->add_option("--format", memory_.format, "table (default) or json");
}

std::optional<int> InspectCommands::Run() {
  for (const auto& [cmd, resource] : list_cmds_) {
    if (!cmd->parsed()) continue;
    // `list actors [--json]` and `list placement-groups [--json]` print as they always did.
    const bool plain = query_.filters.empty() && query_.limit == 0 && !query_.detail && query_.format == "table";
    if (plain && resource == "actors") return manta::cli::RunListActors(flags_, list_json_);
    if (plain && resource == "placement-groups") return manta::cli::RunListPlacementGroups(flags_, list_json_);
    query_.resource = resource;
    if (list_json_) query_.format = "json";
    return manta::cli::RunListState(flags_, query_);
  }
  for (const auto& [cmd, resource] : get_cmds_) {
    if (cmd->parsed()) return manta::cli::RunGetState(flags_, resource, get_id_, get_format_);
  }
  for (const auto& [cmd, resource] : summary_cmds_) {
    if (cmd->parsed()) return manta::cli::RunSummary(flags_, resource, summary_filters_, summary_format_);
  }
  if (logs_cmd_->parsed()) return manta::cli::RunLogs(flags_, logs_);
  if (timeline_cmd_->parsed()) return manta::cli::RunTimeline(flags_, timeline_job_, timeline_out_);
  if (memory_cmd_->parsed()) return manta::cli::RunMemory(flags_, memory_);
  return std::nullopt;
}

// `manta job submit|status|logs|stop|list` (job_command.cc).
class JobCommands {
 public:
  void Add(CLI::App& app) {
    CLI::App* job = app.add_subcommand("job", "submit jobs to a cluster's head and follow, stop and list them");
    job->require_subcommand(1);
    submit_ = job->add_subcommand("submit", "run a command on the head under a supervisor; prints its submission id");
    AddClusterFlags(submit_, &flags_);
    submit_->add_option("--submission-id", submission_.submission_id, "its id (default: a new one)");
    submit_->add_option("--runtime-env-json", submission_.runtime_env_json,
                        "{\"env_vars\": {...}, \"working_dir\": \"<a directory on the head>\"}");
    submit_->add_option("--metadata-json", submission_.metadata_json, "string fields kept with the job");
    submit_->add_option("--working-dir", submission_.working_dir,
                        "a local directory, uploaded to the head; the entrypoint starts in it");
    submit_->add_flag("--wait", submission_.wait, "print its output until it ends; exit 0 only if it succeeded");
    submit_->add_option("entrypoint", entrypoint_, "the command (after --)")->required();
    for (const char* name : {"status", "logs", "stop"}) {
      CLI::App* cmd = job->add_subcommand(name, std::string(name) + " of one job");
      AddClusterFlags(cmd, &flags_);
      cmd->add_option("submission_id", id_, "its submission id")->required();
      if (std::string(name) == "logs") cmd->add_flag("--follow,-f", follow_, "until the job ends");
      cmds_.emplace_back(cmd, name);
    }
    CLI::App* list = job->add_subcommand("list", "every job submitted to the cluster");
    AddClusterFlags(list, &flags_);
    cmds_.emplace_back(list, "list");
  }
  std::optional<int> Run() {
    if (submit_->parsed()) {
      for (const std::string& word : entrypoint_) {
        submission_.entrypoint += (submission_.entrypoint.empty() ? "" : " ") + word;
      }
      return manta::cli::RunJobSubmit(flags_, submission_);
    }
    for (const auto& [cmd, name] : cmds_) {
      if (cmd->parsed()) return manta::cli::RunJobCommand(flags_, name, id_, follow_);
    }
    return std::nullopt;
  }

 private:
  manta::cli::ClusterFlags flags_;
  manta::cli::JobSubmission submission_;
  std::vector<std::string> entrypoint_;
  std::string id_;
  bool follow_ = false;
  CLI::App* submit_ = nullptr;
  std::vector<std::pair<CLI::App*, std::string>> cmds_;
};

// `manta health-check` and `manta drain-node`: one call each to the GCS (or, for
// `health-check --node`, this machine's raylet).
class NodeCommands {
 public:
  void Add(CLI::App& app) {
    health_ = app.add_subcommand(
        "health-check", "exit 0 when the GCS (or, with --node, this machine's raylet) answers; for probes");
    AddClusterFlags(health_, &health_flags_);
    health_->add_flag("--node", health_node_, "check the raylet `manta start` started on this machine instead");
    health_->add_option("--timeout-ms", health_timeout_ms_, "how long to wait for the answer (default 3000)")
        ->check(CLI::PositiveNumber);
    drain_ = app.add_subcommand(
        "drain-node", "drain a node: it takes no new work, and its objects' owners move their primary copies off it");
    AddClusterFlags(drain_, &drain_flags_);
    drain_->add_option("node_id", drain_node_, "the node's id (hex, as `manta status` prints it)")->required();
  }
  std::optional<int> Run() {
    if (health_->parsed()) return manta::cli::RunHealthCheck(health_flags_, health_node_, health_timeout_ms_);
    if (drain_->parsed()) return manta::cli::RunDrainNode(drain_flags_, drain_node_);
    return std::nullopt;
  }

 private:
  manta::cli::ClusterFlags health_flags_, drain_flags_;
  bool health_node_ = false;
  int64_t health_timeout_ms_ = 3000;
  std::string drain_node_;
  CLI::App* health_ = nullptr;
  CLI::App* drain_ = nullptr;
};

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// The leading words of the command line name a command, then a sub-command
// (`manta list tasks`). The first word that names none of those its command has, or
// a command given without the sub-command it needs, as one line naming the word and
// what is accepted there; "" when the words are fine (CLI11 checks the rest).
std::string CheckCommandWords(CLI::App& app, int argc, char** argv) {
  CLI::App* at = &app;
  std::string path = "manta";
  for (int i = 1;; ++i) {
    std::vector<std::string> names;
    CLI::App* next = nullptr;
    const std::string word = i < argc ? argv[i] : "";
    for (CLI::App* sub : at->get_subcommands([](CLI::App*) { return true; })) {
      if (sub->get_name().empty()) continue;
      names.push_back(sub->get_name());
      if (sub->get_name() == word) next = sub;
    }
    if (names.empty()) return "";
    const std::string what = at == &app ? "command" : "kind for `" + path + "`";
    if (i >= argc) {
      if (at->get_require_subcommand_min() == 0) return "";
      return path + ": name a " + what + ": one of " + JoinNames(names);
    }
    if (!word.empty() && word[0] == '-') return "";  // a flag: CLI11 knows them
    if (next == nullptr) return path + ": unknown " + what + " '" + word + "' (one of " + JoinNames(names) + ")";
    at = next;
    path += " " + word;
  }
}

}  // namespace

CLI::App* AddStopCommand(CLI::App& app, bool* force, int* after_pid) {
  CLI::App* stop_cmd = app.add_subcommand("stop", "stop every Manta process started on this machine");
  stop_cmd->add_flag("--force,-f", *force, "SIGKILL instead of SIGTERM");
  stop_cmd->add_option("--after-pid", *after_pid,
                       "first wait until process PID exits (ray::Init's private clusters stop with their driver); "
                       "returns early when nothing is left to stop")
      ->check(CLI::PositiveNumber);
  return stop_cmd;
}

int main(int argc, char** argv) {
  CLI::App app{"manta: start, stop and inspect Manta clusters"};
  app.require_subcommand(1);

  manta::cli::StartOptions start;
  CLI::App* start_cmd = AddStartCommand(app, &start);

  bool force = false;
  int after_pid = 0;
  CLI::App* stop_cmd = AddStopCommand(app, &force, &after_pid);

  manta::cli::ClusterFlags status_flags;
  bool status_json = false;
  CLI::App* status_cmd = app.add_subcommand("status", "show the nodes of a cluster and their resources");
  status_cmd->add_option("--address", status_flags.address, "GCS host:port (default: the head started here)");
  status_cmd->add_option("--token-file", status_flags.token_file, "file holding the cluster token");
  status_cmd->add_flag("--json", status_json, "machine-readable output");

  InspectCommands inspect;
  inspect.Add(app);
  JobCommands jobs;
  jobs.Add(app);

  NodeCommands node_cmds;
  node_cmds.Add(app);

  if (std::string wrong = CheckCommandWords(app, argc, argv); !wrong.empty()) {
    std::cerr << wrong << " (see manta --help)" << std::endl;
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line naming the problem (CLI11's default prints usage too).
    std::cerr << "manta: " << e.what() << " (see manta --help)" << std::endl;
    return 2;
  }
  if (start_cmd->parsed()) return manta::cli::RunStart(start);
  if (stop_cmd->parsed()) return manta::cli::RunStop(force, after_pid);
  if (status_cmd->parsed()) return manta::cli::RunStatus(status_flags, status_json);
  if (std::optional<int> code = inspect.Run()) return *code;
  if (std::optional<int> code = jobs.Run()) return *code;
  if (std::optional<int> code = node_cmds.Run()) return *code;
  return 2;
}
