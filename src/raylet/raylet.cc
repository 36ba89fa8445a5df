#include "src/raylet/raylet.h"

#include <glog/logging.h>
#include <unistd.h>

#include <iostream>

#include "src/common/process.h"
#include "src/common/util.h"
#include "src/raylet/node_metrics.h"
#include "src/scheduling/resources.h"

namespace manta::raylet {

Raylet::Raylet(RayletOptions options)
    : options_(std::move(options)),
      private_dir_(options_.node.session_dir.empty() ? "/tmp/manta_raylet_" + std::to_string(getpid())
                                                     : options_.node.session_dir),
      loop_(options_.config.slow_handler_warn_ms) {}

Raylet::~Raylet() = default;

absl::StatusOr<std::unique_ptr<Raylet>> Raylet::Create(RayletOptions options) {
  std::unique_ptr<Raylet> raylet(new Raylet(std::move(options)));
  if (auto s = raylet->BuildObjectStore(); !s.ok()) return s;
  const Config& config = raylet->options_.config;
  raylet->client_options_ = rpc::ClientOptionsFromConfig(config, raylet->options_.faults);
  raylet->gcs_ = std::make_unique<gcs::GrpcGcsClient>(raylet->loop_, raylet->options_.gcs_address,
                                                      raylet->client_options_);
  raylet->server_ = std::make_unique<rpc::GrpcServer>("manta_raylet", raylet->options_.bind_address,
                                                      raylet->options_.port, config.grpc_max_message_bytes);
  raylet->BuildWorkers();
  raylet->BuildNodeManager();
  if (auto s = raylet->StartServing(); !s.ok()) return s;
  return raylet;
}

absl::Status Raylet::BuildObjectStore() {
  const Config& config = options_.config;
  const int64_t store_bytes = static_cast<int64_t>(options_.node.resources["object_store_memory"]);
  auto arena = object_store::Arena::Create(store_bytes);
  if (!arena.ok()) return arena.status();
  arena_ = std::move(*arena);
  // Pages are allocated and zeroed in the background, at idle priority, so that
  // writes into the store do not pay for it: a window ahead of the data, grown as
  // objects arrive and given back when unused (ARCHITECTURE §8). -1 asks for the
  // whole arena at start, but never more than half of the memory still available,
  // so several nodes started on one machine cannot commit it all between them.
  int64_t window = config.object_store_prefault_bytes;
  const bool whole_arena = window < 0;
  if (whole_arena) window = std::min(arena_->capacity(), scheduling::DetectAvailableMemoryBytes() / 2);
  pager_ = std::make_unique<object_store::ArenaPager>(*arena_, window, config.object_store_release_idle_ms,
                                                      /*populate_now=*/whole_arena);
  const std::string spill_dir =
      !config.object_spilling_dir.empty() ? config.object_spilling_dir : private_dir_ + "/spill";
  spiller_ =
      std::make_unique<object_store::FileSpiller>(loop_, spill_dir, static_cast<int>(config.object_spilling_threads));
  object_store::ObjectStoreOptions store_options;
  store_options.create_timeout_ms = config.object_store_full_timeout_ms;
  store_options.spill_min_bytes = config.object_spilling_min_bytes;
  store_options.create_check_ms = config.object_store_create_check_ms;
  store_options.on_allocate = [pager = pager_.get()](int64_t offset, int64_t size) { pager->OnAllocate(offset, size); };
  store_options.events = &node_events_;
  store_ = std::make_unique<object_store::ObjectStore>(loop_, arena_->capacity(), store_options, spiller_.get(),
                                                       arena_->base());
  std::string& socket = options_.store_socket;
  if (socket.empty()) socket = private_dir_ + "/store.sock";
  if (socket.size() >= object_store::kMaxSocketPathBytes) {
    // A deep session folder: Unix socket paths are short, so use a name in /tmp.
    std::string short_path = "/tmp/manta-store-" + std::to_string(getpid()) + "-" +
                             options_.node.node_id.Hex().substr(0, 12) + ".sock";
    LOG(INFO) << "store socket path " << socket << " is too long for a Unix socket; using " << short_path;
    socket = short_path;
  }
  pager_timer_ = loop_.RunEvery("ArenaPager.Tick", options_.config.object_store_pager_tick_ms, [this] {
    pager_->Tick(store_->allocated_end(), MonotonicMs());
  });
  // A driver lives while its store connection is open (worker_pool.h); the pool is
  // made later, and store events reach it only once the loop runs.
  object_store::StoreServerOptions server_options;
  server_options.max_pending_connects = config.object_store_max_pending_connects;
  server_options.on_client_connected = [this](const std::string& name) {
    if (pool_ != nullptr) pool_->OnStoreClientConnected(name);
  };
  server_options.on_client_closed = [this](const std::string& name) {
    if (pool_ != nullptr) pool_->OnStoreClientClosed(name);
  };
  store_server_ = std::make_unique<object_store::StoreServer>(loop_, *store_, *arena_, socket, server_options);
  if (auto s = store_server_->Start(); !s.ok()) return s;
  BuildObjectManager();
  return absl::OkStatus();
}

void Raylet::BuildObjectManager() {
  const Config& config = options_.config;
  ObjectManagerOptions om_options;
  om_options.chunk_bytes = config.object_chunk_bytes;
  om_options.max_bytes_in_flight = config.object_manager_max_bytes_in_flight;
  om_options.pull_timeout_ms = config.object_manager_pull_timeout_ms;
  om_options.max_message_bytes = config.grpc_max_message_bytes;
  // The object data channel carries object bytes: with one copy end to end without
  // TLS, sealed (AES-256-GCM under keys of each connection) with it.
  om_options.data_channel = config.object_data_channel;
  om_options.data_limits.encrypt = options_.credentials.tls();
  om_options.transfer_threads = static_cast<int>(config.object_transfer_threads);
  om_options.arena_fd = arena_->fd();
  om_options.events = &node_events_;
  om_options.token = options_.credentials.token;
  om_options.data_limits.connect_timeout_ms = config.object_manager_connect_timeout_ms;
  om_options.data_limits.handshake_timeout_ms = config.object_data_channel_handshake_timeout_ms;
  om_options.data_limits.max_unproven_per_host = config.object_data_channel_max_unproven_per_host;
  om_options.data_limits.max_unproven = config.object_data_channel_max_unproven;
  om_options.data_limits.min_bytes_per_s = config.object_transfer_min_bytes_per_s;
  data_channel_ = om_options.data_channel;
  object_manager_ = std::make_unique<ObjectManager>(loop_, *store_, om_options);
}

void Raylet::BuildWorkers() {
  // Workers and leases (ARCHITECTURE.md §5, §7, §11). Both read the node's config,
  // which takes the head's overrides at registration.
  launcher_ = std::make_unique<ProcessWorkerLauncher>(loop_, client_options_);
  WorkerPoolOptions pool_options;
  pool_options.node_id = options_.node.node_id;
  pool_options.node_ip_address = options_.node.node_ip_address;
  pool_options.bind_address = options_.bind_address;
  pool_options.gcs_address = options_.gcs_address;
  pool_options.store_socket = options_.store_socket;
  pool_options.session_dir = private_dir_;
  pool_options.cluster_token = options_.credentials.token;
  pool_options.tls = options_.tls;
  pool_options.default_worker_path = FindExecutable("manta_worker");
  pool_options.num_cpus = static_cast<int>(options_.node.resources["CPU"]);
  // A job's config is asked of the GCS by the node manager, made next; the pool asks
  // only once the loop runs.
  pool_ = std::make_unique<WorkerPool>(loop_, pool_options, options_.config, *launcher_,
                                       [this](const JobID& job) { node_manager_->FetchJobConfig(job); });
  lease_manager_ = std::make_unique<LeaseManager>(
      loop_, LeaseManagerOptions{options_.node.node_id, options_.node.resources}, options_.config, view_, *pool_,
      [this](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); });
}

