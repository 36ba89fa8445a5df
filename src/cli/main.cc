// manta: start, stop and inspect Manta clusters.
#include <CLI/CLI.hpp>
#include <iostream>

#include "src/cli/commands.h"

namespace {

// `manta start` and its flags, which fill *start.
CLI::App* AddStartCommand(CLI::App& app, manta::cli::StartOptions* start) {
  CLI::App* start_cmd = app.add_subcommand("start", "start a head node or a node that joins a cluster");
  start_cmd->add_flag("--head", start->head, "start a new cluster (Redis, GCS and a raylet)");
  start_cmd->add_option("--address", start->address, "GCS host:port of the cluster to join");
  start_cmd->add_option("--port", start->port, "GCS port of a head node (default 6379)")->check(CLI::Range(0, 65535));
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"manta: start, stop and inspect Manta clusters"};
  app.require_subcommand(1);

  manta::cli::StartOptions start;
  CLI::App* start_cmd = AddStartCommand(app, &start);

  bool force = false;
  CLI::App* stop_cmd = app.add_subcommand("stop", "stop every Manta process started on this machine");
  stop_cmd->add_flag("--force,-f", force, "SIGKILL instead of SIGTERM");
  int after_pid = 0;
  stop_cmd->add_option("--after-pid", after_pid,
                       "first wait until process PID exits (ray::Init's private clusters stop with their driver); "
                       "returns early when nothing is left to stop")
      ->check(CLI::PositiveNumber);

  manta::cli::ClusterFlags status_flags;
  bool status_json = false;
  CLI::App* status_cmd = app.add_subcommand("status", "show the nodes of a cluster and their resources");
  status_cmd->add_option("--address", status_flags.address, "GCS host:port (default: the head started here)");
  status_cmd->add_option("--token-file", status_flags.token_file, "file holding the cluster token");
  status_cmd->add_flag("--json", status_json, "machine-readable output");

  manta::cli::ClusterFlags list_flags;
  bool list_json = false;
  CLI::App* list_cmd = app.add_subcommand("list", "list objects of a cluster (actors, placement groups)");
  CLI::App* list_actors_cmd = list_cmd->add_subcommand("actors", "every actor: id, class, name, state, node, pid");
  CLI::App* list_groups_cmd = list_cmd->add_subcommand(
      "placement-groups", "every placement group: id, name, strategy, state, bundles and their nodes");
  list_cmd->require_subcommand(1);
  for (CLI::App* cmd : {list_actors_cmd, list_groups_cmd}) {
    cmd->add_option("--address", list_flags.address, "GCS host:port (default: the head started here)");
    cmd->add_option("--token-file", list_flags.token_file, "file holding the cluster token");
    cmd->add_flag("--json", list_json, "machine-readable output");
  }

  manta::cli::ClusterFlags health_flags;
  bool health_node = false;
  int64_t health_timeout_ms = 3000;
  CLI::App* health_cmd = app.add_subcommand(
      "health-check", "exit 0 when the GCS (or, with --node, this machine's raylet) answers; for probes");
  health_cmd->add_option("--address", health_flags.address, "GCS host:port (default: RAY_ADDRESS, else the head "
                                                            "started here)");
  health_cmd->add_option("--token-file", health_flags.token_file, "file holding the cluster token");
  health_cmd->add_flag("--node", health_node, "check the raylet `manta start` started on this machine instead");
  health_cmd->add_option("--timeout-ms", health_timeout_ms, "how long to wait for the answer (default 3000)")
      ->check(CLI::PositiveNumber);

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
  if (list_actors_cmd->parsed()) return manta::cli::RunListActors(list_flags, list_json);
  if (list_groups_cmd->parsed()) return manta::cli::RunListPlacementGroups(list_flags, list_json);
  if (health_cmd->parsed()) return manta::cli::RunHealthCheck(health_flags, health_node, health_timeout_ms);
  return 2;
}
