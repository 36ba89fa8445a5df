// manta_raylet: one per node. Started by `manta start`.
#include <glog/logging.h>
#include <malloc.h>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <random>

#include "src/common/config.h"
#include "src/common/logging.h"
#include "src/common/process.h"
#include "src/common/rpc/auth.h"
#include "src/common/util.h"
#include "src/object_store/arena.h"
#include "src/object_store/arena_pager.h"
#include "src/object_store/object_store.h"
#include "src/object_store/spiller.h"
#include "src/object_store/store_server.h"
#include "src/raylet/child_reaper.h"
#include "src/raylet/lease_manager.h"
#include "src/raylet/node_manager.h"
#include "src/raylet/node_manager_worker_grpc_service.h"
#include "src/raylet/object_manager.h"
#include "src/raylet/process_worker_launcher.h"
#include "src/raylet/worker_pool.h"

namespace {

int Fail(const std::string& message, int code = 1) {
  std::cerr << "manta_raylet: " << message << std::endl;
  LOG(ERROR) << message;
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"manta_raylet: Manta's per-node scheduler and object store"};
  std::string gcs_address;
  std::string node_ip_address = "127.0.0.1";
  std::string bind_address;
  int port = 0;
  double num_cpus = -1;
  double num_gpus = 0;
  int64_t memory = -1;
  int64_t object_store_memory = -1;
  std::string resources_json;
  std::string session_dir;
  std::string ready_file;
  std::string log_dir;
  std::string node_name;
  std::string node_id_hex;
  std::string system_config;
  std::string store_socket;
  bool head = false;
  std::string token_file;
  manta::rpc::TlsFiles tls;
  app.add_option("--gcs-address", gcs_address, "GCS host:port")->required();
  app.add_option("--node-ip-address", node_ip_address, "address this node is reached at (advertised)");
  app.add_option("--bind-address", bind_address,
                 "address the raylet and its workers listen on (default: the node ip address; 0.0.0.0 = all)");
  app.add_option("--port", port, "node manager port (0 = any free port)")->check(CLI::Range(0, 65535));
  app.add_option("--num-cpus", num_cpus, "CPUs to offer (default: all)")->check(CLI::NonNegativeNumber);
  app.add_option("--num-gpus", num_gpus, "GPUs to offer")->check(CLI::NonNegativeNumber);
  app.add_option("--memory", memory, "memory bytes to offer (default: 70% of RAM)")->check(CLI::NonNegativeNumber);
  app.add_option("--object-store-memory", object_store_memory, "object store bytes (default: 30% of RAM)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--resources", resources_json, "custom resources as JSON, e.g. {\"special\": 2}");
  app.add_option("--session-dir", session_dir, "session directory of this node");
  app.add_option("--ready-file", ready_file, "written with the bound port once registered");
  app.add_option("--log-dir", log_dir, "log directory (default: stderr)");
  app.add_option("--node-name", node_name, "human-readable node name");
  app.add_option("--node-id", node_id_hex, "node id as hex (default: random)");
  app.add_option("--system-config", system_config, "JSON object of config overrides");
  app.add_option("--store-socket", store_socket, "object store socket (default: <session dir>/store.sock)");
  app.add_flag("--head", head, "this is the head node");
  app.add_option("--token-file", token_file, "file holding the cluster token (default: $MANTA_CLUSTER_TOKEN)");
  app.add_option("--tls-cert", tls.cert_file, "TLS certificate chain (PEM); turns TLS on with --tls-key, --tls-ca");
  app.add_option("--tls-key", tls.key_file, "TLS private key (PEM)");
  app.add_option("--tls-ca", tls.ca_file, "CA certificate every member's certificate is signed by (PEM)");
  CLI11_PARSE(app, argc, argv);