void Raylet::BuildNodeManager() {
  NodeManagerParts parts{options_.config, view_,          *gcs_,   *gcs_,   *pool_, *lease_manager_,
                         *store_,         *object_manager_, *arena_, options_.store_socket};
  node_manager_ = std::make_unique<NodeManager>(loop_, options_.node, std::move(parts), MonotonicMs,
                                                [this](const std::string& reason) {
                                                  LOG(ERROR) << "raylet exiting: " << reason;
                                                  std::cerr << "manta_raylet: exiting: " << reason << std::endl;
                                                  Quit(1);
                                                });
  service_ = std::make_unique<NodeManagerGrpcService>(loop_, *node_manager_);
  server_->RegisterService(service_.get());
  server_->RegisterService(object_manager_->service());
  worker_service_ = std::make_unique<NodeManagerWorkerGrpcService>(loop_, *pool_, *lease_manager_);
  server_->RegisterService(worker_service_.get());
  LogManagerOptions log_options;
  log_options.log_dir = private_dir_ + "/logs";
  log_options.node_id = options_.node.node_id;
  log_options.node_ip = options_.node.node_ip_address;
  log_options.stream_period_ms = options_.config.log_to_driver_period_ms;
  log_options.stream_max_bytes = options_.config.log_to_driver_max_bytes;
  log_manager_ = std::make_unique<LogManager>(loop_, log_options, *gcs_, [this] { return pool_->WorkerLogs(); });
  log_service_ = std::make_unique<LogGrpcService>(loop_, *log_manager_);
  server_->RegisterService(log_service_.get());
  node_state_service_ = std::make_unique<NodeStateGrpcService>(loop_, *pool_, node_events_, options_.node.node_id,
                                                               options_.node.node_ip_address);
  server_->RegisterService(node_state_service_.get());
  metrics_agent_ = std::make_unique<MetricsAgent>(loop_, options_.bind_address, options_.metrics_export_port,
                                                  static_cast<size_t>(options_.config.metrics_max_series_per_metric));
  server_->RegisterService(metrics_agent_.get());
  pool_->AddGoneListener([this](const WorkerGone& gone) { metrics_agent_->OnProcessGone(gone.worker_id.Binary()); });
  // Worker exits arrive as SIGCHLD.
  reaper_ = std::make_unique<ChildReaper>(loop_, [this](pid_t pid, int status) { pool_->OnProcessExit(pid, status); });
  reaper_->Start();
}

