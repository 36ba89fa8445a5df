// manta_raylet: one per node. Started by `manta start`.
#include "src/raylet/raylet_main.h"

#include <glog/logging.h>
#include <malloc.h>

#include <unistd.h>

#include <iostream>

#include "src/common/config.h"
#include "src/common/daemon.h"
#include "src/common/flags.h"
#include "src/common/process.h"
#include "src/common/util.h"
#include "src/raylet/raylet.h"
#include "src/scheduling/resources.h"

namespace {

int Fail(const std::string& message, int code = 1) {
  std::cerr << "manta_raylet: " << message << std::endl;
  LOG(ERROR) << message;
  return code;
}

struct RayletFlags {
  std::string gcs_address;
  std::string node_ip_address = "127.0.0.1";
  std::string bind_address;
  int port = 0;
  int metrics_export_port = 0;
  double num_cpus = -1;
  double num_gpus = 0;
  int64_t memory = -1;
  int64_t object_store_memory = -1;
  std::string resources_json;
  std::string session_dir;
  std::string ready_file;
  std::string node_name;
  std::string node_type;
  std::string instance_id;
  std::string node_id_hex;
  std::string store_socket;
  bool head = false;
  manta::DaemonFlags daemon;
};

void AddRayletFlags(manta::FlagParser& parser, RayletFlags* f) {
  parser.Add("--gcs-address", &f->gcs_address, "GCS host:port").Required();
  parser.Add("--node-ip-address", &f->node_ip_address, "address this node is reached at (advertised)");
  parser.Add("--bind-address", &f->bind_address,
             "address the raylet and its workers listen on (default: the node ip address; 0.0.0.0 = all)");
  parser.Add("--port", &f->port, "node manager port (0 = any free port)").Range(0, 65535);
  parser.Add("--metrics-export-port", &f->metrics_export_port,
             "port of the Prometheus endpoint, GET /metrics (0 = any free port)")
      .Range(0, 65535);
  parser.Add("--num-cpus", &f->num_cpus, "CPUs to offer (default: all)").NonNegative();
  parser.Add("--num-gpus", &f->num_gpus, "GPUs to offer").NonNegative();
  parser.Add("--memory", &f->memory, "memory bytes to offer (default: 70% of RAM)").NonNegative();
  parser.Add("--object-store-memory", &f->object_store_memory, "object store bytes (default: 30% of RAM)")
      .NonNegative();
  parser.Add("--resources", &f->resources_json, "custom resources as JSON, e.g. {\"special\": 2}");
  parser.Add("--session-dir", &f->session_dir, "session directory of this node");
  parser.Add("--ready-file", &f->ready_file, "written with the bound port and the metrics port once registered");
  parser.Add("--node-name", &f->node_name, "human-readable node name");
  parser.Add("--node-type", &f->node_type, "the autoscaler's node type of this node");
  parser.Add("--instance-id", &f->instance_id, "the autoscaler provider's id of this machine");
  parser.Add("--node-id", &f->node_id_hex, "node id as hex (default: random)");
  parser.Add("--store-socket", &f->store_socket, "object store socket (default: <session dir>/store.sock)");
  parser.AddFlag("--head", &f->head, "this is the head node");
  manta::AddDaemonFlags(parser, &f->daemon);
}

// The node's identity and resources from the flags; an error names the bad flag.
absl::StatusOr<manta::raylet::NodeManagerOptions> NodeOptions(const RayletFlags& f) {
  if (auto hp = manta::ParseHostPort(f.gcs_address); !hp.ok()) {
    return absl::InvalidArgumentError("--gcs-address: " + std::string(hp.status().message()));
  }
  auto custom = manta::scheduling::ParseCustomResources(f.resources_json);
  if (!custom.ok()) return custom.status();
  manta::raylet::NodeManagerOptions options;
  if (f.node_id_hex.empty()) {
    options.node_id = manta::NodeID::FromRandom();
  } else {
    auto id = manta::NodeID::FromHex(f.node_id_hex);
    if (!id.ok()) return absl::InvalidArgumentError("--node-id: " + std::string(id.status().message()));
    options.node_id = *id;
  }
  const int64_t ram = manta::scheduling::DetectMemoryBytes();
  options.resources = *custom;
  options.resources["CPU"] = f.num_cpus >= 0 ? f.num_cpus : manta::scheduling::DetectNumCpus();
  if (f.num_gpus > 0) options.resources["GPU"] = f.num_gpus;
  options.resources["memory"] = static_cast<double>(f.memory >= 0 ? f.memory : ram * 7 / 10);
  options.resources["object_store_memory"] =
      static_cast<double>(f.object_store_memory >= 0 ? f.object_store_memory : ram * 3 / 10);
  options.node_ip_address = f.node_ip_address;
  options.node_name = f.node_name.empty() ? f.node_ip_address : f.node_name;
  options.node_type = f.node_type;
  options.instance_id = f.instance_id;
  options.session_dir = f.session_dir;
  options.is_head = f.head;
  return options;
}

}  // namespace

int manta::raylet::RayletMain(int argc, char** argv) {
  manta::FlagParser parser("manta_raylet: Manta's per-node scheduler and object store");
  RayletFlags flags;
  AddRayletFlags(parser, &flags);
  if (auto exit_code = parser.Parse(argc, argv)) return *exit_code;

  auto daemon = manta::SetUpDaemon(argv[0], flags.daemon);
  if (!daemon.ok()) return Fail(std::string(daemon.status().message()), 2);
  // Object chunks are megabytes: keep such buffers in the heap for reuse rather than
  // mmapping (and page-faulting) fresh memory for every chunk.
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(daemon->config.raylet_malloc_mmap_threshold_bytes));
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(daemon->config.raylet_malloc_trim_threshold_bytes));
  auto node = NodeOptions(flags);
  if (!node.ok()) return Fail(std::string(node.status().message()), 2);

  manta::raylet::RayletOptions options;
  options.gcs_address = flags.gcs_address;
  options.bind_address = !flags.bind_address.empty()       ? flags.bind_address
                         : flags.node_ip_address == "localhost" ? "127.0.0.1"
                                                               : flags.node_ip_address;
  options.port = flags.port;
  options.metrics_export_port = flags.metrics_export_port;
  options.store_socket = flags.store_socket;
  options.ready_file = flags.ready_file;
  options.node = std::move(*node);
  options.config = daemon->config;
  options.credentials = daemon->credentials;
  options.tls = flags.daemon.tls;
  options.faults = daemon->faults;
  auto raylet = manta::raylet::Raylet::Create(std::move(options));
  if (!raylet.ok()) return Fail(std::string(raylet.status().message()));
  return (*raylet)->Run();
}