  manta::InitLogging(argv[0], log_dir);
  manta::RaiseOpenFileLimit();
  auto credentials = manta::rpc::InstallDaemonCredentials(token_file, tls);
  if (!credentials.ok()) return Fail(std::string(credentials.status().message()), 2);
  // Object chunks are megabytes: keep such buffers in the heap for reuse rather than
  // mmapping (and page-faulting) fresh memory for every chunk.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  auto config = manta::Config::Load(system_config);
  if (!config.ok()) return Fail(std::string(config.status().message()), 2);
  auto faults = manta::rpc::FaultInjector::Parse(config->testing_rpc_failure);
  if (!faults.ok()) return Fail(std::string(faults.status().message()), 2);
  if (auto hp = manta::ParseHostPort(gcs_address); !hp.ok()) {
    return Fail("--gcs-address: " + std::string(hp.status().message()), 2);
  }
  auto custom = manta::scheduling::ParseCustomResources(resources_json);
  if (!custom.ok()) return Fail(std::string(custom.status().message()), 2);

  manta::raylet::NodeManagerOptions options;
  if (node_id_hex.empty()) {
    options.node_id = manta::NodeID::FromRandom();
  } else {
    auto id = manta::NodeID::FromHex(node_id_hex);
    if (!id.ok()) return Fail("--node-id: " + std::string(id.status().message()), 2);
    options.node_id = *id;
  }
  int64_t ram = manta::scheduling::DetectMemoryBytes();
  options.resources = *custom;
  options.resources["CPU"] = num_cpus >= 0 ? num_cpus : manta::scheduling::DetectNumCpus();
  if (num_gpus > 0) options.resources["GPU"] = num_gpus;
  options.resources["memory"] = static_cast<double>(memory >= 0 ? memory : ram * 7 / 10);
  options.resources["object_store_memory"] =
      static_cast<double>(object_store_memory >= 0 ? object_store_memory : ram * 3 / 10);
  options.node_ip_address = node_ip_address;
  options.node_name = node_name.empty() ? node_ip_address : node_name;
  options.session_dir = session_dir;
  options.is_head = head;
  options.config = *config;

  manta::EventLoop loop(config->slow_handler_warn_ms);