absl::Status Raylet::StartServing() {
  if (auto s = server_->Start(); !s.ok()) return s;
  node_manager_->SetPort(server_->port());
  if (data_channel_) {
    auto data_port = object_manager_->StartDataChannel(options_.bind_address);
    if (!data_port.ok()) return data_port.status();
    node_manager_->SetObjectDataPort(*data_port);
  }
  pool_->SetRayletPort(server_->port());
  return StartMetrics();
}

absl::Status Raylet::StartMetrics() {
  if (absl::Status s = metrics_agent_->Start(); !s.ok()) {
    return absl::Status(s.code(), "the metrics endpoint (--metrics-export-port): " + std::string(s.message()));
  }
  node_manager_->SetMetricsExportPort(metrics_agent_->port());
  auto snapshot = [this] {
    NodeCounts counts;
    counts.leases = lease_manager_->num_leases();
    counts.queued = lease_manager_->num_queued();
    counts.infeasible = lease_manager_->num_infeasible();
    counts.workers_idle = pool_->num_idle();
    counts.workers_starting = pool_->num_starting();
    counts.workers_busy = pool_->num_workers() - pool_->num_idle() - pool_->num_starting();
    counts.drivers = pool_->num_drivers();
    metrics_agent_->endpoint().SetSnapshot(NodeMetricFamilies(node_manager_->Usage(), counts));
  };
  snapshot();
  const int64_t period_ms = std::max<int64_t>(options_.config.metrics_report_period_ms, 100);
  metrics_timer_ = loop_.RunEvery("Raylet.MetricsSnapshot", period_ms, snapshot);
  loop_lag_timer_ = metrics::WatchLoopLag(loop_, "raylet", period_ms);
  return absl::OkStatus();
}

int Raylet::Run() {
  node_manager_->Start([this](absl::Status s) { OnRegistered(s); });
  loop_.OnTerminationSignal([this](int signo) {
    LOG(INFO) << "raylet: signal " << signo << ", shutting down";
    node_manager_->Shutdown([this] { Quit(0); });
    // If the GCS does not answer, stop anyway.
    loop_.PostAfter("Raylet.ForceUnregister", options_.config.raylet_unregister_timeout_ms, [this] { Quit(0); });
  });
  loop_.Run();
  if (!server_->WaitForShutdown(3000)) {
    LOG(ERROR) << "RPC server did not stop in time; exiting anyway";
    std::_Exit(exit_code_);
  }
  return exit_code_;
}

void Raylet::OnRegistered(const absl::Status& status) {
  if (!status.ok()) {
    std::cerr << "manta_raylet: cannot register with the GCS at " << options_.gcs_address << ": "
              << status.message() << std::endl;
    Quit(1);
    return;
  }
  pool_->Start();
  // The head's overrides came with the registration.
  object_manager_->SetPullTimeout(options_.config.object_manager_pull_timeout_ms);
  if (!options_.ready_file.empty()) {
    const std::string ports = std::to_string(server_->port()) + " " + std::to_string(metrics_agent_->port()) + "\n";
    if (auto w = WriteFileAtomic(options_.ready_file, ports, 0600); !w.ok()) {
      std::cerr << "manta_raylet: " << w.message() << std::endl;
      Quit(1);
      return;
    }
  }
  LOG(INFO) << "manta_raylet ready: node " << options_.node.node_id.Hex() << " on " << options_.node.node_ip_address
            << ":" << server_->port() << " with " << scheduling::FormatResources(options_.node.resources);
}

void Raylet::Quit(int code) {
  if (quitting_) return;
  quitting_ = true;
  exit_code_ = code;
  if (pool_ != nullptr) pool_->Shutdown();
  metrics_timer_.reset();
  if (metrics_agent_ != nullptr) metrics_agent_->Stop();
  store_server_->Stop();
  server_->ShutdownAsync(loop_, 100, [this] { loop_.Stop(); });
  loop_.PostAfter("Raylet.ForceStop", options_.config.raylet_stop_timeout_ms, [this] { loop_.Stop(); });
}

}  // namespace manta::raylet