  // The object store: arena, table, spilling, socket server, transfer.
  int64_t store_bytes = static_cast<int64_t>(options.resources["object_store_memory"]);
  auto arena = manta::object_store::Arena::Create(store_bytes);
  if (!arena.ok()) return Fail(std::string(arena.status().message()));
  // Pages are allocated and zeroed in the background, at idle priority, so that
  // writes into the store do not pay for it: a window ahead of the data, grown as
  // objects arrive and given back when unused (ARCHITECTURE §8). -1 asks for the
  // whole arena at start, but never more than half of the memory still available,
  // so several nodes started on one machine cannot commit it all between them.
  int64_t window = config->object_store_prefault_bytes;
  if (window < 0) window = std::min((*arena)->capacity(), manta::scheduling::DetectAvailableMemoryBytes() / 2);
  manta::object_store::ArenaPager pager(**arena, window, config->object_store_release_idle_ms);
  std::string private_dir = session_dir.empty() ? "/tmp/manta_raylet_" + std::to_string(getpid()) : session_dir;
  std::string spill_dir = !config->object_spilling_dir.empty() ? config->object_spilling_dir : private_dir + "/spill";
  manta::object_store::FileSpiller spiller(loop, spill_dir, static_cast<int>(config->object_spilling_threads));
  manta::object_store::ObjectStoreOptions store_options;
  store_options.create_timeout_ms = config->object_store_full_timeout_ms;
  store_options.spill_min_bytes = config->object_spilling_min_bytes;
  store_options.on_allocate = [&pager](int64_t offset, int64_t size) { pager.OnAllocate(offset, size); };
  manta::object_store::ObjectStore store(loop, (*arena)->capacity(), store_options, &spiller, (*arena)->base());
  if (store_socket.empty()) store_socket = private_dir + "/store.sock";
  if (store_socket.size() >= manta::object_store::kMaxSocketPathBytes) {
    // A deep session folder: Unix socket paths are short, so use a name in /tmp.
    std::string short_path = "/tmp/manta-store-" + std::to_string(getpid()) + "-" +
                             options.node_id.Hex().substr(0, 12) + ".sock";
    LOG(INFO) << "store socket path " << store_socket << " is too long for a Unix socket; using " << short_path;
    store_socket = short_path;
  }
  auto pager_timer = loop.RunEvery("ArenaPager.Tick", 1000, [&pager, &store] {
    pager.Tick(store.allocated_end(), manta::MonotonicMs());
  });
  // A driver lives while its store connection is open (worker_pool.h); the pool is
  // made below, and store events reach it only once the loop runs.
  manta::raylet::WorkerPool* worker_pool = nullptr;
  manta::object_store::StoreServerOptions store_server_options;
  store_server_options.on_client_connected = [&worker_pool](const std::string& name) {
    if (worker_pool != nullptr) worker_pool->OnStoreClientConnected(name);
  };
  store_server_options.on_client_closed = [&worker_pool](const std::string& name) {
    if (worker_pool != nullptr) worker_pool->OnStoreClientClosed(name);
  };
  manta::object_store::StoreServer store_server(loop, store, **arena, store_socket, store_server_options);
  if (auto s = store_server.Start(); !s.ok()) return Fail(std::string(s.message()));
  manta::raylet::ObjectManagerOptions om_options;
  om_options.chunk_bytes = config->object_chunk_bytes;
  om_options.max_bytes_in_flight = config->object_manager_max_bytes_in_flight;
  om_options.pull_timeout_ms = config->object_manager_pull_timeout_ms;
  om_options.max_message_bytes = config->grpc_max_message_bytes;
  // With TLS every byte goes through gRPC (and its TLS); without, the object data
  // channel carries object bytes with one copy end to end.
  om_options.data_channel = config->object_data_channel && !credentials->tls();
  om_options.transfer_threads = static_cast<int>(config->object_transfer_threads);
  om_options.arena_fd = (*arena)->fd();
  om_options.token = credentials->token;
  om_options.connect_timeout_ms = config->object_manager_connect_timeout_ms;
  manta::raylet::ObjectManager object_manager(loop, store, om_options);

  manta::rpc::ClientOptions client_options;
  client_options.deadline_ms = config->grpc_client_deadline_ms;
  client_options.max_attempts = config->grpc_client_max_attempts;
  client_options.initial_backoff_ms = config->grpc_client_initial_backoff_ms;
  client_options.max_backoff_ms = config->grpc_client_max_backoff_ms;
  client_options.max_message_bytes = config->grpc_max_message_bytes;
  client_options.faults = std::make_shared<manta::rpc::FaultInjector>(*faults);
  manta::gcs::GrpcGcsClient gcs(loop, gcs_address, client_options);

  int exit_code = 0;
  if (bind_address.empty()) bind_address = node_ip_address == "localhost" ? "127.0.0.1" : node_ip_address;
  manta::rpc::GrpcServer server("manta_raylet", bind_address, port, config->grpc_max_message_bytes);
  // Stops the RPC server while the loop still runs the handlers of calls in flight,
  // then the loop. Safe to call more than once.
  bool quitting = false;
  auto quit = [&](int code) {
    if (quitting) return;
    quitting = true;
    exit_code = code;
    if (worker_pool != nullptr) worker_pool->Shutdown();
    store_server.Stop();
    server.ShutdownAsync(loop, 100, [&] { loop.Stop(); });
    loop.PostAfter("Raylet.ForceStop", 3000, [&] { loop.Stop(); });
  };
  manta::raylet::NodeManager node_manager(loop, options, gcs, manta::MonotonicMs, [&](const std::string& reason) {
    LOG(ERROR) << "raylet exiting: " << reason;
    std::cerr << "manta_raylet: exiting: " << reason << std::endl;
    quit(1);
  });
  manta::raylet::NodeManagerGrpcService service(loop, node_manager);
  server.RegisterService(&service);
  server.RegisterService(object_manager.service());
  node_manager.AttachObjectStore(&store, &object_manager, store_socket, arena->get());

  // Workers and leases (ARCHITECTURE.md §5, §7, §11). Both read the node manager's
  // config, which takes the head's overrides at registration.
  manta::raylet::ProcessWorkerLauncher launcher(loop, client_options);
  manta::raylet::WorkerPoolOptions pool_options;
  pool_options.node_id = options.node_id;
  pool_options.node_ip_address = node_ip_address;
  pool_options.bind_address = bind_address;
  pool_options.gcs_address = gcs_address;
  pool_options.store_socket = store_socket;
  pool_options.session_dir = private_dir;
  pool_options.cluster_token = credentials->token;
  pool_options.tls = tls;
  pool_options.default_worker_path = manta::FindExecutable("manta_worker");
  pool_options.num_cpus = static_cast<int>(options.resources["CPU"]);
  manta::raylet::WorkerPool pool(loop, pool_options, node_manager.config(), launcher,
                                 [&node_manager](const manta::JobID& job) { node_manager.FetchJobConfig(job); });
  worker_pool = &pool;
  std::mt19937_64 rng(std::random_device{}());
  manta::raylet::LeaseManager lease_manager(
      loop, manta::raylet::LeaseManagerOptions{options.node_id, options.resources}, node_manager.config(),
      node_manager.mutable_view(), pool,
      [&rng](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); });
  node_manager.AttachWorkers(&pool, &lease_manager);
  node_manager.AttachPlacementGroups(&gcs);
  manta::raylet::NodeManagerWorkerGrpcService worker_service(loop, pool, lease_manager);
  server.RegisterService(&worker_service);
  // Worker exits arrive as SIGCHLD.
  manta::raylet::ChildReaper reaper(loop, [&pool](pid_t pid, int status) { pool.OnProcessExit(pid, status); });
  reaper.Start();

  if (auto s = server.Start(); !s.ok()) return Fail(std::string(s.message()));
  node_manager.SetPort(server.port());
  if (om_options.data_channel) {
    auto data_port = object_manager.StartDataChannel(bind_address);
    if (!data_port.ok()) return Fail(std::string(data_port.status().message()));
    node_manager.SetObjectDataPort(*data_port);
  }
  pool.SetRayletPort(server.port());

  node_manager.Start([&](absl::Status s) {
    if (!s.ok()) {
      std::cerr << "manta_raylet: cannot register with the GCS at " << gcs_address << ": " << s.message()
                << std::endl;
      quit(1);
      return;
    }
    pool.Start();
    // The head's overrides came with the registration.
    object_manager.SetPullTimeout(node_manager.config().object_manager_pull_timeout_ms);
    if (!ready_file.empty()) {
      if (auto w = manta::WriteFileAtomic(ready_file, std::to_string(server.port()) + "\n", 0600); !w.ok()) {
        std::cerr << "manta_raylet: " << w.message() << std::endl;
        quit(1);
        return;
      }
    }
    LOG(INFO) << "manta_raylet ready: node " << options.node_id.Hex() << " on " << node_ip_address << ":"
              << server.port() << " with " << manta::scheduling::FormatResources(options.resources);
  });
  loop.OnTerminationSignal([&](int signo) {
    LOG(INFO) << "raylet: signal " << signo << ", shutting down";
    node_manager.Shutdown([&] { quit(0); });
    // If the GCS does not answer, stop anyway.
    loop.PostAfter("Raylet.ForceUnregister", 2000, [&] { quit(0); });
  });
  loop.Run();
  if (!server.WaitForShutdown(3000)) {
    LOG(ERROR) << "RPC server did not stop in time; exiting anyway";
    std::_Exit(exit_code);
  }
  return exit_code;
}
